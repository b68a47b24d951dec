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
  three-way merge). A CRD is waited for until discovery serves it. A namespaced object
  without a namespace goes to ``namespace``. Returns one line per object
  (``created``/``configured`` and ``kind namespace/name``).
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

SUFFIXES = (".yaml", ".yml", ".json")
_FIRST = {"CustomResourceDefinition": 0, "Namespace": 1}


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
    """Create or merge-patch every object, CRDs and Namespaces first; one line per object."""
    done: list[str] = []
    for obj in ordered(objects):
        if obj["kind"] == "CustomResourceDefinition":
            existed = await _exists_crd(client, obj["metadata"]["name"])
            await crds.install(client, [obj])
            if existed:
                await client.patch(crds.CRDS, obj["metadata"]["name"], obj)
            done.append(f"{'configured' if existed else 'created'} {describe(obj)}")
            continue
        resource = await client.resource(obj["apiVersion"], kind=obj["kind"])
        body = {**obj, "metadata": dict(obj["metadata"])}
        ns = None
        if resource.namespaced:
            ns = body["metadata"].setdefault("namespace", namespace)
        else:
            body["metadata"].pop("namespace", None)
        try:
            await client.create(resource, body, namespace=ns)
            verb = "created"
        except errors.AlreadyExists:
            await client.patch(resource, body["metadata"]["name"], body, namespace=ns)
            verb = "configured"
        done.append(f"{verb} {describe(body)}")
    return done


async def _exists_crd(client: Client, name: str) -> bool:
    try:
        await client.get(crds.CRDS, name)
    except errors.NotFound:
        return False
    return True
