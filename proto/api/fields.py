"""Typed reads from decoded JSON, with errors that name the field by its path.

``Fields(obj, "spec", InvalidControllerError)`` wraps one JSON object; ``.get_str("name")``
and friends return the value or ``None`` when the key is absent or ``null`` (Go's zero-value
rule for ``omitempty`` pointers), and raise the given error class when the value has the
wrong JSON type: ``spec.resyncPeriodSeconds: must be an integer, not string``. Booleans are
never integers, and integral floats are not integers either (Go rejects ``1.0`` for an
``int32`` field). ``require_str`` and ``require_object`` raise ``<path>: required`` instead of
returning ``None`` (and ``require_str`` rejects the empty string).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from proto.api.errors import ApiError
from proto.api.selectors import Selector, SelectorError, from_label_selector


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def join(path: str, key: str | int) -> str:
    """``spec`` + ``hooks`` -> ``spec.hooks``; ``children`` + 2 -> ``children[2]``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class Fields:
    """One JSON object at a path; every read checks the JSON type."""

    __slots__ = ("error", "obj", "path")

    def __init__(self, obj: Mapping[str, Any], path: str, error: type[ApiError]) -> None:
        self.obj = obj
        self.path = path
        self.error = error

    @classmethod
    def of(cls, value: Any, path: str, error: type[ApiError]) -> Fields:
        """Wrap ``value``, which must be a JSON object."""
        if not isinstance(value, Mapping):
            raise error(f"{path or 'value'}: must be an object, not {json_type(value)}")
        return cls(value, path, error)

    def fail(self, key: str | int, message: str) -> ApiError:
        """An error of this reader's class about ``key``, to raise."""
        return self.error(f"{join(self.path, key)}: {message}")

    def fail_item(self, key: str, index: int, message: str) -> ApiError:
        """An error about element ``index`` of the array at ``key``, to raise."""
        return self.error(f"{join(join(self.path, key), index)}: {message}")

    def _wrong(self, key: str, expected: str, value: Any) -> ApiError:
        return self.fail(key, f"must be {expected}, not {json_type(value)}")

    def has(self, key: str) -> bool:
        return self.obj.get(key) is not None

    def get_str(self, key: str) -> str | None:
        value = self.obj.get(key)
        if value is None or isinstance(value, str):
            return value
        raise self._wrong(key, "a string", value)

    def require_str(self, key: str) -> str:
        """A string that must be present and non-empty."""
        value = self.get_str(key)
        if value is None:
            raise self.fail(key, "required")
        if not value:
            raise self.fail(key, "must not be empty")
        return value

    def get_bool(self, key: str) -> bool | None:
        value = self.obj.get(key)
        if value is None or isinstance(value, bool):
            return value
        raise self._wrong(key, "a boolean", value)

    def get_int(self, key: str) -> int | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong(key, "an integer", value)
        return value

    def get_number(self, key: str) -> float | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._wrong(key, "a number", value)
        if math.isinf(value) or math.isnan(value):
            raise self.fail(key, "must be a finite number")
        return float(value)

    def get_object(self, key: str) -> Fields | None:
        value = self.obj.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self._wrong(key, "an object", value)
        return Fields(value, join(self.path, key), self.error)

    def require_object(self, key: str) -> Fields:
        """An object that must be present."""
        found = self.get_object(key)
        if found is None:
            raise self.fail(key, "required")
        return found

    def get_raw_object(self, key: str) -> Mapping[str, Any] | None:
        """The object itself (not wrapped), or ``None``."""
        found = self.get_object(key)
        return None if found is None else found.obj

    def get_selector(self, key: str) -> Selector | None:
        """A ``LabelSelector`` object (``None`` when absent; ``{}`` selects everything)."""
        raw = self.get_raw_object(key)
        if raw is None:
            return None
        try:
            return from_label_selector(raw)
        except SelectorError as err:
            raise self.fail(key, str(err)) from None

    def get_list(self, key: str) -> list[Any]:
        """The array (empty when absent or null)."""
        value = self.obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._wrong(key, "an array", value)
        return value

    def get_objects(self, key: str) -> list[Fields]:
        """An array of objects; ``null`` elements are errors."""
        path = join(self.path, key)
        items = self.get_list(key)
        return [Fields.of(item, join(path, i), self.error) for i, item in enumerate(items)]

    def get_strings(self, key: str) -> list[str]:
        """An array of strings."""
        items = self.get_list(key)
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise self.fail_item(key, i, f"must be a string, not {json_type(item)}")
        return items
