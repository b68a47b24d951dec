"""Errors of the Metacontroller API layer, typed by what the caller should do.

::

    ApiError
    ├── InvalidControllerError   the CompositeController/DecoratorController object cannot run
    │                            as written: report it (``CreateError`` event on the controller)
    │                            and do not retry until the object changes
    ├── HookResponseError        a hook answered HTTP 200 with a body that cannot be used: fail
    │                            this reconcile (``SyncError`` Warning event on the parent),
    │                            touch nothing, retry with backoff
    ├── DurationError            a Go duration string does not parse (``time.ParseDuration``)
    └── UnresolvedReference      a Secret or ConfigMap a webhook's TLS or credentials name is
                                 missing or unusable: report it on the controller (object and
                                 key, never a value) and do not call that hook

Every class is also a ``ValueError``: each one means "this input is wrong". Messages name the
offending field by its JSON path (``spec.hooks.sync.webhook.timeout``, ``children[2].kind``).
``proto.api.selectors.SelectorError`` stays separate: it carries the API server's own wording and
is wrapped into one of the errors above where a selector is part of a larger object.
"""

from __future__ import annotations


class ApiError(ValueError):
    """Base of the errors raised by ``proto.api``."""


class InvalidControllerError(ApiError):
    """The controller object is invalid; the message names the field."""


class HookResponseError(ApiError):
    """A hook's 200 response cannot be used; the message says why, for the SyncError event."""


class DurationError(ApiError):
    """A duration string that Go's ``time.ParseDuration`` rejects; the message is Go's."""


class UnresolvedReference(ApiError):
    """A referenced Secret/ConfigMap or key is missing or unusable; names object and key."""
