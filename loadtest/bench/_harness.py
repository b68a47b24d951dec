"""The shared fanout harness (``../shared/bench``, package ``fanoutbench``) as a library.

The harness is not part of this repository: it is put on ``sys.path`` when asked for, and its
modules are untyped (``Any``). Its workload, checker, client and raw baseline are what the
fanout benchmark measures with, so the numbers stay comparable with the harness's own runs.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from types import ModuleType

from loadtest.dev.processes import REPO

SHARED_BENCH = REPO.parent / "shared" / "bench"


@dataclass(frozen=True, slots=True)
class Harness:
    """The harness modules the benchmark uses."""

    runner: ModuleType
    workload: ModuleType
    kube: ModuleType
    checker: ModuleType
    cpu: ModuleType


def available() -> bool:
    return (SHARED_BENCH / "fanoutbench" / "__init__.py").is_file()


def load() -> Harness:
    """Import the harness; ``FileNotFoundError`` when it is not at ``SHARED_BENCH``."""
    if not available():
        raise FileNotFoundError(f"the fanout harness is expected at {SHARED_BENCH}")
    if str(SHARED_BENCH) not in sys.path:
        sys.path.insert(0, str(SHARED_BENCH))
    module = importlib.import_module
    return Harness(
        runner=module("fanoutbench.runner"),
        workload=module("fanoutbench.workload"),
        kube=module("fanoutbench.kube"),
        checker=module("fanoutbench.checker"),
        cpu=module("fanoutbench.cpu"),
    )


def env(kubeconfig: str) -> dict[str, str]:
    """The environment of a process the benchmark starts: this one's, the kubeconfig, and the
    harness and this repository on ``PYTHONPATH``."""
    path = [str(SHARED_BENCH), str(REPO)]
    if os.environ.get("PYTHONPATH"):
        path.append(os.environ["PYTHONPATH"])
    return {**os.environ, "KUBECONFIG": kubeconfig, "PYTHONPATH": os.pathsep.join(path)}
