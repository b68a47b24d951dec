"""How a webhook connects: TLS roots, client certificate, credentials, ETag (pure).

Parsing (``parse_settings``, ``parse_endpoint_configs``, ``parse_etag``) turns the fields of a
``webhook`` or a ``spec.endpointConfigs[]`` entry into frozen values, with Metacontroller's
defaults and rules; a violation raises the reader's error class (``InvalidControllerError``:
the controller is reported and not run, like any other invalid controller):

- ``caBundle``: exactly one of ``inline`` (PEM text), ``secretRef`` or ``configMapRef``
  (``{name, namespace, key}``, key default ``ca.crt``).
- ``clientTLS.secretRef`` (``name``, ``namespace``) with ``certKey`` (``tls.crt``) and
  ``privateKeyKey`` (``tls.key``).
- ``authorization``: ``type`` (default ``Bearer``; ``Basic`` in any case is refused: use
  ``basicAuth``) and ``secretRef{name, namespace, key}`` holding the credentials.
- ``basicAuth.secretRef{name, namespace}`` with ``usernameKey`` (``username``) and
  ``passwordKey`` (``password``).
- ``authorization`` and ``basicAuth`` are mutually exclusive.
- ``etag``: ``enabled``, ``cacheTimeoutSeconds``, ``cacheCleanupSeconds`` (non-negative
  integers, each optional on its own).

Selection (``effective_settings``): a webhook that sets any of the four connection fields uses
exactly those (no field-level merge); otherwise the first ``endpointConfigs`` entry whose
``host`` matches the URL's authority applies (``match_endpoint_config``): case-insensitive,
an ``https`` port 443 or ``http`` port 80 equal to no port. A service-form webhook's URL is
``<protocol>://<name>.<namespace>:<port><path>``, so its host is ``name.namespace[:port]``.

Resolution (``resolve``): the settings plus the data of the Secrets and ConfigMaps they name
(``lookup``, the caller's I/O) give a ``Connection``: PEM roots, client certificate and key, the
``Authorization`` header value. A missing object or key, an empty value or a line break in a
credential raises ``UnresolvedReference`` naming the object and the key, never the value.
``Connection``s travel to workers as JSON (``encode_connections``/``decode_connections``).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

import orjson

from proto.api.errors import UnresolvedReference
from proto.api.fields import Fields

DEFAULT_CA_KEY = "ca.crt"
DEFAULT_CERT_KEY = "tls.crt"
DEFAULT_PRIVATE_KEY_KEY = "tls.key"
DEFAULT_USERNAME_KEY = "username"
DEFAULT_PASSWORD_KEY = "password"
DEFAULT_AUTHORIZATION_TYPE = "Bearer"


class RefKind(StrEnum):
    SECRET = "Secret"
    CONFIG_MAP = "ConfigMap"


@dataclass(frozen=True, slots=True, order=True)
class ObjectRef:
    """A Secret or ConfigMap the coordinator must read."""

    kind: RefKind
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind.value} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class KeyRef:
    """One key of a Secret or ConfigMap."""

    object: ObjectRef
    key: str

    def __str__(self) -> str:
        return f'key "{self.key}" of {self.object}'


@dataclass(frozen=True, slots=True)
class CABundle:
    inline: str | None = None
    ref: KeyRef | None = None


@dataclass(frozen=True, slots=True)
class ClientTLS:
    cert: KeyRef
    private_key: KeyRef


@dataclass(frozen=True, slots=True)
class Authorization:
    type: str
    credentials: KeyRef


@dataclass(frozen=True, slots=True)
class BasicAuth:
    username: KeyRef
    password: KeyRef


@dataclass(frozen=True, slots=True)
class Settings:
    """The four connection fields of a webhook or an endpoint config (all optional)."""

    ca_bundle: CABundle | None = None
    client_tls: ClientTLS | None = None
    authorization: Authorization | None = None
    basic_auth: BasicAuth | None = None

    @property
    def empty(self) -> bool:
        return (
            self.ca_bundle is None
            and self.client_tls is None
            and self.authorization is None
            and self.basic_auth is None
        )

    def key_refs(self) -> tuple[KeyRef, ...]:
        refs: list[KeyRef] = []
        if self.ca_bundle is not None and self.ca_bundle.ref is not None:
            refs.append(self.ca_bundle.ref)
        if self.client_tls is not None:
            refs += (self.client_tls.cert, self.client_tls.private_key)
        if self.authorization is not None:
            refs.append(self.authorization.credentials)
        if self.basic_auth is not None:
            refs += (self.basic_auth.username, self.basic_auth.password)
        return tuple(refs)


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    host: str
    settings: Settings


@dataclass(frozen=True, slots=True)
class ETag:
    enabled: bool = False
    cache_timeout_seconds: int | None = None
    cache_cleanup_seconds: int | None = None


# --- parsing ----------------------------------------------------------------------------------


def _ref(fields: Fields, kind: RefKind, key: str, default_key: str | None) -> KeyRef:
    """``{name, namespace[, key]}`` at ``fields``; ``key`` falls back to ``default_key``."""
    name = fields.require_str("name")
    namespace = fields.require_str("namespace")
    chosen = fields.get_str(key) or default_key
    if chosen is None:
        chosen = fields.require_str(key)
    return KeyRef(ObjectRef(kind, namespace, name), chosen)


def _ca_bundle(fields: Fields) -> CABundle:
    inline = fields.get_str("inline")
    secret = fields.get_object("secretRef")
    config_map = fields.get_object("configMapRef")
    sources = sum(x is not None for x in (inline, secret, config_map))
    if sources != 1:
        problem = "none" if sources == 0 else "more than one"
        raise fields.error(
            f"{fields.path}: {problem} of inline, secretRef, or configMapRef is specified "
            "(exactly one is required)"
        )
    if secret is not None:
        return CABundle(ref=_ref(secret, RefKind.SECRET, "key", DEFAULT_CA_KEY))
    if config_map is not None:
        return CABundle(ref=_ref(config_map, RefKind.CONFIG_MAP, "key", DEFAULT_CA_KEY))
    return CABundle(inline=inline)


def _secret_keys(fields: Fields, *keys: tuple[str, str]) -> tuple[KeyRef, ...]:
    """``secretRef{name, namespace}`` plus one key per ``(field, default)`` of ``fields``."""
    secret = fields.require_object("secretRef")
    obj = ObjectRef(RefKind.SECRET, secret.require_str("namespace"), secret.require_str("name"))
    return tuple(KeyRef(obj, fields.get_str(name) or default) for name, default in keys)


def parse_settings(fields: Fields) -> Settings:
    """The connection fields of a webhook or endpoint config. Raises the reader's error."""
    ca_fields = fields.get_object("caBundle")
    tls_fields = fields.get_object("clientTLS")
    auth_fields = fields.get_object("authorization")
    basic_fields = fields.get_object("basicAuth")
    if auth_fields is not None and basic_fields is not None:
        raise fields.error(f"{fields.path}: authorization and basicAuth are mutually exclusive")
    client_tls = None
    if tls_fields is not None:
        cert, key = _secret_keys(
            tls_fields,
            ("certKey", DEFAULT_CERT_KEY),
            ("privateKeyKey", DEFAULT_PRIVATE_KEY_KEY),
        )
        client_tls = ClientTLS(cert, key)
    authorization = None
    if auth_fields is not None:
        kind = (auth_fields.get_str("type") or DEFAULT_AUTHORIZATION_TYPE).strip()
        if kind.lower() == "basic":
            raise auth_fields.fail(
                "type", f'"{kind}" is not supported; use the basicAuth field instead'
            )
        if not kind or any(c.isspace() for c in kind):
            raise auth_fields.fail("type", f'must be one word, not "{kind}"')
        secret = auth_fields.require_object("secretRef")
        authorization = Authorization(kind, _ref(secret, RefKind.SECRET, "key", None))
    basic_auth = None
    if basic_fields is not None:
        username, password = _secret_keys(
            basic_fields,
            ("usernameKey", DEFAULT_USERNAME_KEY),
            ("passwordKey", DEFAULT_PASSWORD_KEY),
        )
        basic_auth = BasicAuth(username, password)
    return Settings(
        ca_bundle=None if ca_fields is None else _ca_bundle(ca_fields),
        client_tls=client_tls,
        authorization=authorization,
        basic_auth=basic_auth,
    )


