"""The collector settings a metashard process applies before its event loop starts."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from proto.runtime import gctune


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored_gc")
def test_settle_freezes_what_lives_now_and_collects_the_young_less_often() -> None:
    gc.unfreeze()
    long_lived = [{"i": i} for i in range(1000)]
    _, middle, old = gc.get_threshold()
    gctune.settle()
    assert gc.get_freeze_count() >= len(long_lived)
    assert gc.get_threshold() == (gctune.YOUNG_THRESHOLD, middle, old)
    # Cycles made afterwards are still collected.
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1
