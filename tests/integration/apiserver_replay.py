"""Replays a recorded conformance scenario against the emulator and compares the answers.

The transcripts' rules (``../shared/conformance/README.md``):

- placeholders (``<uid:N>``, ``<rv:N>``, ``<name:N>``, ``<continue:N>``, ``<token:N>``) bind
  to the emulator's value where a response first shows them, must keep that value
  afterwards, may not share it with another placeholder of the same family, and are
  substituted into later requests;
  resourceVersions must keep the transcript's order;
- a list's or bookmark's ``metadata.resourceVersion`` may be any value not older than every
  resourceVersion seen so far (the real store had unrelated writes);
- ``<time>`` holds a timestamp of the field's form (``Time`` or ``MicroTime``);
- ``ignore`` pointers are removed from both sides, ``trimmed`` lists keep only the
  transcript's entries, objects compare as unordered maps; ``managedFields`` are compared
  like any field (a ``time`` is a ``<time>``), the entries of one operation in the
  transcript's order (their order follows times the transcript hides);
- watches: ``during`` steps go on a second connection, BOOKMARKs without the
  initial-events-end annotation are optional, a stream the server ends at ``timeoutSeconds`` is
  ended by advancing the emulator's manual clock; polls retry until they match;
- ``unordered`` arrays compare as multisets; a request whose ``auth`` names ``<token:N>`` is
  sent with that (bound) ServiceAccount token, any other ``auth`` with an invalid token;
  scenarios that use ServiceAccount tokens run on an emulator with RBAC on.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from loadtest.apiserver import Settings
from loadtest.apiserver.background import ClusterThread
from proto.runtime.clock import FakeClock

TOKEN = "conformance-token"
USER_AGENT = "conformance-recorder/1.0"  # the recorder's: non-apply writes are its manager's
PLACEHOLDER = re.compile(r"<(uid|rv|name|continue|token):(\d+)>|<time>|<host:port>")
TOKEN_AUTH = re.compile(r"<token:\d+>")
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
MICROTIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
MICRO_KEYS = frozenset({"eventTime", "acquireTime", "renewTime", "lastObservedTime"})
INITIAL_END = "k8s.io/initial-events-end"


@dataclass
class Observed:
    status: int
    content_type: str
    body: Any = None
    text: str | None = None
    warnings: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] | None = None
    closed_by_server: bool = False


class Mismatch(AssertionError):
    pass


def _remove_pointer(doc: Any, parts: list[str]) -> None:
    if not parts or doc is None:
        return
    head, rest = parts[0], parts[1:]
    if isinstance(doc, list):
        indexes = range(len(doc)) if head == "*" else [int(head)] if head.isdigit() else []
        for i in sorted(indexes, reverse=True):
            if i < len(doc):
                if rest:
                    _remove_pointer(doc[i], rest)
                else:
                    del doc[i]
    elif isinstance(doc, dict):
        keys = list(doc) if head == "*" else [head]
        for key in keys:
            if key in doc:
                if rest:
                    _remove_pointer(doc[key], rest)
                else:
                    del doc[key]


def _pointer_parts(pointer: str) -> list[str]:
    """A JSON pointer's reference tokens, unescaped (``~1`` is ``/``, ``~0`` is ``~``)."""
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer.strip("/").split("/")]


def remove_ignored(response: dict[str, Any], pointers: list[str]) -> None:
    for pointer in pointers:
        _remove_pointer(response, _pointer_parts(pointer))


def _identity(item: Any) -> Any:
    if isinstance(item, dict):
        for key in ("name", "resource", "version", "subresource"):
            if key in item:
                return item[key]
        meta = item.get("metadata")
        if isinstance(meta, dict):
            return meta.get("name", "")
    return None


def trim(actual: Any, expected: Any) -> Any:
    """Keep the actual list entries the (trimmed) transcript kept, recursively.

    Only lists of named objects are trimmed (groups, resources, versions); scalar lists
    such as ``verbs`` are compared whole.
    """
    if isinstance(actual, list) and isinstance(expected, list):
        if not expected or _identity(expected[0]) is None:
            return actual
        wanted = {_identity(e): e for e in expected}
        return [trim(a, wanted[_identity(a)]) for a in actual if _identity(a) in wanted]
    if isinstance(actual, dict) and isinstance(expected, dict):
        return {k: trim(v, expected[k]) if k in expected else v for k, v in actual.items()}
    return actual


