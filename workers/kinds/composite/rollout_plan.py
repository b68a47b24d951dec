"""The rollout planner: which revision each rolling child belongs to after one sync. Pure.

Metacontroller's ``syncRevisions`` / ``syncRollingUpdate`` (``composite/controller_revision.go``,
``rolling_update.go``), split in two steps around the hook calls:

1. ``arrange(revisions, latest_patch, new_name)``: the revision whose ``parentPatch`` deep-equals
   the live parent's patch is the latest (a new, unwritten one named ``new_name`` when none
   does); the others are older. Among several with the latest patch, the one with the highest
   history number is kept and the rest are deleted. The latest gets the next history number
   unless it already has the highest. The reconciler then calls the sync hook once for the
   latest revision and once for each older revision that still owns children (a childless
   one has nothing to decide), each with the parent materialized from that revision's patch.
2. ``plan(arrangement, desired, observed, strategies, history_limit)``:

   - Claims are cleaned (``syncRevisionClaims``): claims of child kinds that no longer roll
     and of children the latest answer no longer wants are dropped; a child claimed twice
     stays with the first claimant (the latest revision first).
   - The latest revision takes every desired rolling child no revision claims, and every
     child whose update to the latest desired state would change nothing but its
     ``controller-revision-hash`` label (``REVISION_HASH_LABEL``, which names the revision a
     child belongs to, so it differs on every child of an older one).
   - The latest answer's children are walked **in the order the hook returned them**: the
     first rolling child not on the latest revision moves to it, but only when every child
     already on the latest revision exists, is up to date (its ``controller-revision-hash``
     label aside: a label someone removed or changed is put back in place by this sync's
     write, so the child does not count as not updated meanwhile), has
     ``status.observedGeneration >= metadata.generation`` where it reports a positive one
     (``RollingInPlace``), and shows every ``statusChecks.conditions`` entry. At most one
     child moves per pass.
   - The ``Updated`` condition says what happened, with Metacontroller's reasons and
     messages: ``False/RolloutWaiting`` (the first failed check), ``False/RolloutProgressing``
     (``updating <Kind> <name>``) or ``True/OnLatestRevision`` (``latest ControllerRevision:
     <name>``).
   - Older revisions left without children are history: the ``history_limit`` with the
     highest numbers are kept, the rest deleted (Metacontroller keeps none: limit 0).
   - Each desired child is built from the answer of the revision that owns it: the latest
     answer, with the children an older revision still owns replaced by that revision's
     version. Non-rolling children always come from the latest answer.

Children are named relative to the parent: ``name`` when in the parent's namespace (or
cluster-scoped), ``namespace/name`` otherwise. Metacontroller keys observed children
``namespace/name`` and revision claims by bare name, so its rollouts of namespaced parents
stall after one child; here both sides use the same key.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from proto.api import names
from proto.api.controllers import StatusCheck, UpdateMethod
from proto.api.revisions import REVISION_HASH_LABEL, ChildNames, Revision
from workers.apply import ApplyError, changes_only_labels, deep_equal

ChildId = tuple[str, str, str]
"""``(apiGroup, kind, relative name)``."""
GroupKind = tuple[str, str]
Updated = Callable[[Mapping[str, Any] | None, Mapping[str, Any]], bool]
"""Whether an observed child (None: missing) already holds a desired state: under server-side
apply ``workers.apply.ssa.up_to_date``; under dynamic apply (None) the plan asks
``workers.apply.changes_only_labels``."""
_HASH_LABEL = frozenset((REVISION_HASH_LABEL,))


@dataclass(frozen=True, slots=True)
class Strategy:
    """The ``updateStrategy`` of one child kind."""

    method: UpdateMethod
    checks: tuple[StatusCheck, ...] = ()

    @property
    def rolling(self) -> bool:
        return self.method.rolling


@dataclass(frozen=True, slots=True)
class Desired:
    """One child of a hook answer."""

    id: ChildId
    obj: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Arrangement:
    latest: Revision
    older: tuple[Revision, ...]
    """Highest history number first."""
    duplicates: tuple[Revision, ...] = ()
    """Live revisions with the latest patch that lost to ``latest``: to delete."""

    @property
    def hooked(self) -> tuple[Revision, ...]:
        """The revisions whose parent the sync hook is called with: the latest, then each
        older one that owns children."""
        return (self.latest, *(r for r in self.older if r.child_count()))


def _order(revision: Revision) -> tuple[int, str, str]:
    obj = revision.obj or {}
    created = str((obj.get("metadata") or {}).get("creationTimestamp") or "")
    return (revision.number, created, revision.name)


def arrange(
    revisions: Sequence[Revision], latest_patch: Mapping[str, Any], new_name: str
) -> Arrangement:
    """Step 1 (see the module docstring)."""
    ordered = sorted(revisions, key=_order, reverse=True)
    matching = [r for r in ordered if deep_equal(r.patch, latest_patch)]
    older = tuple(r for r in ordered if not deep_equal(r.patch, latest_patch))
    top = max((r.number for r in ordered), default=0)
    if matching:
        latest, duplicates = matching[0], tuple(matching[1:])
    else:
        latest, duplicates = Revision(new_name, latest_patch), ()
    others = [r.number for r in (*older, *duplicates)]
    if latest.number == 0 or any(n >= latest.number for n in others):
        latest = replace(latest, number=top + 1)
    return Arrangement(latest, older, duplicates)


@dataclass(frozen=True, slots=True)
class Rollout:
    """What one sync decides (step 2)."""

    revisions: tuple[Revision, ...]
    """The revisions to keep, as they must be written: the latest first."""
    deletes: tuple[Revision, ...]
    """Live revisions to delete."""
    children: tuple[tuple[Desired, str | None], ...]
    """The desired children in the latest answer's order, each with the name of the
    revision it belongs to (``None`` for a child kind that does not roll)."""
    condition: dict[str, Any]
    """The ``Updated`` condition for the parent's status."""
    moved: ChildId | None = None
    """The child that moved to the latest revision in this pass (one that needs a write)."""
    waiting: str | None = None
    """Why the rollout waits, when it does."""

    @property
    def latest(self) -> Revision:
        return self.revisions[0]


