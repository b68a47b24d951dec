"""Custom resources checked against their CRD version's structural schema.

``CustomKind`` is the ``Kind`` of a custom resource:

- ``decode`` prunes fields the schema does not know (unless
  ``x-kubernetes-preserve-unknown-fields``; ``additionalProperties`` schemas apply to map
  values; embedded resources keep ``apiVersion``/``kind``/``metadata``) and returns their
  paths (``spec.ports[0].extra``) for the ``Warning`` header or the strict-mode error;
- ``default`` applies schema ``default`` values, inside list items and maps too;
- ``validate`` checks the object metadata and then types, ``required``, bounds, ``enum``,
  ``pattern``, lengths, item and property counts, list-map keys and sets, with the API
  server's messages (``spec.replicas in body must be of type integer: "string"``).
- CEL rules (``x-kubernetes-validations``) and ``format`` are not evaluated.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from loadtest.apiserver.kinds import validate_meta
from loadtest.apiserver.registry import DecodeError
from loadtest.apiserver.schema import OBJECT_META
from proto.api import validation as v
from proto.api.validation import ErrorType, FieldError

_ROOT_FIELDS = frozenset({"apiVersion", "kind", "metadata"})


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _matches_type(value: Any, schema: dict[str, Any]) -> bool:
    expected = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        return _type_name(value) in ("integer", "string")
    if value is None:
        return bool(schema.get("nullable")) or not expected
    if not expected:
        return True
    actual = _type_name(value)
    return actual == expected or (expected == "number" and actual == "integer")


class CustomKind:
    """Custom resources of one CRD version."""

    def __init__(self, schema: dict[str, Any], *, kind: str, group: str) -> None:
        self.schema = schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        self.kind = kind
        self.group = group

    # --- pruning --------------------------------------------------------------------------

    def decode(self, obj: dict[str, Any]) -> list[str]:
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise DecodeError(
                f"json: cannot unmarshal {type(meta).__name__} into Go struct field "
                f"{self.kind}.metadata of type v1.ObjectMeta"
            )
        unknown = OBJECT_META.decode(meta, "metadata")
        props = self.schema.get("properties") or {}
        for key in list(obj):
            if key in _ROOT_FIELDS:
                continue
            if key in props:
                self._prune(obj[key], props[key], key, unknown)
            elif not self.schema.get("x-kubernetes-preserve-unknown-fields"):
                unknown.append(key)
                del obj[key]
        return unknown

    def _prune(self, value: Any, schema: dict[str, Any], path: str, unknown: list[str]) -> None:
        if isinstance(value, dict):
            if schema.get("x-kubernetes-embedded-resource") and isinstance(
                value.setdefault("metadata", {}), dict
            ):
                OBJECT_META.decode(value["metadata"], f"{path}.metadata")
            props = schema.get("properties")
            extra = schema.get("additionalProperties")
            for key in list(value):
                where = f"{path}.{key}"
                if props and key in props:
                    self._prune(value[key], props[key], where, unknown)
                elif isinstance(extra, dict):
                    self._prune(value[key], extra, where, unknown)
                elif schema.get("x-kubernetes-embedded-resource") and key in _ROOT_FIELDS:
                    continue
                elif not schema.get("x-kubernetes-preserve-unknown-fields") and extra is not True:
                    unknown.append(where)
                    del value[key]
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                self._prune(item, schema["items"], f"{path}[{i}]", unknown)

    # --- defaulting -----------------------------------------------------------------------

    def default(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        self._default(obj, self.schema)

    def _default(self, value: Any, schema: dict[str, Any]) -> None:
        if isinstance(value, dict):
            for key, sub in (schema.get("properties") or {}).items():
                if key not in value and "default" in sub:
                    value[key] = orjson.loads(orjson.dumps(sub["default"]))
                if key in value:
                    self._default(value[key], sub)
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                for item in value.values():
                    self._default(item, extra)
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for item in value:
                self._default(item, schema["items"])

    # --- validation -----------------------------------------------------------------------

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        errors = validate_meta(obj, v.is_dns1123_subdomain)
        props = self.schema.get("properties") or {}
        for key in sorted(obj):
            if key not in _ROOT_FIELDS and key in props:
                self._check(obj[key], props[key], key, errors)
        return errors

    def _check(
        self, value: Any, schema: dict[str, Any], path: str, errors: list[FieldError]
    ) -> None:
        if not _matches_type(value, schema):
            expected = (
                "integer,string" if schema.get("x-kubernetes-int-or-string") else schema["type"]
            )
            actual = _type_name(value)
            errors.append(
                FieldError(
                    ErrorType.TYPE_INVALID,
                    path,
                    f'{path} in body must be of type {expected}: "{actual}"',
                    actual,
                )
            )
            return
        if value is None:
            return
        if "enum" in schema and value not in schema["enum"]:
            allowed = ", ".join(v.render_value(e) for e in schema["enum"])
            errors.append(
                FieldError(ErrorType.NOT_SUPPORTED, path, f"supported values: {allowed}", value)
            )
        if isinstance(value, int | float) and not isinstance(value, bool):
            self._bounds(value, schema, path, errors)
        elif isinstance(value, str):
            self._string(value, schema, path, errors)
        elif isinstance(value, list):
            self._array(value, schema, path, errors)
        elif isinstance(value, dict):
            self._object(value, schema, path, errors)

    def _bounds(
        self, value: float, schema: dict[str, Any], path: str, errors: list[FieldError]
    ) -> None:
        def bad(detail: str) -> None:
            errors.append(FieldError(ErrorType.INVALID, path, f"{path} in body {detail}", value))

        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None:
            if schema.get("exclusiveMinimum") and value <= low:
                bad(f"should be greater than {low}")
            elif value < low:
                bad(f"should be greater than or equal to {low}")
        if high is not None:
            if schema.get("exclusiveMaximum") and value >= high:
                bad(f"should be less than {high}")
            elif value > high:
                bad(f"should be less than or equal to {high}")
        step = schema.get("multipleOf")
        if step and value % step:
            bad(f"should be a multiple of {step}")

    def _string(
        self, value: str, schema: dict[str, Any], path: str, errors: list[FieldError]
    ) -> None:
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(
                FieldError(
                    ErrorType.INVALID,
                    path,
                    f"{path} in body should be at least {schema['minLength']} chars long",
                    value,
                )
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(
                FieldError(
                    ErrorType.TOO_LONG, path, f"may not be more than {schema['maxLength']} bytes"
                )
            )
        pattern = schema.get("pattern")
        if pattern and not re.search(pattern, value):
            errors.append(
                FieldError(
                    ErrorType.INVALID, path, f"{path} in body should match '{pattern}'", value
                )
            )

    def _array(
        self, value: list[Any], schema: dict[str, Any], path: str, errors: list[FieldError]
    ) -> None:
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(
                FieldError(
                    ErrorType.INVALID,
                    path,
                    f"{path} in body should have at least {schema['minItems']} items",
                    len(value),
                )
            )
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(
                FieldError(
                    ErrorType.TOO_MANY,
                    path,
                    f"must have at most {schema['maxItems']} items",
                    len(value),
                )
            )
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                self._check(item, items, f"{path}[{i}]", errors)
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "map":
            keys = schema.get("x-kubernetes-list-map-keys") or []
            seen: set[bytes] = set()
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    continue
                ident = {k: item.get(k) for k in keys if k in item}
                token = orjson.dumps(ident, option=orjson.OPT_SORT_KEYS)
                if token in seen:
                    errors.append(FieldError(ErrorType.DUPLICATE, f"{path}[{i}]", "", ident))
                seen.add(token)
        elif list_type == "set" or schema.get("uniqueItems"):
            seen_items: set[bytes] = set()
            for i, item in enumerate(value):
                token = orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
                if token in seen_items:
                    errors.append(FieldError(ErrorType.DUPLICATE, f"{path}[{i}]", "", item))
                seen_items.add(token)

    def _object(
        self, value: dict[str, Any], schema: dict[str, Any], path: str, errors: list[FieldError]
    ) -> None:
        for name in schema.get("required") or []:
            if name not in value:
                errors.append(FieldError(ErrorType.REQUIRED, f"{path}.{name}", ""))
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key in sorted(value):
            if key in props:
                self._check(value[key], props[key], f"{path}.{key}", errors)
            elif isinstance(extra, dict):
                self._check(value[key], extra, f"{path}.{key}", errors)
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            errors.append(
                FieldError(
                    ErrorType.TOO_MANY,
                    path,
                    f"must have at most {schema['maxProperties']} items",
                    len(value),
                )
            )
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            errors.append(
                FieldError(
                    ErrorType.INVALID,
                    path,
                    f"{path} in body should have at least {schema['minProperties']} properties",
                    len(value),
                )
            )
