"""Defaults and validation rules of the core and coordination types the emulator serves.

- Namespaces: the ``kubernetes.io/metadata.name`` label, the ``kubernetes`` finalizer (on
  create), phase ``Active``.
- ConfigMaps and Secrets: key names, a key in both ``data`` and ``binaryData``, the 1 MiB
  limit, ``immutable``; Secrets' ``stringData`` merged into ``data``, base64 checked.
- Leases: ``leaseDurationSeconds`` > 0, ``leaseTransitions`` >= 0 (times are checked while
  decoding, see ``schema.MICROTIME``).
- Services: cluster IPs from 10.96.0.0/12, port and policy defaults; PVCs: access modes and
  storage request. (RBAC kinds: ``rbac_validation.py``.)
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import itertools
from typing import Any

from loadtest.apiserver.registry import DecodeError
from loadtest.apiserver.schema import BOOL, INT32, MICROTIME, STRING, STRING_MAP, Field, Struct, top
from proto.api import validation as v
from proto.api.validation import ErrorType, FieldError

# --- namespaces ----------------------------------------------------------------------------


def default_namespace(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    meta = obj["metadata"]
    if meta.get("name"):
        meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}
    obj.setdefault("spec", {})
    obj.setdefault("status", {}).setdefault("phase", "Active")


def prepare_namespace(obj: dict[str, Any]) -> None:
    """``PrepareForCreate``: a new namespace gets the ``kubernetes`` finalizer (after the field
    manager recorded the create, so nobody owns it)."""
    spec = obj.setdefault("spec", {})
    if not spec.get("finalizers"):
        spec["finalizers"] = ["kubernetes"]


# --- configmaps and secrets ----------------------------------------------------------------


def _validate_keys(obj: dict[str, Any], field: str) -> list[FieldError]:
    return [
        FieldError(ErrorType.INVALID, f"{field}[{key}]", m, key)
        for key in obj.get(field) or {}
        for m in v.is_config_map_key(key)
    ]


def _immutable_data(
    obj: dict[str, Any], old: dict[str, Any] | None, fields: tuple[str, ...]
) -> list[FieldError]:
    if old is None or not old.get("immutable"):
        return []
    errors = [
        FieldError(ErrorType.FORBIDDEN, f, "field is immutable when `immutable` is set")
        for f in fields
        if obj.get(f) != old.get(f)
    ]
    if not obj.get("immutable"):
        errors.append(
            FieldError(
                ErrorType.FORBIDDEN, "immutable", "field is immutable when `immutable` is set"
            )
        )
    return errors


def validate_configmap(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    errors = _validate_keys(obj, "data")
    errors.extend(
        FieldError(ErrorType.INVALID, f"data[{key}]", "duplicate of key present in binaryData", key)
        for key in data
        if key in binary
    )
    errors.extend(_validate_keys(obj, "binaryData"))
    if sum(map(len, data.values())) + sum(map(len, binary.values())) > 1024 * 1024:
        errors.append(FieldError(ErrorType.TOO_LONG, "", "must have at most 1048576 bytes"))
    return errors + _immutable_data(obj, old, ("data", "binaryData"))


def _check_base64(obj: dict[str, Any], field: str) -> None:
    for value in (obj.get(field) or {}).values():
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise DecodeError("illegal base64 data at input byte 0") from None


def decode_configmap(obj: dict[str, Any]) -> list[str]:
    unknown = CONFIG_MAP.decode(obj)
    _check_base64(obj, "binaryData")
    return unknown


def decode_secret(obj: dict[str, Any]) -> list[str]:
    unknown = SECRET.decode(obj)
    _check_base64(obj, "data")
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(value.encode()).decode()
    return unknown


def validate_secret(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errors = _validate_keys(obj, "data")
    if old is not None and obj.get("type") != old.get("type"):
        errors.append(FieldError(ErrorType.INVALID, "type", "field is immutable", obj.get("type")))
    return errors + _immutable_data(obj, old, ("data",))


# --- leases --------------------------------------------------------------------------------


def validate_lease(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errors = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        errors.append(
            FieldError(
                ErrorType.INVALID, "spec.leaseDurationSeconds", "must be greater than 0", duration
            )
        )
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        errors.append(
            FieldError(
                ErrorType.INVALID,
                "spec.leaseTransitions",
                "must be greater than or equal to 0",
                transitions,
            )
        )
    return errors


# --- services ------------------------------------------------------------------------------


class ClusterIPs:
    """Hands out service cluster IPs from 10.96.0.0/12 (10.96.0.1 is ``kubernetes``)."""

    def __init__(self) -> None:
        network = ipaddress.ip_network("10.96.0.0/12")
        self._next = itertools.islice(network.hosts(), 1, None)

    def allocate(self) -> str:
        return str(next(self._next))


def service_defaults(ips: ClusterIPs) -> Any:
    def default(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["type"] != "ExternalName":
            if not spec.get("clusterIP"):
                spec["clusterIP"] = ips.allocate()
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])
        obj.setdefault("status", {}).setdefault("loadBalancer", {})

    return default


def validate_service(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errors = []
    if (
        spec.get("type") != "ExternalName"
        and spec.get("clusterIP") != "None"
        and not spec.get("ports")
    ):
        errors.append(FieldError(ErrorType.REQUIRED, "spec.ports", ""))
    if old is not None:
        old_ip = (old.get("spec") or {}).get("clusterIP")
        if old_ip and spec.get("clusterIP") != old_ip:
            errors.append(
                FieldError(
                    ErrorType.INVALID,
                    "spec.clusterIPs[0]",
                    "may not change once set",
                    spec.get("clusterIP"),
                )
            )
    return errors


# --- persistent volume claims, RBAC --------------------------------------------------------


def default_pvc(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    obj.setdefault("status", {}).setdefault("phase", "Pending")


def validate_pvc(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errors = []
    if not spec.get("accessModes"):
        errors.append(
            FieldError(ErrorType.REQUIRED, "spec.accessModes", "at least 1 access mode is required")
        )
    if not ((spec.get("resources") or {}).get("requests") or {}).get("storage"):
        errors.append(FieldError(ErrorType.REQUIRED, "spec.resources[storage]", ""))
    return errors


def default_secret(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    obj.setdefault("type", "Opaque")


def default_lease(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    obj.setdefault("spec", {})


CONFIG_MAP = top(
    "ConfigMap",
    {"data": Field(STRING_MAP), "binaryData": Field(STRING_MAP), "immutable": Field(BOOL)},
)
SECRET = top(
    "Secret",
    {
        "data": Field(STRING_MAP),
        "stringData": Field(STRING_MAP),
        "type": Field(STRING),
        "immutable": Field(BOOL),
    },
)
LEASE_SPEC = Struct(
    "LeaseSpec",
    {
        "holderIdentity": Field(STRING),
        "leaseDurationSeconds": Field(INT32),
        "acquireTime": Field(MICROTIME),
        "renewTime": Field(MICROTIME),
        "leaseTransitions": Field(INT32),
        "strategy": Field(STRING),
        "preferredHolder": Field(STRING),
    },
)
