"""The least-privilege RBAC rules a set of controllers of every kind needs.

``controller_resources(obj, resolve)`` reads one controller object (a plain dict) of a kind
in ``manager.kinds`` into the resources it names; ``cluster_role_rules(controllers,
related=...)`` turns those into ClusterRole rules with exactly the verbs metashard issues.
Both are pure: the caller supplies ``resolve`` (the objects' ``apiVersion`` and plural, or the
cluster's discovery) and prints the result (``manager.cli.rbac``).

Each kind supplies its own part (``Kind.needs``, returning ``Needs``): where its spec names
parents and children, the verbs its workers use on its parents, its hooks' connection
settings, and any other grant it needs. This module checks what every controller object has
(``apiVersion``, a kind of ``manager.kinds``, ``metadata.name``, ``spec``, a customize hook),
refuses an object of any other kind, grants every kind's CRD, and merges the rules.

What each use of a resource is granted, and why (the calls are in the modules named):

- **CompositeController parent** (``PARENT_VERBS``): ``list``, ``watch`` (the coordinator's
  informer, ``manager.informers.informer``); ``patch`` (our finalizer,
  ``workers.kinds.composite``). ``<parent>/status``: ``update`` (the status PUT,
  ``workers.kinds.composite``).
  ``<parent>/finalizers``: ``update``, because children carry an ownerReference with
  ``blockOwnerDeletion: true`` to the parent, which the API server's
  OwnerReferencesPermissionEnforcement admission allows only to those who may update the
  owner's finalizers. No ``get``: workers read parents from the
  coordinator's snapshots, never from the API server.
- **CompositeController child**: ``list``, ``watch`` (informer); ``create``, ``update``,
  ``delete`` (``workers.sync.children``); ``patch`` (adoption and release,
  ``workers.sync.claims``).
- **DecoratorController resource** (its parents, ``DECORATOR_PARENT_VERBS``): as a Composite
  parent, plus ``update``: a
  DecoratorController's sync hook may set the parent's labels and annotations, which
  Metacontroller writes with an update. **Attachment**: as a child.
- **Related resources** of customize hooks: ``list``, ``watch`` (``manager.routing.related``). A
  customize hook chooses them per parent at run time, so they cannot be read from the
  controller objects: the caller passes them (``related=``). A rule with a
  ``namespaceSelector`` also watches ``namespaces`` (pass that too).
- **metacontroller.k8s.io**: the CRD of every kind (``compositecontrollers``,
  ``decoratorcontrollers``): ``list``, ``watch`` (``manager.controllers.hosted``).
  ``controllerrevisions``, a grant of the composite kind's own, only when a
  CompositeController has a ``RollingRecreate`` or ``RollingInPlace`` child type: ``list``,
  ``watch`` (the coordinator's informer, ``manager.kinds.composite``); ``create``,
  ``update``, ``delete`` (``workers.kinds.composite.rollouts``); ``patch`` (adoption of
  orphaned revisions, ``workers.sync.claims``). Granted cluster-wide (a ClusterRole rule),
  so it also covers ``--cluster-revision-namespace``, where the revisions of cluster-scoped
  parents live.
- **events** (core group): ``create``, ``patch`` (``proto.kube.events``), in every namespace a
  parent lives in, and ``default`` for cluster-scoped objects.
- **Secrets and ConfigMaps a webhook names** (``caBundle``, ``clientTLS``, ``authorization``,
  ``basicAuth``, in the hooks or ``spec.endpointConfigs``): ``get``, limited to those names
  with ``resourceNames`` (``manager.controllers.hookrefs`` reads each one by name, never a list).

The coordinator's Leases are namespaced: ``leader_election_rules()`` gives the Role for them
(``get``, ``create``, ``update``): the election's (``manager.election.lease``) and the presence
Lease every leading coordinator renews (``manager.term.presence``).

Rules are merged per API group and verb set, sorted, so equal inputs print equal YAML.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from manager.kinds import registry
from proto.api import names
from proto.api.controllers import HookName
from proto.api.endpoints import RefKind, Settings, object_refs
from proto.api.errors import InvalidControllerError
from proto.api.fields import Fields
from proto.kube.resources import Resource, split_api_version

VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete")

CONTROLLER_VERBS = ("list", "watch")
PARENT_VERBS = ("list", "watch", "patch")
DECORATOR_PARENT_VERBS = ("list", "watch", "update", "patch")
STATUS_VERBS = ("update",)
FINALIZERS_VERBS = ("update",)
CHILD_VERBS = ("list", "watch", "create", "update", "patch", "delete")
REVISION_VERBS = ("list", "watch", "create", "update", "patch", "delete")
RELATED_VERBS = ("list", "watch")
EVENT_VERBS = ("create", "patch")
LEASE_VERBS = ("get", "create", "update")


class RbacError(ValueError):
    """The controllers cannot be turned into rules; the message says which and why."""


@dataclass(frozen=True, slots=True, order=True)
class GroupResource:
    """A resource (plural, or ``plural/subresource``) of an API group (``""``: core)."""

    group: str
    resource: str

    def sub(self, subresource: str) -> GroupResource:
        return GroupResource(self.group, f"{self.resource}/{subresource}")

    def __str__(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @classmethod
    def parse(cls, text: str) -> GroupResource:
        """``kubectl``'s ``RESOURCE[.GROUP]``: ``configmaps``, ``deployments.apps``."""
        resource, _, group = text.partition(".")
        if not resource or resource != resource.lower() or " " in text:
            raise RbacError(f"not a RESOURCE[.GROUP]: {text!r} (e.g. deployments.apps)")
        return cls(group, resource)