def parse_endpoint_configs(spec: Fields) -> tuple[EndpointConfig, ...]:
    """``spec.endpointConfigs[]``: each needs a ``host``."""
    return tuple(
        EndpointConfig(host=item.require_str("host"), settings=parse_settings(item))
        for item in spec.get_objects("endpointConfigs")
    )


def parse_etag(fields: Fields | None) -> ETag | None:
    """``webhook.etag`` (``None`` when absent)."""
    if fields is None:
        return None
    numbers: dict[str, int | None] = {}
    for key in ("cacheTimeoutSeconds", "cacheCleanupSeconds"):
        value = fields.get_int(key)
        if value is not None and value < 0:
            raise fields.fail(key, f"must not be negative, not {value}")
        numbers[key] = value
    return ETag(
        enabled=bool(fields.get_bool("enabled")),
        cache_timeout_seconds=numbers["cacheTimeoutSeconds"],
        cache_cleanup_seconds=numbers["cacheCleanupSeconds"],
    )


# --- selection --------------------------------------------------------------------------------


def match_endpoint_config(url: str, configs: Iterable[EndpointConfig]) -> EndpointConfig | None:
    """The first config whose ``host`` names the authority of ``url`` (module docstring)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    hostname = parts.hostname or ""
    if ":" in hostname:
        hostname = f"[{hostname}]"
    default = {"https": 443, "http": 80}.get(parts.scheme)
    names = {f"{hostname}:{port if port is not None else default}".lower()}
    if port is None or port == default:
        names.add(hostname.lower())
    for config in configs:
        if config.host.lower() in names:
            return config
    return None


def effective_settings(url: str, own: Settings, configs: Iterable[EndpointConfig]) -> Settings:
    """The webhook's own settings if it sets any, else those of the matching endpoint config."""
    if not own.empty:
        return own
    config = match_endpoint_config(url, configs)
    return Settings() if config is None else config.settings


