"""Kubernetes name and label validation with apimachinery's exact error texts.

The embedded cluster answers invalid objects with these messages (the real server's 422
causes), and controllers use the same checks to reject bad hook output early.

- Every ``is_*`` function returns a list of problems (empty when valid), worded exactly as
  ``k8s.io/apimachinery/pkg/util/validation`` words them.
- ``FieldError`` renders like ``field.Error``: ``<field>: <type>: <value>: <detail>``; its
  ``cause()`` is the ``details.causes[]`` entry of a Status body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

import orjson

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = rf"{_DNS1123_LABEL_FMT}(\.{_DNS1123_LABEL_FMT})*"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"

_DNS1123_LABEL = re.compile(f"^{_DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_QUALIFIED_NAME = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_LABEL_VALUE = re.compile(f"^{_LABEL_VALUE_FMT}$")


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if examples:
        shown = ",  or ".join(f"'{e}'" for e in examples)
        msg += f" (e.g. {shown}, regex used for validation is '{fmt}')"
    else:
        msg += f" (regex used for validation is '{fmt}')"
    return msg


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def _checked(
    value: str, limit: int, pattern: re.Pattern[str], message: str, fmt: str, *examples: str
) -> list[str]:
    """apimachinery's usual pair of checks: at most ``limit`` characters, then the format."""
    errs = []
    if len(value) > limit:
        errs.append(_max_len_error(limit))
    if not pattern.match(value):
        errs.append(_regex_error(message, fmt, *examples))
    return errs


def is_dns1123_label(value: str) -> list[str]:
    """RFC 1123 label: namespaces, most names of things that become DNS labels."""
    return _checked(
        value,
        DNS1123_LABEL_MAX,
        _DNS1123_LABEL,
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
        "or '-', and must start and end with an alphanumeric character",
        _DNS1123_LABEL_FMT,
        "my-name",
        "123-abc",
    )


def is_dns1123_subdomain(value: str) -> list[str]:
    """RFC 1123 subdomain: the names of most objects (ConfigMaps, custom resources...)."""
    return _checked(
        value,
        DNS1123_SUBDOMAIN_MAX,
        _DNS1123_SUBDOMAIN,
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
        "characters, '-' or '.', and must start and end with an alphanumeric character",
        _DNS1123_SUBDOMAIN_FMT,
        "example.com",
    )