Resolve = Callable[[str, str], GroupResource]
"""``(apiVersion, resource as written) -> GroupResource``; raises ``RbacError`` if unknown."""


def _group_version(api_version: str) -> tuple[str, str]:
    try:
        return split_api_version(api_version)
    except ValueError as err:
        raise RbacError(str(err)) from None


def by_api_version(api_version: str, resource: str) -> GroupResource:
    """The group of ``api_version`` and the resource as written (the controller spec names
    the plural)."""
    return GroupResource(_group_version(api_version)[0], resource)


def by_discovery(served: Iterable[Resource]) -> Resolve:
    """A resolver over the cluster's discovered resources: the plural or a short name of a
    served group/version, as the coordinator resolves them."""
    table: dict[tuple[str, str], list[Resource]] = {}
    for item in served:
        table.setdefault((item.group, item.version), []).append(item)

    def resolve(api_version: str, resource: str) -> GroupResource:
        candidates = table.get(_group_version(api_version))
        if candidates is None:
            raise RbacError(f"the cluster does not serve {api_version}")
        for item in candidates:
            if resource == item.name or resource in item.short_names:
                return GroupResource(item.group, item.name)
        served_names = ", ".join(sorted(item.name for item in candidates))
        raise RbacError(f"{api_version} has no resource {resource!r} (it serves: {served_names})")

    return resolve


Grants = tuple[tuple[GroupResource, tuple[str, ...]], ...]
"""(resource, verbs) pairs."""


def resolved(fields: Fields, resolve: Resolve) -> GroupResource:
    """The resource a spec entry names (its ``apiVersion`` and ``resource``)."""
    return resolve(fields.require_str("apiVersion"), fields.require_str("resource"))


@dataclass(frozen=True, slots=True)
class Needs:
    """What a kind reads from one of its controller objects (``manager.kinds.Kind.needs``)."""

    parents: tuple[GroupResource, ...]
    children: tuple[GroupResource, ...]
    parent_verbs: tuple[str, ...]
    """What its workers do to its parents (``PARENT_VERBS``, ``DECORATOR_PARENT_VERBS``)."""
    connections: Mapping[HookName, Settings]
    """Each hook's connection settings: the Secrets and ConfigMaps they name are granted."""
    grants: Grants = ()
    """Anything else the controller needs (a rolling CompositeController: its revisions)."""


@dataclass(frozen=True, slots=True)
class ControllerResources:
    """What one controller object names."""

    kind: str
    name: str
    parents: tuple[GroupResource, ...]
    children: tuple[GroupResource, ...]
    customize: bool
    """It has a customize hook: its related resources are known only at run time."""
    parent_verbs: tuple[str, ...] = PARENT_VERBS
    """What its kind's workers do to its parents."""
    referenced: tuple[tuple[str, str], ...] = ()
    """(``secrets`` or ``configmaps``, name) its webhooks read."""
    grants: Grants = ()
    """What else its kind says it needs (a rolling CompositeController: ControllerRevisions)."""

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


