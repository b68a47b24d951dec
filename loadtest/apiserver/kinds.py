"""The ``Kind`` of built-in resources: typed decoding, defaults and validation.

``Builtin`` combines a ``schema.Struct`` (decoding), a defaulting function and a validation
function with the object-metadata rules every resource shares (``validate_meta``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadtest.apiserver.schema import Struct
from proto.api import validation as v
from proto.api.validation import ErrorType, FieldError

NameRule = Callable[[str], list[str]]
Defaulter = Callable[[dict[str, Any], dict[str, Any] | None], None]
Validator = Callable[[dict[str, Any], dict[str, Any] | None], list[FieldError]]


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
    errors.extend(v.validate_labels(meta.get("labels") or {}))
    errors.extend(v.validate_annotations(meta.get("annotations") or {}))
    errors.extend(v.validate_owner_references(meta.get("ownerReferences") or []))
    errors.extend(v.validate_finalizers(meta.get("finalizers") or []))
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
        return self.struct.decode(obj)

    def default(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if self._defaults is not None:
            self._defaults(obj, old)

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        errors = validate_meta(obj, self.name_rule)
        if self._validate is not None:
            errors.extend(self._validate(obj, old))
        return errors


def go_map(labels: dict[str, str]) -> str:
    """A ``map[string]string`` as Go's ``%#v`` prints it (keys sorted)."""
    inner = ", ".join(f'"{k}":"{labels[k]}"' for k in sorted(labels))
    return f"map[string]string{{{inner}}}"


def go_strings(values: list[str]) -> str:
    """A ``[]string`` as Go's ``%#v`` prints it."""
    return "[]string{" + ", ".join(f'"{s}"' for s in values) + "}"
