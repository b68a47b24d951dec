"""RBAC mode of the embedded cluster through real clients: ``proto.kube`` and ``kubernetes``.

A ServiceAccount token from the TokenRequest API is refused (403) until a binding grants
the verb, then allowed; watches need ``watch``; escalation is refused; the token dies with
its ServiceAccount; with RBAC off nothing of this is served.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import kubernetes
import pytest

from loadtest.apiserver import EmbeddedCluster
from loadtest.apiserver.background import ClusterThread
from proto.kube.client import Client
from proto.kube.cluster import ClusterConfig
from proto.kube.errors import ApiError
from proto.kube.session import Session
from tests.integration.apiserver_client import Api, running

ADMIN = "admin-token"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


async def _token(api: Api, namespace: str, name: str) -> str:
    reply = await api.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", {})
    assert reply.status == 201, reply.body
    return str(reply.body["status"]["token"])


@contextlib.asynccontextmanager
async def _as_account(cluster: EmbeddedCluster, token: str) -> AsyncIterator[Client]:
    config = ClusterConfig(server=cluster.url, authorization=f"Bearer {token}")
    async with Session(config) as session:
        yield Client(session)


async def _setup(api: Api, namespace: str) -> str:
    await api.namespace(namespace)
    reply = await api.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "app"}}
    )
    assert reply.status == 201, reply.body
    return await _token(api, namespace, "app")


async def _bind(api: Api, namespace: str, name: str, rules: list[dict[str, Any]]) -> None:
    role = {"metadata": {"name": name}, "rules": rules}
    assert (await api.post(f"{RBAC}/namespaces/{namespace}/roles", role)).status == 201
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": namespace}],
    }
    reply = await api.post(f"{RBAC}/namespaces/{namespace}/rolebindings", binding)
    assert reply.status == 201, reply.body


@pytest.mark.asyncio
async def test_a_service_account_is_forbidden_until_bound_then_allowed() -> None:
    async with running(token=ADMIN, rbac=True) as (cluster, api):
        token = await _setup(api, "team")
        await api.configmap("team", "cm")
        async with _as_account(cluster, token) as client:
            configmaps = await client.resource("v1", resource="configmaps")
            with pytest.raises(ApiError) as denied:
                await client.list(configmaps, namespace="team")
            assert denied.value.status == 403
            assert 'cannot list resource "configmaps"' in str(denied.value)
            await _bind(
                api,
                "team",
                "read",
                [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
            )
            listed = await client.list(configmaps, namespace="team")
            assert [o["metadata"]["name"] for o in listed.items] == ["cm"]
            with pytest.raises(ApiError) as other_namespace:
                await client.list(configmaps, namespace="default")
            assert other_namespace.value.status == 403
            with pytest.raises(ApiError) as not_get:
                await client.get(configmaps, "cm", namespace="team")
            assert not_get.value.status == 403


@pytest.mark.asyncio
async def test_watch_needs_the_watch_verb() -> None:
    async with running(token=ADMIN, rbac=True) as (cluster, api):
        token = await _setup(api, "team")
        read = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]
        await _bind(api, "team", "read", read)
        sa = Api(api.session, cluster.url, token)
        refused = await sa.get("/api/v1/namespaces/team/configmaps", watch="true")
        assert refused.status == 403
        assert refused.body["message"].endswith(
            'cannot watch resource "configmaps" in API group "" in the namespace "team"'
        )
        assert cluster.access is not None
        assert list(cluster.access.denials) == [
            {
                "user": "system:serviceaccount:team:app",
                "verb": "watch",
                "apiGroup": "",
                "resource": "configmaps",
                "subresource": "",
                "namespace": "team",
                "name": "",
            }
        ]
        assert (await sa.get("/api/v1/namespaces/team/configmaps")).status == 200
        watch = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["watch"]}]
        await _bind(api, "team", "watch", watch)
        async with sa.watch("/api/v1/namespaces/team/configmaps") as stream:
            await api.configmap("team", "new")
            event = await stream.next()
        assert event["type"] == "ADDED"
        assert event["object"]["metadata"]["name"] == "new"


@pytest.mark.asyncio
async def test_a_deleted_service_accounts_token_is_unauthorized() -> None:
    async with running(token=ADMIN, rbac=True) as (cluster, api):
        token = await _setup(api, "team")
        sa = Api(api.session, cluster.url, token)
        whoami = await sa.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", {})
        assert whoami.status == 201
        assert whoami.body["status"]["userInfo"]["username"] == "system:serviceaccount:team:app"
        assert (await api.delete("/api/v1/namespaces/team/serviceaccounts/app")).status == 200
        again = await sa.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", {})
        assert again.status == 401
        recreated = await api.post(
            "/api/v1/namespaces/team/serviceaccounts", {"metadata": {"name": "app"}}
        )
        assert recreated.status == 201
        assert (
            await sa.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", {})
        ).status == 401


def _managing_roles(*verbs: str) -> list[dict[str, Any]]:
    """``verbs`` on roles and rolebindings plus ``get`` on configmaps (what it may grant)."""
    return [
        {
            "apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["roles", "rolebindings"],
            "verbs": list(verbs),
        },
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
    ]


@pytest.mark.asyncio
async def test_escalation_is_refused_unless_the_verb_is_held() -> None:
    async with running(token=ADMIN, rbac=True) as (cluster, api):
        token = await _setup(api, "team")
        await _bind(api, "team", "manage", _managing_roles("create"))
        sa = Api(api.session, cluster.url, token)
        wider = {
            "metadata": {"name": "wider"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "delete"]}],
        }
        refused = await sa.post(f"{RBAC}/namespaces/team/roles", wider)
        assert refused.status == 403
        assert refused.body["message"].endswith(
            '{APIGroups:[""], Resources:["configmaps"], Verbs:["delete"]}'
        )
        narrower = {
            **wider,
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        }
        assert (await sa.post(f"{RBAC}/namespaces/team/roles", narrower)).status == 201


async def _apply(api: Api, path: str, body: dict[str, Any], manager: str = "me") -> Any:
    return await api.request(
        "PATCH",
        path,
        body,
        content_type="application/apply-patch+yaml",
        params={"fieldManager": manager},
    )


@pytest.mark.asyncio
async def test_server_side_apply_of_rbac_objects_passes_the_escalation_checks() -> None:
    async with running(token=ADMIN, rbac=True) as (cluster, api):
        token = await _setup(api, "team")
        await _bind(api, "team", "manage", _managing_roles("get", "patch"))
        wide = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "wide"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}],
        }
        assert (await api.post(f"{RBAC}/clusterroles", wide)).status == 201
        sa = Api(api.session, cluster.url, token)
        role = f"{RBAC}/namespaces/team/roles/own"
        wider = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "own"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "delete"]}],
        }
        refused = await _apply(sa, role, wider)
        assert refused.status == 403, refused.body
        assert refused.body["message"] == (
            'roles.rbac.authorization.k8s.io "own" is forbidden: user '
            '"system:serviceaccount:team:app" (groups=["system:serviceaccounts" '
            '"system:serviceaccounts:team" "system:authenticated"]) is attempting to grant RBAC '
            "permissions not currently held:\n"
            '{APIGroups:[""], Resources:["configmaps"], Verbs:["delete"]}'
        )
        assert (await api.get(role)).status == 404  # the refused apply created nothing
        narrower = {
            **wider,
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        }
        created = await _apply(sa, role, narrower)
        assert created.status == 201, created.body
        assert (await _apply(sa, role, wider)).status == 403  # nor may an apply widen it
        assert (await api.get(role)).body["rules"] == narrower["rules"]
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "wide"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "wide",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "team"}],
        }
        bound = await _apply(sa, f"{RBAC}/namespaces/team/rolebindings/wide", binding)
        assert bound.status == 403
        assert bound.body["message"].endswith(
            '{APIGroups:[""], Resources:["configmaps"], Verbs:["*"]}'
        )
        may_bind = [
            {
                "apiGroups": ["rbac.authorization.k8s.io"],
                "resources": ["clusterroles"],
                "verbs": ["bind"],
                "resourceNames": ["wide"],
            }
        ]
        await _bind(api, "team", "bind", may_bind)
        bound = await _apply(sa, f"{RBAC}/namespaces/team/rolebindings/wide", binding)
        assert bound.status == 201, bound.body


@pytest.mark.asyncio
async def test_rbac_off_keeps_the_single_token_and_serves_no_token_api() -> None:
    async with running(token=ADMIN) as (_, api):
        await api.namespace("team")
        reply = await api.post(
            "/api/v1/namespaces/team/serviceaccounts", {"metadata": {"name": "app"}}
        )
        assert reply.status == 201
        token = await api.post("/api/v1/namespaces/team/serviceaccounts/app/token", {})
        assert token.status == 405
        assert (await api.get(f"{RBAC}/clusterroles")).body["items"] == []


def test_the_kubernetes_client_requests_a_token_and_reviews_access() -> None:
    """The official client's TokenRequest and SelfSubjectAccessReview models round-trip."""
    with ClusterThread(token=ADMIN, rbac=True) as thread:
        admin = kubernetes.client.Configuration()
        admin.host = thread.url
        admin.api_key = {"authorization": f"Bearer {ADMIN}"}
        with kubernetes.client.ApiClient(admin) as client:
            core = kubernetes.client.CoreV1Api(client)
            meta = kubernetes.client.V1ObjectMeta
            core.create_namespace(kubernetes.client.V1Namespace(metadata=meta(name="team")))
            core.create_namespaced_service_account(
                "team", kubernetes.client.V1ServiceAccount(metadata=meta(name="app"))
            )
            request = kubernetes.client.AuthenticationV1TokenRequest(
                spec=kubernetes.client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
            )
            issued = core.create_namespaced_service_account_token("app", "team", request)
            assert issued.spec is not None and issued.status is not None
            assert issued.spec.expiration_seconds == 600
            token = issued.status.token
        account = kubernetes.client.Configuration()
        account.host = thread.url
        account.api_key = {"authorization": f"Bearer {token}"}
        with kubernetes.client.ApiClient(account) as client:
            review = kubernetes.client.V1SelfSubjectAccessReview(
                spec=kubernetes.client.V1SelfSubjectAccessReviewSpec(
                    resource_attributes=kubernetes.client.V1ResourceAttributes(
                        namespace="team", verb="list", resource="pods"
                    )
                )
            )
            answer = kubernetes.client.AuthorizationV1Api(client).create_self_subject_access_review(
                review
            )
            assert answer.status is not None
            assert answer.status.allowed is False
            with pytest.raises(kubernetes.client.ApiException) as denied:
                kubernetes.client.CoreV1Api(client).list_namespaced_pod("team")
            assert denied.value.status == 403