def controller_resources(obj: Mapping[str, Any], resolve: Resolve) -> ControllerResources:
    """What ``obj`` needs: the parents and children it names, resolved, and what its kind
    adds (``Kind.needs``).

    Raises ``RbacError`` naming the object and field when it is not a controller of a kind
    of ``manager.kinds`` or lacks a field the rules need.
    """
    top = Fields.of(obj, "", InvalidControllerError)
    kind = obj.get("kind")
    kinds = {k.kind.value: k for k in registry()}
    try:
        api_version = obj.get("apiVersion")
        found = (
            kinds.get(kind) if isinstance(kind, str) and api_version == names.API_VERSION else None
        )
        if found is None:
            raise top.fail("kind", f"not a {names.API_VERSION} {' or '.join(kinds)}")
        name = top.require_object("metadata").require_str("name")
        spec = top.require_object("spec")
        needs = found.needs(spec, obj, resolve)
        hooks = spec.get_object("hooks")
        return ControllerResources(
            kind=found.kind.value,
            name=name,
            parents=needs.parents,
            children=needs.children,
            customize=hooks is not None and hooks.get_object("customize") is not None,
            parent_verbs=needs.parent_verbs,
            referenced=_referenced(needs.connections),
            grants=needs.grants,
        )
    except (InvalidControllerError, RbacError) as err:
        what = f"{kind or 'object'} {(obj.get('metadata') or {}).get('name') or '(unnamed)'}"
        raise RbacError(f"{what}: {err}") from None


def _referenced(connections: Mapping[HookName, Settings]) -> tuple[tuple[str, str], ...]:
    """(``secrets``/``configmaps``, name) of every object the hooks' ``connections`` name."""
    plural = {RefKind.SECRET: "secrets", RefKind.CONFIG_MAP: "configmaps"}
    return tuple(sorted({(plural[r.kind], r.name) for r in object_refs(connections.values())}))


@dataclass(frozen=True, slots=True)
class Rule:
    """One PolicyRule."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, list[str]]:
        rule = {
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }
        if self.resource_names:
            rule["resourceNames"] = list(self.resource_names)
        return rule


def _merge(grants: Iterable[tuple[GroupResource, Sequence[str]]]) -> list[Rule]:
    """One rule per (group, verb set), resources sorted; metacontroller.k8s.io first, then
    the core group, then the others by name."""
    verbs: dict[GroupResource, set[str]] = {}
    for resource, granted in grants:
        verbs.setdefault(resource, set()).update(granted)
    rules: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for resource, merged in verbs.items():
        ordered = tuple(v for v in VERB_ORDER if v in merged)
        rules.setdefault((resource.group, ordered), []).append(resource.resource)

    def order(key: tuple[str, tuple[str, ...]]) -> tuple[int, str, int, tuple[int, ...]]:
        group, ordered = key
        rank = 0 if group == names.GROUP else 1 if group == "" else 2
        return (rank, group, -len(ordered), tuple(VERB_ORDER.index(v) for v in ordered))

    return [
        Rule((group,), tuple(sorted(rules[group, ordered])), ordered)
        for group, ordered in sorted(rules, key=order)
    ]


def cluster_role_rules(
    controllers: Iterable[ControllerResources], *, related: Iterable[GroupResource] = ()
) -> list[Rule]:
    """The ClusterRole rules for ``controllers`` plus ``related`` resources (see the module
    docstring for every verb)."""
    grants: list[tuple[GroupResource, Sequence[str]]] = [
        (GroupResource(names.GROUP, kind.resource), CONTROLLER_VERBS) for kind in registry()
    ]
    grants.append((GroupResource("", "events"), EVENT_VERBS))
    controllers_seen = list(controllers)
    for controller in controllers_seen:
        for parent in controller.parents:
            grants.append((parent, controller.parent_verbs))
            grants.append((parent.sub("status"), STATUS_VERBS))
            grants.append((parent.sub("finalizers"), FINALIZERS_VERBS))
        grants += [(child, CHILD_VERBS) for child in controller.children]
        grants += controller.grants
    grants += [(resource, RELATED_VERBS) for resource in related]
    rules = _merge(grants)
    named: dict[str, set[str]] = {}
    for controller in controllers_seen:
        for plural, name in controller.referenced:
            named.setdefault(plural, set()).add(name)
    rules += [
        Rule(("",), (plural,), ("get",), tuple(sorted(names_)))
        for plural, names_ in sorted(named.items())
    ]
    return rules


def leader_election_rules() -> list[Rule]:
    """The namespaced Role rules of the coordinator's Lease."""
    return [Rule(("coordination.k8s.io",), ("leases",), LEASE_VERBS)]