class Bindings:
    """Placeholder values and the resourceVersion order they must keep."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.loose: set[str] = set()
        self.max_rv = 0
        self.host = ""

    def copy(self) -> Bindings:
        other = Bindings()
        other.values = dict(self.values)
        other.loose = set(self.loose)
        other.max_rv = self.max_rv
        other.host = self.host
        return other

    def substitute(self, value: Any) -> Any:
        if isinstance(value, str):

            def replace(match: re.Match[str]) -> str:
                token = match.group(0)
                if token == "<host:port>":
                    return self.host
                if token in self.values:
                    return self.values[token]
                if token == "<time>":
                    return token
                raise Mismatch(f"request uses {token} before any response bound it")

            return PLACEHOLDER.sub(replace, value)
        if isinstance(value, dict):
            return {self.substitute(k): self.substitute(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.substitute(v) for v in value]
        return value

    def bind(self, token: str, value: str, where: str, *, loose: bool = False) -> None:
        family = token[1:].split(":", 1)[0]
        number = 0
        if family == "rv":
            if not value.isdigit():
                raise Mismatch(f"{where}: {value!r} is not a resourceVersion for {token}")
            number = int(value)
        bound = self.values.get(token)
        if bound is not None:
            if bound != value and not (loose and number >= self.max_rv):
                raise Mismatch(f"{where}: {token} was {bound!r}, now {value!r}")
        else:
            if loose:
                if number < self.max_rv:
                    raise Mismatch(
                        f"{where}: resourceVersion {value} is older than one already seen "
                        f"({self.max_rv})"
                    )
                self.loose.add(token)
            else:
                for other, other_value in self.values.items():
                    if (
                        other_value == value
                        and other.startswith(f"<{family}:")
                        and other not in self.loose
                    ):
                        raise Mismatch(f"{where}: {token} and {other} both bind {value!r}")
            self.values[token] = value
        self.max_rv = max(self.max_rv, number)

    def check_order(self) -> None:
        rvs = sorted(
            ((int(t[4:-1]), t) for t in self.values if t.startswith("<rv:")),
        )
        for (_, a), (_, b) in itertools.pairwise(rvs):
            va, vb = int(self.values[a]), int(self.values[b])
            if va > vb or (va == vb and a not in self.loose and b not in self.loose):
                raise Mismatch(f"resourceVersion order: {a}={va} must be below {b}={vb}")


class Comparator:
    def __init__(self, bindings: Bindings) -> None:
        self.b = bindings
        self.problems: list[str] = []

    def fail(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    def value(self, expected: Any, actual: Any, path: list[str], *, loose_rv: bool = False) -> None:
        where = "/" + "/".join(path)
        if isinstance(expected, str) and PLACEHOLDER.search(expected):
            self._string(expected, actual, path, where, loose_rv)
        elif isinstance(expected, dict):
            if not isinstance(actual, dict):
                self.fail(where, f"expected an object, got {json.dumps(actual)[:200]}")
                return
            expected = self._bound_keys(expected, actual)
            missing = set(expected) - set(actual)
            extra = set(actual) - set(expected)
            if missing:
                self.fail(where, f"missing keys {sorted(missing)}")
            if extra:
                self.fail(
                    where,
                    f"unexpected keys {sorted(extra)}: "
                    + json.dumps({k: actual[k] for k in extra})[:300],
                )
            listish = ("items" in expected and "metadata" in expected) or expected.get(
                "_bookmark"
            ) is True
            for key in expected:
                if key in actual:
                    if listish and key == "metadata" and isinstance(expected[key], dict):
                        self._metadata(expected[key], actual[key], [*path, key])
                    else:
                        self.value(expected[key], actual[key], [*path, key])
        elif isinstance(expected, list):
            if not isinstance(actual, list):
                self.fail(where, f"expected a list, got {json.dumps(actual)[:200]}")
                return
            if path and path[-1] == "managedFields":
                actual = _align_same_operation(expected, actual)
            if len(expected) != len(actual):
                self.fail(
                    where,
                    f"expected {len(expected)} items, got {len(actual)}: "
                    + json.dumps(actual)[:400],
                )
                return
            for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
                self.value(e, a, [*path, str(i)])
        elif type(expected) is not type(actual) or expected != actual:
            self.fail(where, f"expected {json.dumps(expected)}, got {json.dumps(actual)[:300]}")

    def _bound_keys(self, expected: dict[str, Any], actual: dict[str, Any]) -> dict[str, Any]:
        """Placeholders inside keys (``k:{"uid":"<uid:3>"}`` of managedFields) take their
        bound values, or bind to the actual key of the same form."""
        if not any("<" in key for key in expected):
            return expected
        out = {}
        for key, value in expected.items():
            if not PLACEHOLDER.search(key):
                out[key] = value
                continue
            try:
                out[self.b.substitute(key)] = value
                continue
            except Mismatch:
                pass
            for candidate in actual:
                if candidate not in expected and self._matches_key(key, candidate):
                    out[candidate] = value
                    break
            else:
                out[key] = value
        return out

    def _matches_key(self, pattern: str, candidate: str) -> bool:
        trial = Comparator(self.b.copy())
        trial._string(pattern, candidate, [], "", False)
        if trial.problems:
            return False
        self._string(pattern, candidate, [], "", False)
        return True

    def _metadata(self, expected: dict[str, Any], actual: Any, path: list[str]) -> None:
        if not isinstance(actual, dict):
            self.fail("/" + "/".join(path), "expected list metadata")
            return
        rest_e = {k: v for k, v in expected.items() if k != "resourceVersion"}
        rest_a = {k: v for k, v in actual.items() if k != "resourceVersion"}
        self.value(rest_e, rest_a, path)
        if "resourceVersion" in expected:
            self.value(
                expected["resourceVersion"],
                actual.get("resourceVersion"),
                [*path, "resourceVersion"],
                loose_rv=True,
            )

    def _string(
        self, expected: str, actual: Any, path: list[str], where: str, loose_rv: bool
    ) -> None:
        if not isinstance(actual, str):
            self.fail(where, f"expected a string like {expected!r}, got {json.dumps(actual)}")
            return
        if expected == "<time>":
            form = MICROTIME if path and path[-1] in MICRO_KEYS else TIME
            if not form.match(actual):
                self.fail(where, f"{actual!r} is not a timestamp of the form {form.pattern}")
            return
        tokens: list[str] = []
        pattern = ""
        last = 0
        for match in PLACEHOLDER.finditer(expected):
            pattern += re.escape(expected[last : match.start()])
            token = match.group(0)
            if token == "<host:port>":
                pattern += re.escape(self.b.host)
            else:
                tokens.append(token)
                pattern += "(.+?)"
            last = match.end()
        pattern += re.escape(expected[last:])
        found = re.fullmatch(pattern, actual, flags=re.DOTALL)
        if not found:
            self.fail(where, f"expected {expected!r}, got {actual!r}")
            return
        for token, value in zip(tokens, found.groups(), strict=True):
            if token == "<time>":
                continue
            loose = loose_rv or (token.startswith("<rv:") and "current: " + token in expected)
            try:
                self.b.bind(token, value, where, loose=loose and token.startswith("<rv:"))
            except Mismatch as err:
                self.problems.append(str(err))


def compare_response(
    expected: dict[str, Any], actual: Observed, bindings: Bindings, step: dict[str, Any]
) -> list[str]:
    """Mismatches between a recorded response and what the emulator answered."""
    comparator = Comparator(bindings)
    if expected.get("status") != actual.status:
        comparator.fail(
            "status",
            f"expected {expected.get('status')}, got {actual.status}: "
            + (actual.text or json.dumps(actual.body)[:500]),
        )
        return comparator.problems
    want_type = (expected.get("headers") or {}).get("Content-Type")
    if want_type and want_type != actual.content_type:
        comparator.fail("Content-Type", f"expected {want_type!r}, got {actual.content_type!r}")
    exp = json.loads(json.dumps(expected))
    act: dict[str, Any] = {"status": actual.status}
    if actual.events is not None:
        act["events"] = actual.events
    elif actual.body is not None:
        act["body"] = actual.body
    else:
        act["bodyText"] = actual.text
    remove_ignored(exp, step.get("ignore") or [])
    remove_ignored(act, step.get("ignore") or [])
    for pointer in step.get("unordered") or []:
        _sort_at(exp, _pointer_parts(pointer))
        _sort_at(act, _pointer_parts(pointer))
    trimmed = step.get("trimmed")
    if trimmed and "body" in act:
        pointer = trimmed["pointer"].strip("/").split("/")[1:]
        act["body"] = _trim_at(act["body"], exp["body"], pointer)
    if "events" in exp:
        expected_events = [e for e in exp["events"] if not _optional(e)]
        actual_events = [e for e in act.get("events") or [] if not _optional(e)]
        for e in expected_events + actual_events:
            if e.get("type") == "BOOKMARK":
                e["object"]["_bookmark"] = True
        comparator.value(expected_events, actual_events, ["events"])
        for e in expected_events + actual_events:
            e.get("object", {}).pop("_bookmark", None)
    elif "body" in exp:
        if "body" not in act:
            comparator.fail("body", f"expected JSON, got {actual.text!r}")
        else:
            comparator.value(exp["body"], act["body"], ["body"])
    elif "bodyText" in exp and exp["bodyText"] != actual.text:
        comparator.fail("bodyText", f"expected {exp['bodyText']!r}, got {actual.text!r}")
    if expected.get("warnings", []) != actual.warnings:
        comparator.fail(
            "warnings", f"expected {expected.get('warnings', [])}, got {actual.warnings}"
        )
    try:
        bindings.check_order()
    except Mismatch as err:
        comparator.problems.append(str(err))
    return comparator.problems


def _sort_at(doc: Any, parts: list[str]) -> None:
    """Sort the array at ``parts`` by its items' JSON (a multiset comparison)."""
    for part in parts[:-1]:
        if not isinstance(doc, dict):
            return
        doc = doc.get(part)
    if isinstance(doc, dict) and isinstance(doc.get(parts[-1]), list):
        doc[parts[-1]].sort(key=lambda item: json.dumps(item, sort_keys=True))


