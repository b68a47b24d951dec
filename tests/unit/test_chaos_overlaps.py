"""tests.e2e.overlaps: what the chaos test counts against exclusive work, and what explains it."""

from __future__ import annotations

from collections.abc import Sequence

from tests.e2e.overlaps import Call, LateSend, Write, judge_calls, judge_writes, late_sends

MARGIN, ANSWER = 0.5, 0.03


def call(attempt: str, token: tuple[int, int], arrived: float, parent: str = "p") -> Call:
    return Call(parent, token, attempt, arrived, arrived + ANSWER)


def judged(
    calls: list[Call],
    sends: Sequence[LateSend] = (),
    pauses: Sequence[tuple[float, float]] = (),
) -> list[str]:
    found = judge_calls(calls, sends, pauses, margin=MARGIN, answer_seconds=ANSWER)
    return [str(f) for f in found]


def test_calls_of_one_owner_after_another_are_fine() -> None:
    calls = [call("w1/a/1", (1, 3), 0.0), call("w1/a/2", (1, 3), 0.5), call("w2/b/1", (1, 7), 2.0)]
    assert judged(calls) == []
    other_parent = call("w2/b/2", (1, 7), 0.01, parent="q")
    assert judged([*calls, other_parent]) == []


def test_an_overlap_and_a_stale_call_without_a_pause_are_not_explained() -> None:
    # w1 (generation 3) lost the parent to w2 (generation 7) but calls late, while w2's call
    # is answered: a broken fence.
    calls = [call("w2/b/1", (1, 7), 2.0), call("w1/a/9", (1, 3), 2.01)]
    assert judged(calls) == [
        "overlap on p: w1/a/9 vs w2/b/1 (NOT EXPLAINED)",
        "stale call on p: w1/a/9 vs w2/b/1 (NOT EXPLAINED)",
    ]


def test_a_late_send_of_the_older_attempt_explains_it() -> None:
    calls = [call("w2/b/1", (1, 7), 2.0), call("w1/a/9", (1, 3), 2.01)]
    found = judged(calls, [LateSend(0.9, attempt="w1/a/9")])
    assert found == [
        "overlap on p: w1/a/9 vs w2/b/1 (w1/a/9 was sent 0.900s after its fence check)",
        "stale call on p: w1/a/9 vs w2/b/1 (w1/a/9 was sent 0.900s after its fence check)",
    ]


def test_only_a_hook_server_pause_longer_than_the_margin_explains_an_overlap() -> None:
    long_answer = Call("p", (1, 3), "w1/a/1", 1.0, 1.6)  # stretched by the server's pause
    calls = [long_answer, call("w2/b/1", (1, 7), 1.55)]
    assert judged(calls, pauses=[(1.0, 1.3)]) == ["overlap on p: w1/a/1 vs w2/b/1 (NOT EXPLAINED)"]
    assert judged(calls, pauses=[(1.0, 1.5)]) == [
        "overlap on p: w1/a/1 vs w2/b/1 (the hook server was paused for 0.500s)"
    ]


def test_stale_writes_follow_the_order_the_api_server_made_them() -> None:
    writes = [
        Write("ConfigMap/p-c", "p", (1, 3)),
        Write("ConfigMap/p-c", "p", (1, 7)),
        Write("ConfigMap/p-c", "p", (1, 3)),
        Write("Thing/p", "p", (1, 3)),
    ]
    assert [str(f) for f in judge_writes(writes, [])] == [
        "stale write on p: ConfigMap/p-c vs (1, 7) (NOT EXPLAINED)"
    ]
    sends = [LateSend(1.1, write="replace configmaps ns/p-c")]
    (found,) = judge_writes(writes, sends)
    assert found.explained_by == "a write of it was sent 1.100s after its check"


def test_late_sends_are_read_from_json_log_lines() -> None:
    lines = [
        b'{"event": "reconciled", "level": "info"}',
        b'{"event": "a request went out after the fence deadline: ...", "paused": 0.7,'
        b' "late": 0.2, "hook": "sync", "attempt": "w1/a/9"}',
        b"not json, a request went out after the fence deadline",
    ]
    assert late_sends(lines) == [LateSend(0.7, attempt="w1/a/9")]
