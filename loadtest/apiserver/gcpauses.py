"""Short garbage-collector pauses for the emulator process, as a Go API server has.

CPython's full collections scan every object the collector tracks. With the objects a load
test stores they grew to 0.2 s each (fanout, N=2000: six full collections growing from 0.07
to 0.20 s, 0.69 s in all, and 0.37 s more in 890 young ones), and every request in flight
waited: a controller's reconciles then looked slow in the emulator's pauses. With this
module the same run pauses at most 41 ms, 0.27 s in all. kube-apiserver's collector runs
beside the program, with sub-millisecond pauses.

``install()``, once, in the emulator's own process (``python -m loadtest.apiserver``; not in
a process that embeds the library):

- the youngest generation is collected every ``proto.runtime.gctune.YOUNG_THRESHOLD`` allocations
  instead of 700, as in metashard's own processes;
- whatever survives a full collection is frozen (``gc.freeze()``, which moves the lists, not
  the objects): the next full collection scans only what was allocated since;
- the first full collection ``THAW_INTERVAL`` seconds after the last such one first puts the
  frozen objects back into the oldest generation, and so scans everything once: cycles that
  died after being frozen are still reclaimed, at the price of one long pause every ten
  minutes.

Reference counting frees everything without cycles at once, frozen or not (stored objects
are dicts and bytes); only how often cycles are looked for changes.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from proto.runtime.gctune import YOUNG_THRESHOLD

THAW_INTERVAL = 600.0
_OLDEST = 2


class _FreezeSurvivors:
    """A ``gc.callbacks`` entry: thaw before a full collection when due, freeze after it."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._last_thaw = clock()

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != _OLDEST:
            return
        if phase == "stop":
            gc.freeze()
            return
        now = self._clock()
        if now - self._last_thaw >= THAW_INTERVAL:
            self._last_thaw = now
            gc.unfreeze()


def install(*, clock: Callable[[], float] = time.monotonic) -> None:
    """Tune the collector of this process (see the module docstring). Call it once."""
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
    gc.callbacks.append(_FreezeSurvivors(clock))
