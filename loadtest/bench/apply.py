"""Benchmark: dynamic apply (the update check and the 3-way merge), Go-compatible JSON and
server-side apply bodies.

Inputs: ``../shared/vectors/merge_bench_inputs.json``, a 12.6 KB running Pod (managedFields,
status, the last-applied annotation) and two desired versions: the steady state (equal to
last-applied) and a one-field change.

Baselines, measured in the same run and checked to give the same answers:

- ``plain_merge`` / ``plain_update``: a straightforward dict-based 3-way merge written plainly
  (build new dicts and lists, share the subtrees it does not touch, no deep copy), with the
  update check around it (strip the annotation, revert the system fields and status, record
  the new annotation, compare with ``==``). What a careful first implementation would be.
- the decode floor: ``orjson.loads`` of the observed object's JSON. Any controller decodes
  the object it compares against at least once, so no update check can be much cheaper.

``reference_merge`` / ``reference_update`` are Metacontroller's Go code transliterated line by
line (deep-copy observed, mutate it in place): the oracle the unit tests hold
``workers.apply`` to, not a baseline. Figures for Metacontroller itself (Go) are not measured
here; they are printed as labelled references only, never as ratios.

Targets: steady-state ``apply_update`` >= 15,000/s, one-field change >= 3,000/s;
``gojson.dumps`` within 3x of ``orjson.dumps`` (sorted keys, as Go's output is).

Server-side apply bodies: ``applybody.encode`` (the escapes that keep the API server's YAML
reading from changing strings) against the plain ``orjson.dumps`` it replaced, on the Pods
above with nothing to escape and with an annotation to escape.

Rates are per core: calls per wall-clock second divided by the share of a core the process got
while measuring (printed at the end), so that other load on the machine does not count.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from loadtest.bench._report import header, rate, row
from proto.api import gojson
from proto.kube import applybody
from workers import apply

INPUTS = Path(__file__).resolve().parents[2].parent / "shared/vectors/merge_bench_inputs.json"
_KNOWN_KEYS = ("containerPort", "port", "mountPath", "name", "uid", "ip", "path")


def reference_merge(observed: dict[str, Any], last: Any, desired: Any) -> Any:
    """``apply.Merge`` as written in Go: deep copy, then merge in place."""
    return _merge(copy.deepcopy(observed), last, desired)


def _merge(dest: Any, last: Any, desired: Any) -> Any:
    if isinstance(dest, dict):
        return _merge_object(
            dest,
            last if isinstance(last, dict) else None,
            desired if isinstance(desired, dict) else None,
        )
    if isinstance(dest, list):
        return _merge_array(
            dest,
            last if isinstance(last, list) else None,
            desired if isinstance(desired, list) else None,
        )
    return desired


def _merge_object(dest: dict[str, Any], last: Any, desired: Any) -> dict[str, Any]:
    for key in last or {}:
        if desired is None or key not in desired:
            dest.pop(key, None)
    for key, value in (desired or {}).items():
        dest[key] = _merge(dest.get(key), (last or {}).get(key), value)
    return dest


def _merge_array(dest: list[Any], last: Any, desired: Any) -> Any:
    key = _detect_key(dest, last or [], desired or [])
    if key is None:
        return desired
    dest_map = {_key(item[key]): item for item in dest}
    last_map = {_key(item[key]): item for item in last or []}
    desired_map = {_key(item[key]): item for item in desired or []}
    _merge_object(dest_map, last_map, desired_map)
    return _in_order(dest_map, dest, desired or [], key)


def _in_order(
    merged: dict[str, Any], observed: list[Any], desired: list[Any], key: str
) -> list[Any]:
    """The items of a list merged by ``key`` (``merged``, by ``_key``): those of ``observed``
    still there, in its order, then the new ones in the order of ``desired``."""
    out, added = [], set()
    for item in observed:
        k = _key(item[key])
        if k in merged:
            out.append(merged[k])
            added.add(k)
    for item in desired:
        k = _key(item[key])
        if k not in added:
            out.append(merged[k])
            added.add(k)
    return out


def _detect_key(*lists: list[Any]) -> str | None:
    common: set[str] | None = None
    for items in lists:
        for item in items:
            if not isinstance(item, dict):
                return None
            common = set(item) if common is None else common & set(item)
    return next((k for k in _KNOWN_KEYS if common and k in common), None)


def _key(value: Any) -> str:
    return value if isinstance(value, str) else gojson.sprint(value)


def reference_update(observed: dict[str, Any], desired: dict[str, Any]) -> tuple[Any, bool]:
    """``ApplyUpdate`` and the no-op check, transliterated: copies, merge, revert, compare."""
    desired = copy.deepcopy(desired)
    annotations = observed.get("metadata", {}).get("annotations") or {}
    recorded = annotations.get(apply.LAST_APPLIED_ANNOTATION, "")
    last = gojson.loads(recorded) if recorded else None
    desired_annotations = desired.get("metadata", {}).get("annotations") or {}
    if apply.LAST_APPLIED_ANNOTATION in desired_annotations:
        del desired_annotations[apply.LAST_APPLIED_ANNOTATION]
        if not desired_annotations:
            del desired["metadata"]["annotations"]
    merged = reference_merge(observed, last, desired)
    for field in apply.SYSTEM_FIELDS:
        if field in observed.get("metadata", {}):
            merged.setdefault("metadata", {})[field] = copy.deepcopy(observed["metadata"][field])
        elif isinstance(merged.get("metadata"), dict):
            merged["metadata"].pop(field, None)
    if "status" in observed:
        merged["status"] = copy.deepcopy(observed["status"])
    else:
        merged.pop("status", None)
    metadata = merged.setdefault("metadata", {})
    metadata["annotations"] = dict(metadata.get("annotations") or {})
    metadata["annotations"][apply.LAST_APPLIED_ANNOTATION] = gojson.dumps(desired).decode()
    return merged, merged != observed


def plain_merge(observed: Any, last: Any, desired: Any) -> Any:
    """The 3-way merge written plainly (see the module docstring): objects merge key by key,
    keys in ``last`` but not in ``desired`` are removed, lists of objects with a merge key
    (``_KNOWN_KEYS``) merge by key, anything else is replaced by ``desired``. Where types
    differ it answers as Metacontroller does: an observed object meeting a desired non-object
    keeps its keys (less those in ``last``), an observed list meeting a non-list becomes null."""
    if isinstance(observed, dict):
        return _plain_object(
            observed,
            last if isinstance(last, dict) else {},
            desired if isinstance(desired, dict) else {},
        )
    if isinstance(observed, list):
        return _plain_list(
            observed,
            last if isinstance(last, list) else [],
            desired if isinstance(desired, list) else [],
            desired if isinstance(desired, list) else None,  # Go's typed nil: null
        )
    return desired


def _plain_object(
    observed: dict[Any, Any], last: dict[Any, Any], desired: dict[Any, Any]
) -> dict[Any, Any]:
    out = {k: v for k, v in observed.items() if k not in last or k in desired}
    for key, value in desired.items():
        out[key] = plain_merge(observed.get(key), last.get(key), value)
    return out


def _plain_list(observed: list[Any], last: list[Any], desired: list[Any], original: Any) -> Any:
    key = _detect_key(observed, last, desired)
    if key is None:
        return original
    merged = _plain_object(
        {_key(item[key]): item for item in observed},
        {_key(item[key]): item for item in last},
        {_key(item[key]): item for item in desired},
    )
    return _in_order(merged, observed, desired, key)


def plain_update(observed: dict[str, Any], desired: dict[str, Any]) -> tuple[Any, bool]:
    """The update check around ``plain_merge``: the merged object and whether it differs."""
    observed_meta = observed.get("metadata", {})
    recorded = (observed_meta.get("annotations") or {}).get(apply.LAST_APPLIED_ANNOTATION, "")
    last = orjson.loads(recorded) if recorded else None
    desired_meta = desired.get("metadata", {})
    desired_annotations = desired_meta.get("annotations") or {}
    if apply.LAST_APPLIED_ANNOTATION in desired_annotations:
        rest = {k: v for k, v in desired_annotations.items() if k != apply.LAST_APPLIED_ANNOTATION}
        desired_meta = {k: v for k, v in desired_meta.items() if k != "annotations"}
        if rest:
            desired_meta["annotations"] = rest
        desired = {**desired, "metadata": desired_meta}
    merged = plain_merge(observed, last, desired)
    metadata = dict(merged.get("metadata") or {})
    for field in apply.SYSTEM_FIELDS:
        if field in observed_meta:
            metadata[field] = observed_meta[field]
        else:
            metadata.pop(field, None)
    merged = {k: v for k, v in merged.items() if k != "status"}
    if "status" in observed:
        merged["status"] = observed["status"]
    annotations = dict(metadata.get("annotations") or {})
    annotations[apply.LAST_APPLIED_ANNOTATION] = gojson.dumps(desired).decode()
    merged["metadata"] = {**metadata, "annotations": annotations}
    return merged, merged != observed


class _PerCore:
    """``rate`` scaled to a whole core: calls per wall-clock second divided by the share of a
    core the process got meanwhile, since other processes may share the machine."""

    def __init__(self, *, quick: bool) -> None:
        self.seconds, self.repeat = (0.05, 1) if quick else (1.0, 5)
        self.shares: list[float] = []

    def __call__(self, fn: Callable[[], object]) -> float:
        wall, cpu = time.perf_counter(), time.process_time()
        calls = rate(fn, seconds=self.seconds, repeat=self.repeat)
        share = min(1.0, (time.process_time() - cpu) / (time.perf_counter() - wall))
        self.shares.append(share)
        return calls / share


def _reference(text: str) -> None:
    """A figure not measured in this run: printed as such, never as a ratio."""
    print(f"  {'reference, not measured here: ' + text}", flush=True)


def _apply_bodies(inputs: dict[str, Any]) -> dict[str, Any]:
    """Pods to apply: nothing to escape (ASCII; non-ASCII text), then text to escape."""

    def annotated(pod: dict[str, Any], text: str) -> dict[str, Any]:
        metadata = pod["metadata"]
        annotations = {**(metadata.get("annotations") or {}), "example.com/note": text}
        return {**pod, "metadata": {**metadata, "annotations": annotations}}

    desired, observed = inputs["desired_steady"], inputs["observed"]
    return {
        "2.6 KB Pod": desired,
        "12.6 KB Pod": observed,
        "2.6 KB Pod, non-ASCII note": annotated(desired, "été “quoted” — 100 €"),
        "2.6 KB Pod, note to escape": annotated(desired, "a<b & c>d été \u2028 end"),
        "12.6 KB Pod, note to escape": annotated(observed, "a<b & c>d été \u2028 end"),
    }


def main(quick: bool) -> None:
    inputs = json.loads(INPUTS.read_text())
    observed, last = inputs["observed"], inputs["lastApplied"]
    cases = {"steady state": inputs["desired_steady"], "one-field change": inputs["desired_change"]}
    per_core = _PerCore(quick=quick)
    for desired in cases.values():
        expected = apply.apply_update(observed, desired)
        assert plain_update(observed, desired) == expected == reference_update(observed, desired)
        assert plain_merge(observed, last, desired) == apply.merge(observed, last, desired)

    header("decode floor: orjson.loads of the observed Pod (12.6 KB)")
    encoded = orjson.dumps(observed)
    floor = per_core(partial(orjson.loads, encoded))
    row("orjson.loads, observed", floor, "/s")

    header("apply_update: the full update check of one child")
    targets = {"steady state": ">= 15,000/s", "one-field change": ">= 3,000/s"}
    for name, desired in cases.items():
        base = per_core(partial(plain_update, observed, desired))
        fast = per_core(partial(apply.apply_update, observed, desired))
        row(f"baseline: plain_update, {name}", base, "/s")
        row(f"apply_update, {name}", fast, "/s", baseline=base, vs="plain", target=targets[name])
        row(f"apply_update, {name}", fast, "/s", baseline=floor, vs="decode floor")
    _reference("Metacontroller (Go) does this update check at about 1,000/s per core")

    header("merge alone")
    for name, desired in cases.items():
        base = per_core(partial(plain_merge, observed, last, desired))
        fast = per_core(partial(apply.merge, observed, last, desired))
        row(f"baseline: plain_merge, {name}", base, "/s")
        row(f"merge, {name}", fast, "/s", baseline=base, vs="plain")
    _reference("Metacontroller (Go) merges these inputs at about 5,000/s per core")

    header("Go JSON encoding of the 2.6 KB desired Pod")
    desired = inputs["desired_steady"]
    plain = per_core(partial(orjson.dumps, desired))
    sorted_ = per_core(partial(orjson.dumps, desired, option=orjson.OPT_SORT_KEYS))
    ours = per_core(partial(gojson.dumps, desired))
    row("orjson.dumps", plain, "/s")
    row("orjson.dumps, sorted keys", sorted_, "/s")
    row(
        "gojson.dumps",
        ours,
        "/s",
        baseline=sorted_,
        vs="orjson sorted",
        target="x >= 0.33",
    )
    row("gojson.dumps", ours, "/s", baseline=plain, vs="orjson")

    header("server-side apply bodies: applybody.encode against plain orjson.dumps")
    for name, body in _apply_bodies(inputs).items():
        plain = per_core(partial(orjson.dumps, body))
        ours = per_core(partial(applybody.encode, body))
        row(f"orjson.dumps, {name}", plain, "/s")
        row(f"applybody.encode, {name}", ours, "/s", baseline=plain, vs="orjson")
    print(
        f"\n  rates are per CPU-second of one core; this process got {min(per_core.shares):.0%}"
        f" to {max(per_core.shares):.0%} of a core while measuring",
        flush=True,
    )