def is_qualified_name(value: str) -> list[str]:
    """``[prefix/]name``: label keys, annotation keys, finalizer names."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + msg for msg in is_dns1123_subdomain(prefix))
    else:
        return [
            _regex_error(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character",
                _QUALIFIED_NAME_FMT,
                "MyName",
                "my.name",
                "123-abc",
            )
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + _max_len_error(QUALIFIED_NAME_MAX))
    if name and not _QUALIFIED_NAME.match(name):
        errs.append(
            _regex_error(
                "name part must consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character",
                _QUALIFIED_NAME_FMT,
                "MyName",
                "my.name",
                "123-abc",
            )
        )
    return errs


def is_label_key(value: str) -> list[str]:
    return is_qualified_name(value)


def is_label_value(value: str) -> list[str]:
    return _checked(
        value,
        LABEL_VALUE_MAX,
        _LABEL_VALUE,
        "a valid label must be an empty string or consist of alphanumeric characters, "
        "'-', '_' or '.', and must start and end with an alphanumeric character",
        _LABEL_VALUE_FMT,
        "MyValue",
        "my_value",
        "12345",
    )


class ErrorType(Enum):
    """``field.ErrorType``: the cause ``reason`` and the word used in messages."""

    REQUIRED = ("FieldValueRequired", "Required value")
    INVALID = ("FieldValueInvalid", "Invalid value")
    TYPE_INVALID = ("FieldValueTypeInvalid", "Invalid value")
    DUPLICATE = ("FieldValueDuplicate", "Duplicate value")
    NOT_SUPPORTED = ("FieldValueNotSupported", "Unsupported value")
    FORBIDDEN = ("FieldValueForbidden", "Forbidden")
    NOT_FOUND = ("FieldValueNotFound", "Not found")
    TOO_LONG = ("FieldValueTooLong", "Too long")
    TOO_MANY = ("FieldValueTooMany", "Too many")

    @property
    def reason(self) -> str:
        return self.value[0]

    @property
    def word(self) -> str:
        return self.value[1]


class Verbatim(str):
    """A value already rendered as Go prints it (e.g. ``map[string]string{"a":"b"}``)."""


def render_value(value: Any) -> str:
    """A value as ``field.Error`` prints it: strings quoted, numbers bare, the rest as JSON."""
    if isinstance(value, Verbatim):
        return str(value)
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if value is None:
        return "null"
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


_NO_VALUE = object()


@dataclass(frozen=True, slots=True)
class FieldError:
    """One validation failure at a field path, e.g. ``metadata.labels``."""

    type: ErrorType
    field: str
    detail: str = ""
    value: Any = _NO_VALUE

    def body(self) -> str:
        """The message without the field path (the ``causes[].message`` text)."""
        text = self.type.word
        if self.type in (ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG):
            return f"{text}: {self.detail}" if self.detail else text
        if self.value is not _NO_VALUE:
            text += f": {render_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}" if self.field else self.body()

    def cause(self) -> dict[str, str]:
        return {"reason": self.type.reason, "message": self.body(), "field": self.field}


def aggregate(errors: list[FieldError]) -> str:
    """Several errors as apimachinery aggregates them: one, or ``[a, b, ...]``."""
    if len(errors) == 1:
        return str(errors[0])
    return "[" + ", ".join(str(e) for e in errors) + "]"


def validate_labels(labels: dict[str, str], field: str = "metadata.labels") -> list[FieldError]:
    """Label keys and values (``ValidateLabels``)."""
    errors: list[FieldError] = []
    for key, value in labels.items():
        errors.extend(FieldError(ErrorType.INVALID, field, msg, key) for msg in is_label_key(key))
        errors.extend(
            FieldError(ErrorType.INVALID, field, msg, value) for msg in is_label_value(value)
        )
    return errors


TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})

_CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_MAP_KEY = re.compile(f"^{_CONFIG_MAP_KEY_FMT}$")


def is_config_map_key(value: str) -> list[str]:
    """A key of ``data``/``binaryData`` in ConfigMaps and Secrets."""
    errs = _checked(
        value,
        DNS1123_SUBDOMAIN_MAX,
        _CONFIG_MAP_KEY,
        "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
        _CONFIG_MAP_KEY_FMT,
        "key.name",
        "KEY_NAME",
        "key-name",
    )
    if value in (".", ".."):
        errs.append(f"must not be '{value}'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def is_path_segment_name(value: str) -> list[str]:
    """Names that only have to be usable as one URL path segment (e.g. RBAC roles)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def validate_annotations(
    annotations: dict[str, str], field: str = "metadata.annotations"
) -> list[FieldError]:
    """Annotation keys and their total size (``ValidateAnnotations``)."""
    errors: list[FieldError] = []
    total = 0
    for key, value in annotations.items():
        errors.extend(
            FieldError(ErrorType.INVALID, field, msg, key) for msg in is_qualified_name(key.lower())
        )
        total += len(key) + len(value)
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errors.append(
            FieldError(
                ErrorType.TOO_LONG, field, f"must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"
            )
        )
    return errors


def validate_finalizers(
    finalizers: list[str], field: str = "metadata.finalizers"
) -> list[FieldError]:
    """Each finalizer is a qualified name; one without a prefix must be a standard one."""
    errors: list[FieldError] = []
    for name in finalizers:
        problems = is_qualified_name(name)
        errors.extend(FieldError(ErrorType.INVALID, field, msg, name) for msg in problems)
        if not problems and "/" not in name and name not in STANDARD_FINALIZERS:
            errors.append(
                FieldError(
                    ErrorType.INVALID,
                    field,
                    "name is neither a standard finalizer name nor is it fully qualified",
                    name,
                )
            )
    return errors


def validate_owner_references(
    refs: list[dict[str, Any]], field: str = "metadata.ownerReferences"
) -> list[FieldError]:
    """Required fields of each ownerReference and at most one ``controller: true``."""
    errors: list[FieldError] = []
    controllers: list[str] = []
    for ref in refs:
        for key, what in (
            ("apiVersion", "version"),
            ("kind", "kind"),
            ("name", "name"),
            ("uid", "uid"),
        ):
            if not ref.get(key):
                errors.append(
                    FieldError(ErrorType.INVALID, f"{field}.{key}", f"{what} must not be empty", "")
                )
        if ref.get("controller") is True:
            controllers.append(f"{ref.get('kind', '')}/{ref.get('name', '')}")
    if len(controllers) > 1:
        errors.append(
            FieldError(
                ErrorType.INVALID,
                field,
                'Only one reference can have Controller set to true. Found "true" in '
                f"references for {' and '.join(controllers)}",
                refs,
            )
        )
    return errors
