"""The API server's error responses: ``Status`` bodies and the plain-text 404.

Every error a request can meet is raised as one of these and rendered by the router; the
messages, reasons and ``details`` follow kube-apiserver word for word (see the conformance
transcripts).

    ApiError                 a JSON ``Status`` body with an HTTP code (4xx/5xx)
    PageNotFound             ``404 page not found`` as ``text/plain`` (unknown groups/versions)

Constructors are named after the ``reason`` a client switches on (``not_found``,
``conflict``, ``invalid``...). ``ApiError.status`` is the body as a dict.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from proto.api.validation import FieldError, aggregate


class PageNotFound(Exception):
    """The router knows nothing at this path: ``404 page not found`` in plain text."""


class ApiError(Exception):
    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        list_continue: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}
        self.list_continue = list_continue

    def status(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"continue": self.list_continue} if self.list_continue else {}
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": meta,
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(name: str | None, group: str, kind: str, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    details.update(extra)
    return details


def qualified(resource: str, group: str) -> str:
    """``configmaps`` or ``widgets.example.com``: how messages name a resource."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(resource, group)} "{name}" not found',
        details=_details(name, group, resource),
    )


def resource_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", details={})


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(resource, group)} "{name}" already exists',
        details=_details(name, group, resource),
    )


def conflict(resource: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        details=_details(name, group, resource),
    )


MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def stale(resource: str, group: str, name: str) -> ApiError:
    return conflict(resource, group, name, MODIFIED)


def invalid(
    kind: str, group: str, name: str, errors: Iterable[FieldError], *, details_kind: str = ""
) -> ApiError:
    """422 ``Invalid``: ``<Kind>[.group] "<name>" is invalid: <errors>``."""
    errs = list(errors)
    label = f"{kind}.{group}" if group else kind
    unique = list({str(e): e for e in errs}.values())
    return ApiError(
        422,
        "Invalid",
        f'{label} "{name}" is invalid: {aggregate(unique)}',
        details=_details(name, group, details_kind or kind, causes=[e.cause() for e in errs]),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(resource: str, group: str, name: str, why: str, **extra: Any) -> ApiError:
    label = f'{qualified(resource, group)} "{name}"' if name else qualified(resource, group)
    return ApiError(
        403,
        "Forbidden",
        f"{label} is forbidden: {why}",
        details=_details(name, group, resource, **extra),
    )


def method_not_allowed() -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        details={},
    )


def unsupported_media_type(accepted: Iterable[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def not_acceptable() -> ApiError:
    return ApiError(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/yaml, "
        "application/vnd.kubernetes.protobuf",
    )


def internal(message: str) -> ApiError:
    return ApiError(500, "", message)


def internal_error(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        details={"causes": [{"message": message}]},
    )


def expired(message: str, *, list_continue: str | None = None) -> ApiError:
    return ApiError(410, "Expired", message, list_continue=list_continue)


def too_large_resource_version(requested: int, current: int) -> ApiError:
    return ApiError(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {requested}, current: {current}",
        details={
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )


def timeout() -> ApiError:
    return ApiError(
        504,
        "Timeout",
        "Timeout: request did not complete within the allotted timeout",
        details={"retryAfterSeconds": 1},
    )


def too_many_requests(retry_after: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        details={"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def invalid_options(kind: str, errors: Iterable[FieldError]) -> ApiError:
    """422 for ``ListOptions``/``DeleteOptions``/``PatchOptions`` (group ``meta.k8s.io``)."""
    errs = list(errors)
    return ApiError(
        422,
        "Invalid",
        f'{kind}.meta.k8s.io "" is invalid: {aggregate(errs)}',
        details={"group": "meta.k8s.io", "kind": kind, "causes": [e.cause() for e in errs]},
    )
