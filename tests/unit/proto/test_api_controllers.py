"""CompositeController parsing: defaults, the effective webhook URL, and every rejection."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from proto.api.controllers import (
    DEFAULT_TIMEOUT_SECONDS,
    HookName,
    HookVersion,
    ResponseMode,
    ServiceRef,
    StatusCheck,
    UpdateMethod,
    parse_composite_controller,
)
from proto.api.endpoints import (
    BasicAuth,
    CABundle,
    EndpointConfig,
    ETag,
    KeyRef,
    ObjectRef,
    RefKind,
    Settings,
)
from proto.api.errors import InvalidControllerError
from tests.unit.proto.api_examples import FANOUT, load_simple_yaml


def controller(**spec: Any) -> dict[str, Any]:
    """A minimal valid controller with ``spec`` fields replaced (``None`` deletes)."""
    obj = copy.deepcopy(FANOUT)
    for key, value in spec.items():
        if value is None:
            obj["spec"].pop(key, None)
        else:
            obj["spec"][key] = value
    return obj


def webhook(**fields: Any) -> dict[str, Any]:
    return controller(hooks={"sync": {"webhook": fields}})


def test_fanout_copy_matches_the_shared_manifest(shared_dir: Path) -> None:
    path = shared_dir / "bench/fanoutbench/manifests/fanout-compositecontroller.yaml"
    text = path.read_text().replace("${HOOK_URL}", "http://127.0.0.1:8080/sync")
    assert load_simple_yaml(text) == FANOUT


def test_fanout_example() -> None:
    cc = parse_composite_controller(FANOUT)
    assert cc.name == "fanout-bench"
    assert cc.generate_selector is True
    assert cc.parent.api_version == "bench.metashard.io/v1"
    assert cc.parent.resource == "fanouts"
    assert cc.parent.revision_field_paths == ("spec",)
    assert cc.parent.label_selector.empty
    assert cc.parent.ignore_status_changes is False
    (child,) = cc.children
    assert (child.api_version, child.resource, child.group) == ("v1", "configmaps", "")
    assert child.update_strategy.method is UpdateMethod.IN_PLACE
    assert cc.hooks.sync.webhook.url == "http://127.0.0.1:8080/sync"
    assert cc.hooks.sync.webhook.timeout_seconds == 10.0
    assert cc.hooks.get(HookName.SYNC) is cc.hooks.sync
    assert cc.hooks.get(HookName.FINALIZE) is None
    assert cc.hooks.get(HookName.CUSTOMIZE) is None
    assert cc.finalizer == "metacontroller.io/compositecontroller-fanout-bench"
    assert cc.raw is FANOUT
    assert cc.rolling is False
    assert cc.resync_period_seconds is None


def test_defaults() -> None:
    cc = parse_composite_controller(
        controller(
            childResources=[{"apiVersion": "apps/v1", "resource": "statefulsets"}],
            hooks={
                "sync": {"webhook": {"url": "http://hook/sync"}},
                "finalize": {"version": "v2", "webhook": {"url": "https://hook/fin"}},
            },
        )
    )
    assert cc.children[0].update_strategy.method is UpdateMethod.ON_DELETE
    assert cc.children[0].update_strategy.status_checks == ()
    assert cc.children[0].group == "apps"
    sync, finalize = cc.hooks.sync, cc.hooks.finalize
    assert finalize is not None
    assert sync.version is HookVersion.V1 and sync.response_mode is ResponseMode.LOOSE
    assert finalize.version is HookVersion.V2 and finalize.response_mode is ResponseMode.STRICT
    assert sync.webhook.timeout_seconds == DEFAULT_TIMEOUT_SECONDS
    assert sync.webhook.service is None and sync.webhook.etag is None


def test_everything_set() -> None:
    cc = parse_composite_controller(
        controller(
            parentResource={
                "apiVersion": "ctl.example.com/v1",
                "resource": "things",
                "labelSelector": {"matchLabels": {"tier": "gold"}},
                "revisionHistory": {"fieldPaths": ["spec.template", "spec.size"]},
                "ignoreStatusChanges": True,
            },
            childResources=[
                {
                    "apiVersion": "v1",
                    "resource": "pods",
                    "updateStrategy": {
                        "method": "RollingRecreate",
                        "statusChecks": {
                            "conditions": [{"type": "Ready", "status": "True"}, {"type": "X"}]
                        },
                    },
                }
            ],
            hooks={
                "sync": {
                    "version": "v1",
                    "webhook": {
                        "service": {"name": "hooks", "namespace": "ops", "port": 8443},
                        "path": "/sync",
                        "timeout": "1m30s",
                        "responseUnMarshallMode": "strict",
                        "etag": {"enabled": True, "cacheTimeoutSeconds": 60},
                        "caBundle": {"inline": "PEM"},
                    },
                },
                "customize": {
                    "webhook": {
                        "service": {"name": "c", "namespace": "ops", "protocol": "https"},
                        "path": "/customize",
                    }
                },
                "preUpdateChild": {"webhook": {"url": "http://ignored"}},
            },
            resyncPeriodSeconds=0,
            generateSelector=False,
            endpointConfigs=[
                {
                    "host": "hooks.ops:8443",
                    "basicAuth": {"secretRef": {"name": "b", "namespace": "o"}},
                }
            ],
        )
    )
    assert cc.parent.label_selector.matches({"tier": "gold"})
    assert not cc.parent.label_selector.matches({"tier": "silver"})
    assert cc.parent.revision_field_paths == ("spec.template", "spec.size")
    assert cc.parent.ignore_status_changes is True
    strategy = cc.children[0].update_strategy
    assert strategy.method is UpdateMethod.ROLLING_RECREATE and strategy.method.rolling
    assert strategy.status_checks == (StatusCheck("Ready", "True"), StatusCheck("X"))
    assert cc.rolling is True
    hook = cc.hooks.sync.webhook
    assert hook.url == "http://hooks.ops:8443/sync"
    assert hook.service == ServiceRef("hooks", "ops", 8443, "http")
    assert hook.timeout_seconds == 90.0
    assert cc.hooks.sync.response_mode is ResponseMode.STRICT
    assert hook.etag == ETag(enabled=True, cache_timeout_seconds=60)
    assert hook.settings == Settings(ca_bundle=CABundle(inline="PEM"))
    customize = cc.hooks.customize
    assert customize is not None
    assert customize.webhook.url == "https://c.ops:80/customize"
    assert cc.resync_period == 0 and cc.resync_period_seconds == 1.0
    (config,) = cc.endpoint_configs
    secret = ObjectRef(RefKind.SECRET, "o", "b")
    assert config == EndpointConfig(
        "hooks.ops:8443",
        Settings(basic_auth=BasicAuth(KeyRef(secret, "username"), KeyRef(secret, "password"))),
    )
    settings = cc.connection_settings()
    assert settings[HookName.SYNC] == hook.settings  # its own: the endpoint config is ignored
    assert settings[HookName.CUSTOMIZE] == Settings()  # c.ops:80 matches no config
    assert HookName.FINALIZE not in settings


@pytest.mark.parametrize(
    ("method", "rolling", "recreates", "in_place"),
    [
        (UpdateMethod.ON_DELETE, False, False, False),
        (UpdateMethod.RECREATE, False, True, False),
        (UpdateMethod.IN_PLACE, False, False, True),
        (UpdateMethod.ROLLING_RECREATE, True, True, False),
        (UpdateMethod.ROLLING_IN_PLACE, True, False, True),
    ],
)
def test_update_methods_say_how_a_changed_child_is_updated(
    method: UpdateMethod, rolling: bool, recreates: bool, in_place: bool
) -> None:
    assert (method.rolling, method.recreates, method.in_place) == (rolling, recreates, in_place)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"url": "http://u/x", "service": {"name": "s", "namespace": "n"}, "path": "/p"}, "u/x"),
        ({"service": {"name": "s", "namespace": "n"}, "path": "/p"}, "http://s.n:80/p"),
        (
            {
                "service": {"name": "s", "namespace": "n", "port": 9, "protocol": "https"},
                "path": "/",
            },
            "https://s.n:9/",
        ),
    ],
)
def test_effective_url(fields: dict[str, Any], expected: str) -> None:
    url = parse_composite_controller(webhook(**fields)).hooks.sync.webhook.url
    assert url.endswith(expected)


@pytest.mark.parametrize(
    ("timeout", "seconds"),
    [("500ms", 0.5), ("1.5h", 5400.0), ("0s", 10.0), ("0", 10.0), ("-3s", 10.0), (None, 10.0)],
)
def test_timeout(timeout: str | None, seconds: float) -> None:
    fields: dict[str, Any] = {"url": "http://h/s"}
    if timeout is not None:
        fields["timeout"] = timeout
    assert parse_composite_controller(webhook(**fields)).hooks.sync.webhook.timeout_seconds == (
        seconds
    )


def _with(path: list[str | int], value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(FANOUT)
    target: Any = obj
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return obj


_DELETE = object()
SYNC_WEBHOOK: list[str | int] = ["spec", "hooks", "sync", "webhook"]

INVALID = [
    (_with(["spec", "hooks"], _DELETE), "spec.hooks: required (no hooks defined)"),
    (_with(["spec", "hooks"], {}), "spec.hooks.sync: required"),
    (_with(["spec", "hooks"], {"finalize": {"webhook": {"url": "http://x/"}}}), "spec.hooks.sync"),
    (_with(["spec", "hooks", "sync"], {}), "spec.hooks.sync.webhook: required"),
    (_with(SYNC_WEBHOOK, {}), "spec.hooks.sync.webhook: must specify either full 'url'"),
    (_with(SYNC_WEBHOOK, {"path": "/x"}), "must specify either full 'url', or both"),
    (
        _with(SYNC_WEBHOOK, {"service": {"name": "s", "namespace": "n"}}),
        "spec.hooks.sync.webhook.path: required with 'service'",
    ),
    (
        _with(SYNC_WEBHOOK, {"service": {"namespace": "n"}, "path": "/p"}),
        "spec.hooks.sync.webhook.service.name: required",
    ),
    (
        _with(SYNC_WEBHOOK, {"service": {"name": "s", "namespace": ""}, "path": "/p"}),
        "spec.hooks.sync.webhook.service.namespace: must not be empty",
    ),
    (
        _with(SYNC_WEBHOOK, {"service": {"name": "s", "namespace": "n"}, "path": "p"}),
        'path: must start with "/"',
    ),
    (
        _with(SYNC_WEBHOOK, {"service": {"name": "s", "namespace": "n", "port": 0}, "path": "/"}),
        "service.port: must be between 1 and 65535",
    ),
    (
        _with(
            SYNC_WEBHOOK, {"service": {"name": "s", "namespace": "n", "port": "80"}, "path": "/"}
        ),
        "service.port: must be an integer, not string",
    ),
    (
        _with(
            SYNC_WEBHOOK,
            {"service": {"name": "s", "namespace": "n", "protocol": "ftp"}, "path": "/"},
        ),
        'service.protocol: must be "http" or "https"',
    ),
    (_with([*SYNC_WEBHOOK, "url"], "hook/sync"), "url: must be an absolute http or https URL"),
    (_with([*SYNC_WEBHOOK, "url"], 7), "url: must be a string, not number"),
    (
        _with([*SYNC_WEBHOOK, "timeout"], "10"),
        'spec.hooks.sync.webhook.timeout: time: missing unit in duration "10"',
    ),
    (_with([*SYNC_WEBHOOK, "timeout"], "ten"), 'time: invalid duration "ten"'),
    (_with([*SYNC_WEBHOOK, "timeout"], 10), "timeout: must be a string, not number"),
    (_with([*SYNC_WEBHOOK, "responseUnMarshallMode"], "lax"), 'must be "loose" or "strict"'),
    (_with(["spec", "hooks", "sync", "version"], "v3"), 'version: must be "v1" or "v2"'),
    (
        _with(["spec", "parentResource", "labelSelector"], {"matchLabels": {"a b": "c"}}),
        "spec.parentResource.labelSelector: key: Invalid value",
    ),
    (
        _with(
            ["spec", "parentResource", "labelSelector"],
            {"matchExpressions": [{"key": "a", "operator": "Has"}]},
        ),
        "spec.parentResource.labelSelector: 'Has' is not a valid label selector operator",
    ),
    (_with(["spec", "parentResource", "labelSelector"], []), "must be an object, not array"),
    (
        _with(["spec", "childResources", 0, "updateStrategy", "method"], "Rolling"),
        'spec.childResources[0].updateStrategy.method: unknown update method "Rolling"',
    ),
    (
        _with(
            ["spec", "childResources"],
            [
                {"apiVersion": "v1", "resource": "configmaps"},
                {"apiVersion": "v1", "resource": "secrets"},
                {"apiVersion": "v1", "resource": "configmaps"},
            ],
        ),
        "spec.childResources[2]: duplicate child resource configmaps",
    ),
    (
        _with(
            ["spec", "childResources"],
            [
                {"apiVersion": "apps/v1", "resource": "deployments"},
                {"apiVersion": "apps/v1beta1", "resource": "deployments"},
            ],
        ),
        'spec.childResources[1]: duplicate child resource deployments in group "apps"',
    ),
    (_with(["spec", "childResources"], [None]), "spec.childResources[0]: must be an object"),
    (_with(["spec", "childResources"], {}), "spec.childResources: must be an array, not object"),
    (_with(["spec", "childResources", 0, "resource"], ""), "resource: must not be empty"),
    (_with(["spec", "childResources", 0, "apiVersion"], "a/b/c"), 'invalid apiVersion "a/b/c"'),
    (_with(["spec", "parentResource"], _DELETE), "spec.parentResource: required"),
    (_with(["spec", "parentResource", "apiVersion"], _DELETE), "parentResource.apiVersion: req"),
    (_with(["spec", "parentResource", "revisionHistory"], {"fieldPaths": "spec"}), "fieldPaths"),
    (_with(["spec", "generateSelector"], "yes"), "spec.generateSelector: must be a boolean"),
    (_with(["spec", "resyncPeriodSeconds"], 1.5), "resyncPeriodSeconds: must be an integer"),
    (_with(["spec", "resyncPeriodSeconds"], True), "resyncPeriodSeconds: must be an integer"),
    (_with(["spec", "resyncPeriodSeconds"], 2**31), "resyncPeriodSeconds: must fit in 32 bits"),
    (
        _with(
            ["spec", "childResources", 0, "updateStrategy", "statusChecks"], {"conditions": [{}]}
        ),
        "statusChecks.conditions[0].type: required",
    ),
    (_with(["spec", "endpointConfigs"], ["host"]), "spec.endpointConfigs[0]: must be an object"),
    (_with(["spec"], _DELETE), "spec: required"),
    (_with(["metadata", "name"], _DELETE), "metadata.name: required"),
    (_with(["kind"], "DecoratorController"), 'kind: must be "CompositeController"'),
    (_with(["apiVersion"], "metacontroller.k8s.io/v1"), 'apiVersion: must be "metacontroller'),
]


@pytest.mark.parametrize(("obj", "message"), INVALID)
def test_invalid(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidControllerError) as info:
        parse_composite_controller(obj)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http:/alice:s3cretPW@hook.ns/sync", "http:/[REDACTED]@hook.ns/sync"),
        ("htps://alice:s3cretPW@hook.ns/sync", "htps://[REDACTED]@hook.ns/sync"),
        ("ftp://hook.ns/sync?token=s3cretPW", "ftp://hook.ns/sync?token=[REDACTED]"),
    ],
)
def test_an_invalid_url_is_named_without_its_credentials(url: str, shown: str) -> None:
    with pytest.raises(InvalidControllerError) as info:
        parse_composite_controller(webhook(url=url))
    assert str(info.value) == (
        f'spec.hooks.sync.webhook.url: must be an absolute http or https URL, not "{shown}"'
    )


def test_not_an_object() -> None:
    with pytest.raises(InvalidControllerError, match="must be an object, not array"):
        parse_composite_controller([])  # type: ignore[arg-type]
