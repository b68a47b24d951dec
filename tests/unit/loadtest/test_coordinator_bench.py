from __future__ import annotations

import asyncio
import random

import orjson

from loadtest.bench._scale_objects import configmap, fanout, watch_line
from loadtest.bench.coordinator import cpu, live_latency, memory
from proto.kube.watch import decode_event


def test_the_objects_are_the_scale_jobs_sizes_and_shapes() -> None:
    parent = fanout(7, "ns", random.Random(1))
    child = configmap(parent, 2)
    assert 800 < len(orjson.dumps(parent)) < 1000
    assert 1250 < len(orjson.dumps(child)) < 1500
    meta, owner = child["metadata"], child["metadata"]["ownerReferences"][0]
    assert meta["name"] == "fo-000007-2" and meta["namespace"] == "ns"
    assert owner["uid"] == parent["metadata"]["uid"] == meta["labels"]["controller-uid"]
    assert parent["status"]["observedGeneration"] == parent["metadata"]["generation"]
    assert "status" not in fanout(8, "ns", random.Random(1), synced=False)
    event = decode_event(watch_line("ADDED", child))
    assert event.object == child and orjson.loads(event.raw) == child


def test_memory_is_measured_per_object_against_the_json() -> None:
    m = memory(50)
    assert m.parent_raw < m.parent_held and m.child_raw < m.child_held
    held, raw = m.per_object
    assert m.key_index > 0 and raw < held


def test_a_live_key_is_measured_behind_low_ones_and_alone() -> None:
    behind, alone, low_done = asyncio.run(live_latency(300, 1))
    assert behind > 0 and alone > 0 and low_done > 0


def test_cpu_is_measured_per_fetch_and_per_event_against_the_codec() -> None:
    c = asyncio.run(cpu(30))
    assert c.fetch > c.encode > 0
    assert c.child_event > c.decode > 0 and c.parent_event > c.decode
    assert c.reconcile == 2 * c.fetch + 3 * c.child_event + c.parent_event