# --- resolution -------------------------------------------------------------------------------


Lookup = Callable[[ObjectRef], Mapping[str, bytes] | None]
"""The data of a Secret or ConfigMap (values decoded to bytes), ``None`` if it does not exist."""


@dataclass(frozen=True, slots=True, repr=False)
class Connection:
    """What a hook call needs, resolved: PEM text and the ``Authorization`` header value.

    Its ``repr`` says which parts are present, never their content.
    """

    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    authorization: str | None = None
    """``None``: the hook client sends the URL's userinfo, if any, as Basic auth."""
    error: str | None = None
    """Why the settings could not be resolved: the hook must not be called."""

    def __repr__(self) -> str:
        present = [
            name
            for name in ("ca_bundle", "client_cert", "client_key", "authorization")
            if getattr(self, name) is not None
        ]
        error = f", error={self.error!r}" if self.error is not None else ""
        return f"Connection(set={present}{error})"

    @property
    def tls_material(self) -> tuple[str | None, str | None, str | None]:
        return (self.ca_bundle, self.client_cert, self.client_key)


def _value(ref: KeyRef, lookup: Lookup) -> bytes:
    data = lookup(ref.object)
    if data is None:
        raise UnresolvedReference(f"{ref.object} not found")
    if ref.key not in data:
        raise UnresolvedReference(f"{ref.object} has no key {ref.key!r}")
    value = data[ref.key]
    if not value.strip():
        raise UnresolvedReference(f"{ref} is empty")
    return value


