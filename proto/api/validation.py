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


def is_dns1123_label(value: str) -> list[str]:
    """RFC 1123 label: namespaces, most names of things that become DNS labels."""
    errs = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL.match(value):
        errs.append(
            _regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                "or '-', and must start and end with an alphanumeric character",
                _DNS1123_LABEL_FMT,
                "my-name",
                "123-abc",
            )
        )
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """RFC 1123 subdomain: the names of most objects (ConfigMaps, custom resources...)."""
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                _DNS1123_SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return errs


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
    errs = []
    if len(value) > LABEL_VALUE_MAX:
        errs.append(_max_len_error(LABEL_VALUE_MAX))
    if not _LABEL_VALUE.match(value):
        errs.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                _LABEL_VALUE_FMT,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errs


class ErrorType(Enum):
    """``field.ErrorType``: the cause ``reason`` and the word used in messages."""

    REQUIRED = ("FieldValueRequired", "Required value")
    INVALID = ("FieldValueInvalid", "Invalid value")
    TYPE_INVALID = ("FieldValueTypeInvalid", "Invalid value")
    DUPLICATE = ("FieldValueDuplicate", "Duplicate value")
    NOT_SUPPORTED = ("FieldValueNotSupported", "Unsupported value")
    FORBIDDEN = ("FieldValueForbidden", "Forbidden")
    TOO_LONG = ("FieldValueTooLong", "Too long")

    @property
    def reason(self) -> str:
        return self.value[0]

    @property
    def word(self) -> str:
        return self.value[1]


def render_value(value: Any) -> str:
    """A value as ``field.Error`` prints it: strings quoted, numbers bare, the rest as JSON."""
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
