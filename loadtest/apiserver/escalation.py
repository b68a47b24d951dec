"""RBAC escalation prevention: a user can only grant the permissions they hold.

Pure functions after ``pkg/registry/rbac/validation`` (``Covers``, ``BreakdownRule``,
``CompactRules``, ``CompactString``) and ``ConfirmNoEscalation``'s message:

- ``breakdown`` splits a rule into atomic rules (one group, one resource, one verb, at most
  one name; or one non-resource URL and one verb).
- an owner rule ``covers`` an atomic rule when its verbs, groups, resources (``*``,
  ``*/<subresource>``), resource names (none = all) and non-resource URLs (``prefix*``)
  include it. Wildcards in the *requested* rule are matched literally: granting ``*``
  needs ``*``.
- ``missing`` lists the atomic rules no owner rule covers; ``compact`` merges those that
  differ only in verb; ``escalation_message`` renders them one per line, sorted, as
  ``{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from loadtest.apiserver.attributes import UserInfo
from loadtest.apiserver.rbac import ALL, Rule, strings

Atomic = dict[str, list[str]]


def breakdown(rule: Rule) -> list[Atomic]:
    """``BreakdownRule``: one atomic rule per group x resource x verb (x name), per URL x verb."""
    verbs = strings(rule, "verbs")
    names = strings(rule, "resourceNames")
    out: list[Atomic] = []
    for group in strings(rule, "apiGroups"):
        for resource in strings(rule, "resources"):
            for verb in verbs:
                base = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                if names:
                    out.extend({**base, "resourceNames": [n]} for n in names)
                else:
                    out.append(base)
    for url in strings(rule, "nonResourceURLs"):
        out.extend({"nonResourceURLs": [url], "verbs": [verb]} for verb in verbs)
    return out


def _resources_cover(owned: Sequence[str], wanted: Sequence[str]) -> bool:
    if ALL in owned:
        return True
    for resource in wanted:
        if resource in owned:
            continue
        if "/" not in resource or "*/" + resource.split("/", 1)[1] not in owned:
            return False
    return True


def _url_covers(owned: str, wanted: str) -> bool:
    return owned == wanted or (owned.endswith("*") and wanted.startswith(owned.rstrip("*")))


def covers(owner: Rule, atomic: Rule) -> bool:
    """``ruleCovers``: whether ``owner`` grants everything ``atomic`` grants."""
    verbs, groups = strings(owner, "verbs"), strings(owner, "apiGroups")
    names = strings(owner, "resourceNames")
    wanted_names = strings(atomic, "resourceNames")
    return (
        (ALL in verbs or all(v in verbs for v in strings(atomic, "verbs")))
        and (ALL in groups or all(g in groups for g in strings(atomic, "apiGroups")))
        and _resources_cover(strings(owner, "resources"), strings(atomic, "resources"))
        and all(
            any(_url_covers(o, w) for o in strings(owner, "nonResourceURLs"))
            for w in strings(atomic, "nonResourceURLs")
        )
        and (not names or (bool(wanted_names) and all(n in names for n in wanted_names)))
    )


def missing(owned: Iterable[Rule], requested: Iterable[Rule]) -> list[Atomic]:
    """The atomic parts of ``requested`` that no rule in ``owned`` covers (``Covers``)."""
    owner_rules = list(owned)
    return [
        atomic
        for rule in requested
        for atomic in breakdown(rule)
        if not any(covers(owner, atomic) for owner in owner_rules)
    ]


def compact(rules: Iterable[Atomic]) -> list[Atomic]:
    """``CompactRules``: atomic rules of one group/resource/name merged across verbs."""
    merged: dict[tuple[str, str, str], Atomic] = {}
    others: list[Atomic] = []
    for rule in rules:
        groups, resources = rule.get("apiGroups", []), rule.get("resources", [])
        names = rule.get("resourceNames", [])
        if rule.get("nonResourceURLs") or len(groups) != 1 or len(resources) != 1 or len(names) > 1:
            others.append(rule)
            continue
        key = (groups[0], resources[0], names[0] if names else "\0")
        if key in merged:
            merged[key]["verbs"] = [*merged[key]["verbs"], *rule.get("verbs", [])]
        else:
            merged[key] = {k: list(v) for k, v in rule.items()}
    return others + list(merged.values())


def _go_quoted(values: Sequence[str]) -> str:
    """Go's ``%q`` of a ``[]string``: ``["a" "b"]``."""
    return "[" + " ".join(_go_string(v) for v in values) + "]"


def _go_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def compact_string(rule: Mapping[str, Any]) -> str:
    """``CompactString``: ``{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}``."""
    parts = [
        f"{label}:{_go_quoted(rule[key])}"
        for label, key in (
            ("APIGroups", "apiGroups"),
            ("Resources", "resources"),
            ("NonResourceURLs", "nonResourceURLs"),
            ("ResourceNames", "resourceNames"),
            ("Verbs", "verbs"),
        )
        if rule.get(key)
    ]
    return "{" + ", ".join(parts) + "}"


def escalation_message(user: UserInfo, absent: Iterable[Atomic]) -> str:
    """The reason ``ConfirmNoEscalation`` gives, listing the missing rules."""
    lines = sorted({compact_string(rule) for rule in compact(absent)})
    return (
        f"user {_go_string(user.name)} (groups={_go_quoted(user.groups)}) is attempting to "
        "grant RBAC permissions not currently held:\n" + "\n".join(lines)
    )