@dataclass(slots=True)
class _Claims:
    """Mutable claims during one plan: revision name -> group/kind -> names (ordered)."""

    by_revision: dict[str, dict[GroupKind, list[str]]] = field(default_factory=dict)
    owner: dict[ChildId, str] = field(default_factory=dict)

    def add(self, revision: str, child: ChildId) -> None:
        group, kind, name = child
        listed = self.by_revision.setdefault(revision, {}).setdefault((group, kind), [])
        if name not in listed:
            listed.append(name)
        self.owner[child] = revision

    def remove(self, revision: str, child: ChildId) -> None:
        group, kind, name = child
        listed = self.by_revision.get(revision, {}).get((group, kind))
        if listed and name in listed:
            listed.remove(name)

    def children(self, revision: str) -> ChildNames:
        kinds = self.by_revision.get(revision, {})
        return tuple((g, k, tuple(n)) for (g, k), n in kinds.items() if n)


def plan(
    arrangement: Arrangement,
    *,
    desired: Mapping[str, Sequence[Desired]],
    observed: Mapping[ChildId, Mapping[str, Any]],
    strategies: Mapping[GroupKind, Strategy],
    history_limit: int,
    updated: Updated | None = None,
) -> Rollout:
    """Step 2 (see the module docstring). ``desired`` holds the answer of each revision in
    ``arrangement.hooked``, by revision name; ``observed`` the claimed children; ``updated``
    the "already updated" check of the apply strategy (default: dynamic apply's)."""
    latest = arrangement.latest
    latest_desired = desired[latest.name]
    wanted = {d.id: d for d in latest_desired}

    def rolling(group: str, kind: str) -> bool:
        strategy = strategies.get((group, kind))
        return strategy is not None and strategy.rolling

    claims = _Claims()
    for revision in (latest, *arrangement.older):
        claims.by_revision[revision.name] = {}
        for group, kind, listed in revision.children:
            if not rolling(group, kind):
                continue
            for name in listed:
                child = (group, kind, name)
                if child in wanted and child not in claims.owner:
                    claims.add(revision.name, child)

    for child in wanted:
        if not rolling(child[0], child[1]):
            continue
        owner = claims.owner.get(child)
        if owner is None:
            claims.add(latest.name, child)
        elif owner != latest.name:
            current = observed.get(child)
            if current is not None and _holds_or_not(current, wanted[child], updated):
                claims.remove(owner, child)
                claims.add(latest.name, child)

    moved: ChildId | None = None
    waiting: str | None = None
    condition = _condition(
        "True", names.REASON_ON_LATEST_REVISION, f"latest ControllerRevision: {latest.name}"
    )
    for item in latest_desired:
        child = item.id
        if not rolling(child[0], child[1]) or claims.owner.get(child) == latest.name:
            continue
        waiting = _blocker(
            claims.children(latest.name), wanted, observed, strategies, updated=updated
        )
        if waiting is not None:
            condition = _condition("False", names.REASON_ROLLOUT_WAITING, waiting)
            break
        claims.remove(claims.owner[child], child)
        claims.add(latest.name, child)
        moved = child
        condition = _condition(
            "False", names.REASON_ROLLOUT_PROGRESSING, f"updating {child[1]} {child[2]}"
        )
        break

    kept = [replace(latest, children=claims.children(latest.name))]
    history: list[Revision] = []
    for revision in arrangement.older:
        now = replace(revision, children=claims.children(revision.name))
        (kept if now.children else history).append(now)
    kept += history[: max(history_limit, 0)]
    deletes = tuple(history[max(history_limit, 0) :]) + arrangement.duplicates

    children: list[tuple[Desired, str | None]] = []
    for item in latest_desired:
        owner = claims.owner.get(item.id) if rolling(item.id[0], item.id[1]) else None
        version = item
        if owner is not None and owner != latest.name:
            version = _find(desired.get(owner, ()), item.id) or item
        children.append((version, owner))
    return Rollout(tuple(kept), tuple(deletes), tuple(children), condition, moved, waiting)


