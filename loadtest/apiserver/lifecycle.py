"""Object writes with kube-apiserver's generic registry semantics.

``Objects`` is what the HTTP handlers and the built-in controllers call to change objects
(each write may carry a ``FieldOwner`` that records its ``managedFields``; writes without
one keep the stored ones):

- create: server fields (uid, creationTimestamp, generation 1, generateName), admission,
  defaults, validation (422), AlreadyExists (409).
- update (PUT, PATCH, ``/status``, ``/finalize``): resourceVersion precondition (409; 500 for a
  non-numeric one), server fields kept, spec/status separation for resources with a status
  subresource, generation bumped when anything but metadata/status changes, no new
  finalizers on a terminating object (422), no-op writes keep the resourceVersion and emit
  no event, and removing the last finalizer of a terminating object deletes it (the response
  shows the object at its previous resourceVersion).
- delete: uid/resourceVersion preconditions, propagation policies (``foregroundDeletion`` and
  ``orphan`` finalizers), deletionTimestamp + ``deletionGracePeriodSeconds: 0`` when
  finalizers remain, otherwise removal with a ``Status`` (or the object, for Pods/Services);
  namespaces turn Terminating; CRDs get their cleanup finalizer.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from loadtest.apiserver import admission, crd, errors, pods, render, rules, timefmt
from loadtest.apiserver.kinds import go_strings
from loadtest.apiserver.ownership import FieldOwner, keep_stored
from loadtest.apiserver.registry import Registry, ResourceType
from loadtest.apiserver.storage import Entry, Storage, Table
from proto.api.validation import ErrorType, FieldError, Verbatim

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
_META_ORDER = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
)
NAMESPACE_MISMATCH = (
    "the namespace of the provided object does not match the namespace sent on the request"
)
_SERVER_FIELDS = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")


@dataclass(frozen=True, slots=True)
class Written:
    """The outcome of a write: what to answer and, if it was stored, the entry."""

    obj: dict[str, Any]
    entry: Entry | None = None
    created: bool = False
    status: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    policy: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    dry_run: bool = False


def _shape(rt: ResourceType, obj: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The object with kind/apiVersion/metadata first and metadata in struct order."""
    group, version, _ = (
        rt.storage_gvk if rt.custom and rt.storage_gvk else (rt.group, rt.version, "")
    )
    ordered_meta = {k: meta.get(k, "") for k in _META_ORDER if k in meta or k == "resourceVersion"}
    ordered_meta.update(
        (k, v) for k, v in meta.items() if k not in ordered_meta and k != "managedFields"
    )
    if "managedFields" in meta:
        ordered_meta["managedFields"] = meta["managedFields"]
    api_version = f"{group}/{version}" if group else version
    if rt.view is not None:
        api_version = "v1"
    shaped = {"kind": rt.kind, "apiVersion": api_version, "metadata": ordered_meta}
    shaped.update((k, v) for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata"))
    return shaped


def _spec_changed(rt: ResourceType, new: dict[str, Any], old: dict[str, Any]) -> bool:
    if not rt.custom:
        return new.get("spec") != old.get("spec")
    skip = {"metadata", "status"} if rt.status else {"metadata"}
    keys = (set(new) | set(old)) - skip
    return any(new.get(k) != old.get(k) for k in keys)


class Objects:
    """Create, update and delete objects of any served resource."""

    def __init__(self, storage: Storage, registry: Registry) -> None:
        self.storage = storage
        self.registry = registry

    def table(self, rt: ResourceType) -> Table:
        return self.storage.table(rt.storage, watch_cache=rt.watch_cache, sort_keys=rt.custom)

    def get(self, rt: ResourceType, namespace: str, name: str) -> Entry:
        entry = self.table(rt).get(namespace, name)
        if entry is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return entry

    # --- create -------------------------------------------------------------------------------

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        obj: dict[str, Any],
        *,
        dry_run: bool = False,
        owner: FieldOwner | None = None,
    ) -> Written:
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request(NAMESPACE_MISMATCH)
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise errors.internal("resourceVersion should not be set on objects to be created")
        for key in (*_SERVER_FIELDS, "selfLink", "generation"):
            meta.pop(key, None)
        generate = not meta.get("name") and bool(meta.get("generateName"))
        table = self.table(rt)
        for _attempt in range(8):
            if generate:
                meta["name"] = meta["generateName"] + admission.random_suffix()
            if not generate or table.get(namespace if rt.namespaced else "", meta["name"]) is None:
                break
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = timefmt.now()
        if rt.generation:
            meta["generation"] = 1
        obj = _shape(rt, render.to_storage(rt, obj), meta)
        name = meta.get("name", "")
        if rt.namespaced:
            admission.check_namespace(self.storage, rt, namespace, name)
        if rt.custom:
            definition = self.storage.table(crd.CRDS).get("", f"{rt.plural}.{rt.group}")
            if definition is not None and definition.meta.get("deletionTimestamp"):
                raise errors.ApiError(
                    405,
                    "MethodNotAllowed",
                    "create not allowed while custom resource definition is terminating",
                    details={},
                )
        rt.behaviour.default(obj, None)
        if owner is not None:
            owner.record(rt, None, obj)
        else:
            obj["metadata"].pop("managedFields", None)
        if rt.kind == "Namespace" and not rt.group:
            rules.prepare_namespace(obj)
        if rt.kind == "Pod" and not rt.group:
            pods.admit_pod(obj)
            admission.service_account(self.storage, obj)
        self._validate(rt, obj, None)
        if table.get(namespace if rt.namespaced else "", name) is not None:
            raise errors.already_exists(rt.plural, rt.group, name)
        if dry_run:
            obj["metadata"].pop("resourceVersion", None)
            return Written(obj, created=True)
        return Written(obj, self.storage.create(table, obj), created=True)

    def _validate(self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        problems = rt.behaviour.validate(obj, old)
        if problems:
            raise errors.invalid(
                rt.kind, rt.group if not rt.view else "", obj["metadata"].get("name", ""), problems
            )

    # --- update -------------------------------------------------------------------------------

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        obj: dict[str, Any],
        *,
        subresource: str = "",
        dry_run: bool = False,
        owner: FieldOwner | None = None,
    ) -> Written:
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        if meta.get("name", "") != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name', '')}) does not match the name on "
                f"the URL ({name})"
            )
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request(NAMESPACE_MISMATCH)
            meta["namespace"] = namespace
        table = self.table(rt)
        current = table.get(namespace if rt.namespaced else "", name)
        if current is None:
            if rt.create_on_update and not subresource:
                meta.pop("resourceVersion", None)
                return self.create(rt, namespace, obj, dry_run=dry_run, owner=owner)
            raise errors.not_found(rt.plural, rt.group, name)
        self._preconditions(rt, current, meta)
        new = self._merge(rt, current, render.to_storage(rt, obj), subresource)
        return self.store(rt, table, current, new, dry_run=dry_run, owner=owner)

    def _preconditions(self, rt: ResourceType, current: Entry, meta: dict[str, Any]) -> None:
        rv = meta.get("resourceVersion", "")
        if rv:
            try:
                wanted = int(rv)
                if wanted < 0:
                    raise ValueError
            except ValueError:
                raise errors.internal(
                    f'strconv.ParseUint: parsing "{rv}": invalid syntax'
                ) from None
            if wanted != current.rv:
                raise errors.stale(rt.plural, rt.group, current.name)
        elif not rt.unconditional_update:
            raise errors.invalid(
                rt.plural,
                rt.group,
                current.name,
                [
                    FieldError(
                        ErrorType.INVALID,
                        "metadata.resourceVersion",
                        "must be specified for an update",
                        Verbatim("0x0"),
                    )
                ],
                details_kind=rt.plural,
            )
        uid = meta.get("uid")
        if uid and uid != current.uid:
            raise errors.conflict(
                rt.plural,
                rt.group,
                current.name,
                f"Precondition failed: UID in precondition: {current.uid}, "
                f"UID in object meta: {uid}",
            )

    def _merge(
        self, rt: ResourceType, current: Entry, body: dict[str, Any], subresource: str
    ) -> dict[str, Any]:
        """The object to store: ``body`` plus what the server keeps from ``current``.

        Parts taken from the stored object are copies: defaulting may touch them, and a
        stored object never changes.
        """
        old = current.obj
        if subresource in ("status", "finalize"):
            new = current.copy()
            if subresource == "status":
                if "status" in body:
                    new["status"] = body["status"]
                else:
                    new.pop("status", None)
            else:
                spec = dict(old.get("spec") or {})
                spec["finalizers"] = (body.get("spec") or {}).get("finalizers") or []
                new["spec"] = spec
            meta = new["metadata"]
        else:
            new = dict(body)
            if rt.status:
                if "status" in old:
                    new["status"] = orjson.loads(orjson.dumps(old["status"]))
                else:
                    new.pop("status", None)
            if rt.kind == "Namespace" and not rt.group:
                new["spec"] = {
                    **(new.get("spec") or {}),
                    "finalizers": (old.get("spec") or {}).get("finalizers", []),
                }
            meta = dict(body.get("metadata") or {})
            old_meta = old["metadata"]
            for key in (*_SERVER_FIELDS, "generation", "namespace"):
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
        meta["resourceVersion"] = old["metadata"].get("resourceVersion", "")
        shaped = _shape(rt, new, meta)
        rt.behaviour.default(shaped, old)
        return shaped

    def store(
        self,
        rt: ResourceType,
        table: Table,
        current: Entry,
        new: dict[str, Any],
        *,
        dry_run: bool = False,
        owner: FieldOwner | None = None,
    ) -> Written:
        """Validate and write ``new`` over ``current`` (the last step of every update).

        ``owner`` records the write's managedFields; without one the stored ones are kept.
        """
        old = current.obj
        if owner is not None:
            owner.record(rt, old, new)
        else:
            keep_stored(old, new)
        self._validate(rt, new, old)
        meta, old_meta = new["metadata"], old["metadata"]
        if old_meta.get("deletionTimestamp"):
            added = [
                f
                for f in meta.get("finalizers") or []
                if f not in (old_meta.get("finalizers") or [])
            ]
            if added:
                problem = FieldError(
                    ErrorType.FORBIDDEN,
                    "metadata.finalizers",
                    "no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers {go_strings(added)}",
                )
                raise errors.invalid(rt.kind, rt.group, current.name, [problem, problem])
        if new == old:
            return Written(old, current)
        if rt.generation and _spec_changed(rt, new, old):
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
        if dry_run:
            return Written(new)
        if (
            old_meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not self._held(rt, new)
        ):
            self.storage.delete(table, current)
            return Written(new)
        return Written(new, self.storage.update(table, current, new))

    @staticmethod
    def _held(rt: ResourceType, obj: dict[str, Any]) -> bool:
        """A terminating namespace stays until its spec.finalizers are gone too."""
        return (
            rt.kind == "Namespace"
            and not rt.group
            and bool((obj.get("spec") or {}).get("finalizers"))
        )

    # --- delete -------------------------------------------------------------------------------

    def delete(
        self, rt: ResourceType, namespace: str, name: str, options: DeleteOptions
    ) -> Written:
        table = self.table(rt)
        current = table.get(namespace if rt.namespaced else "", name)
        if current is None:
            raise errors.not_found(rt.plural, rt.group, name)
        if options.uid is not None and options.uid != current.uid:
            raise self._precondition_failed(
                rt,
                current,
                f"the UID in the precondition ({options.uid}) does not match the UID in record "
                f"({current.uid}). The object might have been deleted and then recreated",
            )
        if options.resource_version is not None and options.resource_version != str(current.rv):
            raise self._precondition_failed(
                rt,
                current,
                f"the ResourceVersion in the precondition ({options.resource_version}) does not "
                f"match the ResourceVersion in record ({current.rv}). "
                "The object might have been modified",
            )
        if rt.kind == "Namespace" and not rt.group:
            return self._delete_namespace(rt, table, current, options)
        old_meta = current.meta
        finalizers = list(old_meta.get("finalizers") or [])
        if options.policy == "Foreground":
            finalizers = [f for f in finalizers if f != ORPHAN] + (
                [FOREGROUND] if FOREGROUND not in finalizers else []
            )
        elif options.policy == "Orphan":
            finalizers = [f for f in finalizers if f != FOREGROUND] + (
                [ORPHAN] if ORPHAN not in finalizers else []
            )
        elif options.policy == "Background":
            finalizers = [f for f in finalizers if f not in (ORPHAN, FOREGROUND)]
        if rt.kind == "CustomResourceDefinition" and rt.group == "apiextensions.k8s.io":
            finalizers += [crd.CLEANUP_FINALIZER] if crd.CLEANUP_FINALIZER not in finalizers else []
        if old_meta.get("deletionTimestamp"):
            if finalizers == (old_meta.get("finalizers") or []):
                return Written(current.obj, current)
            new = current.copy()
            new["metadata"]["finalizers"] = finalizers
            return self.store(rt, table, current, new, dry_run=options.dry_run)
        if finalizers:
            new = current.copy()
            new_meta = new["metadata"]
            if new_meta.get("generation"):
                new_meta["generation"] += 1
            new_meta["deletionTimestamp"] = timefmt.now()
            new_meta["deletionGracePeriodSeconds"] = 0
            new_meta["finalizers"] = finalizers
            new = _shape(rt, new, new_meta)
            if rt.kind == "CustomResourceDefinition":
                crd_terminating(new)
            if options.dry_run:
                return Written(new)
            return Written(new, self.storage.update(table, current, new))
        deleted = None if options.dry_run else self.storage.delete(table, current)
        if rt.return_deleted:
            # the object at the deletion's resourceVersion, as etcd3's Delete returns it (16)
            shown = deleted or current
            return Written(shown.obj, shown)
        details: dict[str, Any] = {"name": name}
        if rt.group:
            details["group"] = rt.group
        details.update(kind=rt.plural, uid=current.uid)
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }
        return Written(current.obj, status=status)

    @staticmethod
    def _precondition_failed(rt: ResourceType, current: Entry, why: str) -> errors.ApiError:
        return errors.ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {rt.kind} "{current.name}": {why}',
            details={
                "name": current.name,
                **({"group": rt.group} if rt.group else {}),
                "kind": rt.kind,
            },
        )

    def _delete_namespace(
        self, rt: ResourceType, table: Table, current: Entry, options: DeleteOptions
    ) -> Written:
        if current.name in IMMORTAL_NAMESPACES:
            raise errors.forbidden(
                "namespaces", "", current.name, "this namespace may not be deleted"
            )
        if current.meta.get("deletionTimestamp"):
            return Written(current.obj, current)
        new = current.copy()
        new["metadata"]["deletionTimestamp"] = timefmt.now()
        new.setdefault("status", {})["phase"] = "Terminating"
        new = _shape(rt, new, new["metadata"])
        if options.dry_run:
            return Written(new)
        if not (new.get("spec") or {}).get("finalizers") and not new["metadata"].get("finalizers"):
            self.storage.delete(table, current)
            return Written(new)
        return Written(new, self.storage.update(table, current, new))


def crd_terminating(obj: dict[str, Any]) -> None:
    status = obj.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Terminating"]
    conditions.append(
        {
            "type": "Terminating",
            "status": "True",
            "lastTransitionTime": timefmt.now(),
            "reason": "InstanceDeletionInProgress",
            "message": "CustomResource deletion is in progress",
        }
    )
    status["conditions"] = conditions
