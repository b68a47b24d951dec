from __future__ import annotations

from loadtest.bench.informer import ingest_stream, relist_streams, store_memory
from proto.kube.watch import LineSplitter, decode_event


def test_the_ingest_stream_is_a_streaming_list_followed_by_live_changes() -> None:
    events = [decode_event(line) for line in LineSplitter().feed(ingest_stream(5))]
    assert [e.type for e in events] == ["ADDED"] * 5 + ["BOOKMARK"] + ["MODIFIED"] * 5
    assert events[5].initial_events_end and events[5].resource_version == "5"
    assert [e.resource_version for e in events[6:]] == ["6", "7", "8", "9", "10"]
    assert events[0].object["metadata"]["name"] == events[6].object["metadata"]["name"]


def test_the_relist_streams_end_in_410_then_list_every_object_changed() -> None:
    first, second = relist_streams(3)
    lines = LineSplitter().feed(first)
    assert [decode_event(line).type for line in lines[:-1]] == ["ADDED"] * 3 + ["BOOKMARK"]
    assert b'"code":410' in bytes(lines[-1])
    relisted = [decode_event(line) for line in LineSplitter().feed(second)]
    assert [e.resource_version for e in relisted] == ["4", "5", "6", "6"]
    assert relisted[-1].initial_events_end


def test_store_memory_is_measured_against_the_raw_size() -> None:
    held, dict_held, raw = store_memory(200)
    assert 2800 < raw < 3600
    assert raw < held < dict_held
