"""Hook answers reused while their ``ttlSeconds`` lasts: the answer cache of one controller's
sync hook (``proto.api.ttl``).

Contract:
- An entry is kept per parent and variant (the same keys as the ETag cache,
  ``proto.hooks.etag``): the digest of the request body the answer was given for, the
  answer's body as it came, and when it expires (``ttlSeconds`` after the answer came).
- ``get(key, request)`` returns the answer's body only for the same request (the same
  digest) before it expires; a different request replaces nothing by itself, but its answer
  replaces the entry (``put``), or removes it when it sets no TTL (``put`` with None).
- Requests are kept as digests (BLAKE2b, 16 bytes): a request differs from the one answered
  when its bytes do. A digest is only computed for a key that has an entry (``get``) or an
  answer with a TTL (``put``), so a hook that never sets one costs a dict lookup per call.
- Memory is bounded: past ``max_bytes`` of kept answers the least recently used entries go
  (``proto.hooks.bodies``); an expired entry is removed when it is next asked for.
  ``drop(predicate)`` removes the entries of keys that match (the worker lost their slot).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from proto.hooks.bodies import DEFAULT_MAX_BYTES, Bodies


@dataclass(frozen=True, slots=True)
class _Answer:
    digest: bytes
    body: bytes
    expires: float


def _digest(body: bytes) -> bytes:
    return hashlib.blake2b(body, digest_size=16).digest()


class AnswerCache:
    """Answers per key while their TTL lasts (see the module docstring)."""

    def __init__(
        self,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._entries: Bodies[_Answer] = Bodies(max_bytes=max_bytes, clock=clock)

    def get(self, key: Hashable, request: bytes) -> bytes | None:
        """The answer kept for ``key`` if it was given for ``request`` (the request body) and
        has not expired."""
        entry = self._entries.get(key)
        if entry is None or entry.digest != _digest(request):
            return None
        return entry.body

    def put(self, key: Hashable, request: bytes, body: bytes, ttl: float | None) -> None:
        """The answer ``body`` to ``request`` (the request body) came, valid for ``ttl``
        seconds (None: not to be reused)."""
        if ttl is None:
            self._entries.remove(key)
        else:
            self._entries.put(key, _Answer(_digest(request), body, self._clock() + ttl))

    def drop(self, predicate: Callable[[Any], bool]) -> None:
        self._entries.drop(predicate)

    def __len__(self) -> int:
        return len(self._entries)
