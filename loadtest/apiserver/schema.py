"""Typed decoding of built-in objects, the way Go's ``encoding/json`` decodes them.

Built-in resources are stored schemaless, but their bodies go through a small declarative
schema first (``Struct``: known fields and their Go types) so that the emulator answers what
the real decoder answers:

- a field of the wrong JSON type is a 400 with Go's message (``json: cannot unmarshal number
  into Go struct field ConfigMap.data of type string``);
- ``metav1.Time``/``MicroTime`` fields are parsed and re-written in their canonical form;
- unknown fields of a ``Struct`` are removed and reported (the ``Warning`` header, or a
  ``strict decoding error`` with ``fieldValidation=Strict``);
- ``omitempty`` fields holding null or an empty value are dropped, as Go would not emit them.

Fields typed ``ANY`` are kept as sent, unchecked (deep type checking of e.g. PodSpec is not
modelled).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadtest.apiserver import timefmt
from loadtest.apiserver.registry import DecodeError

ANY = "any"
STRING = "string"
INT32 = "int32"
INT64 = "int64"
BOOL = "bool"
TIME = "time"
MICROTIME = "microtime"
STRING_MAP = "map[string]string"
STRING_LIST = "[]string"
OBJECT = "object"
LIST = "list"

_COLLECTIONS = frozenset({STRING, STRING_MAP, STRING_LIST, OBJECT, LIST})
_JSON_TYPE = {dict: "object", list: "array", str: "string", bool: "bool", int: "number"}
# Kinds checked by the JSON type alone, with the Go type an error names; the items of those
# in _OF_STRINGS must be strings too.
_PLAIN: dict[str, tuple[type[Any], str]] = {
    STRING: (str, "string"),
    BOOL: (bool, "bool"),
    STRING_MAP: (dict, "map[string]string"),
    STRING_LIST: (list, "[]string"),
    OBJECT: (dict, "map[string]interface {}"),
}
_OF_STRINGS = frozenset({STRING_MAP, STRING_LIST})


def _json_type(value: Any) -> str:
    return "number" if isinstance(value, float) else _JSON_TYPE.get(type(value), "value")


@dataclass(frozen=True, slots=True)
class Field:
    type: str | Struct
    omitempty: bool = True
    items: Struct | None = None
    zero: bool = False  # a non-pointer omitempty number/bool: 0 and false are omitted too


@dataclass(frozen=True, slots=True)
class Struct:
    """A Go struct: its type name (for messages) and its JSON fields."""

    name: str
    fields: dict[str, Field] = field(default_factory=dict)
    open: bool = False

    def decode(self, obj: dict[str, Any], path: str = "") -> list[str]:
        """Check, normalize and prune ``obj`` in place; return the unknown field paths."""
        unknown: list[str] = []
        for key in list(obj):
            spec = self.fields.get(key)
            where = f"{path}.{key}" if path else key
            if spec is None:
                if not self.open:
                    unknown.append(where)
                    del obj[key]
                continue
            value = obj[key]
            if value is None:  # Go decodes null as the zero value
                if spec.omitempty:
                    del obj[key]
                elif isinstance(spec.type, Struct):
                    obj[key] = {}
                elif spec.type == STRING:
                    obj[key] = ""
                elif spec.type not in (TIME, MICROTIME):
                    del obj[key]
                continue
            value = obj[key] = self._value(spec, value, where, unknown)
            if spec.omitempty and (
                (isinstance(spec.type, str) and spec.type in _COLLECTIONS and not value)
                or (spec.zero and value in (0, False))
            ):
                del obj[key]
        return unknown

    def _mismatch(self, value: Any, where: str, go_type: str) -> DecodeError:
        return DecodeError(
            f"json: cannot unmarshal {_json_type(value)} into Go struct field "
            f"{self.name}.{where} of type {go_type}"
        )

    def _value(self, spec: Field, value: Any, where: str, unknown: list[str]) -> Any:
        kind = spec.type
        if isinstance(kind, Struct):
            if not isinstance(value, dict):
                raise self._mismatch(value, where, kind.name)
            unknown.extend(kind.decode(value, where))
            return value
        if kind == ANY:
            return value
        plain = _PLAIN.get(kind)
        if plain is not None:
            expected, go_type = plain
            if not isinstance(value, expected):
                raise self._mismatch(value, where, go_type)
            if kind in _OF_STRINGS:
                for item in value.values() if isinstance(value, dict) else value:
                    if not isinstance(item, str):
                        raise self._mismatch(item, where, "string")
            return value
        if kind in (INT32, INT64):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise self._mismatch(value, where, kind)
            if isinstance(value, float):
                if not value.is_integer():
                    raise self._mismatch(value, where, kind)
                value = int(value)
            return value
        if kind in (TIME, MICROTIME):
            if not isinstance(value, str):
                raise DecodeError(
                    f"json: cannot unmarshal {_json_type(value)} into Go value of type string"
                )
            try:
                moment = timefmt.parse(value, micro=kind == MICROTIME)
            except timefmt.TimeParseError as err:
                raise DecodeError(str(err)) from None
            return (
                timefmt.format_micro(moment) if kind == MICROTIME else timefmt.format_time(moment)
            )
        if kind == LIST:
            if not isinstance(value, list):
                raise self._mismatch(
                    value, where, "[]" + (spec.items.name if spec.items else "interface {}")
                )
            if spec.items is not None:
                for i, item in enumerate(value):
                    if not isinstance(item, dict):
                        raise self._mismatch(item, where, spec.items.name)
                    unknown.extend(spec.items.decode(item, f"{where}[{i}]"))
            return value
        raise AssertionError(kind)


OWNER_REFERENCE = Struct(
    "OwnerReference",
    {
        "apiVersion": Field(STRING, omitempty=False),
        "kind": Field(STRING, omitempty=False),
        "name": Field(STRING, omitempty=False),
        "uid": Field(STRING, omitempty=False),
        "controller": Field(BOOL),
        "blockOwnerDeletion": Field(BOOL),
    },
)

OBJECT_META = Struct(
    "ObjectMeta",
    {
        "name": Field(STRING),
        "generateName": Field(STRING),
        "namespace": Field(STRING),
        "selfLink": Field(STRING),
        "uid": Field(STRING),
        "resourceVersion": Field(STRING),
        "generation": Field(INT64),
        "creationTimestamp": Field(ANY),
        "deletionTimestamp": Field(ANY),
        "deletionGracePeriodSeconds": Field(INT64),
        "labels": Field(STRING_MAP),
        "annotations": Field(STRING_MAP),
        "ownerReferences": Field(LIST, items=OWNER_REFERENCE),
        "finalizers": Field(STRING_LIST),
        "managedFields": Field(ANY),
    },
)


def spec_status(kind: str, group: str = "v1") -> dict[str, Field]:
    """``spec`` and ``status`` as Go structs whose inside is not modelled (kept as sent)."""
    return {
        "spec": Field(Struct(f"{group}.{kind}Spec", open=True), omitempty=False),
        "status": Field(Struct(f"{group}.{kind}Status", open=True)),
    }


def top(name: str, fields: dict[str, Field]) -> Struct:
    """A top-level object type: ``apiVersion``, ``kind``, ``metadata`` plus ``fields``."""
    base = {
        "apiVersion": Field(STRING),
        "kind": Field(STRING),
        "metadata": Field(OBJECT_META, omitempty=False),
    }
    return Struct(name, {**base, **fields})
