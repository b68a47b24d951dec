"""How long a sync answer stays valid: ``ttlSeconds``, metashard's addition to the contract.

A sync answer (CompositeController or DecoratorController) may say ``"ttlSeconds": 300``: for
that many seconds, a sync of the same parent whose request is byte for byte the one this
answer was given for (the parent, its children, related objects and revisions unchanged, so
their resourceVersions too) reuses the answer instead of calling the hook
(``proto.hooks.answers``). Crossplane's composition functions say the same with ``meta.ttl``.
Absent, ``null`` or ``0``: the answer is not reused.

``read_ttl(top)`` reads it from a decoded answer: a positive finite number of seconds, at most
``MAX_TTL_SECONDS``. Like ``events`` and ``conditions`` (``proto.api.reports``), a value that
is not one does not refuse the answer: the answer is then not reused, and the problem is
returned for the caller to report with theirs.
"""

from __future__ import annotations

import math
from typing import Final

from proto.api.decoding import FREE
from proto.api.fields import Fields, json_type

TTL_FIELD: Final = "ttlSeconds"
TTL_SHAPE: Final = FREE
MAX_TTL_SECONDS: Final = 86_400.0
"""A day: longer than any resync period worth saving a call for."""


def read_ttl(top: Fields) -> tuple[float | None, str | None]:
    """(``ttlSeconds`` of the answer, None: not reused; the problem with its value, if any)."""
    value = top.obj.get(TTL_FIELD)
    if value is None or (value == 0 and not isinstance(value, bool)):
        return None, None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, f"{TTL_FIELD}: must be a number of seconds, not {json_type(value)}"
    if not math.isfinite(value) or not 0 < value <= MAX_TTL_SECONDS:
        return None, f"{TTL_FIELD}: must be above 0 and at most {MAX_TTL_SECONDS:g}, not {value!r}"
    return float(value), None
