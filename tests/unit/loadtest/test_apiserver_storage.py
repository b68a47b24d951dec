from __future__ import annotations

from typing import Any

import pytest

from loadtest.apiserver import listing
from loadtest.apiserver.errors import ApiError
from loadtest.apiserver.storage import ADDED, DELETED, MODIFIED, Change, Storage, Table
from proto.api import selectors


def cm(name: str, ns: str = "a", **data: str) -> dict[str, Any]:
    return {
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "uid": name},
        "data": data,
    }


class Recorder:
    def __init__(self) -> None:
        self.changes: list[Change] = []

    def offer(self, change: Change) -> None:
        self.changes.append(change)


def test_one_global_resource_version_and_watch_history() -> None:
    storage = Storage(history=10)
    cms, other = storage.table("/configmaps"), storage.table("/secrets")
    recorder = Recorder()
    cms.subscribers.add(recorder)
    first = storage.create(cms, cm("x", v="1"))
    storage.create(other, cm("s"))
    second = storage.update(cms, first, cm("x", v="2"))
    gone = storage.delete(cms, second)
    assert [first.rv, second.rv, gone.rv] == [2, 4, 5]
    assert [c.type for c in recorder.changes] == [ADDED, MODIFIED, DELETED]
    assert gone.obj["data"] == {"v": "2"} and gone.meta["resourceVersion"] == "5"
    assert [c.rv for c in cms.since(2)] == [4, 5]
    assert second.obj["metadata"]["resourceVersion"] == "4", "stored versions never change"


def test_historical_state_and_compaction() -> None:
    storage = Storage()
    table = storage.table("/configmaps")
    a = storage.create(table, cm("a", v="1"))
    storage.create(table, cm("b"))
    a2 = storage.update(table, a, cm("a", v="2"))
    storage.delete(table, a2)
    assert {k: e.obj["data"] for k, e in table.at(a.rv).items()} == {"a/a": {"v": "1"}}
    assert set(table.at(storage.rv)) == {"a/b"}
    storage.compact()
    assert storage.compacted == storage.rv and table.mvcc == []


def test_too_much_history_compacts_the_older_half() -> None:
    storage = Storage(revisions=10)
    table = storage.table("/configmaps")
    entry = storage.create(table, cm("x", v="0"))
    for i in range(1, 11):
        entry = storage.update(table, entry, cm("x", v=str(i)))
    assert len(table.mvcc) == 5
    assert storage.compacted == table.mvcc[0].rv - 1


def test_bounded_watch_cache_moves_its_start() -> None:
    storage = Storage(history=2)
    table = storage.table("/configmaps")
    for name in "abcd":
        storage.create(table, cm(name))
    assert len(table.log) == 2 and table.log_start == 3
    storage.expire_history()
    assert table.log_start == storage.rv and not table.log


def test_entries_sort_by_key_bytes_across_namespaces() -> None:
    storage = Storage()
    table = storage.table("/configmaps")
    for ns, name in (("conf-list", "c1"), ("conf-list-b", "c1"), ("conf-list", "c0")):
        storage.create(table, cm(name, ns))
    assert [e.key for e in table.entries()] == ["conf-list-b/c1", "conf-list/c0", "conf-list/c1"]
    assert [e.name for e in table.entries("conf-list")] == ["c0", "c1"]


def test_continue_tokens_round_trip_and_reject_garbage() -> None:
    token = listing.encode_token(42, "/c2\x00")
    assert listing.decode_token(token) == ("c2\x00", 42)
    with pytest.raises(ApiError) as err:
        listing.decode_token("bm90LWEtdG9rZW4=")
    assert err.value.message == (
        "invalid continue token: continue key is not valid: illegal base64 data at input byte 15"
    )


def test_pages_are_snapshots_with_remaining_counts() -> None:
    storage = Storage()
    table = storage.table("/configmaps")
    for name in ("c1", "c2", "c3"):
        storage.create(table, cm(name))

    def options(**extra: Any) -> listing.ListOptions:
        base = dict(
            label=selectors.parse(""),
            field=(),
            limit=2,
            token="",
            rv="",
            rv_match="",
            watch=False,
            bookmarks=False,
            send_initial=None,
            timeout=None,
        )
        return listing.ListOptions(**{**base, **extra})

    page = listing.list_page(storage, table, "a", options())
    assert [e.name for e in page.items] == ["c1", "c2"] and page.remaining == 1
    storage.create(table, cm("c0"))
    rest = listing.list_page(storage, table, "a", options(token=page.token))
    assert [e.name for e in rest.items] == ["c3"] and rest.rv == page.rv and not rest.token


def test_table_without_watch_cache_replays_from_mvcc() -> None:
    storage = Storage(history=1)
    events = storage.table("/events", watch_cache=False)
    for name in "abc":
        storage.create(events, cm(name))
    assert [c.entry.name for c in events.since(0)] == ["a", "b", "c"]
    assert isinstance(events, Table)
