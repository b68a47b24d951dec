"""Why a child cannot be applied, typed by what the reconcile should do.

::

    ApplyError                 the child cannot be updated or created as it stands: fail the
    │                          reconcile (SyncError event on the parent), retry with backoff
    ├── LastAppliedError       the child's last-applied annotation is not a JSON object (an
    │                          edit by hand, a foreign tool); Metacontroller fails the same way
    └── InvalidObjectError     an object or its ``metadata`` is not a JSON object

Every class is also a ``ValueError``: each one means "this input is wrong".
"""

from __future__ import annotations


class ApplyError(ValueError):
    """Base of the errors raised by ``workers.apply`` and ``workers.apply.merge``."""


class LastAppliedError(ApplyError):
    """The observed child's last-applied annotation cannot be parsed."""


class InvalidObjectError(ApplyError):
    """An object, or its ``metadata``, does not have the shape of a Kubernetes object."""
