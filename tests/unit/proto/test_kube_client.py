"""Client reads and writes against recorded exchanges: what is sent, what comes back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from proto.kube import errors
from proto.kube.client import Client, PatchType
from proto.kube.resources import Resource
from tests.unit.proto.kube_fake import FakeApiServer, Reply, load_transcript, serve

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
WIDGETS = Resource("example.com", "v1", "widgets", "Widget", namespaced=True)

Call = Callable[[Client, Any], Awaitable[dict[str, Any]]]

# (transcript, step, the call given the step's request body)
WRITES: list[tuple[str, int, Call]] = [
    ("03-errors.json", 6, lambda c, b: c.create(CONFIGMAPS, b, namespace="conf-errors")),
    ("03-errors.json", 8, lambda c, b: c.replace(CONFIGMAPS, b, namespace="conf-errors")),
    ("02-crd-lifecycle.json", 11, lambda c, b: c.replace_status(WIDGETS, b)),
    ("08-patches.json", 5, lambda c, b: c.patch(CONFIGMAPS, "p1", b, namespace="conf-patch")),
    (
        "08-patches.json",
        6,
        lambda c, b: c.patch(
            CONFIGMAPS, "p1", b, namespace="conf-patch", patch_type=PatchType.JSON
        ),
    ),
    (
        "08-patches.json",
        10,
        lambda c, b: c.patch(
            CONFIGMAPS, "p1", b, namespace="conf-patch", patch_type=PatchType.STRATEGIC
        ),
    ),
    ("08-patches.json", 22, lambda c, b: c.patch_status(WIDGETS, "w1", b, namespace="conf-patch")),
    (
        "09-server-side-apply.json",
        3,
        lambda c, b: c.apply(CONFIGMAPS, b, namespace="conf-ssa", field_manager="a"),
    ),
    (
        "09-server-side-apply.json",
        13,
        lambda c, b: c.apply(
            CONFIGMAPS, b, namespace="conf-ssa", field_manager="a", force=True, dry_run=True
        ),
    ),
    (
        "09-server-side-apply.json",
        24,
        lambda c, b: c.apply_status(WIDGETS, b, namespace="conf-ssa", field_manager="ctrl"),
    ),
    (
        "03-errors.json",
        19,
        lambda c, b: c.delete(
            CONFIGMAPS, "cm1", namespace="conf-errors", uid=b["preconditions"]["uid"]
        ),
    ),
    (
        "03-errors.json",
        18,
        lambda c, b: c.delete(
            CONFIGMAPS,
            "cm1",
            namespace="conf-errors",
            resource_version=b["preconditions"]["resourceVersion"],
        ),
    ),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("name", "index", "call"), WRITES)
async def test_writes_send_what_the_recorded_client_sent(
    shared_dir: Path, name: str, index: int, call: Call
) -> None:
    step = load_transcript(shared_dir, name)[index]
    request, response = step["request"], step["response"]
    server = FakeApiServer()
    server.replay(step)
    async with serve(server) as session:
        client = Client(session)
        if response["status"] >= 400:
            with pytest.raises(errors.ApiError) as caught:
                await call(client, request["body"])
            assert caught.value.status == response["status"]
        else:
            assert await call(client, request["body"]) == response["body"]
    (received,) = server.received
    assert received.method == request["method"]
    assert received.path == request["path"]
    assert received.query == request["query"]
    assert received.headers["Content-Type"] == request["headers"]["Content-Type"]
    assert received.json() == request["body"]


@pytest.mark.asyncio
async def test_delete_sends_delete_options_and_returns_the_object_or_a_status(
    shared_dir: Path,
) -> None:
    namespace_step = load_transcript(shared_dir, "13-namespaces.json")[8]
    server = FakeApiServer()
    server.replay(namespace_step)
    async with serve(server) as session:
        client = Client(session)
        kept = await client.delete(
            NAMESPACES, "conf-ns-doomed", propagation_policy="Foreground", dry_run=True
        )
    assert kept["kind"] == "Namespace"
    assert kept["status"]["phase"] == "Terminating"
    assert server.received[0].json() == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Foreground",
        "dryRun": ["All"],
    }


@pytest.mark.asyncio
async def test_bytes_bodies_are_forwarded_untouched() -> None:
    raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"n"} }'
    server = FakeApiServer()
    server.route("POST", "/api/v1/namespaces/n/configmaps", Reply.json(201, {"kind": "X"}))
    server.route("PUT", "/api/v1/namespaces/n/configmaps/c", Reply.json(200, {"kind": "Y"}))
    server.route("PATCH", "/api/v1/namespaces/n/configmaps/c", Reply.json(200, {"kind": "Z"}))
    async with serve(server) as session:
        client = Client(session)
        assert (await client.create(CONFIGMAPS, raw))["kind"] == "X"
        assert (await client.replace(CONFIGMAPS, raw))["kind"] == "Y"
        assert (await client.apply(CONFIGMAPS, raw, field_manager="m"))["kind"] == "Z"
    assert [r.body for r in server.received] == [raw, raw, raw]
    assert server.received[2].headers["Content-Type"] == "application/apply-patch+yaml"


@pytest.mark.asyncio
async def test_writes_refuse_bodies_without_a_name_or_namespace() -> None:
    async with serve(FakeApiServer()) as session:
        client = Client(session)
        with pytest.raises(ValueError, match="namespaced"):
            await client.create(CONFIGMAPS, {"metadata": {"name": "x"}})
        with pytest.raises(ValueError, match=r"metadata\.name"):
            await client.replace(CONFIGMAPS, {"metadata": {}}, namespace="n")
        with pytest.raises(ValueError, match="field_manager"):
            await client.patch(CONFIGMAPS, "x", {}, namespace="n", patch_type=PatchType.APPLY)
        with pytest.raises(ValueError, match="force"):
            await client.patch(CONFIGMAPS, "x", {}, namespace="n", force=True)


@pytest.mark.asyncio
async def test_get_reads_one_object(shared_dir: Path) -> None:
    step = load_transcript(shared_dir, "02-crd-lifecycle.json")[13]
    server = FakeApiServer()
    server.replay(step)
    async with serve(server) as session:
        got = await Client(session).get(WIDGETS, "w1", namespace="conf-crd", subresource="status")
    assert got == step["response"]["body"]


# --- lists -----------------------------------------------------------------------------------


def _pages(shared_dir: Path) -> tuple[FakeApiServer, list[dict[str, Any]]]:
    steps = load_transcript(shared_dir, "10-labels-fields-pagination.json")
    server = FakeApiServer()
    for index in (30, 31, 33):  # limit=2, then two continue tokens
        server.replay(steps[index])
    return server, [steps[i]["response"]["body"] for i in (30, 31, 33)]


@pytest.mark.asyncio
async def test_list_follows_continue_tokens_to_the_end(shared_dir: Path) -> None:
    server, pages = _pages(shared_dir)
    async with serve(server) as session:
        listed = await Client(session).list(
            CONFIGMAPS, namespace="conf-list", limit=2, resource_version="0"
        )
    names = [item["metadata"]["name"] for item in listed.items]
    assert names == ["c1", "c2", "c3", "c4", "c5"]
    assert listed.resource_version == pages[-1]["metadata"]["resourceVersion"]
    assert [r.query for r in server.received] == [
        {"limit": "2", "resourceVersion": "0"},
        {"limit": "2", "continue": "<continue:1>"},
        {"limit": "2", "continue": "<continue:2>"},
    ]
    # list items come without kind/apiVersion; the client adds them, as in watch events
    assert all(i["kind"] == "ConfigMap" and i["apiVersion"] == "v1" for i in listed.items)
    assert [orjson.loads(raw) for raw in listed.raws] == listed.items


@pytest.mark.asyncio
async def test_an_expired_continue_token_raises_gone(shared_dir: Path) -> None:
    steps = load_transcript(shared_dir, "06-watch-gone.json")
    server = FakeApiServer()
    server.replay(steps[7])  # first page, limit=1
    server.replay(steps[11])  # its continue token has expired
    async with serve(server) as session:
        with pytest.raises(errors.Gone) as caught:
            await Client(session).list(CONFIGMAPS, namespace="conf-gone", limit=1)
    assert caught.value.continue_token is not None


def _watch_list_steps(shared_dir: Path) -> list[dict[str, Any]]:
    return load_transcript(shared_dir, "05-watch-list.json")


@pytest.mark.asyncio
async def test_stream_list_ends_at_the_initial_events_end_bookmark(shared_dir: Path) -> None:
    step = _watch_list_steps(shared_dir)[4]
    events = step["response"]["events"]
    server = FakeApiServer()
    server.route("GET", step["request"]["path"], Reply.recorded(step["response"]))
    async with serve(server) as session:
        listed = await Client(session).stream_list(CONFIGMAPS, namespace="conf-watchlist")
    assert listed.items == [e["object"] for e in events[:3]]
    assert [orjson.loads(raw) for raw in listed.raws] == listed.items
    assert listed.resource_version == events[3]["object"]["metadata"]["resourceVersion"]
    query = server.received[0].query
    assert {k: query[k] for k in step["request"]["query"] if k != "timeoutSeconds"} == {
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
    }
    assert len(server.received) == 1  # no fallback list


def _fallback_server(shared_dir: Path, watch_reply: Reply) -> tuple[FakeApiServer, list[Any]]:
    steps = _watch_list_steps(shared_dir)
    listed = steps[6]  # a plain list of the same namespace
    server = FakeApiServer()
    server.route("GET", listed["request"]["path"], Reply.recorded(listed["response"]))
    server.route("GET", listed["request"]["path"], watch_reply, query={"watch": "true"})
    return server, listed["response"]["body"]["items"]


@pytest.mark.asyncio
@pytest.mark.parametrize("refusal", ["422", "error-event", "no-bookmark"])
async def test_stream_list_falls_back_to_pages(shared_dir: Path, refusal: str) -> None:
    refused = {
        "422": Reply.recorded(_watch_list_steps(shared_dir)[9]["response"]),
        "error-event": Reply.events(
            (
                "ERROR",
                {
                    "kind": "Status",
                    "code": 500,
                    "reason": "InternalError",
                    "message": "the required storage feature RequestWatchProgress is disabled",
                },
            )
        ),
        "no-bookmark": Reply.events(("ADDED", {"metadata": {"name": "a", "resourceVersion": "1"}})),
    }[refusal]
    server, items = _fallback_server(shared_dir, refused)
    async with serve(server) as session:
        listed = await Client(session).stream_list(CONFIGMAPS, namespace="conf-watchlist")
    assert [i["metadata"]["name"] for i in listed.items] == [i["metadata"]["name"] for i in items]
    assert [r.query.get("watch") for r in server.received] == ["true", None]
    assert server.received[1].query == {"limit": "500"}


@pytest.mark.asyncio
async def test_stream_list_does_not_hide_transport_errors() -> None:
    server = FakeApiServer()
    server.route(
        "GET", "/api/v1/namespaces/n/configmaps", Reply(chunks=[b'{"type":'], truncate=True)
    )
    async with serve(server) as session:
        with pytest.raises(errors.TransportError):
            await Client(session).stream_list(CONFIGMAPS, namespace="n")


@pytest.mark.asyncio
async def test_stream_list_waits_for_the_annotated_bookmark() -> None:
    def cm(name: str, rv: str) -> dict[str, Any]:
        return {
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "n", "resourceVersion": rv},
        }

    end = {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "9", "annotations": {"k8s.io/initial-events-end": "true"}},
    }
    server = FakeApiServer()
    server.route(
        "GET",
        "/api/v1/namespaces/n/configmaps",
        Reply.events(
            ("ADDED", cm("a", "3")),
            ("BOOKMARK", {"kind": "ConfigMap", "metadata": {"resourceVersion": "4"}}),
            ("ADDED", cm("b", "5")),
            ("ADDED", cm("c", "6")),
            ("DELETED", cm("b", "7")),
            ("MODIFIED", cm("a", "8")),
            ("BOOKMARK", end),
            ("ADDED", cm("live", "10")),
        ),
    )
    async with serve(server) as session:
        listed = await Client(session).stream_list(CONFIGMAPS, namespace="n")
    assert [(i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in listed.items] == [
        ("a", "8"),
        ("c", "6"),
    ]
    assert listed.resource_version == "9"
