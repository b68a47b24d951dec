"""ControllerRevision names, exactly as Metacontroller derives them.

``<parent plural>.<parent group, or "core">-<sha1 hex>``: the SHA-1 is over the parent UID's
bytes followed by Go's ``json.Marshal`` of the revision's parent patch, and the prefix is cut
to 212 bytes so the name fits in 253. The hash makes creation idempotent (a second create of
the same revision is AlreadyExists), so the bytes must match Go's: a different encoding would
create a second revision for the same patch and start a spurious rollout.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from proto.api import gojson

__all__ = ["revision_name"]

_MAX_NAME = 253
_HASH_AND_DASH = 41


def revision_name(
    resource: str, group: str, parent_uid: str, parent_patch: Mapping[str, Any]
) -> str:
    """The ControllerRevision name for ``parent_patch`` of the parent with ``parent_uid``."""
    prefix = f"{resource}.{group or 'core'}".encode()[: _MAX_NAME - _HASH_AND_DASH]
    digest = hashlib.sha1(parent_uid.encode() + gojson.dumps(parent_patch), usedforsecurity=False)
    return f"{prefix.decode(errors='ignore')}-{digest.hexdigest()}"
