"""The server-side apply request: ``PATCH`` with ``application/apply-patch+yaml``.

- ``fieldManager`` is required (422 ``PatchOptions``), ``force`` is ``true``/``false``;
- the body is YAML or JSON of the endpoint's apiVersion and kind (else 400
  ``invalid object type: <group>/<version>, Kind=<kind>``) without ``managedFields`` (400);
  unknown fields are dropped or refused per ``fieldValidation`` like any body;
- an absent object is created by the apply (201; a made-up ``resourceVersion`` in the body is
  ignored); otherwise a ``resourceVersion`` in the body is a precondition (409) and the
  configuration is merged into the object (``ssa.managed.apply``); the result passes the
  request's admission (RBAC escalation checks, as for any write) and then goes through the
  normal create/update path (defaults, validation, status/spec separation, no-op
  detection, ``dryRun``);
- conflicts are a 409 ``Conflict`` with one ``FieldManagerConflict`` cause per field;
- ``apply_config`` does the same for a configuration already decoded (the emulator's own
  controllers apply through it);
- the ``kubectl`` manager may take the fields listed in the object's
  ``kubectl.kubernetes.io/last-applied-configuration`` annotation from other managers, and
  its apply rewrites that annotation from the applied configuration (kubectl's upgrade path
  from client-side apply).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from loadtest.apiserver import decode, errors, goyaml, ownership, render, timefmt
from loadtest.apiserver.lifecycle import Objects, Written
from loadtest.apiserver.registry import ResourceType
from loadtest.apiserver.ssa import fieldpath as fp
from loadtest.apiserver.ssa import managed
from loadtest.apiserver.ssa.fieldset import to_set
from proto.api import gojson

KUBECTL = "kubectl"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
Check = Callable[[dict[str, Any]], dict[str, Any]]
Admit = Callable[[dict[str, Any]], None]


def parse_force(value: str | None) -> bool:
    if value in (None, "", "false", "False", "0"):
        return False
    if value in ("true", "True", "1"):
        return True
    raise errors.bad_request(f'invalid value for force: "{value}"')


def decode_config(raw: bytes, rt: ResourceType) -> dict[str, Any]:
    """The applied configuration; 400 unless it is an object of ``rt``'s group, version and
    kind (``invalid object type: apps/v1, Kind=Deployment``) without managedFields."""
    try:
        config = goyaml.loads(raw)
    except decode.SyntaxProblem as err:
        raise errors.bad_request(f"error decoding YAML: {err}") from None
    if not isinstance(config, dict):
        config = {}
    api_version, kind = config.get("apiVersion") or "", config.get("kind") or ""
    if (api_version, kind) != (rt.api_version, rt.kind):
        group, _, version = str(api_version).rpartition("/")
        raise errors.bad_request(f"invalid object type: {group}/{version}, Kind={kind}")
    meta = config.get("metadata")
    if isinstance(meta, dict) and meta.get("managedFields") is not None:
        raise errors.bad_request("metadata.managedFields must be nil")
    return config


def apply(
    objects: Objects,
    rt: ResourceType,
    namespace: str,
    name: str,
    subresource: str,
    *,
    raw: bytes,
    manager: str,
    force: bool,
    dry_run: bool,
    check: Check,
    admit: Admit | None = None,
) -> Written:
    """Apply the configuration in ``raw`` for ``manager`` and write the result.

    ``check`` decodes the configuration like any body (unknown fields); ``admit`` sees the
    merged object before it is written and raises ``errors.ApiError`` to refuse it (the
    admission a create, update or patch of the same object goes through).
    """
    config = check(decode_config(raw, rt))
    return apply_config(
        objects,
        rt,
        namespace,
        name,
        subresource,
        config=config,
        manager=manager,
        force=force,
        dry_run=dry_run,
        admit=admit,
    )


def apply_config(
    objects: Objects,
    rt: ResourceType,
    namespace: str,
    name: str,
    subresource: str,
    *,
    config: dict[str, Any],
    manager: str,
    force: bool,
    dry_run: bool = False,
    admit: Admit | None = None,
) -> Written:
    """Apply the decoded ``config`` (an object of ``rt``, not modified) for ``manager`` and
    write the result: what ``apply`` does once the body is decoded, and how the emulator's
    own controllers apply (the clusterrole-aggregation controller)."""
    config = copy.deepcopy(config)
    as_sent = copy.deepcopy(config)
    meta = config.get("metadata")
    if not isinstance(meta, dict):
        meta = config["metadata"] = {}
    if meta.get("name", name) != name:
        raise errors.bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL "
            f"({name})"
        )
    meta["name"] = name
    precondition = meta.pop("resourceVersion", None)
    for key in ("managedFields", "uid", "creationTimestamp"):
        meta.pop(key, None)  # managedFields: only an explicit null gets here
    scope = ownership.scope(rt, subresource)
    table = objects.table(rt)
    current = table.get(namespace if rt.namespaced else "", name)
    live = render.view_dict(rt, current.copy()) if current is not None else None
    may_take: fp.Node | None = None
    if manager == KUBECTL and live is not None:
        may_take = _last_applied_fields(live, scope)
    try:
        obj, entries, _ = managed.apply(
            live,
            config,
            manager=manager,
            scope=scope,
            force=force,
            now=timefmt.now(),
            zero=lambda: ownership.zero(rt),
            may_take=may_take,
        )
    except managed.Conflicts as err:
        raise errors.ApiError(
            409,
            "Conflict",
            str(err),
            details={
                "causes": [
                    {
                        "reason": "FieldManagerConflict",
                        "message": f"conflict with {who}",
                        "field": path,
                    }
                    for who, path in err.conflicts
                ]
            },
        ) from None
    if manager == KUBECTL and _annotation(obj) is not None:
        obj = _rewrite_last_applied(obj, as_sent)
    if admit is not None:
        admit(obj)
    owner = ownership.FieldOwner(manager, subresource, entries, applied=True)
    if current is None:
        if subresource:
            raise errors.not_found(rt.plural, rt.group, name)
        return objects.create(rt, namespace, obj, dry_run=dry_run, owner=owner)
    obj["metadata"]["resourceVersion"] = precondition or str(current.rv)
    return objects.update(
        rt, namespace, name, obj, subresource=subresource, dry_run=dry_run, owner=owner
    )


def _annotation(obj: dict[str, Any]) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations")
    text = annotations.get(LAST_APPLIED) if isinstance(annotations, dict) else None
    return text if isinstance(text, str) else None


def _last_applied_fields(live: dict[str, Any], scope: managed.Scope) -> fp.Node | None:
    """The fields listed in the live object's last-applied annotation (kubectl may take them
    from other managers)."""
    text = _annotation(live)
    if not text:
        return None
    try:
        last = json.loads(text)
    except ValueError:
        return None
    if not isinstance(last, dict):
        return None
    return scope.owned(to_set(last, scope.type))


def _rewrite_last_applied(obj: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with the annotation rewritten from the applied configuration (without the
    annotation itself), encoded as Go's JSON encoder writes it, newline included."""
    config_meta = config.get("metadata")
    if isinstance(config_meta, dict) and isinstance(config_meta.get("annotations"), dict):
        rest = {k: v for k, v in config_meta["annotations"].items() if k != LAST_APPLIED}
        config = {**config, "metadata": {**config_meta, "annotations": rest}}
    meta = obj["metadata"]
    annotations = {**meta["annotations"], LAST_APPLIED: gojson.dumps(config).decode() + "\n"}
    return {**obj, "metadata": {**meta, "annotations": annotations}}