def labelled(obj: Mapping[str, Any], value: str | None) -> dict[str, Any]:
    """``obj`` with its ``REVISION_HASH_LABEL`` set to ``value`` (removed when None); shallow,
    and ``obj`` itself (as a dict) when it already is."""
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    labels = metadata.get("labels")
    labels = labels if isinstance(labels, dict) else {}
    if labels.get(REVISION_HASH_LABEL) == value:
        return dict(obj)
    if value is None:
        labels = {k: v for k, v in labels.items() if k != REVISION_HASH_LABEL}
    else:
        labels = {**labels, REVISION_HASH_LABEL: value}
    return {**obj, "metadata": {**metadata, "labels": labels}}


def _as_labelled(current: Mapping[str, Any], wanted: Desired) -> dict[str, Any]:
    """``wanted`` with the revision label ``current`` has (or none when it has none)."""
    metadata = current.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    value = labels.get(REVISION_HASH_LABEL) if isinstance(labels, Mapping) else None
    return labelled(wanted.obj, value if isinstance(value, str) else None)


def _find(answer: Sequence[Desired], child: ChildId) -> Desired | None:
    return next((d for d in answer if d.id == child), None)


def _condition(status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": names.CONDITION_UPDATED, "status": status, "reason": reason, "message": message}


def _holds(current: Mapping[str, Any], wanted: Desired, updated: Updated | None) -> bool:
    """Whether ``current`` holds ``wanted``, its ``REVISION_HASH_LABEL`` aside: a label someone
    removed or changed is repaired in place by this sync's write, so it never counts as a
    difference. Raises ``ApplyError`` when dynamic apply cannot compute the update."""
    if updated is not None:
        return updated(current, _as_labelled(current, wanted))
    return changes_only_labels(dict(current), dict(wanted.obj), _HASH_LABEL)


def _holds_or_not(current: Mapping[str, Any], wanted: Desired, updated: Updated | None) -> bool:
    """``_holds``, False when it cannot be computed."""
    try:
        return _holds(current, wanted, updated)
    except ApplyError:
        return False


def _blocker(
    on_latest: ChildNames,
    wanted: Mapping[ChildId, Desired],
    observed: Mapping[ChildId, Mapping[str, Any]],
    strategies: Mapping[GroupKind, Strategy],
    *,
    updated: Updated | None,
) -> str | None:
    """Why the rollout may not move another child (``shouldContinueRolling``), or None."""
    for group, kind, listed in on_latest:
        strategy = strategies.get((group, kind))
        if strategy is None or not strategy.rolling:
            continue
        for name in listed:
            child = observed.get((group, kind, name))
            if child is None:
                return f"missing child {kind} {name}"
            try:
                different = not _holds(child, wanted[(group, kind, name)], updated)
            except ApplyError as err:
                return f"can't check if child {kind} {name} is updated: {err}"
            if different:
                return f"child {kind} {name} is not updated yet"
            if strategy.method is UpdateMethod.ROLLING_IN_PLACE and not _observed_latest(child):
                return (
                    f"child {kind} {name} with RollingInPlace update strategy hasn't "
                    "observed latest spec"
                )
            failed = check_status(strategy.checks, child)
            if failed is not None:
                return f"child {kind} {name} failed status check: {failed}"
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _observed_latest(child: Mapping[str, Any]) -> bool:
    status = child.get("status")
    observed = _int(status.get("observedGeneration")) if isinstance(status, Mapping) else None
    if observed is None or observed <= 0:
        return True  # not every controller reports it
    generation = _int((child.get("metadata") or {}).get("generation")) or 0
    return observed >= generation


def _quote(text: str) -> str:
    """Go's ``%q`` for the printable strings conditions hold."""
    return json.dumps(text, ensure_ascii=False)


def check_status(checks: Sequence[StatusCheck], child: Mapping[str, Any]) -> str | None:
    """The first ``statusChecks.conditions`` entry ``child`` fails, as Metacontroller words
    it (``childStatusCheck``), or None when it passes them all."""
    status = child.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for check in checks:
        found = None
        if isinstance(conditions, list):
            found = next(
                (c for c in conditions if isinstance(c, Mapping) and c.get("type") == check.type),
                None,
            )
        if found is None:
            return f"required condition type missing: {_quote(check.type)}"
        for key, wanted in (("status", check.status), ("reason", check.reason)):
            actual = found.get(key)
            actual = actual if isinstance(actual, str) else ""
            if wanted is not None and actual != wanted:
                return (
                    f"{_quote(check.type)} condition {key} is {_quote(actual)} "
                    f"(want {_quote(wanted)})"
                )
    return None


def with_condition(
    status: Mapping[str, Any] | None, condition: Mapping[str, Any]
) -> tuple[dict[str, Any], bool]:
    """``status`` (``{}`` when the hook gave none) with ``condition`` replacing the condition
    of the same type, or appended; and whether the hook had set one of that type itself."""
    result = dict(status or {})
    conditions = result.get("conditions")
    items = list(conditions) if isinstance(conditions, list) else []
    replaced = False
    for i, item in enumerate(items):
        if isinstance(item, Mapping) and item.get("type") == condition.get("type"):
            items[i] = dict(condition)
            replaced = True
            break
    else:
        items.append(dict(condition))
    result["conditions"] = items
    return result, replaced
