"""The coordinator/worker wire protocol: messages, msgpack codec, keys and slots.

Pure: this package imports no I/O library (enforced by import-linter); the ZeroMQ sockets that
carry these frames live in ``manager.link.router`` (ROUTER) and ``workers.link.dealer`` (DEALER).

- ``messages``: the message dataclasses, what each means and which way it goes;
- ``codec``: ``encode``/``decode`` and frame validation;
- ``keys``: ``ParentKey``; ``slots``: key -> slot hashing, slot -> worker rendezvous assignment;
- ``intake``: decode-count-log-once for the receive loops of both link ends;
- ``errors``: ``FrameError`` (drop the frame), ``LinkClosed``.
"""

from __future__ import annotations

from proto.wire.codec import DEFAULT_MAX_FRAME_SIZE, decode, encode
from proto.wire.errors import (
    FRAME_ERROR_REASONS,
    FrameError,
    FrameErrorReason,
    LinkClosed,
    WireError,
)
from proto.wire.intake import (
    DROPPED_FRAMES_HELP,
    DROPPED_FRAMES_METRIC,
    Intake,
    dropped_frames_counter,
)
from proto.wire.keys import ParentKey
from proto.wire.messages import (
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    Assign,
    Bye,
    ControllerDef,
    ControllerKind,
    Controllers,
    Done,
    Fetch,
    Heartbeat,
    Hello,
    Keys,
    Message,
    Nack,
    NackReason,
    Priority,
    Released,
    ResourceInfo,
    Revoke,
    Snapshot,
    Welcome,
)
from proto.wire.slots import SLOT_COUNT, assign, moves, slot_hash, slot_of

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "DROPPED_FRAMES_HELP",
    "DROPPED_FRAMES_METRIC",
    "FRAME_ERROR_REASONS",
    "MESSAGE_TYPES",
    "PROTOCOL_VERSION",
    "SLOT_COUNT",
    "Assign",
    "Bye",
    "ControllerDef",
    "ControllerKind",
    "Controllers",
    "Done",
    "Fetch",
    "FrameError",
    "FrameErrorReason",
    "Heartbeat",
    "Hello",
    "Intake",
    "Keys",
    "LinkClosed",
    "Message",
    "Nack",
    "NackReason",
    "ParentKey",
    "Priority",
    "Released",
    "ResourceInfo",
    "Revoke",
    "Snapshot",
    "Welcome",
    "WireError",
    "assign",
    "decode",
    "dropped_frames_counter",
    "encode",
    "moves",
    "slot_hash",
    "slot_of",
]