def _trim_at(actual: Any, expected: Any, pointer: list[str]) -> Any:
    if not pointer:
        return trim(actual, expected)
    head, rest = pointer[0], pointer[1:]
    if head == "*" and isinstance(actual, list) and isinstance(expected, list):
        return [_trim_at(a, e, rest) for a, e in zip(actual, expected, strict=False)] + actual[
            len(expected) :
        ]
    if (
        isinstance(actual, dict)
        and isinstance(expected, dict)
        and head in actual
        and head in expected
    ):
        return {**actual, head: _trim_at(actual[head], expected[head], rest)}
    return actual


def _align_same_operation(expected: list[Any], actual: list[Any]) -> list[Any]:
    """``actual`` managedFields with the entries of each operation in the transcript's order.

    The API server sorts entries by operation, then time (in seconds), then manager. The
    transcript hides times behind ``<time>``, and whether two writes fell into the same
    second (then the manager name decides) depends on the pace of the recording, so within an
    operation the order is taken from the transcript; the operations' order is still checked.
    """
    if not all(isinstance(e, dict) for e in [*expected, *actual]):
        return actual

    def identity(entry: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(entry.get(k) for k in ("manager", "operation", "subresource"))

    rank = {identity(e): i for i, e in enumerate(expected)}
    out: list[Any] = []
    for _, group in itertools.groupby(actual, key=lambda e: e.get("operation")):
        out.extend(sorted(group, key=lambda e: rank.get(identity(e), 0)))
    return out


def _raw_resource_versions(path: Path) -> dict[str, str]:
    """Real resourceVersions the normalization left in request bodies (15's JSON patches
    replace ``/metadata/resourceVersion`` with a value read earlier), mapped to their
    placeholders through the same step's response in the un-normalized transcript."""
    raw_path = path.parent / "raw" / path.name
    if not raw_path.is_file():
        return {}
    mapping: dict[str, str] = {}
    steps = json.loads(path.read_text())["steps"]
    raw_steps = json.loads(raw_path.read_text())["steps"]
    for step, raw_step in zip(steps, raw_steps, strict=False):
        body = (step.get("response") or {}).get("body")
        raw_body = (raw_step.get("response") or {}).get("body")
        if isinstance(body, dict) and isinstance(raw_body, dict):
            rv = (body.get("metadata") or {}).get("resourceVersion")
            raw_rv = (raw_body.get("metadata") or {}).get("resourceVersion")
            if isinstance(rv, str) and rv.startswith("<rv:") and isinstance(raw_rv, str):
                mapping[raw_rv] = rv
    return mapping


def _unraw(body: Any, raw_rvs: dict[str, str]) -> Any:
    if not isinstance(body, list) or not raw_rvs:
        return body
    return [
        {**op, "value": _unraw_value(op.get("value"), raw_rvs)}
        if isinstance(op, dict) and op.get("path") == "/metadata/resourceVersion"
        else op
        for op in body
    ]


def _unraw_value(value: Any, raw_rvs: dict[str, str]) -> Any:
    return raw_rvs.get(value, value) if isinstance(value, str) else value


def _optional(event: dict[str, Any]) -> bool:
    if event.get("type") != "BOOKMARK":
        return False
    annotations = (event.get("object") or {}).get("metadata", {}).get("annotations") or {}
    return annotations.get(INITIAL_END) != "true"


class Replay:
    """One scenario against one fresh emulator (in a background thread, manual clock)."""

    def __init__(self, path: Path, *, rbac: bool | None = None) -> None:
        """``rbac``: RBAC mode on or off; by default on for scenarios with ServiceAccount tokens."""
        self.doc = json.loads(path.read_text())
        self.steps: list[dict[str, Any]] = self.doc["steps"]
        self.clock = FakeClock()
        self.cluster = ClusterThread(
            token=TOKEN,
            clock=self.clock,
            settings=Settings(bookmark_interval=60.0),
            rbac=bool(self.doc.get("placeholders", {}).get("tokens")) if rbac is None else rbac,
        )
        self.cluster.start()
        self.bindings = Bindings()
        self.bindings.host = self.cluster.url.removeprefix("http://")
        self.done = 0
        self.results: dict[int, list[str]] = {}
        self.raw_rvs = _raw_resource_versions(path)

    def close(self) -> None:
        self.cluster.stop()

    def result(self, index: int) -> list[str]:
        while self.done <= index:
            step = self.steps[self.done]
            try:
                problems = asyncio.run(self._step(step))
            except Mismatch as err:
                problems = [str(err)]
            self.results[self.done] = problems
            self.done += 1
        return self.results[index]

    # --- requests -----------------------------------------------------------------------------

    def _request(self, request: dict[str, Any]) -> tuple[str, str, dict[str, str], bytes | None]:
        path = self.bindings.substitute(request["path"])
        query = self.bindings.substitute(request.get("query") or {})
        qs = "&".join(
            f"{urllib.parse.quote(k, safe='')}={urllib.parse.quote(str(v), safe='')}"
            for k, v in query.items()
        )
        url = self.cluster.url + path + (f"?{qs}" if qs else "")
        headers = {"User-Agent": USER_AGENT, **(request.get("headers") or {})}
        auth = request.get("auth") or ""
        named = TOKEN_AUTH.search(auth)
        if named:
            bearer = self.bindings.substitute(named.group(0))
        else:
            bearer = "not-a-valid-token" if auth else TOKEN
        headers["Authorization"] = f"Bearer {bearer}"
        body: bytes | None = None
        if "body" in request:
            raw = self.bindings.substitute(_unraw(request["body"], self.raw_rvs))
            body = (
                raw.encode()
                if isinstance(raw, str)
                else json.dumps(raw, separators=(",", ":")).encode()
            )
        return request["method"], url, headers, body

    async def _send(self, session: aiohttp.ClientSession, request: dict[str, Any]) -> Observed:
        method, url, headers, body = self._request(request)
        task = asyncio.ensure_future(session.request(method, url, headers=headers, data=body))
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.2)
            if done:
                break
            self._advance_time()
        async with task.result() as response:
            raw = await response.read()
            return self._observed(response, raw)

    def _observed(self, response: aiohttp.ClientResponse, raw: bytes) -> Observed:
        content_type = response.headers.get("Content-Type", "")
        observed = Observed(
            response.status, content_type, warnings=response.headers.getall("Warning", [])
        )
        if content_type.startswith("application/json"):
            try:
                observed.body = json.loads(raw)
            except ValueError:
                observed.text = raw.decode()
        else:
            observed.text = raw.decode()
        return observed

    def _advance_time(self) -> None:
        """Let a second of the emulator's (fake) time pass: its timers fire promptly."""
        self.cluster.call(self.clock.advance, 1.0)

    # --- steps --------------------------------------------------------------------------------

    async def _step(self, step: dict[str, Any]) -> list[str]:
        kind = step.get("kind", "request")
        async with aiohttp.ClientSession() as session:
            if kind == "action":
                await self._action(session, step)
                return []
            if kind == "watch":
                return await self._watch(session, step)
            if kind == "poll":
                return await self._poll(session, step)
            observed = await self._send(session, step["request"])
            return compare_response(step["response"], observed, self.bindings, step)

    async def _poll(self, session: aiohttp.ClientSession, step: dict[str, Any]) -> list[str]:
        if "compacted" in step.get("until", ""):
            await self._background_write(session)
            self.cluster.call(self.cluster.cluster.faults.compact)  # type: ignore[union-attr]
        problems: list[str] = []
        for attempt in range(100):
            observed = await self._send(session, step["request"])
            trial = self.bindings.copy()
            problems = compare_response(step["response"], observed, trial, step)
            if not problems:
                self.bindings.values, self.bindings.loose, self.bindings.max_rv = (
                    trial.values,
                    trial.loose,
                    trial.max_rv,
                )
                return []
            if attempt % 5 == 4:
                self._advance_time()
            await asyncio.sleep(0.01)
        return compare_response(step["response"], observed, self.bindings, step)

    async def _background_write(self, session: aiohttp.ClientSession) -> None:
        """A write elsewhere, as a real control plane's lease renewals make between steps."""
        url = f"{self.cluster.url}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
        name = f"background-{self.bindings.max_rv}"
        body = {"metadata": {"name": name}, "spec": {"holderIdentity": "conformance"}}
        headers = {"Authorization": f"Bearer {TOKEN}", "User-Agent": USER_AGENT}
        async with session.post(url, json=body, headers=headers) as response:
            assert response.status == 201, await response.text()

    async def _action(self, session: aiohttp.ClientSession, step: dict[str, Any]) -> None:
        """06's wait-and-churn, replaced by writes and the emulator's history-expiry hook."""
        namespace = self.steps[0]["request"]["body"]["metadata"]["name"]
        base = f"{self.cluster.url}/api/v1/namespaces/{namespace}/configmaps"
        headers = {
            "Authorization": f"Bearer {TOKEN}",
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
        }
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "churn"},
            "data": {"i": "0"},
        }
        async with session.post(base, json=body, headers=headers) as response:
            assert response.status == 201, await response.text()
        patch_headers = {**headers, "Content-Type": "application/merge-patch+json"}
        for i in (1, 2, 149):
            async with session.patch(
                f"{base}/churn", json={"data": {"i": str(i)}}, headers=patch_headers
            ) as response:
                assert response.status == 200, await response.text()
        self.cluster.call(self.cluster.cluster.faults.expire_history)  # type: ignore[union-attr]

    async def _watch(self, session: aiohttp.ClientSession, step: dict[str, Any]) -> list[str]:
        expected = step["response"]
        method, url, headers, body = self._request(step["request"])
        response = await session.request(method, url, headers=headers, data=body)
        try:
            if "events" not in expected:
                observed = self._observed(response, await response.read())
                return compare_response(expected, observed, self.bindings, step)
            problems: list[str] = []
            events: list[dict[str, Any]] = []
            reader = asyncio.ensure_future(self._read_events(response, events))
            async with aiohttp.ClientSession() as other:
                for i, during in enumerate(step.get("during") or []):
                    if during.get("kind") == "poll":
                        found = await self._poll(other, during)
                    else:
                        found = compare_response(
                            during["response"],
                            await self._send(other, during["request"]),
                            self.bindings,
                            during,
                        )
                    problems.extend(f"during[{i}] {p}" for p in found)
            wanted = [e for e in expected["events"] if not _optional(e)]
            await self._wait_for(events, len(wanted))
            closed = False
            if expected.get("end", {}).get("by") == "server":
                timeout = float(
                    (step["request"].get("query") or {}).get("timeoutSeconds", "0") or 0
                )
                if not reader.done():
                    self.cluster.call(self.clock.advance, timeout + 1)
                try:
                    await asyncio.wait_for(asyncio.shield(reader), 3)
                    closed = True
                except TimeoutError:
                    problems.append("the server did not end the stream")
            reader.cancel()
            observed = Observed(
                response.status,
                response.headers.get("Content-Type", ""),
                events=events,
                closed_by_server=closed,
            )
            problems.extend(compare_response(expected, observed, self.bindings, step))
            return problems
        finally:
            response.close()

    @staticmethod
    async def _read_events(response: aiohttp.ClientResponse, events: list[dict[str, Any]]) -> None:
        while True:
            line = await response.content.readline()
            if not line:
                return
            if line.strip():
                events.append(json.loads(line))

    @staticmethod
    async def _wait_for(events: list[dict[str, Any]], count: int) -> None:
        for _ in range(150):
            if len([e for e in events if not _optional(e)]) >= count:
                return
            await asyncio.sleep(0.02)
