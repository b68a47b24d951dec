"""Typed decoding of built-in ``spec`` trees, the way Go's ``encoding/json`` decodes them.

``schema.Struct`` types the top level and metadata of built-in objects and leaves ``spec``
open; this module types what is below, for the kinds in ``KINDS``, from the same field
tables as the protobuf decoder (``protobuf_schema``):

- a value of the wrong JSON type raises ``DecodeError`` with Go's wording (``json: cannot
  unmarshal string into Go struct field PodSpec.spec.containers of type []v1.Container``; a
  400 from the handlers), so ``containers: nginx`` is refused as the real server refuses it;
- unknown fields are removed and their paths returned (``spec.template.spec.containers[0].
  imagePullPolcy``) for the ``Warning`` header or a ``strict decoding error``;
- null values are dropped (Go decodes them as zero values).

Departures: named Go types print as their underlying type (``string`` where Go says
``v1.Protocol``, ``map[string]resource.Quantity`` for ``v1.ResourceList``); quantities and
int-or-strings are checked for their JSON type only.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from loadtest.apiserver.protobuf import Field, table
from loadtest.apiserver.registry import DecodeError
from loadtest.apiserver.schema import _json_type

KINDS = frozenset(
    {
        "Pod",
        "Service",
        "Deployment",
        "ReplicaSet",
        "StatefulSet",
        "DaemonSet",
        "Job",
        "CronJob",
        "PersistentVolumeClaim",
    }
)
_SCALAR_GO = {
    "s": "string",
    "i": "int32",
    "l": "int64",
    "b": "bool",
    "y": "[]uint8",
    "quantity": "resource.Quantity",
    "intstr": "intstr.IntOrString",
    "time": "v1.Time",
    "microtime": "v1.MicroTime",
    "raw": "runtime.RawExtension",
    "fieldsv1": "v1.FieldsV1",
}


def go_type(kind: str) -> str:
    return _SCALAR_GO.get(kind) or f"v1.{kind}"


@cache
def json_fields(message: str) -> dict[str, tuple[Field, str]]:
    """JSON name -> (field, the Go struct that declares it), inlined structs flattened."""
    out: dict[str, tuple[Field, str]] = {}
    for f in table(message).values():
        if f.name is None:
            out.update(json_fields(f.kind))
        else:
            out[f.name] = (f, message)
    return out


def _mismatch(value: Any, owner: str, go_path: str, go: str) -> DecodeError:
    return DecodeError(
        f"json: cannot unmarshal {_json_type(value)} into Go struct field "
        f"{owner}.{go_path} of type {go}"
    )


def _scalar(kind: str, value: Any, owner: str, go_path: str) -> Any:
    ok: bool
    if kind in ("s", "y", "time", "microtime"):
        ok = isinstance(value, str)
    elif kind in ("i", "l"):
        ok = (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and float(value).is_integer()
        )
        if ok and isinstance(value, float):
            value = int(value)
    elif kind == "b":
        ok = isinstance(value, bool)
    elif kind == "quantity":
        ok = isinstance(value, str | int | float) and not isinstance(value, bool)
    elif kind == "intstr":
        ok = isinstance(value, str | int) and not isinstance(value, bool)
    else:  # raw, fieldsv1: any JSON
        ok = True
    if not ok:
        raise _mismatch(value, owner, go_path, go_type(kind))
    return value


def _value(kind: str, value: Any, owner: str, go_path: str, path: str, unknown: list[str]) -> Any:
    if kind in _SCALAR_GO:
        return _scalar(kind, value, owner, go_path)
    if not isinstance(value, dict):
        raise _mismatch(value, owner, go_path, go_type(kind))
    unknown.extend(decode_message(kind, value, path=path, go_path=go_path))
    return value


def decode_message(message: str, obj: dict[str, Any], *, path: str, go_path: str) -> list[str]:
    """Check and prune ``obj`` (message ``message`` at ``path``) in place; unknown paths."""
    fields = json_fields(message)
    unknown: list[str] = []
    for key in list(obj):
        where = f"{path}.{key}"
        found = fields.get(key)
        if found is None:
            unknown.append(where)
            del obj[key]
            continue
        f, owner = found
        value = obj[key]
        if value is None:
            del obj[key]
            continue
        go_where = f"{go_path}.{key}"
        if f.repeated:
            if not isinstance(value, list):
                raise _mismatch(value, owner, go_where, "[]" + go_type(f.kind))
            obj[key] = [
                _value(f.kind, item, owner, go_where, f"{where}[{i}]", unknown)
                for i, item in enumerate(value)
            ]
        elif f.map_key is not None:
            if not isinstance(value, dict):
                raise _mismatch(value, owner, go_where, "map[string]" + go_type(f.kind))
            obj[key] = {
                k: _value(f.kind, item, owner, go_where, f"{where}.{k}", unknown)
                for k, item in value.items()
            }
        else:
            obj[key] = _value(f.kind, value, owner, go_where, where, unknown)
    return unknown


def decode_spec(kind: str, obj: dict[str, Any]) -> list[str]:
    """Type ``obj["spec"]`` of a built-in ``kind`` (no-op for kinds not in ``KINDS``)."""
    spec = obj.get("spec")
    if kind not in KINDS or not isinstance(spec, dict):
        return []
    spec_message = json_fields(kind)["spec"][0].kind
    return decode_message(spec_message, spec, path="spec", go_path="spec")