def _entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The managedFields of ``obj`` without their times."""
    keys = ("manager", "operation", "apiVersion", "fieldsV1")
    return [{k: e[k] for k in keys} for e in obj["metadata"]["managedFields"]]


# aiohttp's User-Agent "Python/3.x aiohttp/..." names the creator's entry
CREATOR: dict[str, Any] = {
    "manager": "Python",
    "operation": "Update",
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "fieldsV1": {"f:aggregationRule": {".": {}, "f:clusterRoleSelectors": {}}},
}


@pytest.mark.asyncio
async def test_aggregated_cluster_role_follows_its_selected_roles() -> None:
    async with running(token=ADMIN, rbac=True) as (_, api):
        selector = {"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}}]}
        created = await api.post(
            f"{RBAC}/clusterroles", {"metadata": {"name": "agg"}, "aggregationRule": selector}
        )
        assert created.body["rules"] is None
        part = {
            "metadata": {"name": "part", "labels": {"agg": "yes"}},
            "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}],
        }
        assert (await api.post(f"{RBAC}/clusterroles", part)).status == 201
        for _ in range(100):
            rules = (await api.get(f"{RBAC}/clusterroles/agg")).body["rules"]
            if rules:
                break
            await asyncio.sleep(0.01)
        assert rules == [{"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments"]}]
        aggregated = (await api.get(f"{RBAC}/clusterroles/agg")).body
        applied = {
            "manager": "clusterrole-aggregation-controller",
            "operation": "Apply",
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "fieldsV1": {"f:rules": {}},
        }
        assert _entries(aggregated) == [applied, CREATOR]
        edited = {**aggregated, "rules": [{"apiGroups": [""], "resources": ["*"], "verbs": ["*"]}]}
        put = await api.put(f"{RBAC}/clusterroles/agg", edited)
        assert put.status == 200
        editor = {**CREATOR, "fieldsV1": {**CREATOR["fieldsV1"], "f:rules": {}}}
        assert _entries(put.body) == [editor]  # the controller's entry lost its only field
        for _ in range(100):
            reverted = (await api.get(f"{RBAC}/clusterroles/agg")).body
            if reverted["rules"] == rules:
                break
            await asyncio.sleep(0.01)
        assert reverted["rules"] == rules
        assert _entries(reverted) == [applied, CREATOR]
        assert (await api.delete(f"{RBAC}/clusterroles/part")).status == 200
        for _ in range(100):
            rules = (await api.get(f"{RBAC}/clusterroles/agg")).body["rules"]
            if not rules:
                break
            await asyncio.sleep(0.01)
        assert not rules


@pytest.mark.asyncio
async def test_access_reviews_for_another_subject_and_their_validation() -> None:
    async with running(token=ADMIN, rbac=True) as (_, api):
        await _setup(api, "team")
        read = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
        await _bind(api, "team", "read", read)
        attributes = {"namespace": "team", "verb": "get", "resource": "secrets"}
        review = {
            "spec": {
                "user": "system:serviceaccount:team:app",
                "groups": ["system:serviceaccounts"],
                "resourceAttributes": attributes,
            }
        }
        authz = "/apis/authorization.k8s.io/v1"
        answer = await api.post(f"{authz}/subjectaccessreviews", review)
        assert answer.status == 201
        assert _entries(answer.body) == [  # the echoed request's create, as the real server
            {
                "manager": "Python",
                "operation": "Update",
                "apiVersion": "authorization.k8s.io/v1",
                "fieldsV1": {
                    "f:spec": {
                        "f:groups": {},
                        "f:resourceAttributes": {
                            ".": {},
                            "f:namespace": {},
                            "f:resource": {},
                            "f:verb": {},
                        },
                        "f:user": {},
                    }
                },
            }
        ]
        assert answer.body["status"] == {
            "allowed": True,
            "reason": 'RBAC: allowed by RoleBinding "read/team" of Role "read" to '
            'ServiceAccount "app/team"',
        }
        local = await api.post(f"{authz}/namespaces/team/localsubjectaccessreviews", review)
        assert (local.status, local.body["status"]["allowed"]) == (201, True)
        elsewhere = await api.post(f"{authz}/namespaces/other/localsubjectaccessreviews", review)
        assert elsewhere.status == 400
        anonymous = await api.post(
            f"{authz}/subjectaccessreviews", {"spec": {"resourceAttributes": attributes}}
        )
        assert anonymous.status == 422
        assert "at least one of user or group must be specified" in anonymous.body["message"]
        assert (await api.get(f"{authz}/subjectaccessreviews")).status == 405
        rules = await api.post(f"{authz}/selfsubjectrulesreviews", {"spec": {}})
        assert rules.status == 400
        listed = await api.post(f"{authz}/selfsubjectrulesreviews", {"spec": {"namespace": "team"}})
        assert (listed.status, listed.body["metadata"]) == (201, {})  # a new object: no fields


@pytest.mark.asyncio
async def test_a_token_request_answer_records_the_defaulted_expiration() -> None:
    async with running(token=ADMIN, rbac=True) as (_, api):
        await _setup(api, "team")
        path = "/api/v1/namespaces/team/serviceaccounts/app/token"
        issued = await api.request("POST", path, {}, params={"fieldManager": "issuer"})
        assert issued.status == 201
        entry = issued.body["metadata"]["managedFields"][0]
        assert {k: v for k, v in entry.items() if k != "time"} == {
            "manager": "issuer",
            "operation": "Update",
            "apiVersion": "authentication.k8s.io/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:expirationSeconds": {}}},
            "subresource": "token",
        }
        too_long = await api.request("POST", path, {}, params={"fieldManager": "x" * 129})
        assert too_long.status == 422
