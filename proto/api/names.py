"""The strings Metacontroller leaves in users' clusters and shows to users, exactly.

Existing objects carry these values (finalizers on parents, annotations and labels on children
and revisions), so a drop-in replacement must write and read the very same strings:

- Finalizers live under the ``metacontroller.io`` domain (not ``.k8s.io``):
  ``metacontroller.io/compositecontroller-<name>`` and ``.../decoratorcontroller-<name>``.
- Annotations and revision labels live under ``metacontroller.k8s.io``.
- Event reasons and the event source component are what ``kubectl describe`` shows.
"""

from __future__ import annotations

from typing import Final

# --- the API group ----------------------------------------------------------------------------

GROUP: Final = "metacontroller.k8s.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

COMPOSITE_CONTROLLER: Final = "CompositeController"
DECORATOR_CONTROLLER: Final = "DecoratorController"
CONTROLLER_REVISION: Final = "ControllerRevision"

COMPOSITE_CONTROLLERS: Final = "compositecontrollers"
DECORATOR_CONTROLLERS: Final = "decoratorcontrollers"
CONTROLLER_REVISIONS: Final = "controllerrevisions"

# --- finalizers -------------------------------------------------------------------------------

FINALIZER_DOMAIN: Final = "metacontroller.io"


def composite_finalizer(controller_name: str) -> str:
    """The finalizer a CompositeController with a finalize hook puts on its parents."""
    return f"{FINALIZER_DOMAIN}/compositecontroller-{controller_name}"


def decorator_finalizer(controller_name: str) -> str:
    """The finalizer a DecoratorController with a finalize hook puts on its targets."""
    return f"{FINALIZER_DOMAIN}/decoratorcontroller-{controller_name}"


# --- annotations and labels -------------------------------------------------------------------

LAST_APPLIED_ANNOTATION: Final = f"{GROUP}/last-applied-configuration"
"""Dynamic apply's record of the last desired object (Go ``encoding/json`` bytes)."""

DECORATOR_ANNOTATION: Final = f"{GROUP}/decorator-controller"
"""On every attachment of a DecoratorController; the value is the controller's name."""

CONTROLLER_UID_LABEL: Final = "controller-uid"
"""The ``generateSelector`` label: its value is the parent's UID."""

REVISION_API_GROUP_LABEL: Final = f"{GROUP}/apiGroup"
"""On ControllerRevisions: the parent's API group."""

REVISION_RESOURCE_LABEL: Final = f"{GROUP}/resource"
"""On ControllerRevisions: the parent's resource (plural)."""

# --- events -----------------------------------------------------------------------------------

EVENT_COMPONENT: Final = "metacontroller"
"""``source.component`` / ``reportingController`` of every event."""

EVENT_TYPE_NORMAL: Final = "Normal"
EVENT_TYPE_WARNING: Final = "Warning"

REASON_SYNC_ERROR: Final = "SyncError"
"""Warning on the parent when a sync fails; the message is the error text."""
REASON_CREATE_ERROR: Final = "CreateError"
"""Warning on the controller object when it cannot be started."""
REASON_UNSUPPORTED_FIELD: Final = "UnsupportedField"
"""Warning on the controller object for a field metashard accepts but does not act on
(``proto.api.unsupported``). metashard's own: Metacontroller has no such event."""
REASON_APPLY_CONFLICT: Final = "ApplyConflict"
"""Warning on the parent when a server-side apply without ``force`` conflicts with another
field manager; the message names the child, the managers and the fields. metashard's own."""
REASON_PAUSED: Final = "Paused"
"""Normal, on a parent whose sync was skipped because it is paused (``metashard.io/paused``),
and on a controller object loaded paused. metashard's own."""
REASON_INVALID_ANNOTATION: Final = "InvalidAnnotation"
"""Warning on a parent or controller object whose metashard annotation has a value that
cannot be read; the default applies. metashard's own."""
REASON_STARTING: Final = "Starting"
REASON_STARTED: Final = "Started"
REASON_STOPPING: Final = "Stopping"
REASON_STOPPED: Final = "Stopped"

# --- parent status ----------------------------------------------------------------------------

OBSERVED_GENERATION: Final = "observedGeneration"
"""Injected into every CompositeController parent's status."""

CONDITION_UPDATED: Final = "Updated"
"""The rollout condition on parents whose children use a Rolling* update method."""
REASON_ROLLOUT_WAITING: Final = "RolloutWaiting"
REASON_ROLLOUT_PROGRESSING: Final = "RolloutProgressing"
REASON_ON_LATEST_REVISION: Final = "OnLatestRevision"
