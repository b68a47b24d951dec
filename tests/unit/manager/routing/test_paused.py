"""manager.routing.paused: the paused parents per controller, kept by the router in step with
the key index, as the gauge reads them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from manager.informers.store import Store
from manager.kinds.composite import CompositeView
from manager.routing.paused import PausedParents
from manager.routing.router import KeyIndex, Router
from manager.term.metrics import TermMetrics
from proto.wire import ParentKey, Priority
from tests.unit.manager.informers.fakes import Stores
from tests.unit.manager.routing.test_router import SELECTOR, THINGS, cached, controller

PAUSED = {"metashard.io/paused": "true"}


class Metrics:
    def __init__(self) -> None:
        self.series: dict[str, Callable[[], float]] = {}

    def paused_parents(self, controller: str, count: Callable[[], float] | None) -> None:
        if count is None:
            del self.series[controller]
        else:
            self.series[controller] = count

    def read(self) -> dict[str, float]:
        return {name: count() for name, count in self.series.items()}


class World:
    def __init__(self, *views: CompositeView) -> None:
        self.stores = Stores(things=Store(), configmaps=Store())
        self.keys = KeyIndex()
        self.metrics = Metrics()
        self.paused = PausedParents(keys=self.keys, metrics=self.metrics)
        self.router = Router(sink=self, keys=self.keys, stores=self.stores, paused=self.paused)
        self.router.controllers_changed(list(views), list(views))

    def push(self, key: ParentKey, priority: Priority) -> None:
        pass

    def parent(self, name: str, **meta: Any) -> None:
        obj = cached(name, spec=SELECTOR, meta=meta)
        old = self.stores["things"].upsert(obj)
        self.router.handler(THINGS)("MODIFIED" if old else "ADDED", old, obj, False)

    def gone(self, name: str) -> None:
        old = self.stores["things"].delete("ns", name)
        self.router.handler(THINGS)("DELETED", old, None, False)


def test_parents_paused_by_their_annotation_are_counted_as_they_come_change_and_go() -> None:
    world = World(controller())
    assert world.metrics.read() == {"CompositeController-cc": 0}
    world.parent("a", annotations=PAUSED)
    world.parent("b", annotations=PAUSED)
    world.parent("c")
    assert world.metrics.read() == {"CompositeController-cc": 2}
    world.parent("a", annotations={"metashard.io/paused": "false"})
    world.parent("c", annotations={"metashard.io/paused": "maybe"})  # the default: not paused
    assert world.metrics.read() == {"CompositeController-cc": 1}
    world.gone("b")
    assert world.metrics.read() == {"CompositeController-cc": 0}


def test_every_parent_of_a_paused_controller_counts_and_a_rebuild_recounts() -> None:
    world = World(controller())
    world.parent("a", annotations=PAUSED)
    world.parent("b")
    world.router.controllers_changed([controller(annotations=PAUSED)], [])
    assert world.metrics.read() == {"CompositeController-cc": 2}
    world.parent("c")
    assert world.metrics.read() == {"CompositeController-cc": 3}
    world.router.controllers_changed([controller()], [])
    assert world.metrics.read() == {"CompositeController-cc": 1}  # a, from the caches


def test_a_controller_that_goes_loses_its_series_and_so_do_all_when_the_term_ends() -> None:
    world = World(controller(name="one"), controller(name="two"))
    assert set(world.metrics.series) == {"CompositeController-one", "CompositeController-two"}
    world.router.controllers_changed([controller(name="two")], [])
    assert set(world.metrics.series) == {"CompositeController-two"}
    world.paused.forget()
    assert world.metrics.series == {}


def test_the_gauge_reads_the_count_at_each_scrape_and_drops_the_series() -> None:
    registry = CollectorRegistry()
    metrics = TermMetrics(registry)
    counted = [3]
    metrics.paused_parents("CompositeController-cc", lambda: counted[0])
    labels = {"controller": "CompositeController-cc"}
    assert registry.get_sample_value("metashard_coordinator_paused_parents", labels) == 3
    counted[0] = 5
    assert registry.get_sample_value("metashard_coordinator_paused_parents", labels) == 5
    metrics.paused_parents("CompositeController-cc", None)
    metrics.paused_parents("CompositeController-cc", None)  # twice: nothing to drop
    assert registry.get_sample_value("metashard_coordinator_paused_parents", labels) is None
