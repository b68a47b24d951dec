"""The GC guard: one pause across concurrent bulk loads, freeze after the last one."""

from __future__ import annotations

import gc

import pytest

from manager.informers.gcguard import GcGuard


class FakeCollector:
    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.calls: list[str] = []

    def isenabled(self) -> bool:
        return self.enabled

    def enable(self) -> None:
        self.enabled = True
        self.calls.append("enable")

    def disable(self) -> None:
        self.enabled = False
        self.calls.append("disable")

    def freeze(self) -> None:
        self.calls.append("freeze")


def test_overlapping_loads_pause_once_and_freeze_after_the_last() -> None:
    collector = FakeCollector()
    guard = GcGuard(collector)
    first = guard.bulk()
    second = guard.bulk()
    first.__enter__()
    second.__enter__()
    assert not collector.isenabled()
    first.__exit__(None, None, None)  # the other load still runs: stay paused
    assert not collector.isenabled() and collector.calls == ["disable"]
    second.__exit__(None, None, None)
    assert collector.isenabled()
    assert collector.calls == ["disable", "freeze", "enable"]  # one pause, one freeze


def test_a_failing_load_still_restores_the_collector() -> None:
    collector = FakeCollector()
    guard = GcGuard(collector)
    with pytest.raises(RuntimeError), guard.bulk():
        raise RuntimeError("list failed")
    assert collector.isenabled() and collector.calls == ["disable", "freeze", "enable"]


def test_a_process_running_without_gc_stays_without() -> None:
    collector = FakeCollector(enabled=False)
    guard = GcGuard(collector)
    with guard.bulk():
        pass
    assert not collector.isenabled() and "enable" not in collector.calls


def test_the_real_collector_is_paused_and_restored() -> None:
    assert gc.isenabled()
    guard = GcGuard()
    frozen = gc.get_freeze_count()
    with guard.bulk():
        assert not gc.isenabled()
        kept = [[i] for i in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen + len(kept)
    gc.unfreeze()
