"""How a metashard process that cannot start says so: one line on stderr and exit code 2.

Contract:
- ``StartupError`` is raised for a configuration reason the operator must fix (a port in use,
  an address that cannot be served, a reconciler that cannot be loaded). Together with
  ``proto.kube.errors.ConfigError`` (no usable kubeconfig) it is a *configuration failure*.
- ``guard(prog, main, debug=...)`` runs ``main`` and turns a configuration failure into one
  line ``<prog>: error: <message>`` on stderr and ``EXIT_CONFIG`` (2), the exit code argparse
  uses for a bad flag. The traceback is printed only when ``debug`` is true (``--log-level
  debug``). Any other exception is a bug and propagates with its traceback.
- ``metashard run`` stops when one of its workers exits with ``EXIT_CONFIG``: restarting a
  process that cannot start would only loop.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

from proto.kube.errors import ConfigError

EXIT_CONFIG = 2


class StartupError(Exception):
    """The process cannot start for a configuration reason; the message says which."""


def report(prog: str, error: BaseException, *, debug: bool) -> int:
    """Print the one-line error (and, when ``debug``, its traceback); return ``EXIT_CONFIG``."""
    if debug:
        traceback.print_exception(error, file=sys.stderr)
    print(f"{prog}: error: {error}", file=sys.stderr, flush=True)
    return EXIT_CONFIG


def guard(prog: str, main: Callable[[], int], *, debug: bool) -> int:
    """``main()``, with a configuration failure reported as one line and ``EXIT_CONFIG``."""
    try:
        return main()
    except (StartupError, ConfigError) as e:
        return report(prog, e, debug=debug)
