"""A controller's own limits, from annotations on its controller object: ``limits_of``.

- ``metashard.io/max-concurrent-reconciles``: at most this many reconciles of the controller
  run at once, across all workers (a positive integer);
- ``metashard.io/reconciles-per-second``: reconciles of the controller start at most at this
  rate, a token bucket holding one second's worth of tokens, at least one (a positive
  decimal number, at most ``MAX_RATE``).

Both are opt-in: without them a controller is not limited here (each worker's
``--concurrency`` still applies). A value that does not parse is a ``Problem`` (the
coordinator reports it as a Warning event on the controller, ``manager.controllers.hosted``)
and that limit takes its default, none; the other annotation still applies. The limits are
enforced by ``manager.term.throttle``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

MAX_CONCURRENT_ANNOTATION: Final = "metashard.io/max-concurrent-reconciles"
RATE_ANNOTATION: Final = "metashard.io/reconciles-per-second"
MAX_RATE: Final = 1_000_000.0


@dataclass(frozen=True, slots=True)
class Limits:
    """A controller's limits; None: not limited in that way."""

    max_concurrent: int | None = None
    per_second: float | None = None

    @property
    def limited(self) -> bool:
        return self.max_concurrent is not None or self.per_second is not None

    @property
    def burst(self) -> int:
        """Tokens the bucket holds when full: one second's worth, at least one."""
        return max(1, math.floor(self.per_second)) if self.per_second is not None else 0


NO_LIMITS: Final = Limits()


@dataclass(frozen=True, slots=True)
class Problem:
    annotation: str
    value: str

    def __str__(self) -> str:
        return (
            f"annotation {self.annotation}: {self.value!r} is not "
            f"{_WANTED[self.annotation]}; not limited by it"
        )


_WANTED: Final = {
    MAX_CONCURRENT_ANNOTATION: "a positive integer",
    RATE_ANNOTATION: f"a positive number of at most {MAX_RATE:g}",
}


def limits_of(controller: Mapping[str, Any]) -> tuple[Limits, tuple[Problem, ...]]:
    """The limits the annotations of ``controller`` (a controller object) set, and the
    annotation values that do not parse (those limits take their default: none)."""
    metadata = controller.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return NO_LIMITS, ()
    problems: list[Problem] = []
    concurrent = annotations.get(MAX_CONCURRENT_ANNOTATION)
    max_concurrent = None if concurrent is None else _positive_int(concurrent)
    if concurrent is not None and max_concurrent is None:
        problems.append(Problem(MAX_CONCURRENT_ANNOTATION, str(concurrent)))
    rate = annotations.get(RATE_ANNOTATION)
    per_second = None if rate is None else _positive_rate(rate)
    if rate is not None and per_second is None:
        problems.append(Problem(RATE_ANNOTATION, str(rate)))
    return Limits(max_concurrent, per_second), tuple(problems)


def _positive_int(value: object) -> int | None:
    if not isinstance(value, str) or not value.strip().isdecimal():
        return None
    number = int(value.strip())
    return number if number > 0 else None


def _positive_rate(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and 0 < number <= MAX_RATE else None
