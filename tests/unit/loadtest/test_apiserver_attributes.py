"""Request attributes derived from the request line, as kube-apiserver's RequestInfoFactory."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


segment = st.text(alphabet="abcdefgh-.0123456789", min_size=1, max_size=8).filter(
    lambda s: s not in ("watch", "namespaces")
)


@given(
    st.sampled_from(["", "apps", "example.com"]),
    st.sampled_from(["", "ns1"]),
    segment,
    st.sampled_from(["", "obj"]),
    st.sampled_from(["", "status", "scale"]),
    st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]),
)
def test_a_resource_path_round_trips_into_its_attributes(
    group: str, namespace: str, resource: str, name: str, sub: str, method: str
) -> None:
    sub = sub if name else ""
    path = "/api/v1" if not group else f"/apis/{group}/v1"
    path += (f"/namespaces/{namespace}" if namespace else "") + f"/{resource}"
    path += (f"/{name}" if name else "") + (f"/{sub}" if sub else "")
    attrs = request_attributes(U, method, path, {})
    assert attrs.resource_request
    assert (attrs.api_group, attrs.api_version) == (group, "v1")
    assert (attrs.namespace, attrs.resource, attrs.name, attrs.subresource) == (
        namespace,
        resource,
        name,
        sub,
    )
    writes = {"POST": "create", "PUT": "update", "PATCH": "patch"}
    reads = (
        {"GET": "get", "DELETE": "delete"}
        if name
        else {"GET": "list", "DELETE": "deletecollection"}
    )
    assert attrs.verb == writes.get(method, reads.get(method))
