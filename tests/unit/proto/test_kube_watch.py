"""Watch decoding: line splitting, raw bytes, bookmarks, errors, truncation, inactivity."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource
from proto.kube.watch import Line, LineSplitter, WatchEvent, decode_event
from tests.unit.proto.kube_fake import FakeApiServer, Reply, load_transcript, serve, watch_line

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
PATH = "/api/v1/namespaces/w/configmaps"


def _configmap(name: str, rv: str, data: str = "v") -> dict[str, Any]:
    return {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": "w", "resourceVersion": rv},
        "data": {"k": data},
    }


async def _collect(client: Client, **options: Any) -> list[WatchEvent]:
    events = client.watch(CONFIGMAPS, namespace="w", **options)
    async with contextlib.aclosing(events):
        return [event async for event in events]


# --- the line splitter -----------------------------------------------------------------------


def test_many_lines_in_one_chunk() -> None:
    splitter = LineSplitter()
    lines = [watch_line("ADDED", _configmap(f"c{i}", str(i))) for i in range(500)]
    assert splitter.feed(b"".join(lines)) == [line[:-1] for line in lines]
    assert splitter.finish() == b""


def test_a_line_larger_than_a_mebibyte_across_chunks() -> None:
    big = watch_line("ADDED", _configmap("big", "7", data="x" * (3 << 20)))
    small = watch_line("MODIFIED", _configmap("s", "8"))
    stream = big + small
    splitter = LineSplitter()
    out: list[Line] = []
    for start in range(0, len(stream), 1 << 20):
        out.extend(splitter.feed(stream[start : start + (1 << 20)]))
    assert out == [big[:-1], small[:-1]]
    assert decode_event(out[0]).object["data"]["k"] == "x" * (3 << 20)


@given(
    st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20), st.data()
)
def test_any_chunking_yields_the_same_lines(lines: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    splitter = LineSplitter()
    out: list[Line] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        out.extend(splitter.feed(stream[start:end]))
    assert [bytes(line) for line in out] == [line for line in lines if line]  # empty: skipped
    assert splitter.finish() == b""


def test_an_endless_line_is_refused() -> None:
    splitter = LineSplitter(max_line_bytes=100)
    splitter.feed(b"x" * 60)
    with pytest.raises(errors.StreamError, match="exceeds 100 bytes"):
        splitter.feed(b"x" * 60)


# --- decoding one line ------------------------------------------------------------------------


def test_raw_is_sliced_from_the_line_without_re_encoding() -> None:
    # Spacing and key order that orjson would not produce: a re-encoding would change them.
    obj = b'{"metadata": {"resourceVersion": "5", "name": "a"},  "kind":"ConfigMap"}'
    line = b'{"type":"MODIFIED","object":' + obj + b"}"
    event = decode_event(line)
    assert event.type == "MODIFIED"
    assert event.raw == obj
    from_view = decode_event(memoryview(line + b"\n")[:-1])  # as the splitter hands them out
    assert type(from_view.raw) is bytes and from_view.raw == obj
    assert event.object == orjson.loads(obj)
    assert event.resource_version == "5"
    assert not event.initial_events_end


def test_another_layout_falls_back_to_encoding_the_object() -> None:
    event = decode_event(b'{"object": {"metadata": {"resourceVersion": "5"}}, "type": "DELETED"}')
    assert event.type == "DELETED"
    assert event.raw == b'{"metadata":{"resourceVersion":"5"}}'


def test_bookmarks_carry_the_resource_version_and_the_initial_events_end(
    shared_dir: Path,
) -> None:
    step = load_transcript(shared_dir, "05-watch-list.json")[4]
    bookmark = step["response"]["events"][3]
    event = decode_event(watch_line(bookmark["type"], bookmark["object"])[:-1])
    assert event.type == "BOOKMARK"
    assert event.resource_version == bookmark["object"]["metadata"]["resourceVersion"]
    assert event.initial_events_end
    plain = decode_event(watch_line("BOOKMARK", {"metadata": {"resourceVersion": "9"}})[:-1])
    assert plain.resource_version == "9" and not plain.initial_events_end


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"type":"ADDED","object":{"kind":', "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"type":"ADDED"}', "not a watch event"),
        (b'{"type":"RENAMED","object":{}}', "not a watch event"),
        (b'{"type":["ADDED"],"object":{}}', "not a watch event"),
        (b'{"type":"ADDED","object":"text"}', "not a watch event"),
    ],
)
def test_malformed_lines_raise_stream_error(line: bytes, message: str) -> None:
    with pytest.raises(errors.StreamError, match=message):
        decode_event(line)
    with pytest.raises(errors.StreamError, match=message):
        decode_event(memoryview(b"\n" + line + b"\n")[1:-1])


def test_error_events_raise_their_api_error(shared_dir: Path) -> None:
    step = load_transcript(shared_dir, "06-watch-gone.json")[14]
    error = step["response"]["events"][0]
    with pytest.raises(errors.Gone):
        decode_event(watch_line("ERROR", error["object"])[:-1])
    internal = {"kind": "Status", "code": 500, "reason": "InternalError", "message": "boom"}
    with pytest.raises(errors.ServerError, match="boom"):
        decode_event(watch_line("ERROR", internal)[:-1])


# --- through the client and the fake server ---------------------------------------------------


@pytest.mark.asyncio
async def test_recorded_watch_is_replayed_in_order(shared_dir: Path) -> None:
    step = load_transcript(shared_dir, "04-watch-basics.json")[3]
    recorded = step["response"]["events"]
    server = FakeApiServer()
    server.route("GET", step["request"]["path"], Reply.recorded(step["response"]))
    resource = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
    async with serve(server) as session:
        events = Client(session).watch(resource, namespace="conf-watch", resource_version="<rv:2>")
        async with contextlib.aclosing(events):
            got = [event async for event in events]
    assert [(e.type, e.object) for e in got] == [(e["type"], e["object"]) for e in recorded]
    assert all(orjson.loads(e.raw) == e.object for e in got)
    # bookmarks advance the resourceVersion the caller resumes from
    assert got[-1].type == "BOOKMARK"
    assert got[-1].resource_version == recorded[-1]["object"]["metadata"]["resourceVersion"]
    query = server.received[0].query
    assert query["watch"] == "true"
    assert query["resourceVersion"] == "<rv:2>"
    assert query["allowWatchBookmarks"] == "true"
    assert 300 <= int(query["timeoutSeconds"]) <= 600


@pytest.mark.asyncio
async def test_timeout_seconds_can_be_set_and_bookmarks_turned_off() -> None:
    server = FakeApiServer()
    server.route("GET", PATH, Reply(chunks=[]))
    async with serve(server) as session:
        assert await _collect(Client(session), timeout_seconds=42, allow_bookmarks=False) == []
    query = server.received[0].query
    assert query["timeoutSeconds"] == "42"
    assert "allowWatchBookmarks" not in query and "resourceVersion" not in query


@pytest.mark.asyncio
async def test_410_as_an_error_event_mid_stream(shared_dir: Path) -> None:
    gone = load_transcript(shared_dir, "06-watch-gone.json")[14]["response"]["events"][0]
    server = FakeApiServer()
    server.route(
        "GET",
        PATH,
        Reply.events(("ADDED", _configmap("a", "5")), ("ERROR", gone["object"])),
    )
    seen: list[WatchEvent] = []
    async with serve(server) as session:
        events = Client(session).watch(CONFIGMAPS, namespace="w", resource_version="4")
        with pytest.raises(errors.Gone, match="too old resource version"):
            async for event in events:
                seen.append(event)
    assert [e.resource_version for e in seen] == ["5"]


@pytest.mark.asyncio
async def test_410_as_an_http_status() -> None:
    expired = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    server = FakeApiServer()
    server.route("GET", PATH, Reply.json(410, expired))
    async with serve(server) as session:
        with pytest.raises(errors.Gone):
            await _collect(Client(session), resource_version="1")


@pytest.mark.asyncio
async def test_an_object_over_a_mebibyte_streamed_in_small_pieces() -> None:
    big = watch_line("ADDED", _configmap("big", "7", data="y" * ((1 << 20) + 12345)))
    pieces = [big[i : i + 65536] for i in range(0, len(big), 65536)]
    tail = watch_line("MODIFIED", _configmap("s", "8"))
    server = FakeApiServer()
    server.route("GET", PATH, Reply(chunks=[*pieces, tail]))
    async with serve(server) as session:
        got = await _collect(Client(session))
    assert [e.resource_version for e in got] == ["7", "8"]
    assert len(got[0].object["data"]["k"]) == (1 << 20) + 12345
    assert got[0].raw == big[len(b'{"type":"ADDED","object":') : -2]


@pytest.mark.asyncio
async def test_many_events_in_one_chunk() -> None:
    lines = b"".join(watch_line("MODIFIED", _configmap("c", str(i))) for i in range(2000))
    server = FakeApiServer()
    server.route("GET", PATH, Reply(chunks=[lines]))
    async with serve(server) as session:
        got = await _collect(Client(session))
    assert [e.resource_version for e in got] == [str(i) for i in range(2000)]


@pytest.mark.asyncio
async def test_a_stream_dropped_mid_line_is_a_transport_error() -> None:
    line = watch_line("ADDED", _configmap("a", "5"))
    server = FakeApiServer()
    server.route("GET", PATH, Reply(chunks=[line, line[:30]], truncate=True))
    seen: list[WatchEvent] = []
    async with serve(server) as session:
        with pytest.raises(errors.TransportError):
            async for event in Client(session).watch(CONFIGMAPS, namespace="w"):
                seen.append(event)
    assert len(seen) == 1


@pytest.mark.asyncio
async def test_a_stream_ended_cleanly_mid_line_is_a_transport_error() -> None:
    line = watch_line("ADDED", _configmap("a", "5"))
    server = FakeApiServer()
    server.route("GET", PATH, Reply(chunks=[line, line[:30]]))
    async with serve(server) as session:
        with pytest.raises(errors.TransportError, match="middle of a line"):
            await _collect(Client(session))


@pytest.mark.asyncio
async def test_a_malformed_line_in_the_stream_is_a_stream_error() -> None:
    server = FakeApiServer()
    server.route(
        "GET", PATH, Reply(chunks=[watch_line("ADDED", _configmap("a", "5")), b"<html>\n"])
    )
    async with serve(server) as session:
        with pytest.raises(errors.StreamError, match="not JSON"):
            await _collect(Client(session))


@pytest.mark.asyncio
async def test_the_inactivity_deadline_raises_so_the_caller_resumes() -> None:
    server = FakeApiServer()
    server.route("GET", PATH, Reply(chunks=[watch_line("ADDED", _configmap("a", "5"))], stall=5.0))
    seen: list[WatchEvent] = []
    async with serve(server) as session:
        with pytest.raises(errors.TransportError, match=r"no data for 0\.2 s"):
            async for event in Client(session).watch(
                CONFIGMAPS, namespace="w", inactivity_timeout=0.2
            ):
                seen.append(event)
    assert [e.resource_version for e in seen] == ["5"]


@pytest.mark.asyncio
async def test_a_normal_server_side_end_ends_the_iteration() -> None:
    server = FakeApiServer()
    server.route(
        "GET",
        PATH,
        Reply.events(("ADDED", _configmap("a", "5")), ("DELETED", _configmap("a", "6"))),
    )
    async with serve(server) as session:
        got = await _collect(Client(session))
    assert [(e.type, e.resource_version) for e in got] == [("ADDED", "5"), ("DELETED", "6")]
