"""LIST: query options, resourceVersion semantics, pagination and continue tokens.

- ``ListOptions.parse`` reads the query and validates it like ``ValidateListOptions`` (and the
  watch variant), with the same 422 causes.
- resourceVersion: unset = current state; ``0`` = current state with ``limit`` ignored (the
  watch cache); ``N`` (NotOlderThan) = current state once the store reached ``N`` (else 504
  after a wait); ``N`` + ``Exact`` = the historical state at ``N`` (410 once compacted).
- Pages are consistent snapshots: a continue token carries the first page's resourceVersion
  and the last key; later pages read the state at that revision (410 with an "inconsistent"
  token once it was compacted). ``remainingItemCount`` only without selectors.
- Items are sorted by ``namespace/name`` byte order, as etcd returns keys.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import orjson
from multidict import MultiMapping

from loadtest.apiserver import errors, fields
from loadtest.apiserver.registry import ResourceType
from loadtest.apiserver.storage import Entry, Storage, Table
from proto.api import selectors
from proto.api.selectors import Selector
from proto.api.validation import ErrorType, FieldError

_URL_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _bool(query: MultiMapping[str], name: str) -> bool | None:
    value = query.get(name)
    if value is None:
        return None
    return value.lower() in ("true", "1")


def parse_rv(value: str) -> int:
    try:
        rv = int(value)
    except ValueError:
        raise errors.bad_request(f'invalid resource version "{value}"') from None
    if rv < 0:
        raise errors.bad_request(f'invalid resource version "{value}"')
    return rv


_MATCH_WITH_CONTINUE = FieldError(
    ErrorType.FORBIDDEN,
    "resourceVersionMatch",
    "resourceVersionMatch is forbidden when continue is provided",
)
"""A list or watch may not pair ``resourceVersionMatch`` with a ``continue`` token."""


@dataclass(frozen=True, slots=True)
class ListOptions:
    label: Selector
    field: tuple[fields.Term, ...]
    limit: int
    token: str
    rv: str
    rv_match: str
    watch: bool
    bookmarks: bool
    send_initial: bool | None
    timeout: float | None

    @classmethod
    def parse(cls, query: MultiMapping[str], rt: ResourceType, *, watch: bool) -> ListOptions:
        try:
            label = selectors.parse(query.get("labelSelector", ""))
        except selectors.SelectorError as err:
            raise errors.bad_request(str(err)) from None
        field = fields.parse(query.get("fieldSelector", ""), rt)
        try:
            limit = int(query.get("limit", "0") or 0)
            timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        except ValueError as err:
            raise errors.bad_request(str(err)) from None
        opts = cls(
            label=label,
            field=field,
            limit=max(limit, 0),
            token=query.get("continue", ""),
            rv=query.get("resourceVersion", ""),
            rv_match=query.get("resourceVersionMatch", ""),
            watch=watch or _bool(query, "watch") is True,
            bookmarks=_bool(query, "allowWatchBookmarks") is True,
            send_initial=_bool(query, "sendInitialEvents"),
            timeout=timeout,
        )
        problems = opts._watch_problems() if opts.watch else opts._list_problems()
        if problems:
            raise errors.invalid_options("ListOptions", problems)
        return opts

    def _list_problems(self) -> list[FieldError]:
        problems = []
        match = self.rv_match
        if match:
            if not self.rv:
                problems.append(
                    FieldError(
                        ErrorType.FORBIDDEN,
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    )
                )
            if self.token:
                problems.append(_MATCH_WITH_CONTINUE)
            if match not in ("Exact", "NotOlderThan"):
                problems.append(
                    FieldError(
                        ErrorType.NOT_SUPPORTED,
                        "resourceVersionMatch",
                        'supported values: "Exact", "NotOlderThan", ""',
                        match,
                    )
                )
            if match == "Exact" and self.rv == "0":
                problems.append(
                    FieldError(
                        ErrorType.FORBIDDEN,
                        "resourceVersionMatch",
                        'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                    )
                )
        if self.send_initial is not None:
            problems.append(
                FieldError(
                    ErrorType.FORBIDDEN,
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for list",
                )
            )
        return problems

    def _watch_problems(self) -> list[FieldError]:
        problems = []
        match = self.rv_match
        if self.send_initial is not None and match != "NotOlderThan":
            problems.append(
                FieldError(
                    ErrorType.FORBIDDEN,
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )
            )
        if match:
            if self.send_initial is None:
                problems.append(
                    FieldError(
                        ErrorType.FORBIDDEN,
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents "
                        "is provided",
                    )
                )
            if match != "NotOlderThan":
                problems.append(
                    FieldError(
                        ErrorType.NOT_SUPPORTED,
                        "resourceVersionMatch",
                        'supported values: "NotOlderThan"',
                        match,
                    )
                )
            if self.token:
                problems.append(_MATCH_WITH_CONTINUE)
        return problems

    @property
    def filtered(self) -> bool:
        return not self.label.empty or bool(self.field)

    def matches(self, entry: Entry) -> bool:
        if not self.label.empty and not self.label.matches(entry.labels):
            return False
        return not self.field or fields.matches(self.field, entry.obj)


# --- continue tokens ---------------------------------------------------------------------------


def encode_token(rv: int, start: str) -> str:
    data = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start})
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def decode_token(token: str) -> tuple[str, int]:
    """(start key relative to the list's scope, resourceVersion) of a continue token."""

    def invalid(why: str) -> errors.ApiError:
        return errors.bad_request(f"invalid continue token: continue key is not valid: {why}")

    raw = token.encode()
    bad = next((i for i, c in enumerate(raw) if c not in _URL_ALPHABET), None)
    if bad is None and len(raw) % 4 == 1:
        bad = len(raw) - 1
    if bad is not None:
        raise invalid(f"illegal base64 data at input byte {bad}")
    try:
        data = orjson.loads(base64.urlsafe_b64decode(raw + b"=" * (-len(raw) % 4)))
    except (binascii.Error, orjson.JSONDecodeError) as err:
        raise invalid(str(err)) from None
    if not isinstance(data, dict) or data.get("v") != "meta.k8s.io/v1":
        version = data.get("v") if isinstance(data, dict) else ""
        raise invalid(f'server does not recognize this encoded version "{version}"')
    rv, start = data.get("rv"), data.get("start")
    if not isinstance(rv, int) or rv == 0:
        raise invalid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    if not isinstance(start, str) or not start:
        raise invalid("encoded start key empty (version meta.k8s.io/v1)")
    return start.lstrip("/"), rv


# --- listing ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Entry]
    rv: int
    token: str = ""
    remaining: int | None = None

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if self.token:
            meta["continue"] = self.token
        if self.remaining is not None:
            meta["remainingItemCount"] = self.remaining
        return meta


def _scope_key(entry: Entry, namespace: str) -> str:
    return entry.name if namespace else entry.key


def _snapshot(table: Table, namespace: str, rv: int, storage: Storage) -> list[Entry]:
    if rv >= storage.rv:
        return table.entries(namespace)
    state = table.at(rv)
    chosen = [e for e in state.values() if not namespace or e.namespace == namespace]
    return sorted(chosen, key=lambda e: e.key)


def list_page(storage: Storage, table: Table, namespace: str, opts: ListOptions) -> Page:
    """Answer a LIST whose resourceVersion the store has reached (see ``needs_wait``)."""
    limit = opts.limit
    start = ""
    if opts.token:
        if opts.rv not in ("", "0"):
            raise errors.bad_request(
                "specifying resource version is not allowed when using continue"
            )
        start, token_rv = decode_token(opts.token)
        if token_rv == -1:
            rv = storage.rv
        elif token_rv < storage.compacted:
            raise errors.expired(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter, or use the continue "
                "token "
                "in this response to retrieve the remainder of the results. Continuing with the "
                "provided token results in an inconsistent list - objects that were created, "
                "modified, or deleted between the time the first chunk was returned and now may "
                "show up in the list.",
                list_continue=encode_token(-1, start),
            )
        else:
            rv = token_rv
        if opts.rv == "0":
            limit = 0
    elif opts.rv_match == "Exact":
        rv = parse_rv(opts.rv)
        if rv < storage.compacted:
            raise errors.expired("The resourceVersion for the provided list is too old.")
    else:
        rv = storage.rv
        if opts.rv == "0":
            limit = 0
    entries = _snapshot(table, namespace, rv, storage)
    if start:
        entries = [e for e in entries if _scope_key(e, namespace) >= start]
    chosen: list[Entry] = []
    index = 0
    for index, entry in enumerate(entries):  # noqa: B007 - index is read after the loop
        if opts.matches(entry):
            chosen.append(entry)
            if limit and len(chosen) == limit:
                break
    else:
        return Page(chosen, rv)
    rest = len(entries) - index - 1
    if rest <= 0:
        return Page(chosen, rv)
    token = encode_token(rv, "/" + _scope_key(chosen[-1], namespace) + "\x00")
    return Page(chosen, rv, token, None if opts.filtered else rest)


def needs_wait(storage: Storage, opts: ListOptions) -> int | None:
    """The resourceVersion a read must wait for (a NotOlderThan/Exact RV in the future)."""
    if opts.token or opts.rv in ("", "0"):
        return None
    rv = parse_rv(opts.rv)
    return rv if rv > storage.rv else None