def _text(ref: KeyRef, lookup: Lookup, *, single_line: bool) -> str:
    try:
        text = _value(ref, lookup).decode("utf-8").strip()
    except UnicodeDecodeError:
        raise UnresolvedReference(f"{ref} is not UTF-8 text") from None
    if single_line and ("\n" in text or "\r" in text):
        raise UnresolvedReference(f"{ref} holds a line break, which cannot go into an HTTP header")
    return text


def resolve(settings: Settings, lookup: Lookup) -> Connection:
    """The connection of ``settings``; raises ``UnresolvedReference`` (object and key, no value)."""
    pem = None
    ca = settings.ca_bundle
    if ca is not None:
        pem = (
            (ca.inline or "").strip()
            if ca.ref is None
            else _text(ca.ref, lookup, single_line=False)
        )
        if "-----BEGIN CERTIFICATE-----" not in pem:
            where = "caBundle.inline" if ca.ref is None else str(ca.ref)
            raise UnresolvedReference(f"{where} holds no PEM certificate")
    cert = key = None
    if settings.client_tls is not None:
        cert = _text(settings.client_tls.cert, lookup, single_line=False)
        key = _text(settings.client_tls.private_key, lookup, single_line=False)
    header = None
    if settings.authorization is not None:
        token = _text(settings.authorization.credentials, lookup, single_line=True)
        header = f"{settings.authorization.type} {token}"
    elif settings.basic_auth is not None:
        username = _text(settings.basic_auth.username, lookup, single_line=True)
        password = _text(settings.basic_auth.password, lookup, single_line=True)
        header = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
    return Connection(ca_bundle=pem, client_cert=cert, client_key=key, authorization=header)


def resolve_all(
    settings: Mapping[str, Settings], lookup: Lookup
) -> tuple[dict[str, Connection], list[str]]:
    """Each hook's connection, and the problems found (one per hook whose settings fail).

    A hook whose settings cannot be resolved gets a ``Connection`` carrying only ``error``:
    it must not be called. Hooks sharing settings share the problem (reported once).
    """
    connections: dict[str, Connection] = {}
    problems: list[str] = []
    for hook, chosen in settings.items():
        try:
            connections[hook] = resolve(chosen, lookup)
        except UnresolvedReference as err:
            connections[hook] = Connection(error=str(err))
            if str(err) not in problems:
                problems.append(str(err))
    return connections, problems


def object_refs(settings: Iterable[Settings]) -> set[ObjectRef]:
    """Every Secret and ConfigMap the settings name."""
    return {ref.object for chosen in settings for ref in chosen.key_refs()}


def encode_connections(connections: Mapping[str, Connection]) -> bytes:
    """Hook name -> connection, as JSON bytes (only non-empty connections are kept)."""
    out: dict[str, dict[str, Any]] = {}
    for hook, connection in sorted(connections.items()):
        values = {
            "caBundle": connection.ca_bundle,
            "clientCert": connection.client_cert,
            "clientKey": connection.client_key,
            "authorization": connection.authorization,
            "error": connection.error,
        }
        kept = {k: v for k, v in values.items() if v is not None}
        if kept:
            out[hook] = kept
    return orjson.dumps(out, option=orjson.OPT_SORT_KEYS) if out else b""


def decode_connections(data: bytes) -> dict[str, Connection]:
    """The inverse of ``encode_connections``; raises ``ValueError`` for a malformed payload."""
    if not data:
        return {}
    decoded = orjson.loads(data)
    if not isinstance(decoded, dict):
        raise ValueError("hook connections: expected a JSON object")
    out: dict[str, Connection] = {}
    for hook, values in decoded.items():
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise ValueError(f"hook connections: {hook!r} must map names to strings")
        out[hook] = Connection(
            ca_bundle=values.get("caBundle"),
            client_cert=values.get("clientCert"),
            client_key=values.get("clientKey"),
            authorization=values.get("authorization"),
            error=values.get("error"),
        )
    return out
