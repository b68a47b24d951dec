"""The strings existing clusters depend on, spelled exactly as Metacontroller spells them."""

from __future__ import annotations

from proto.api import names
from proto.api.validation import is_label_key, is_qualified_name


def test_finalizers() -> None:
    assert names.composite_finalizer("catset") == "metacontroller.io/compositecontroller-catset"
    assert names.decorator_finalizer("spp") == "metacontroller.io/decoratorcontroller-spp"
    assert is_qualified_name(names.composite_finalizer("a-b.c")) == []


def test_annotations_and_labels() -> None:
    assert names.LAST_APPLIED_ANNOTATION == "metacontroller.k8s.io/last-applied-configuration"
    assert names.DECORATOR_ANNOTATION == "metacontroller.k8s.io/decorator-controller"
    assert names.CONTROLLER_UID_LABEL == "controller-uid"
    assert names.REVISION_API_GROUP_LABEL == "metacontroller.k8s.io/apiGroup"
    assert names.REVISION_RESOURCE_LABEL == "metacontroller.k8s.io/resource"
    for key in (
        names.LAST_APPLIED_ANNOTATION,
        names.DECORATOR_ANNOTATION,
        names.CONTROLLER_UID_LABEL,
        names.REVISION_API_GROUP_LABEL,
        names.REVISION_RESOURCE_LABEL,
    ):
        assert is_label_key(key) == []


def test_group_and_events() -> None:
    assert names.API_VERSION == "metacontroller.k8s.io/v1alpha1"
    assert names.EVENT_COMPONENT == "metacontroller"
    reasons = (
        names.REASON_SYNC_ERROR,
        names.REASON_CREATE_ERROR,
        names.REASON_STARTING,
        names.REASON_STARTED,
        names.REASON_STOPPING,
        names.REASON_STOPPED,
    )
    assert reasons == ("SyncError", "CreateError", "Starting", "Started", "Stopping", "Stopped")
