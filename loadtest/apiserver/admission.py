"""Admission on create: what kube-apiserver's default plugins do to new objects.

- NamespaceLifecycle: creating in a namespace that does not exist is a 404 for the
  namespace; in a terminating one a 403 with cause ``NamespaceTerminating``.
- ServiceAccount (Pods): the service account must exist; the pod gets
  ``serviceAccountName``/``serviceAccount`` and the projected ``kube-api-access-*`` token
  volume mounted in every container, unless automounting is off.
"""

from __future__ import annotations

import random
from typing import Any

from loadtest.apiserver import errors
from loadtest.apiserver.registry import ResourceType
from loadtest.apiserver.storage import Storage

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def random_suffix(length: int = 5) -> str:
    return "".join(random.choices(NAME_ALPHABET, k=length))


def check_namespace(storage: Storage, rt: ResourceType, namespace: str, name: str) -> None:
    ns = storage.table("/namespaces").get("", namespace)
    if ns is None:
        raise errors.not_found("namespaces", "", namespace)
    if ns.meta.get("deletionTimestamp"):
        raise errors.forbidden(
            rt.plural,
            rt.group,
            name,
            f"unable to create new content in namespace {namespace} because it is being terminated",
            causes=[
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {namespace} is being terminated",
                    "field": "metadata.namespace",
                }
            ],
        )


def _token_volume(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
            "defaultMode": 420,
        },
    }


def service_account(storage: Storage, pod: dict[str, Any]) -> None:
    meta, spec = pod["metadata"], pod.setdefault("spec", {})
    namespace = meta.get("namespace", "")
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    sa = storage.table("/serviceaccounts").get(namespace, account)
    if sa is None:
        raise errors.forbidden(
            "pods",
            "",
            meta.get("name", ""),
            f"error looking up service account {namespace}/{account}: "
            f'serviceaccount "{account}" not found',
        )
    spec["serviceAccountName"] = account
    spec["serviceAccount"] = account
    automount = spec.get("automountServiceAccountToken")
    if automount is None:
        automount = sa.obj.get("automountServiceAccountToken", True)
    containers = [
        c
        for key in ("initContainers", "containers")
        for c in spec.get(key) or []
        if isinstance(c, dict)
    ]
    mounted = any(
        isinstance(m, dict) and m.get("mountPath") == TOKEN_MOUNT
        for c in containers
        for m in c.get("volumeMounts") or []
    )
    if not automount or mounted:
        return
    volume = f"kube-api-access-{random_suffix()}"
    spec["volumes"] = [_token_volume(volume), *(spec.get("volumes") or [])]
    for container in containers:
        mounts = container.setdefault("volumeMounts", [])
        mounts.append({"name": volume, "readOnly": True, "mountPath": TOKEN_MOUNT})
