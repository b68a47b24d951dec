from __future__ import annotations

from proto.api import validation as v
from proto.api.validation import ErrorType, FieldError, Verbatim


def test_config_map_keys() -> None:
    assert v.is_config_map_key("key.name_1-x") == []
    assert v.is_config_map_key("..") == ["must not be '..'"]
    assert v.is_config_map_key("..data") == ["must not start with '..'"]
    (problem,) = v.is_config_map_key("a b")
    assert problem.startswith("a valid config key must consist of alphanumeric characters")


def test_path_segment_names() -> None:
    assert v.is_path_segment_name("system:controller:x") == []
    assert v.is_path_segment_name("..") == ["may not be '..'"]
    assert v.is_path_segment_name("a/b%") == ["may not contain '/'", "may not contain '%'"]


def test_annotations_keys_and_total_size() -> None:
    assert v.validate_annotations({"example.com/a": "x"}) == []
    (bad_key,) = v.validate_annotations({"bad key": "x"})
    assert bad_key.field == "metadata.annotations" and bad_key.value == "bad key"
    (too_big,) = v.validate_annotations({"a": "x" * v.TOTAL_ANNOTATION_SIZE_LIMIT})
    assert str(too_big) == "metadata.annotations: Too long: must have at most 262144 bytes"


def test_finalizers_need_a_prefix_unless_standard() -> None:
    assert v.validate_finalizers(["kubernetes", "orphan", "example.com/x"]) == []
    (problem,) = v.validate_finalizers(["custom"])
    assert str(problem) == (
        'metadata.finalizers: Invalid value: "custom": '
        "name is neither a standard finalizer name nor is it fully qualified"
    )


def test_owner_references() -> None:
    good = {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "u", "controller": True}
    assert v.validate_owner_references([good]) == []
    missing = v.validate_owner_references([{"apiVersion": "v1", "kind": "K"}])
    assert [e.field for e in missing] == [
        "metadata.ownerReferences.name",
        "metadata.ownerReferences.uid",
    ]
    two = v.validate_owner_references([good, {**good, "name": "b"}])
    assert "Only one reference can have Controller set to true" in str(two[-1])


def test_verbatim_values_and_too_many() -> None:
    error = FieldError(ErrorType.INVALID, "f", "no", Verbatim('map[string]string{"a":"b"}'))
    assert str(error) == 'f: Invalid value: map[string]string{"a":"b"}: no'
    many = FieldError(ErrorType.TOO_MANY, "items", "must have at most 2 items", 3)
    assert (str(many), many.cause()["reason"]) == (
        "items: Too many: 3: must have at most 2 items",
        "FieldValueTooMany",
    )
