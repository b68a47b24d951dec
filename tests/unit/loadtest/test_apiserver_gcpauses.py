"""The emulator process's collector: survivors of a full collection are frozen, so the next
full collection scans only what came after; a cycle that dies frozen is reclaimed by the
first full collection once the thaw interval has passed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# In a process of its own: freezing changes the collector of the whole process.
SCRIPT = textwrap.dedent(
    """
    import gc, weakref
    from loadtest.apiserver import gcpauses
    from proto.runtime.gctune import YOUNG_THRESHOLD

    now = [0.0]
    gcpauses.install(clock=lambda: now[0])
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD

    class Node:
        pass

    cycle = Node()
    cycle.me = cycle
    alive = weakref.ref(cycle)
    gc.collect()
    assert gc.get_count()[2] == 0 and not gc.get_objects(generation=2), "survivors frozen"
    frozen = gc.get_freeze_count()

    young = Node()
    young.me = young
    gc.collect()
    assert gc.get_freeze_count() > frozen, "each full collection freezes its survivors"

    del cycle
    gc.collect()
    assert alive() is not None, "a frozen cycle waits for the thaw"
    now[0] += gcpauses.THAW_INTERVAL - 1
    gc.collect()
    assert alive() is not None
    now[0] += 1
    gc.collect()
    assert alive() is None, "the thawing collection reclaims it"
    assert gc.get_freeze_count() > 0, "and freezes the survivors again"
    print("ok")
    """
)


def test_full_collections_freeze_survivors_and_thaw_on_schedule() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
