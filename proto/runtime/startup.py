"""How a metashard command says it failed: one line on stderr, and an exit code by kind.

Contract:
- Every ``metashard`` command reports a failure as one line ``<prog>: error: <message>`` on
  stderr (``fail``), where ``prog`` is ``metashard <command>``; several independent failures
  (``metashard rbac``'s broken controllers) are one such line each. No usage dump, no
  traceback (except at ``--log-level debug``).
- Exit codes: ``EXIT_CONFIG`` (2) when the command cannot do its work as given: a flag or
  argument (argparse's code, ``proto.runtime.flags.Parser``), a file it names, the
  kubeconfig, a port in use; ``EXIT_FAILURE`` (1) when it ran and failed: the cluster
  refused or did not answer, an object is missing or broken, a wait timed out, a
  coordinator's term failed.
- ``StartupError`` is raised for a configuration reason the operator must fix (a port in use,
  an address that cannot be served, a reconciler that cannot be loaded, a file that cannot
  be read). Together with ``proto.kube.errors.ConfigError`` (no usable kubeconfig) it is a
  *configuration failure*.
- ``guard(prog, main, debug=...)`` runs ``main`` and turns a configuration failure into its
  error line and ``EXIT_CONFIG``. The traceback is printed only when ``debug`` is true
  (``--log-level debug``). Any other exception is a bug and propagates with its traceback.
- ``metashard run`` stops when one of its workers exits with ``EXIT_CONFIG``: restarting a
  process that cannot start would only loop.
- ``exit_cleanly_on_sigterm()``, called by a long-running command first thing and again once
  its event loop has ended: outside the event loop's lifetime (whose own handler stops the
  process gracefully), a SIGTERM ends the process at once with exit code 0 (``SystemExit``),
  as a process asked to stop that has nothing (left) to clean up. So a pod deleted, or a
  worker removed, while it starts, or a second SIGTERM while it exits, ends it cleanly
  instead of killing it by the signal.
"""

from __future__ import annotations

import signal
import sys
import traceback
from collections.abc import Callable
from types import FrameType

from proto.kube.errors import ConfigError

EXIT_FAILURE = 1
EXIT_CONFIG = 2


class StartupError(Exception):
    """The process cannot start for a configuration reason; the message says which."""


def fail(prog: str, message: object, *, code: int = EXIT_FAILURE) -> int:
    """Print ``<prog>: error: <message>`` on stderr; return ``code``."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return code


def report(prog: str, error: BaseException, *, debug: bool) -> int:
    """Print the one-line error (and, when ``debug``, its traceback); return ``EXIT_CONFIG``."""
    if debug:
        traceback.print_exception(error, file=sys.stderr)
    return fail(prog, error, code=EXIT_CONFIG)


def guard(prog: str, main: Callable[[], int], *, debug: bool) -> int:
    """``main()``, with a configuration failure reported as one line and ``EXIT_CONFIG``."""
    try:
        return main()
    except (StartupError, ConfigError) as e:
        return report(prog, e, debug=debug)


def exit_cleanly_on_sigterm() -> None:
    """Exit 0 on SIGTERM (until an event loop's own handler replaces this one)."""
    signal.signal(signal.SIGTERM, _exit_cleanly)


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)
