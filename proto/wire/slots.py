"""Keys to slots, slots to workers.

- ``slot_of(key)``: BLAKE2b (8-byte digest) of ``key.canonical()``, read big-endian, modulo
  ``SLOT_COUNT``. Stable across processes, runs, Python versions and machines (never Python's
  ``hash()``, which is salted per process); the tests pin known values. The slots of the last
  ``SLOT_CACHE`` keys are remembered; ``slot_hash`` computes the same slot without remembering
  it, for a caller that keeps the slots of its keys itself (the coordinator's key index).
- ``assign(slots, worker_ids)``: rendezvous (highest-random-weight) hashing. The weight of a
  (worker, slot) pair is BLAKE2b of the worker id's UTF-8 bytes followed by the slot as 4
  big-endian bytes; each slot goes to the worker of highest weight. The result depends only on
  the set of worker ids (not their order), and adding or removing one worker of N moves about
  1/N of the slots: without the load bound below, only slots that the newcomer wins, or that
  the leaver owned, change hands.
- Loads are bounded: no worker gets more than ``ceil(load_factor * slots / N)`` slots
  (default factor 1.1). A slot whose first choice is full goes to its next choice, settled as
  the stable matching in which slots and workers both prefer higher weights (unique, so still
  order-independent). Plain rendezvous gives each worker a binomial share (standard deviation
  about 12% of the mean at 1024 slots over 16 workers), so some worker sets would put one
  worker 35-40% above or below the mean; the bound removes the high side and hands the excess
  to the next choices, which evens out the low side too. Movement stays near 1/N (measured:
  1.05x the ideal on average, 1.35x at worst, over random worker sets of 2 to 16).
- ``moves(old, new)``: the slots whose owner differs between two assignments.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Iterable, Mapping
from hashlib import blake2b
from typing import Final

from proto.wire.keys import ParentKey

SLOT_COUNT: Final = 1024
DEFAULT_LOAD_FACTOR: Final = 1.1

_SLOT_BYTES: Final = tuple(s.to_bytes(4, "big") for s in range(SLOT_COUNT))


SLOT_CACHE: Final = 1 << 12
"""Keys whose slot (of ``SLOT_COUNT``) is remembered: a key is asked for again and again
while it is handled (its KEYS, its claim, each write's fencing), and a hit is a dict lookup
instead of a hash (``make bench BENCH=wire``). A few thousand, not the parents: the keys and
their strings stay alive while remembered, so a larger table made a worker's memory grow with
the parents (38 MB at 65,536 keys decoded from the wire, 2.5 MB at 4,096)."""


def slot_of(key: ParentKey, *, slot_count: int = SLOT_COUNT) -> int:
    """The slot of ``key`` (``0 <= slot < slot_count``); remembered for ``SLOT_COUNT`` only."""
    if slot_count == SLOT_COUNT:
        return _cached_slot(key)
    return slot_hash(key, slot_count=slot_count)


def slot_hash(key: ParentKey, *, slot_count: int = SLOT_COUNT) -> int:
    """The slot of ``key``, computed every time (``slot_of`` remembers it)."""
    digest = blake2b(key.canonical(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % slot_count


@functools.lru_cache(maxsize=SLOT_CACHE)
def _cached_slot(key: ParentKey) -> int:
    return slot_hash(key)


def _weights(worker_id: str, slots: Iterable[int]) -> list[tuple[int, int]]:
    """``(weight, slot)`` of ``worker_id`` for each slot."""
    base = blake2b(worker_id.encode("utf-8", "surrogatepass"), digest_size=8)
    out = []
    for s in slots:
        h = base.copy()
        h.update(_SLOT_BYTES[s] if 0 <= s < SLOT_COUNT else s.to_bytes(4, "big"))
        out.append((int.from_bytes(h.digest(), "big"), s))
    return out


def assign(
    slots: int | Iterable[int],
    worker_ids: Iterable[str],
    *,
    load_factor: float = DEFAULT_LOAD_FACTOR,
) -> dict[int, str]:
    """Map every slot (``range(slots)`` for an int) to one of ``worker_ids``.

    ``{}`` when there are no workers. Raises ``ValueError`` for ``load_factor < 1`` or a slot
    outside ``0 <= slot < 2**32``.
    """
    if load_factor < 1:
        raise ValueError(f"load_factor must be >= 1, got {load_factor}")
    wanted = sorted(set(range(slots) if isinstance(slots, int) else slots))
    workers = sorted(set(worker_ids))
    if not workers or not wanted:
        return {}
    if wanted[0] < 0 or wanted[-1] >= 2**32:
        raise ValueError("slots must be in 0 <= slot < 2**32")
    capacity = math.ceil(load_factor * len(wanted) / len(workers))

    # Each slot's preference list: workers by descending weight (ties: larger id first).
    columns = [_weights(w, wanted) for w in workers]
    prefs: list[list[tuple[int, str]]] = [
        sorted(((col[i][0], w) for w, col in zip(workers, columns, strict=True)), reverse=True)
        for i in range(len(wanted))
    ]

    # Slot-proposing deferred acceptance: each worker keeps its `capacity` heaviest proposals.
    held: dict[str, list[tuple[int, int]]] = {w: [] for w in workers}  # min-heaps (weight, i)
    nxt = [0] * len(wanted)
    free = list(range(len(wanted)))
    while free:
        i = free.pop()
        weight, w = prefs[i][nxt[i]]
        nxt[i] += 1
        heap = held[w]
        if len(heap) < capacity:
            heapq.heappush(heap, (weight, i))
        else:
            free.append(heapq.heappushpop(heap, (weight, i))[1])
    return {wanted[i]: w for w, heap in held.items() for _, i in heap}


def moves(old: Mapping[int, str], new: Mapping[int, str]) -> list[int]:
    """Sorted slots whose owner differs (a slot present in only one side counts as moved)."""
    return sorted(s for s in old.keys() | new.keys() if old.get(s) != new.get(s))
