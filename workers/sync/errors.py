"""Why the sync of one parent failed, typed by what the reconciler and the runner should do.

::

    ReconcileError        the reconcile did not complete: the runner retries the key with
    │                     per-key exponential backoff and counts an error
    ├── SyncFailure       the sync failed (hook unreachable or answering nonsense, a write
    │                     refused): a ``SyncError`` Warning event on the parent, whose
    │                     message is ``Sync error: <message>``, as Metacontroller words it
    └── StaleSnapshot     a write guarded by a resourceVersion (finalizer, adoption, release)
                          found the object changed since the snapshot: no event, since the
                          change itself is on its way and a retry sees it

A hook answering 429 is not an error: the reconciler raises ``workers.reconcile.RequeueAfter``.
"""

from __future__ import annotations


class ReconcileError(Exception):
    """Base of the errors a reconciler raises on purpose."""


class SyncFailure(ReconcileError):
    """The message is the text of the parent's SyncError event."""


class StaleSnapshot(ReconcileError):
    """A precondition failed: the snapshot was behind the object."""
