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
    ("02-crd-lifecycle.json", 11, lambda c, b: c.replace(WIDGETS, b, subresource="status")),
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
    (
        "08-patches.json",
        22,
        lambda c, b: c.patch(WIDGETS, "w1", b, namespace="conf-patch", subresource="status"),
    ),
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
        lambda c, b: c.apply(
            WIDGETS, b, namespace="conf-ssa", field_manager="ctrl", subresource="status"
        ),
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
async def test_apply_bodies_escape_what_yaml_would_read_as_line_breaks() -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "n"},
        "data": {"text": "a<b & c>d \u2028 \x85 \x7f end"},
    }
    server = FakeApiServer()
    server.route("PATCH", "/api/v1/namespaces/n/configmaps/c", Reply.json(200, {"kind": "Z"}))
    server.route("POST", "/api/v1/namespaces/n/configmaps", Reply.json(201, {"kind": "X"}))
    async with serve(server) as session:
        client = Client(session)
        await client.apply(CONFIGMAPS, body, field_manager="m")
        await client.create(CONFIGMAPS, body)
    applied, created = (r.body for r in server.received)
    assert b'"a\\u003cb \\u0026 c\\u003ed \\u2028 \\u0085 \\u007f end"' in applied
    assert orjson.loads(applied) == body
    assert created == orjson.dumps(body)  # JSON bodies are read as JSON: nothing to escape


class Refused(Exception):
    pass


@pytest.mark.asyncio
async def test_a_gated_client_asks_its_gate_for_every_write_and_a_refusal_sends_nothing() -> None:
    body = {"metadata": {"name": "c", "namespace": "n"}}
    server = FakeApiServer()
    answer = Reply.json(200, {"kind": "ConfigMap"})
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        path = "/api/v1/namespaces/n/configmaps" + ("" if method == "POST" else "/c")
        server.route(method, path, answer)
    asked: list[str] = []
    refusing = False

    def gate(what: str) -> Callable[[], None]:
        def check() -> None:
            if refusing:
                raise Refused
            asked.append(what)

        return check

    async with serve(server) as session:
        plain = Client(session)
        client = plain.gated(gate)
        writes: list[Callable[[], Awaitable[dict[str, Any]]]] = [
            lambda: client.create(CONFIGMAPS, body),
            lambda: client.replace(CONFIGMAPS, body),
            lambda: client.patch(CONFIGMAPS, "c", {}, namespace="n"),
            lambda: client.apply(CONFIGMAPS, body, field_manager="m"),
            lambda: client.delete(CONFIGMAPS, "c", namespace="n"),
        ]
        for write in writes:
            await write()
        refusing = True
        for write in writes:
            with pytest.raises(Refused):
                await write()
        await plain.replace(CONFIGMAPS, body)  # the client it was made from has no gate
    path = "/api/v1/namespaces/n/configmaps"
    assert asked == [
        f"POST {path} c",
        f"PUT {path}/c",
        f"PATCH {path}/c",
        f"PATCH {path}/c",
        f"DELETE {path}/c",
    ]
    assert len(server.received) == 6


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
