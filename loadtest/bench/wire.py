"""Costs of the wire protocol: codec, link round trips, key hashing, slot assignment.

Measured in one run, each against a baseline:
- encode+decode of a KEYS message (64 keys) and of a SNAPSHOT (parent of 3 KB, 3 children of
  1 KB, as raw bytes) vs plain ``msgpack.packb``/``unpackb`` of the same field values as a
  plain dict: the ratio is the price of the dataclasses and of validation (target: at most 2x
  the time, i.e. a rate ratio of at least 0.5);
- round trips ROUTER -> DEALER -> ROUTER through ``manager.link.router.RouterLink`` and
  ``workers.link.dealer.DealerLink`` (a KEYS push answered by a FETCH; 64 in flight) vs the same
  frames pre-encoded, moved the same way with no codec and no link logic
  (``loadtest.bench._rawframes``), both in this process over ipc://;
- ``slot_of`` per key vs ``zlib.crc32`` of the same NUL-joined key bytes (the cheapest
  stdlib hash): the first time a key is seen (BLAKE2b) and after (its remembered slot);
- ``assign`` of 1024 slots to 16 workers vs a naive rendezvous (``max`` over the same BLAKE2b
  weights, no load bound).

Each figure and its baseline are measured in alternation (medians of several short rounds),
so that both see the same load on a shared machine.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import statistics
import tempfile
import zlib
from collections.abc import Callable
from typing import Any

import msgpack
import uvloop

from loadtest.bench import _rawframes
from loadtest.bench._report import header, rate, row
from manager.link.router import RouterLink, SendResult
from proto.wire import (
    PROTOCOL_VERSION,
    SLOT_COUNT,
    Fetch,
    Keys,
    Message,
    ParentKey,
    Priority,
    Snapshot,
    assign,
    decode,
    encode,
    slot_of,
)
from workers.link.dealer import DealerLink

ROUNDS = 7


def _paired(
    base: Callable[[], object], ours: Callable[[], object], *, seconds: float
) -> tuple[float, float]:
    """Median rates of ``base`` and ``ours`` measured in alternation, ``ROUNDS`` times each.

    The machine is shared: measuring one after the other would compare different loads.
    """
    bases, values = [], []
    for _ in range(ROUNDS):
        bases.append(rate(base, seconds=seconds / ROUNDS, repeat=1))
        values.append(rate(ours, seconds=seconds / ROUNDS, repeat=1))
    return statistics.median(bases), statistics.median(values)


def _keys(count: int) -> tuple[ParentKey, ...]:
    return tuple(
        ParentKey(
            "CompositeController", "catset", "catsets.ctl.enisoc.com", f"ns-{i % 7}", f"p-{i}"
        )
        for i in range(count)
    )


def _codec(seconds: float) -> None:
    header("codec: encode + decode per message (plain msgpack dict as baseline)")
    keys = Keys(41, Priority.LIVE, _keys(64))
    keys_plain = {
        "v": PROTOCOL_VERSION,
        "t": "KEYS",
        "epoch": 41,
        "priority": 0,
        "keys": [list(k) for k in keys.keys],
    }
    parent = b'{"kind":"CatSet","spec":{"x":"' + b"p" * 3000 + b'"}}'
    children = tuple(b'{"kind":"Pod","spec":{"x":"' + b"c" * 1000 + b'"}}' for _ in range(3))
    snap = Snapshot(41, 7, keys.keys[0], parent, {"Pod.v1": children}, (), {})
    snap_plain = {
        "v": PROTOCOL_VERSION,
        "t": "SNAPSHOT",
        "epoch": 41,
        "request_id": 7,
        "key": list(keys.keys[0]),
        "parent": parent,
        "children": {"Pod.v1": list(children)},
        "revisions": [],
        "related": {},
    }
    for name, msg, plain in (
        ("KEYS x64", keys, keys_plain),
        ("SNAPSHOT 3 KB + 3x1 KB", snap, snap_plain),
    ):
        _compare(name, msg, plain, seconds)


def _compare(name: str, msg: Message, plain: dict[str, Any], seconds: float) -> None:
    frame, plain_frame = encode(msg), msgpack.packb(plain, use_bin_type=True)
    cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        (
            "encode+decode",
            lambda: decode(encode(msg)),
            lambda: msgpack.unpackb(msgpack.packb(plain, use_bin_type=True), raw=False),
        ),
        ("encode", lambda: encode(msg), lambda: msgpack.packb(plain, use_bin_type=True)),
        ("decode", lambda: decode(frame), lambda: msgpack.unpackb(plain_frame, raw=False)),
    ]
    for label, ours, base in cases:
        baseline, value = _paired(base, ours, seconds=seconds)
        row(f"{name} {label}: plain msgpack", baseline, "msg/s")
        row(f"{name} {label}: proto.wire", value, "msg/s", baseline=baseline, target=">= 0.5x")


async def _round_trips_links(endpoint: str, count: int) -> float:
    coordinator = RouterLink()
    coordinator.bind(endpoint)
    worker = DealerLink("bench-worker", endpoint)
    push = Keys(1, Priority.LIVE, _keys(1))
    reply = Fetch(1, 1, push.keys[0], {})
    assert await worker.send(reply, wait=5)
    route, _ = await coordinator.recv()  # the ROUTER names the connection

    async def echo() -> None:
        async for _ in worker:
            await worker.send(reply, wait=5)

    async def send() -> None:
        assert await coordinator.send(route, push) is SendResult.SENT

    echoing = asyncio.create_task(echo())
    result = await _rawframes.pump(count, send, coordinator.recv)
    echoing.cancel()
    worker.close()
    coordinator.close()
    return result


def _links(count: int, repeat: int) -> None:
    window = _rawframes.WINDOW
    header(f"round trips ROUTER -> DEALER -> ROUTER, ipc://, {window} in flight, one process")
    with tempfile.TemporaryDirectory() as tmp:
        raw, link = [], []
        push = encode(Keys(1, Priority.LIVE, _keys(1)))
        reply = encode(Fetch(1, 1, _keys(1)[0], {}))
        for i in range(repeat):  # alternate, so both see the same machine load
            endpoint = f"ipc://{tmp}/raw-{i}.sock"
            raw.append(uvloop.run(_rawframes.round_trips(endpoint, push, reply, count)))
            link.append(uvloop.run(_round_trips_links(f"ipc://{tmp}/link-{i}.sock", count)))
        baseline, value = statistics.median(raw), statistics.median(link)
    row("raw frames, pre-encoded (loadtest.bench._rawframes)", baseline, "rt/s")
    row("RouterLink/DealerLink, encode+decode both ways", value, "rt/s", baseline=baseline)


def _weight_of_slot(slot: int, worker: str) -> int:
    data = worker.encode() + slot.to_bytes(4, "big")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def _hashing(seconds: float) -> None:
    header("keys to slots, slots to workers")
    keys = _keys(4096)
    key_count = len(keys)

    def crc_all() -> None:
        for k in keys:
            zlib.crc32("\0".join(k).encode()) % SLOT_COUNT

    def hash_all() -> None:
        for k in keys:  # another slot count is hashed every time, as a key seen first is
            slot_of(k, slot_count=SLOT_COUNT - 1)

    def slot_all() -> None:
        for k in keys:
            slot_of(k)

    baseline, value = (r * key_count for r in _paired(crc_all, hash_all, seconds=seconds))
    row("zlib.crc32 of the key bytes", baseline, "keys/s")
    row("slot_of, first time (BLAKE2b-64)", value, "keys/s", baseline=baseline)
    row("slot_of, first time: cost per key", 1e6 / value, "us")
    baseline, value = (r * key_count for r in _paired(crc_all, slot_all, seconds=seconds))
    row("slot_of, remembered", value, "keys/s", baseline=baseline)
    row("slot_of, remembered: cost per key", 1e6 / value, "us")

    workers = [f"metashard-worker-{i}" for i in range(16)]

    def naive() -> None:
        for s in range(SLOT_COUNT):
            max(workers, key=functools.partial(_weight_of_slot, s))

    baseline, value = _paired(naive, lambda: assign(SLOT_COUNT, workers), seconds=seconds)
    row("naive rendezvous 1024 slots x 16 workers", baseline, "assign/s")
    row("assign 1024 slots x 16 workers (load bound)", value, "assign/s", baseline=baseline)
    row("assign: time per assignment", 1e3 / value, "ms")


def main(quick: bool) -> None:
    seconds = 0.2 if quick else 3.0
    _codec(seconds)
    _links(count=2_000 if quick else 30_000, repeat=1 if quick else 5)
    _hashing(seconds)
