"""Every field of a controller object that metashard accepts but does not act on, in one table.

A controller that sets one of these still runs; the coordinator says so when it loads the
controller: one Warning event (reason ``UnsupportedField``) on the controller object and one
log line per field (``manager.controllers.hosted``). Nothing accepted is ignored silently.

- ``FIELDS`` is the table: which controller kinds, which field (a dotted path where ``*``
  stands for every key of an object or every element of a list), when it counts (a
  predicate on the field's value; present and not null by default) and what metashard does
  instead.
- ``unsupported(kind, obj)`` lists the ``Finding``s for one controller object, in table order.
- ``NOT_YET`` marks fields metashard means to support; the others are fields Metacontroller
  itself accepts and ignores. The README's compatibility table says the same.
- The hooks' connection settings (``caBundle``, ``clientTLS``, ``authorization``,
  ``basicAuth``, ``etag``) and ``spec.endpointConfigs`` are acted on for every kind
  (``proto.api.endpoints``), so they are not in the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from proto.api import names

COMPOSITE: Final = frozenset((names.COMPOSITE_CONTROLLER,))
DECORATOR: Final = frozenset((names.DECORATOR_CONTROLLER,))
BOTH: Final = COMPOSITE | DECORATOR
NOT_YET: Final = "not supported yet"


def _present(value: Any) -> bool:
    return value is not None and value != [] and value != {}


def _rolling(value: Any) -> bool:
    return value in ("RollingRecreate", "RollingInPlace")


def _conditions(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(value.get("conditions"))


def _checks_without_rolling(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and _conditions(value.get("statusChecks"))
        and not _rolling(value.get("method"))
    )


@dataclass(frozen=True, slots=True)
class Field:
    kinds: frozenset[str]
    path: str
    effect: str
    """What metashard does instead of acting on the field."""
    when: Callable[[Any], bool] = _present


FIELDS: Final[tuple[Field, ...]] = (
    Field(
        COMPOSITE,
        "spec.childResources.*.updateStrategy",
        "statusChecks ignored: only the RollingRecreate and RollingInPlace methods use them "
        "(as in Metacontroller)",
        _checks_without_rolling,
    ),
    Field(
        COMPOSITE,
        "spec.hooks.preUpdateChild",
        "never called (Metacontroller does not call it either)",
    ),
    Field(
        COMPOSITE,
        "spec.hooks.postUpdateChild",
        "never called (Metacontroller does not call it either)",
    ),
    Field(
        DECORATOR,
        "spec.attachments.*.updateStrategy.method",
        "acts like Recreate or InPlace: decorators have no rolling updates (nor in Metacontroller)",
        _rolling,
    ),
    Field(
        DECORATOR,
        "spec.attachments.*.updateStrategy.statusChecks",
        "ignored: decorators have no rolling updates (nor in Metacontroller)",
        _conditions,
    ),
)


@dataclass(frozen=True, slots=True)
class Finding:
    path: str
    """Where, with indexes and keys filled in: ``spec.hooks.sync.webhook.caBundle``."""
    effect: str

    def __str__(self) -> str:
        return f"{self.path}: {self.effect}"


def _walk(value: Any, parts: list[str], path: str) -> Iterator[tuple[str, Any]]:
    if not parts:
        yield path, value
        return
    head, rest = parts[0], parts[1:]
    if head == "*":
        if isinstance(value, Mapping):
            for key, item in value.items():
                yield from _walk(item, rest, f"{path}.{key}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from _walk(item, rest, f"{path}[{i}]")
        return
    if isinstance(value, Mapping) and head in value:
        yield from _walk(value[head], rest, f"{path}.{head}" if path else head)


def unsupported(kind: str, obj: Mapping[str, Any]) -> list[Finding]:
    """The fields of controller object ``obj`` (of ``kind``) that metashard does not act on."""
    found: list[Finding] = []
    for field in FIELDS:
        if kind not in field.kinds:
            continue
        for path, value in _walk(obj, field.path.split("."), ""):
            if field.when(value):
                found.append(Finding(path, field.effect))
    return found
