"""Reading Kubernetes manifests (YAML or JSON files, directories) and applying them.

Used by ``metashard dev`` and the example tests; roughly ``kubectl apply -f``:

- ``load(paths)``: every object in the given files and directories, in order. A directory
  contributes its ``*.yaml``, ``*.yml`` and ``*.json`` files (recursively, sorted by path);
  a file may hold several YAML documents; empty documents are skipped; a ``List`` is
  flattened. Anything that is not an object with ``apiVersion``, ``kind`` and
  ``metadata.name`` raises ``ManifestError`` naming the file.
- ``ordered(objects)``: CustomResourceDefinitions first, then Namespaces, then the rest in
  their order, so one directory can hold a CRD and the objects of its kind.
- ``apply(client, objects, namespace=...)``: creates each object, or merge-patches it with
  the manifest when it exists (fields the manifest leaves out are kept; this is not a
  three-way merge). A namespaced object without a namespace goes to ``namespace``. Returns
  one line per object (``created``/``configured`` and ``kind namespace/name``).
  So that a run does not stop with half the manifests applied, nothing is written before
  every kind that no CRD of the manifests defines resolves (else ``errors.ResourceNotFound``,
  nothing written); then the CRDs are applied and waited for until established and served;
  then every other kind is resolved, and every namespace the objects go to that neither
  exists nor is among the manifests is created (``created Namespace name``), before the
  Namespaces of the manifests and the rest are applied in order.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from loadtest.dev import crds
from proto.kube import errors
from proto.kube.client import Client
from proto.kube.resources import Resource, split_api_version

SUFFIXES = (".yaml", ".yml", ".json")
_FIRST = {"CustomResourceDefinition": 0, "Namespace": 1}
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)


class ManifestError(ValueError):
    """A file that is not a manifest of Kubernetes objects."""


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
    if not path.exists():
        raise ManifestError(f"{path}: no such file or directory")
    return [path]


def _objects(doc: Any, source: Path) -> list[dict[str, Any]]:
    if doc is None:
        return []
    if not isinstance(doc, dict):
        raise ManifestError(f"{source}: a document is not an object")
    if str(doc.get("kind", "")).endswith("List") and "items" in doc:  # List, ConfigMapList...
        return [o for item in doc.get("items") or () for o in _objects(item, source)]
    meta = doc.get("metadata")
    if not doc.get("apiVersion") or not doc.get("kind") or not isinstance(meta, dict):
        raise ManifestError(f"{source}: an object without apiVersion, kind or metadata")
    if not meta.get("name"):
        raise ManifestError(f"{source}: a {doc['kind']} without metadata.name")
    return [doc]


def load(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """The objects in ``paths`` (files or directories), in order."""
    found: list[dict[str, Any]] = []
    for path in paths:
        for file in _files(Path(path)):
            text = file.read_text()
            try:
                docs = [json.loads(text)] if file.suffix == ".json" else yaml.safe_load_all(text)
                for doc in docs:
                    found.extend(_objects(doc, file))
            except (yaml.YAMLError, json.JSONDecodeError) as err:
                raise ManifestError(f"{file}: {err}") from None
    return found


def ordered(objects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """CRDs, then Namespaces, then the rest, each group in its given order."""
    return sorted(objects, key=lambda o: _FIRST.get(o["kind"], 2))


def describe(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj['kind']} {where}{meta['name']}"


async def apply(
    client: Client, objects: Sequence[dict[str, Any]], *, namespace: str = "default"
) -> list[str]:
    """Create or merge-patch every object, CRDs and Namespaces first; one line per object
    (see the module docstring for what is checked before anything is written)."""
    objects = ordered(objects)
    defined = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    rest = [o for o in objects if o["kind"] != "CustomResourceDefinition"]
    new_kinds = {_defines(crd) for crd in defined}
    for obj in rest:
        if (split_api_version(obj["apiVersion"])[0], obj["kind"]) not in new_kinds:
            await client.resource(obj["apiVersion"], kind=obj["kind"])
    done: list[str] = []
    for crd in defined:
        existed = await _exists(client, crds.CRDS, crd["metadata"]["name"])
        await crds.install(client, [crd])
        if existed:
            await client.patch(crds.CRDS, crd["metadata"]["name"], crd)
        done.append(f"{'configured' if existed else 'created'} {describe(crd)}")
    placed = [await _placed(client, obj, namespace) for obj in rest]
    listed = {o["metadata"]["name"] for o in rest if o["kind"] == "Namespace"}
    for name in sorted({ns for _, _, ns in placed if ns is not None} - listed):
        if not await _exists(client, NAMESPACES, name):
            await client.create(NAMESPACES, _namespace(name))
            done.append(f"created Namespace {name}")
    for resource, body, ns in placed:
        try:
            await client.create(resource, body, namespace=ns)
            verb = "created"
        except errors.AlreadyExists:
            await client.patch(resource, body["metadata"]["name"], body, namespace=ns)
            verb = "configured"
        done.append(f"{verb} {describe(body)}")
    return done


async def _placed(
    client: Client, obj: dict[str, Any], namespace: str
) -> tuple[Resource, dict[str, Any], str | None]:
    """The object's resource, its body with the namespace it goes to, and that namespace."""
    resource = await client.resource(obj["apiVersion"], kind=obj["kind"])
    body = {**obj, "metadata": dict(obj["metadata"])}
    if not resource.namespaced:
        body["metadata"].pop("namespace", None)
        return resource, body, None
    return resource, body, body["metadata"].setdefault("namespace", namespace)


def _defines(crd: dict[str, Any]) -> tuple[str, str]:
    """The (group, kind) a CRD manifest defines."""
    spec = crd.get("spec") or {}
    return str(spec.get("group")), str((spec.get("names") or {}).get("kind"))


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


async def _exists(client: Client, resource: Resource, name: str) -> bool:
    try:
        await client.get(resource, name)
    except errors.NotFound:
        return False
    return True
