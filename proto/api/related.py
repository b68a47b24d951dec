"""Related-resource rules from customize hooks, and which objects they select.

A rule is ``{apiVersion, resource, labelSelector?, namespaceSelector?, namespace?, names[]?}``.
``names`` cannot be combined with either selector, and ``namespace`` cannot be combined with
``namespaceSelector`` (``parse_related_rule`` rejects both). ``namespace: "*"`` means every
namespace. An object matches a rule when all of these hold, for a parent in namespace ``P``
(``""``: cluster-scoped parent) and an object in namespace ``N`` (``""``: cluster-scoped object):

1. **v1, namespaced parent:** ``N == P``. Version 1 never shows a namespaced parent anything
   from another namespace, nor cluster-scoped objects (its object map drops them).
2. **Namespace:** with ``namespaceSelector``, ``N`` is a namespace whose labels match it (the
   caller supplies those labels); with ``namespace: "*"``, anything; with ``namespace: X``,
   ``N == X``; with neither, a namespaced object must be in ``P`` when the parent is namespaced
   (v2 still lets a namespaced parent see cluster-scoped objects), anything otherwise.
3. **Names:** when ``names`` is non-empty, the object's name is one of them.
4. **Labels:** when ``labelSelector`` is present, the object's labels match it (``{}`` matches
   everything; absent means "no label condition").

For v1 rules of a namespaced parent, ``namespace`` must be ``P`` or ``*`` and
``namespaceSelector`` is not available: ``check_rule_for_parent`` reports both, as the customize
hook's answer cannot be honoured (Metacontroller fails the sync the same way).

These are pure functions: the coordinator routes related-object events to parents with
``matches`` and narrows its cache lookups with ``namespace_scope``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from proto.api.controllers import HookVersion
from proto.api.errors import HookResponseError
from proto.api.fields import Fields
from proto.api.selectors import Selector

ALL_NAMESPACES = "*"


@dataclass(frozen=True, slots=True)
class RelatedRule:
    api_version: str
    resource: str
    label_selector: Selector | None = None
    namespace_selector: Selector | None = None
    namespace: str | None = None
    """A namespace name, ``"*"`` for all, or ``None``."""
    names: frozenset[str] = frozenset()


def parse_related_rule(fields: Fields) -> RelatedRule:
    """One ``relatedResources`` entry. Raises ``HookResponseError``."""
    api_version = fields.require_str("apiVersion")
    resource = fields.require_str("resource")
    label_selector = fields.get_selector("labelSelector")
    namespace_selector = fields.get_selector("namespaceSelector")
    namespace = fields.get_str("namespace") or None
    rule_names = frozenset(fields.get_strings("names"))
    if rule_names and label_selector is not None:
        raise fields.error(f"{fields.path}: names cannot be combined with labelSelector")
    if rule_names and namespace_selector is not None:
        raise fields.error(f"{fields.path}: names cannot be combined with namespaceSelector")
    if namespace is not None and namespace_selector is not None:
        raise fields.error(f"{fields.path}: namespace cannot be combined with namespaceSelector")
    return RelatedRule(
        api_version=api_version,
        resource=resource,
        label_selector=label_selector,
        namespace_selector=namespace_selector,
        namespace=namespace,
        names=rule_names,
    )


def check_rule_for_parent(
    rule: RelatedRule, *, version: HookVersion, parent_namespace: str, path: str
) -> None:
    """Reject what a v1 rule cannot select for a namespaced parent. Raises HookResponseError."""
    if version is not HookVersion.V1 or not parent_namespace:
        return
    if rule.namespace_selector is not None:
        raise HookResponseError(
            f"{path}: namespaceSelector needs hook version v2 for a namespaced parent"
        )
    if rule.namespace not in (None, ALL_NAMESPACES, parent_namespace):
        raise HookResponseError(
            f"{path}: requested related object namespace {rule.namespace} differs from parent "
            f"object namespace {parent_namespace} (hook version v1)"
        )


def matches(
    rule: RelatedRule,
    *,
    version: HookVersion,
    parent_namespace: str,
    namespace: str,
    name: str,
    labels: Mapping[str, str] | None,
    namespace_labels: Mapping[str, str] | None = None,
) -> bool:
    """Whether the object ``namespace/name`` with ``labels`` is selected by ``rule``.

    ``namespace_labels`` are the labels of the object's namespace; they are only read when the
    rule has a ``namespaceSelector`` (``None`` then means "unknown": no match).
    """
    if version is HookVersion.V1 and parent_namespace and namespace != parent_namespace:
        return False
    if rule.namespace_selector is not None:
        if not namespace or namespace_labels is None:
            return False
        if not rule.namespace_selector.matches(namespace_labels):
            return False
    elif rule.namespace == ALL_NAMESPACES:
        pass
    elif rule.namespace is not None:
        if namespace != rule.namespace:
            return False
    elif parent_namespace and namespace and namespace != parent_namespace:
        return False
    if rule.names and name not in rule.names:
        return False
    return rule.label_selector is None or rule.label_selector.matches(labels)


def namespace_scope(
    rule: RelatedRule, *, version: HookVersion, parent_namespace: str
) -> str | None:
    """The one namespace outside which no namespaced object can match, or ``None``.

    ``None`` means the rule may match namespaced objects in several namespaces. The scope says
    nothing about cluster-scoped objects: ``matches`` decides those.
    """
    if version is HookVersion.V1 and parent_namespace:
        return parent_namespace
    if rule.namespace_selector is not None or rule.namespace == ALL_NAMESPACES:
        return None
    if rule.namespace is not None:
        return rule.namespace
    return parent_namespace or None
