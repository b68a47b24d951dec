"""Request attributes derived from the request line, as kube-apiserver's RequestInfoFactory."""

from __future__ import annotations

import pytest

from loadtest.apiserver.attributes import UserInfo, request_attributes

U = UserInfo("u")


@pytest.mark.parametrize(
    ("method", "path", "query", "want"),
    [
        ("GET", "/api/v1/namespaces/ns/pods", {}, ("list", "", "pods", "", "ns", "")),
        (
            "GET",
            "/api/v1/namespaces/ns/pods",
            {"watch": "true"},
            ("watch", "", "pods", "", "ns", ""),
        ),
        ("GET", "/api/v1/watch/namespaces/ns/pods/p", {}, ("watch", "", "pods", "", "ns", "p")),
        ("GET", "/api/v1/namespaces/ns/pods/p", {}, ("get", "", "pods", "", "ns", "p")),
        (
            "GET",
            "/api/v1/pods",
            {"fieldSelector": "metadata.name=p"},
            ("list", "", "pods", "", "", "p"),
        ),
        (
            "GET",
            "/api/v1/pods",
            {"fieldSelector": "metadata.name!=p"},
            ("list", "", "pods", "", "", ""),
        ),
        (
            "PUT",
            "/api/v1/namespaces/ns/pods/p/status",
            {},
            ("update", "", "pods", "status", "ns", "p"),
        ),
        (
            "POST",
            "/api/v1/namespaces/ns/serviceaccounts/sa/token",
            {},
            ("create", "", "serviceaccounts", "token", "ns", "sa"),
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/ns/deployments/d",
            {},
            ("patch", "apps", "deployments", "", "ns", "d"),
        ),
        (
            "DELETE",
            "/apis/apps/v1/namespaces/ns/deployments",
            {},
            ("deletecollection", "apps", "deployments", "", "ns", ""),
        ),
        ("DELETE", "/apis/x.io/v1/widgets/w", {}, ("delete", "x.io", "widgets", "", "", "w")),
        ("GET", "/api/v1/namespaces/ns", {}, ("get", "", "namespaces", "", "ns", "ns")),
        (
            "PUT",
            "/api/v1/namespaces/ns/finalize",
            {},
            ("update", "", "namespaces", "finalize", "ns", "ns"),
        ),
        ("GET", "/api/v1/namespaces", {}, ("list", "", "namespaces", "", "", "")),
    ],
)
def test_resource_requests(
    method: str, path: str, query: dict[str, str], want: tuple[str, ...]
) -> None:
    attrs = request_attributes(U, method, path, query)
    assert attrs.resource_request
    got = (
        attrs.verb,
        attrs.api_group,
        attrs.resource,
        attrs.subresource,
        attrs.namespace,
        attrs.name,
    )
    assert got == want


@pytest.mark.parametrize(
    "path", ["/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1", "/version", "/metrics"]
)
def test_non_resource_requests(path: str) -> None:
    attrs = request_attributes(U, "GET", path, {})
    assert not attrs.resource_request
    assert (attrs.verb, attrs.path) == ("get", path)
