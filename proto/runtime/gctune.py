"""Garbage-collector settings for a long-running metashard process.

``settle()`` is called once, when the process has imported and configured everything and
before its event loop starts:

- ``gc.freeze()`` moves every object alive then (modules, classes, functions, flag tables:
  they live as long as the process) into the permanent generation, so the collector's full
  passes stop re-scanning them (a full pass over them stalls every reconcile under way). Whatever
  garbage exists then is frozen too: a start-up's worth, once;
- the youngest generation's threshold goes from 700 to ``YOUNG_THRESHOLD`` allocations:
  reconciles and watch events allocate many short-lived dicts that reference counting frees
  anyway, so a young pass every 700 allocations mostly scans garbage-free survivors.

Cycles are still collected; only how often the collector runs changes.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def settle() -> None:
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
