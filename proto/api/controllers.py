"""CompositeController objects, parsed once into frozen, validated views.

``parse_composite_controller(obj)`` takes the object as read from the API server (a decoded
dict) and returns a ``CompositeController`` or raises ``InvalidControllerError`` naming the
field. Defaults are Metacontroller's:

- hook ``version`` v1; webhook ``timeout`` 10 s when absent, zero or negative (a Go duration
  string otherwise); ``responseUnMarshallMode`` loose for v1 hooks and strict for v2;
  ``service.port`` 80 and ``service.protocol`` http; ``url`` wins over ``service`` + ``path``.
- ``updateStrategy.method`` OnDelete; ``revisionHistory.fieldPaths`` ``["spec"]``;
  ``parentResource.labelSelector`` absent selects every parent; ``generateSelector`` false.
- ``resyncPeriodSeconds`` is kept as given; ``resync_period_seconds`` applies Metacontroller's
  one-second floor.
- The connection settings (``caBundle``, ``clientTLS``, ``authorization``, ``basicAuth``,
  ``etag``, ``spec.endpointConfigs``) are validated here with Metacontroller's rules
  (``proto.api.endpoints``); ``connection_settings()`` says which apply to each hook.

Stricter than Metacontroller, on purpose (each would only fail later, on every sync): ``hooks``
and ``hooks.sync`` are required, a webhook needs ``url`` or ``service`` + ``path``, the URL must
be http(s), ``path`` must start with ``/``, and a child resource may be listed once.
``preUpdateChild``/``postUpdateChild`` are accepted and never called, as upstream;
``proto.api.unsupported`` lists them (and every other field not acted on) for a warning.

The raw object stays available as ``.raw``: hook requests send it whole (``controller``).
Hook, webhook and update-strategy parsing are shared with DecoratorControllers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from proto.api import names
from proto.api.duration import parse_seconds
from proto.api.endpoints import (
    EndpointConfig,
    ETag,
    Settings,
    effective_settings,
    parse_endpoint_configs,
    parse_etag,
    parse_settings,
)
from proto.api.errors import DurationError, InvalidControllerError
from proto.api.fields import Fields
from proto.api.selectors import Selector
from proto.runtime.redact import masked_url

DEFAULT_TIMEOUT_SECONDS = 10.0
DEFAULT_SERVICE_PORT = 80
DEFAULT_SERVICE_PROTOCOL = "http"
DEFAULT_REVISION_FIELD_PATHS = ("spec",)
MIN_RESYNC_PERIOD_SECONDS = 1.0
_INT32_MAX = 2**31 - 1


class HookVersion(StrEnum):
    """Hook API version: object-map keys, related-resource rules, default strictness."""

    V1 = "v1"
    V2 = "v2"


class ResponseMode(StrEnum):
    """``webhook.responseUnMarshallMode``: what unknown or duplicate response fields do."""

    LOOSE = "loose"
    STRICT = "strict"


class HookName(StrEnum):
    """The hooks metashard calls; also the ``<hook>`` of the hook metric names."""

    SYNC = "sync"
    FINALIZE = "finalize"
    CUSTOMIZE = "customize"


class UpdateMethod(StrEnum):
    """``updateStrategy.method`` of a child (or attachment) resource."""

    ON_DELETE = "OnDelete"
    RECREATE = "Recreate"
    IN_PLACE = "InPlace"
    ROLLING_RECREATE = "RollingRecreate"
    ROLLING_IN_PLACE = "RollingInPlace"

    @property
    def rolling(self) -> bool:
        return self in (UpdateMethod.ROLLING_RECREATE, UpdateMethod.ROLLING_IN_PLACE)

    @property
    def recreates(self) -> bool:
        """A changed child is deleted, and created again by a later sync."""
        return self in (UpdateMethod.RECREATE, UpdateMethod.ROLLING_RECREATE)

    @property
    def in_place(self) -> bool:
        """A changed child is updated where it stands."""
        return self in (UpdateMethod.IN_PLACE, UpdateMethod.ROLLING_IN_PLACE)


@dataclass(frozen=True, slots=True)
class ServiceRef:
    name: str
    namespace: str
    port: int = DEFAULT_SERVICE_PORT
    protocol: str = DEFAULT_SERVICE_PROTOCOL


@dataclass(frozen=True, slots=True)
class Webhook:
    """Where and how to call one hook.

    ``url`` is the effective URL. ``settings`` are the webhook's own ``caBundle``,
    ``clientTLS``, ``authorization`` and ``basicAuth`` (``proto.api.endpoints``; the
    controller's ``endpointConfigs`` apply when all four are absent).
    """

    url: str
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    service: ServiceRef | None = None
    path: str | None = None
    etag: ETag | None = None
    settings: Settings = Settings()  # noqa: RUF009 (frozen, immutable)


@dataclass(frozen=True, slots=True)
class Hook:
    version: HookVersion
    webhook: Webhook
    response_mode: ResponseMode
    """Explicit ``responseUnMarshallMode``, else loose for v1 and strict for v2."""


@dataclass(frozen=True, slots=True)
class CompositeHooks:
    sync: Hook
    finalize: Hook | None = None
    customize: Hook | None = None

    def get(self, name: HookName) -> Hook | None:
        if name is HookName.SYNC:
            return self.sync
        return self.finalize if name is HookName.FINALIZE else self.customize


@dataclass(frozen=True, slots=True)
class StatusCheck:
    """One ``statusChecks.conditions`` entry: a condition the child must show."""

    type: str
    status: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class UpdateStrategy:
    method: UpdateMethod = UpdateMethod.ON_DELETE
    status_checks: tuple[StatusCheck, ...] = ()


@dataclass(frozen=True, slots=True)
class ParentResource:
    api_version: str
    resource: str
    label_selector: Selector = Selector.everything()  # noqa: RUF009 (frozen, immutable)
    revision_field_paths: tuple[str, ...] = DEFAULT_REVISION_FIELD_PATHS
    ignore_status_changes: bool = False


@dataclass(frozen=True, slots=True)
class ChildResource:
    api_version: str
    resource: str
    update_strategy: UpdateStrategy = UpdateStrategy()

    @property
    def group(self) -> str:
        return group_of(self.api_version)


@dataclass(frozen=True, slots=True, kw_only=True)
class LambdaController:
    """What every controller kind has (``CompositeController``, and
    ``proto.api.decorator.DecoratorController``)."""

    name: str
    uid: str
    hooks: CompositeHooks
    resync_period: int | None
    """``resyncPeriodSeconds`` as written (``None`` when absent)."""
    endpoint_configs: tuple[EndpointConfig, ...]
    raw: Mapping[str, Any]
    """The object as read; sent whole as the hook request's ``controller``. Do not mutate."""

    @property
    def resync_period_seconds(self) -> float | None:
        """The periodic resync interval, with Metacontroller's floor of one second."""
        if self.resync_period is None:
            return None
        return max(float(self.resync_period), MIN_RESYNC_PERIOD_SECONDS)

    def connection_settings(self) -> dict[HookName, Settings]:
        """Hook name -> the connection settings it uses: its own, or its endpoint config's
        (``proto.api.endpoints``)."""
        out: dict[HookName, Settings] = {}
        for name in HookName:
            hook = self.hooks.get(name)
            if hook is not None:
                webhook = hook.webhook
                out[name] = effective_settings(webhook.url, webhook.settings, self.endpoint_configs)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CompositeController(LambdaController):
    parent: ParentResource
    children: tuple[ChildResource, ...]
    generate_selector: bool

    @property
    def finalizer(self) -> str:
        return names.composite_finalizer(self.name)

    @property
    def rolling(self) -> bool:
        """True when some child type rolls out revision by revision."""
        return any(c.update_strategy.method.rolling for c in self.children)


def group_of(api_version: str) -> str:
    """``apps/v1`` -> ``apps``; ``v1`` -> ``""`` (the core group)."""
    group, _, _ = api_version.rpartition("/")
    return group


# --- parsing ----------------------------------------------------------------------------------


def api_version_of(fields: Fields, key: str) -> str:
    """A ``group/version`` (or core ``v1``) field."""
    value = fields.require_str(key)
    parts = value.split("/")
    if len(parts) > 2 or not all(parts):
        raise fields.fail(key, f'invalid apiVersion "{value}": expected "group/version" or "v1"')
    return value


def _parse_service(fields: Fields) -> ServiceRef:
    name = fields.require_str("name")
    namespace = fields.require_str("namespace")
    port = fields.get_int("port")
    if port is None:
        port = DEFAULT_SERVICE_PORT
    elif not 1 <= port <= 65535:
        raise fields.fail("port", f"must be between 1 and 65535, not {port}")
    protocol = fields.get_str("protocol") or DEFAULT_SERVICE_PROTOCOL
    if protocol not in ("http", "https"):
        raise fields.fail("protocol", f'must be "http" or "https", not "{protocol}"')
    return ServiceRef(name=name, namespace=namespace, port=port, protocol=protocol)


def _parse_timeout(fields: Fields) -> float:
    text = fields.get_str("timeout")
    if text is None:
        return DEFAULT_TIMEOUT_SECONDS
    try:
        seconds = parse_seconds(text)
    except DurationError as err:
        raise fields.fail("timeout", str(err)) from None
    return seconds if seconds > 0 else DEFAULT_TIMEOUT_SECONDS


def parse_webhook(fields: Fields) -> Webhook:
    """One ``webhook`` object. Raises the reader's error class."""
    url = fields.get_str("url")
    service_fields = fields.get_object("service")
    service = None if service_fields is None else _parse_service(service_fields)
    path = fields.get_str("path")
    if url is None:
        if service is None:
            raise fields.error(
                f"{fields.path}: must specify either full 'url', or both 'service' and 'path'"
            )
        if path is None:
            raise fields.fail("path", "required with 'service'")
        if not path.startswith("/"):
            raise fields.fail("path", f'must start with "/", not "{path}"')
        url = f"{service.protocol}://{service.name}.{service.namespace}:{service.port}{path}"
    else:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            shown = masked_url(url)
            raise fields.fail("url", f'must be an absolute http or https URL, not "{shown}"')
    return Webhook(
        url=url,
        timeout_seconds=_parse_timeout(fields),
        service=service,
        path=path,
        etag=parse_etag(fields.get_object("etag")),
        settings=parse_settings(fields),
    )


def parse_hook(fields: Fields) -> Hook:
    """One hook (``{version, webhook}``). Raises the reader's error class."""
    version_text = fields.get_str("version") or HookVersion.V1.value
    try:
        version = HookVersion(version_text)
    except ValueError:
        raise fields.fail("version", f'must be "v1" or "v2", not "{version_text}"') from None
    webhook_fields = fields.require_object("webhook")
    webhook = parse_webhook(webhook_fields)
    mode_text = webhook_fields.get_str("responseUnMarshallMode")
    if mode_text is None:
        mode = ResponseMode.STRICT if version is HookVersion.V2 else ResponseMode.LOOSE
    else:
        try:
            mode = ResponseMode(mode_text)
        except ValueError:
            raise webhook_fields.fail(
                "responseUnMarshallMode", f'must be "loose" or "strict", not "{mode_text}"'
            ) from None
    return Hook(version=version, webhook=webhook, response_mode=mode)


def parse_update_strategy(fields: Fields | None) -> UpdateStrategy:
    """An ``updateStrategy`` object (``None``: the default, OnDelete)."""
    if fields is None:
        return UpdateStrategy()
    method_text = fields.get_str("method") or UpdateMethod.ON_DELETE.value
    try:
        method = UpdateMethod(method_text)
    except ValueError:
        expected = ", ".join(m.value for m in UpdateMethod)
        raise fields.fail(
            "method", f'unknown update method "{method_text}" (expected one of {expected})'
        ) from None
    checks: list[StatusCheck] = []
    status_checks = fields.get_object("statusChecks")
    if status_checks is not None:
        for condition in status_checks.get_objects("conditions"):
            condition_type = condition.require_str("type")
            checks.append(
                StatusCheck(
                    type=condition_type,
                    status=condition.get_str("status"),
                    reason=condition.get_str("reason"),
                )
            )
    return UpdateStrategy(method=method, status_checks=tuple(checks))


def _parse_parent(fields: Fields) -> ParentResource:
    history = fields.get_object("revisionHistory")
    paths = tuple(history.get_strings("fieldPaths")) if history is not None else ()
    return ParentResource(
        api_version=api_version_of(fields, "apiVersion"),
        resource=fields.require_str("resource"),
        label_selector=fields.get_selector("labelSelector") or Selector.everything(),
        revision_field_paths=paths or DEFAULT_REVISION_FIELD_PATHS,
        ignore_status_changes=bool(fields.get_bool("ignoreStatusChanges")),
    )


def parse_child_resources(spec: Fields, key: str, what: str) -> tuple[ChildResource, ...]:
    """``childResources`` (``attachments``): each resource at most once."""
    children: list[ChildResource] = []
    seen: dict[tuple[str, str], int] = {}
    for i, item in enumerate(spec.get_objects(key)):
        child = ChildResource(
            api_version=api_version_of(item, "apiVersion"),
            resource=item.require_str("resource"),
            update_strategy=parse_update_strategy(item.get_object("updateStrategy")),
        )
        ident = (child.group, child.resource)
        if ident in seen:
            raise spec.fail_item(
                key,
                i,
                f'duplicate {what} resource {child.resource} in group "{child.group}" '
                f"(already listed at [{seen[ident]}])",
            )
        seen[ident] = i
        children.append(child)
    return tuple(children)


def parse_hooks(spec: Fields, kind: str) -> CompositeHooks:
    """``hooks``: ``sync`` required, ``finalize`` and ``customize`` optional."""
    hooks = spec.get_object("hooks")
    if hooks is None:
        raise spec.fail("hooks", "required (no hooks defined)")
    sync = hooks.get_object("sync")
    if sync is None:
        raise hooks.fail("sync", f"required (a {kind} needs a sync hook)")
    finalize = hooks.get_object("finalize")
    customize = hooks.get_object("customize")
    return CompositeHooks(
        sync=parse_hook(sync),
        finalize=None if finalize is None else parse_hook(finalize),
        customize=None if customize is None else parse_hook(customize),
    )


def check_type(obj: Fields, kind: str) -> None:
    api_version = obj.get_str("apiVersion")
    if api_version is not None and api_version != names.API_VERSION:
        raise obj.fail("apiVersion", f'must be "{names.API_VERSION}", not "{api_version}"')
    found = obj.get_str("kind")
    if found is not None and found != kind:
        raise obj.fail("kind", f'must be "{kind}", not "{found}"')


def parse_resync_period(spec: Fields) -> int | None:
    """``resyncPeriodSeconds`` as written: an int32, or ``None`` when absent."""
    resync = spec.get_int("resyncPeriodSeconds")
    if resync is not None and not -(_INT32_MAX + 1) <= resync <= _INT32_MAX:
        raise spec.fail("resyncPeriodSeconds", f"must fit in 32 bits, not {resync}")
    return resync


def parse_composite_controller(obj: Mapping[str, Any]) -> CompositeController:
    """Validate a CompositeController object. Raises ``InvalidControllerError``."""
    top = Fields.of(obj, "", InvalidControllerError)
    check_type(top, names.COMPOSITE_CONTROLLER)
    metadata = top.require_object("metadata")
    name = metadata.require_str("name")
    spec = top.require_object("spec")
    parent = spec.require_object("parentResource")
    return CompositeController(
        name=name,
        uid=metadata.get_str("uid") or "",
        parent=_parse_parent(parent),
        children=parse_child_resources(spec, "childResources", "child"),
        hooks=parse_hooks(spec, names.COMPOSITE_CONTROLLER),
        resync_period=parse_resync_period(spec),
        generate_selector=bool(spec.get_bool("generateSelector")),
        endpoint_configs=parse_endpoint_configs(spec),
        raw=obj,
    )
