"""Errors of the Kubernetes client, typed by what the caller should do.

```
KubeError                        anything raised by proto.kube
 ├── ConfigError                 no usable kubeconfig / in-cluster config: fix the set-up
 ├── ResourceNotFound            discovery has no such resource or kind: wait for the CRD, or fix
 │    └── ResourceNotFoundYet    not in what discovery last read, which may predate it (the
 │                               group/version is not re-read yet): try again after .retry_after
 ├── TransportError              refused/reset connection, client-side timeout (including a watch's
 │                               inactivity deadline), truncated stream: retry / resume the watch
 ├── StreamError                 a watch line that is not a watch event, or a body that is
 │                               not JSON: resume the watch / retry, and report it
 └── ApiError                    the server answered with an error Status (.status .reason
      │                          .message .details .causes .body .retry_after)
      ├── BadRequest             400
      ├── Unauthorized           401
      ├── Forbidden              403
      ├── NotFound               404
      ├── MethodNotAllowed       405
      ├── AlreadyExists          409, reason AlreadyExists: the name is taken
      ├── Conflict               409 otherwise: stale resourceVersion or precondition, SSA
      │                          field-manager conflict: re-read and requeue
      ├── Gone                   410: the resourceVersion / continue token expired: relist
      │                          (.continue_token when the Status carries one)
      ├── UnsupportedMediaType   415
      ├── Invalid                422 (.causes: type, message, field per rejected field)
      ├── TooManyRequests        429 after the client's own retries (.retry_after)
      └── ServerError            5xx
           └── Timeout           504 or reason Timeout/ServerTimeout (.retry_after)
```

Other codes (406, 413, ...) raise the base ``ApiError``. ``api_error(status, body, ...)`` builds
the right class from a response: a JSON ``Status`` body when there is one, otherwise a ``Status``
synthesized from a plain-text body such as ``404 page not found``, so ``.body`` is always a
Status-shaped dict and ``.reason`` is never empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Cause",
    "ConfigError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeError",
    "MethodNotAllowed",
    "NotFound",
    "ResourceNotFound",
    "ResourceNotFoundYet",
    "ServerError",
    "StreamError",
    "Timeout",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "UnsupportedMediaType",
    "api_error",
    "error_from_status",
]

# The reason the API server would put in a Status of this code (metav1.StatusReason*).
_DEFAULT_REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class KubeError(Exception):
    """Base of every error raised by ``proto.kube``."""


class ConfigError(KubeError):
    """No usable cluster configuration; the message says what was tried."""


class ResourceNotFound(KubeError):
    """Discovery knows no resource of that name or kind in that group/version."""


class ResourceNotFoundYet(ResourceNotFound):
    """Not in discovery's last read of the group/version, but that read may be older than the
    resource (its rate limit keeps it from reading again now): ask again after
    ``retry_after`` seconds, when a read answers for sure."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TransportError(KubeError):
    """The request did not get a complete answer: connection refused or reset, client-side
    timeout or inactivity deadline, or a stream cut in the middle of a line."""


class StreamError(KubeError):
    """A watch stream carried a line that is not a watch event, or a response body that
    should be JSON is not."""


@dataclass(frozen=True, slots=True)
class Cause:
    """One ``details.causes`` entry of a Status (``type`` is the JSON ``reason``)."""

    type: str
    message: str
    field: str


class ApiError(KubeError):
    """The API server answered with an error. ``body`` is the (parsed or synthesized) Status."""

    def __init__(
        self,
        status: int,
        body: dict[str, Any],
        *,
        retry_after: float | None = None,
        method: str = "",
        path: str = "",
    ) -> None:
        self.status = status
        self.body = body
        self.reason: str = body.get("reason") or _DEFAULT_REASONS.get(status, "Unknown")
        self.message: str = body.get("message") or ""
        details = body.get("details")
        self.details: dict[str, Any] = details if isinstance(details, dict) else {}
        if retry_after is None:
            seconds = self.details.get("retryAfterSeconds")
            if isinstance(seconds, int | float) and seconds > 0:
                retry_after = float(seconds)
        self.retry_after = retry_after
        self.method = method
        self.path = path
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}{status} {self.reason}: {self.message}")

    @property
    def causes(self) -> tuple[Cause, ...]:
        raw = self.details.get("causes")
        if not isinstance(raw, list):
            return ()
        return tuple(
            Cause(
                type=str(c.get("reason", "")),
                message=str(c.get("message", "")),
                field=str(c.get("field", "")),
            )
            for c in raw
            if isinstance(c, dict)
        )


class BadRequest(ApiError):
    """400: the request is malformed (bad body, selector, name mismatch, strict decoding)."""


class Unauthorized(ApiError):
    """401: the credentials were rejected."""


class Forbidden(ApiError):
    """403: RBAC denial, or the namespace is terminating."""


class NotFound(ApiError):
    """404: no such object (or, as plain text, no such group/version/resource path)."""


class MethodNotAllowed(ApiError):
    """405: the resource does not support this verb on this path."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: a create hit an existing name."""


class Conflict(ApiError):
    """409: a stale resourceVersion or precondition, or a server-side apply field conflict."""


class Gone(ApiError):
    """410: the resourceVersion or continue token is too old; the caller must relist."""

    @property
    def continue_token(self) -> str | None:
        metadata = self.body.get("metadata")
        token = metadata.get("continue") if isinstance(metadata, dict) else None
        return token if isinstance(token, str) and token else None


class UnsupportedMediaType(ApiError):
    """415: the Content-Type (e.g. a strategic merge patch on a custom resource) is refused."""


class Invalid(ApiError):
    """422: validation failed; ``causes`` lists each rejected field."""


class TooManyRequests(ApiError):
    """429 that outlasted the client's retries; ``retry_after`` says when to come back."""


class ServerError(ApiError):
    """5xx: the server failed; retrying later may help."""


class Timeout(ServerError):
    """504 / reason Timeout: the server could not answer in time; retry after ``retry_after``."""


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    415: UnsupportedMediaType,
    422: Invalid,
    429: TooManyRequests,
}


def _error_class(status: int, reason: str) -> type[ApiError]:
    if status == 409 and reason == "AlreadyExists":
        return AlreadyExists
    if status == 504 or reason in ("Timeout", "ServerTimeout"):
        return Timeout
    if status >= 500:
        return ServerError
    return _BY_CODE.get(status, ApiError)


def error_from_status(
    status: int,
    body: dict[str, Any],
    *,
    retry_after: float | None = None,
    method: str = "",
    path: str = "",
) -> ApiError:
    """The ``ApiError`` subclass for an HTTP ``status`` and a parsed Status ``body``."""
    cls = _error_class(status, str(body.get("reason") or ""))
    return cls(status, body, retry_after=retry_after, method=method, path=path)


def api_error(
    status: int,
    content: bytes,
    *,
    retry_after: float | None = None,
    method: str = "",
    path: str = "",
) -> ApiError:
    """Build the error for an error response from its status code and raw body.

    A JSON ``Status`` body is used as it is; anything else (``404 page not found``, an HTML
    page from a proxy, an empty body) becomes the message of a synthesized Status.
    """
    body: dict[str, Any] | None = None
    if content[:1] == b"{":
        try:
            parsed = orjson.loads(content)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict) and parsed.get("kind") == "Status":
            body = parsed
    if body is None:
        text = content.decode("utf-8", "replace").strip()
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": text[:2000],
            "reason": _DEFAULT_REASONS.get(status, "Unknown"),
            "code": status,
        }
    return error_from_status(status, body, retry_after=retry_after, method=method, path=path)
