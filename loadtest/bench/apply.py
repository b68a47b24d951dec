"""Benchmark: dynamic apply (the update check and the 3-way merge) and Go-compatible JSON.

Inputs: ``../shared/vectors/merge_bench_inputs.json``, a 12.6 KB running Pod (managedFields,
status, the last-applied annotation) and two desired versions: the steady state (equal to
last-applied) and a one-field change.

Baseline, measured in the same run: ``reference_merge`` / ``reference_update``, Metacontroller's
Go code transliterated line by line as a straightforward port would be: deep-copy observed,
mutate it in place, compare with ``==``. It is also the oracle the unit tests hold
``workers.apply`` to. For scale: Metacontroller itself does the update check on these inputs
at about 1,000/s per core, the merge alone at about 5,000/s.

Targets: steady-state ``apply_update`` >= 15,000/s, one-field change >= 3,000/s, both >= 3x the
baseline; ``gojson.dumps`` within 3x of ``orjson.dumps`` (sorted keys, as Go's output is).

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
    out, added = [], set()
    for item in dest:
        k = _key(item[key])
        if k in dest_map:
            out.append(dest_map[k])
            added.add(k)
    for item in desired or []:
        k = _key(item[key])
        if k not in added:
            out.append(dest_map[k])
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


def main(quick: bool) -> None:
    inputs = json.loads(INPUTS.read_text())
    observed, last = inputs["observed"], inputs["lastApplied"]
    cases = {"steady state": inputs["desired_steady"], "one-field change": inputs["desired_change"]}
    per_core = _PerCore(quick=quick)

    header("apply_update: the full update check of one child (Go Metacontroller: ~1,000/s)")
    targets = {"steady state": ">= 15,000/s, >= 3x", "one-field change": ">= 3,000/s, >= 3x"}
    for name, desired in cases.items():
        assert apply.apply_update(observed, desired)[1] == reference_update(observed, desired)[1]
        base = per_core(partial(reference_update, observed, desired))
        fast = per_core(partial(apply.apply_update, observed, desired))
        row(f"baseline (deep copy + merge), {name}", base, "/s")
        row(f"apply_update, {name}", fast, "/s", baseline=base, target=targets[name])

    header("merge alone (Go Metacontroller: ~5,000/s)")
    for name, desired in cases.items():
        base = per_core(partial(reference_merge, observed, last, desired))
        fast = per_core(partial(apply.merge, observed, last, desired))
        row(f"baseline merge, {name}", base, "/s")
        row(f"merge, {name}", fast, "/s", baseline=base)

    header("Go JSON encoding of the 2.6 KB desired Pod")
    desired = inputs["desired_steady"]
    plain = per_core(partial(orjson.dumps, desired))
    sorted_ = per_core(partial(orjson.dumps, desired, option=orjson.OPT_SORT_KEYS))
    ours = per_core(partial(gojson.dumps, desired))
    row("orjson.dumps", plain, "/s")
    row("orjson.dumps, sorted keys", sorted_, "/s")
    row(
        "gojson.dumps vs orjson.dumps, sorted keys",
        ours,
        "/s",
        baseline=sorted_,
        target="x >= 0.33",
    )
    row("gojson.dumps vs orjson.dumps", ours, "/s", baseline=plain)
    print(
        f"\n  rates are per CPU-second of one core; this process got {min(per_core.shares):.0%}"
        f" to {max(per_core.shares):.0%} of a core while measuring",
        flush=True,
    )
