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
from proto.kube import Client, Session
from proto.kube.config import ClusterConfig
from proto.kube.errors import ApiError
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


@pytest.mark.asyncio
async def test_escalation_is_refused_unless_the_verb_is_held() -> None:
    async with running(token=ADMIN, rbac=True) as (cluster, api):
        token = await _setup(api, "team")
        manage = [
            {
                "apiGroups": ["rbac.authorization.k8s.io"],
                "resources": ["roles", "rolebindings"],
                "verbs": ["create"],
            },
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
        ]
        await _bind(api, "team", "manage", manage)
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
            core.create_namespace({"metadata": {"name": "team"}})
            core.create_namespaced_service_account("team", {"metadata": {"name": "app"}})
            request = kubernetes.client.AuthenticationV1TokenRequest(
                spec=kubernetes.client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
            )
            issued = core.create_namespaced_service_account_token("app", "team", request)
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
            assert answer.status.allowed is False
            with pytest.raises(kubernetes.client.ApiException) as denied:
                kubernetes.client.CoreV1Api(client).list_namespaced_pod("team")
            assert denied.value.status == 403


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
