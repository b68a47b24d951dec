"""The ``Kind`` of built-in resources: typed decoding, defaults and validation.

``Builtin`` combines a ``schema.Struct`` (decoding; ``spec_decode`` types the specs below
it), a defaulting function and a validation function with the object-metadata rules every
resource shares (``validate_meta``) and the spec rules of ``validation_builtin``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadtest.apiserver import spec_decode, validation_builtin
from loadtest.apiserver.schema import Struct
from proto.api import validation as v
from proto.api.validation import ErrorType, FieldError

NameRule = Callable[[str], list[str]]
Defaulter = Callable[[dict[str, Any], dict[str, Any] | None], None]
Validator = Callable[[dict[str, Any], dict[str, Any] | None], list[FieldError]]


_VALID_LABELS: set[tuple[str, str]] = set()


def _labels(labels: dict[str, str]) -> list[FieldError]:
    """``validate_labels`` remembering valid pairs: the same labels come back on every write."""
    if all(pair in _VALID_LABELS for pair in labels.items()):
        return []
    errors = v.validate_labels(labels)
    if not errors:
        if len(_VALID_LABELS) > 100_000:
            _VALID_LABELS.clear()
        _VALID_LABELS.update(labels.items())
    return errors


def validate_meta(obj: dict[str, Any], name_rule: NameRule) -> list[FieldError]:
    """``ValidateObjectMeta``: name, labels, annotations, finalizers, ownerReferences."""
    meta = obj.get("metadata") or {}
    errors: list[FieldError] = []
    name = meta.get("name") or ""
    if not name:
        if not meta.get("generateName"):
            errors.append(
                FieldError(ErrorType.REQUIRED, "metadata.name", "name or generateName is required")
            )
    else:
        errors.extend(
            FieldError(ErrorType.INVALID, "metadata.name", m, name) for m in name_rule(name)
        )
    if meta.get("labels"):
        errors.extend(_labels(meta["labels"]))
    if meta.get("annotations"):
        errors.extend(v.validate_annotations(meta["annotations"]))
    if meta.get("ownerReferences"):
        errors.extend(v.validate_owner_references(meta["ownerReferences"]))
    if meta.get("finalizers"):
        errors.extend(v.validate_finalizers(meta["finalizers"]))
    return errors


class Builtin:
    """A built-in resource's behaviour."""

    def __init__(
        self,
        struct: Struct,
        *,
        defaults: Defaulter | None = None,
        validate: Validator | None = None,
        name_rule: NameRule = v.is_dns1123_subdomain,
    ) -> None:
        self.struct = struct
        self._defaults = defaults
        self._validate = validate
        self.name_rule = name_rule

    def decode(self, obj: dict[str, Any]) -> list[str]:
        unknown = self.struct.decode(obj)
        unknown.extend(spec_decode.decode_spec(self.struct.name, obj))
        return unknown

    def default(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if self._defaults is not None:
            self._defaults(obj, old)

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        errors = validate_meta(obj, self.name_rule)
        if self._validate is not None:
            errors.extend(self._validate(obj, old))
        errors.extend(validation_builtin.validate(self.struct.name, obj, old))
        return errors


def go_map(labels: dict[str, str]) -> str:
    """A ``map[string]string`` as Go's ``%#v`` prints it (keys sorted)."""
    inner = ", ".join(f'"{k}":"{labels[k]}"' for k in sorted(labels))
    return f"map[string]string{{{inner}}}"


def go_strings(values: list[str]) -> str:
    """A ``[]string`` as Go's ``%#v`` prints it."""
    return "[]string{" + ", ".join(f'"{s}"' for s in values) + "}"
