"""Errors of the wire layer, typed by what the caller should do.

```
WireError                 base class; never raised itself
├── FrameError            a frame is not (or would not be) a valid message of this protocol:
│                         drop it and count it by ``.reason``; the peer and the link stay usable
└── LinkClosed            the link was closed locally: stop using it (recv() raises it,
                          iterating a link simply ends)
```

``FrameError.reason`` is one of ``FRAME_ERROR_REASONS``, a small fixed set meant to be used
as a metric label as it is.
"""

from __future__ import annotations

from typing import Final, Literal

FrameErrorReason = Literal["malformed", "oversized", "unknown_type", "version"]

FRAME_ERROR_REASONS: Final[tuple[FrameErrorReason, ...]] = (
    "malformed",
    "oversized",
    "unknown_type",
    "version",
)


class WireError(Exception):
    """Base class of the wire layer's errors."""


class FrameError(WireError):
    """A frame that cannot be turned into a message (on receive), or into a frame (on send).

    ``reason``:
    - ``malformed``: not msgpack, not a map, a field missing or of the wrong type or value,
      or a multipart message with the wrong number of parts;
    - ``oversized``: longer than the frame size limit;
    - ``unknown_type``: a well-formed message of this version with a type tag we do not know;
    - ``version``: a protocol version other than ours.
    """

    def __init__(self, reason: FrameErrorReason, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason: FrameErrorReason = reason
        self.message = message


class LinkClosed(WireError):
    """The link was closed locally; no more messages will be received or sent on it."""
