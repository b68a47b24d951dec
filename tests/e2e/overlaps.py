"""What the chaos test counts against exclusive work, and what explains it.

metashard promises (README, docs/architecture.md) that two workers never start work on one
parent at overlapping times while no process is paused, between a fence check and the
request it guards, for longer than the margin (worker timeout - fence timeout + safety
margin). Beyond it, the documented exceptions are: a request of a worker paused past its
fence deadline (it logs ``a request went out after the fence deadline`` with the pause), and
a hook call already running when the parent moved. On a loaded machine the hook server of the
test is paused too, which stretches the calls it is answering.

Pure functions over what the test recorded (all times ``time.monotonic()``, one clock for
every process of the machine):

- ``Call``: one hook call as the hook server saw it, with its fencing token (epoch, slot
  generation) and attempt id. ``judge_calls`` finds
  - overlaps: two calls for one parent, of different attempts, being answered at the same
    time;
  - stale calls: a call whose token is smaller than that of a call for the parent that
    arrived before it (a hook that fences would refuse it);
  and explains each by the older attempt's late send (``LateSend``, from the worker logs), or
  by the hook server's own pauses between the older call's arrival less a second and the
  newer call's arrival adding up to more than the margin less the hook's answer time.
- ``Write``: one write of a parent's object as a watch saw it (in the order the API server
  made them), with the token the hook put into it. ``judge_writes`` finds stale writes: a
  token smaller than one written before for the parent; explained by a late send of a write
  of that object.

A ``Finding`` without an explanation is a broken promise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import orjson

Token = tuple[int, int]
LATE_SEND = "a request went out after the fence deadline"
LOOK_BACK = 1.0  # seconds before the older call in which a server pause still counts


@dataclass(frozen=True, slots=True)
class Call:
    parent: str  # uid
    token: Token
    attempt: str
    arrived: float
    answered: float


@dataclass(frozen=True, slots=True)
class Write:
    obj: str  # "<kind>/<name>"
    parent: str
    token: Token


@dataclass(frozen=True, slots=True)
class LateSend:
    """A worker's report of a request sent after its fence deadline."""

    paused: float  # seconds between its fence check and the send
    attempt: str = ""  # of a hook call
    write: str = ""  # "<verb> <resource> <namespace>/<name>" of a write


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str  # "overlap", "stale call", "stale write"
    parent: str
    older: str  # the older attempt, or the object written
    newer: str
    explained_by: str | None  # None: nothing explains it

    def __str__(self) -> str:
        why = self.explained_by or "NOT EXPLAINED"
        return f"{self.kind} on {self.parent}: {self.older} vs {self.newer} ({why})"


def call_of(
    request: Mapping[str, object], headers: Mapping[str, str], arrived: float, answered: float
) -> Call:
    """A ``Call`` from a hook request, its headers and its times."""
    return Call(
        parent=headers.get("X-Metashard-Parent-Uid", ""),
        token=(
            int(headers.get("X-Metashard-Epoch", 0)),
            int(headers.get("X-Metashard-Slot-Generation", 0)),
        ),
        attempt=headers.get("X-Metashard-Attempt", ""),
        arrived=arrived,
        answered=answered,
    )


def late_sends(log_lines: Iterable[bytes]) -> list[LateSend]:
    """The late sends reported in JSON log lines of workers."""
    found = []
    for line in log_lines:
        if LATE_SEND.encode() not in line:
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        found.append(
            LateSend(
                float(record.get("paused", 0.0)),
                str(record.get("attempt", "")),
                str(record.get("write", "")),
            )
        )
    return found


def _paused(pauses: Sequence[tuple[float, float]], start: float, end: float) -> float:
    """Seconds of ``pauses`` within ``[start, end]``."""
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in pauses)


def judge_calls(
    calls: Sequence[Call],
    sends: Sequence[LateSend],
    server_pauses: Sequence[tuple[float, float]],
    *,
    margin: float,
    answer_seconds: float,
) -> list[Finding]:
    """Overlapping and stale calls, each with what explains it (module docstring)."""
    late = {s.attempt: s for s in sends if s.attempt}
    by_parent: dict[str, list[Call]] = {}
    for call in sorted(calls, key=lambda c: c.arrived):
        by_parent.setdefault(call.parent, []).append(call)
    findings = []

    def explain(older: Call, newer: Call) -> str | None:
        send = late.get(older.attempt)
        if send is not None:
            return f"{older.attempt} was sent {send.paused:.3f}s after its fence check"
        paused = _paused(server_pauses, older.arrived - LOOK_BACK, newer.arrived)
        if paused > margin - answer_seconds:
            return f"the hook server was paused for {paused:.3f}s"
        return None

    for parent, seen in by_parent.items():
        newest: Call | None = None
        answering: list[Call] = []  # calls not answered yet when the current one arrived
        for call in seen:
            answering = [c for c in answering if c.answered > call.arrived]
            for other in answering:
                if other.attempt != call.attempt:
                    older, newer = sorted((other, call), key=lambda c: (c.token, c.arrived))
                    findings.append(
                        Finding(
                            "overlap", parent, older.attempt, newer.attempt, explain(older, newer)
                        )
                    )
            answering.append(call)
            if newest is not None and call.token < newest.token:
                findings.append(
                    Finding(
                        "stale call", parent, call.attempt, newest.attempt, explain(call, newest)
                    )
                )
            if newest is None or call.token > newest.token:
                newest = call
    return findings


def judge_writes(writes: Sequence[Write], sends: Sequence[LateSend]) -> list[Finding]:
    """Stale writes, in the order they were made, each with what explains it."""
    late: dict[str, LateSend] = {}
    for send in sends:
        if send.write:
            late[send.write.rsplit("/", 1)[-1]] = send
    newest: dict[str, Token] = {}
    findings = []
    for write in writes:
        best = newest.get(write.obj)
        if best is not None and write.token < best:
            sent = late.get(write.obj.rsplit("/", 1)[-1])
            why = f"a write of it was sent {sent.paused:.3f}s after its check" if sent else None
            findings.append(Finding("stale write", write.parent, write.obj, str(best), why))
        if best is None or write.token > best:
            newest[write.obj] = write.token
    return findings
