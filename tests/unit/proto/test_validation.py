from __future__ import annotations

import pytest

from proto.api.validation import (
    ErrorType,
    FieldError,
    aggregate,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
    validate_labels,
)

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def test_messages_match_the_real_server(shared_dir: object) -> None:
    # Exact texts of the conformance scenario 03 ("several invalid fields at once").
    errors = [
        FieldError(ErrorType.INVALID, "metadata.name", msg, "bad_name.")
        for msg in is_dns1123_subdomain("bad_name.")
    ] + validate_labels({"bad key!": "bad value!"})
    assert errors[0].cause() == {
        "reason": "FieldValueInvalid",
        "message": f'Invalid value: "bad_name.": {SUBDOMAIN_MSG}',
        "field": "metadata.name",
    }
    text = aggregate(errors)
    assert text.startswith(f'[metadata.name: Invalid value: "bad_name.": {SUBDOMAIN_MSG}, ')
    assert (
        'metadata.labels: Invalid value: "bad key!": name part must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')" in text
    )
    assert text.endswith(
        'metadata.labels: Invalid value: "bad value!": a valid label must be an empty string or '
        "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
        "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]"
    )


def test_required_and_numeric_renderings() -> None:
    required = FieldError(ErrorType.REQUIRED, "metadata.name", "name or generateName is required")
    assert str(required) == "metadata.name: Required value: name or generateName is required"
    minimum = FieldError(
        ErrorType.INVALID, "spec.replicas", "spec.replicas in body should be >= 0", -1
    )
    assert minimum.body() == "Invalid value: -1: spec.replicas in body should be >= 0"
    dup = FieldError(ErrorType.DUPLICATE, "spec.ports[1]", value={"name": "a"})
    assert dup.cause()["message"] == 'Duplicate value: {"name":"a"}'


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("a", True),
        ("a-b.c", True),
        ("A", False),
        ("-a", False),
        ("a" * 253, True),
        ("a" * 254, False),
        ("", False),
    ],
)
def test_subdomain(value: str, ok: bool) -> None:
    assert (is_dns1123_subdomain(value) == []) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [("ns-1", True), ("a.b", False), ("a" * 63, True), ("a" * 64, False)],
)
def test_label_names(value: str, ok: bool) -> None:
    assert (is_dns1123_label(value) == []) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("app", True),
        ("example.com/app", True),
        ("Example.com/app", False),
        ("/app", False),
        ("a/b/c", False),
        ("a" * 64, False),
        ("app_1.x-y", True),
        ("", False),
    ],
)
def test_qualified_names(value: str, ok: bool) -> None:
    assert (is_qualified_name(value) == []) is ok


def test_label_values() -> None:
    assert is_label_value("") == []
    assert is_label_value("v1.2_x-y") == []
    assert is_label_value("a" * 64) == ["must be no more than 63 characters"]
    assert is_label_value("bad value!") != []
