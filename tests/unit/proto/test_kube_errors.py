"""Every error class, built from a Status body a real API server sent (conformance transcripts),
both directly and through a request to the fake server replaying that response."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from proto.kube import errors
from proto.kube.errors import Cause, api_error
from tests.unit.proto.kube_fake import FakeApiServer, Reply, load_transcript, serve

# (transcript, step, expected class, expected reason)
RECORDED = [
    ("03-errors.json", 13, errors.BadRequest, "BadRequest"),
    ("03-errors.json", 41, errors.Unauthorized, "Unauthorized"),
    ("13-namespaces.json", 9, errors.Forbidden, "Forbidden"),
    ("03-errors.json", 3, errors.NotFound, "NotFound"),
    ("03-errors.json", 32, errors.NotFound, "NotFound"),  # text/plain "404 page not found"
    ("03-errors.json", 35, errors.MethodNotAllowed, "MethodNotAllowed"),
    ("03-errors.json", 7, errors.AlreadyExists, "AlreadyExists"),
    ("03-errors.json", 9, errors.Conflict, "Conflict"),
    ("09-server-side-apply.json", 6, errors.Conflict, "Conflict"),
    ("06-watch-gone.json", 8, errors.Gone, "Expired"),
    ("06-watch-gone.json", 11, errors.Gone, "Expired"),
    ("03-errors.json", 37, errors.UnsupportedMediaType, "UnsupportedMediaType"),
    ("03-errors.json", 16, errors.Invalid, "Invalid"),
    ("03-errors.json", 11, errors.ServerError, "InternalError"),  # a 500 without a reason
    ("10-labels-fields-pagination.json", 46, errors.Timeout, "Timeout"),
    ("01-discovery.json", 22, errors.ApiError, "NotAcceptable"),
]


def _step(shared_dir: Path, name: str, index: int) -> dict[str, object]:
    return load_transcript(shared_dir, name)[index]


def _raw_body(response: dict[str, object]) -> bytes:
    if "bodyText" in response:
        return str(response["bodyText"]).encode()
    return orjson.dumps(response["body"])


@pytest.mark.parametrize(("name", "index", "cls", "reason"), RECORDED)
def test_recorded_status_builds_the_right_class(
    shared_dir: Path, name: str, index: int, cls: type[errors.ApiError], reason: str
) -> None:
    response = _step(shared_dir, name, index)["response"]
    assert isinstance(response, dict)
    error = api_error(response["status"], _raw_body(response))
    assert type(error) is cls
    assert error.status == response["status"]
    assert error.reason == reason
    assert error.body["kind"] == "Status"
    if "body" in response:
        assert error.message == response["body"].get("message", "")
        assert error.body == response["body"]
    else:
        assert error.message == "404 page not found"


@pytest.mark.asyncio
@pytest.mark.parametrize(("name", "index", "cls", "reason"), RECORDED)
async def test_session_raises_the_recorded_error(
    shared_dir: Path, name: str, index: int, cls: type[errors.ApiError], reason: str
) -> None:
    step = _step(shared_dir, name, index)
    server = FakeApiServer()
    server.replay(step)
    request = step["request"]
    assert isinstance(request, dict)
    async with serve(server) as session:
        with pytest.raises(cls) as caught:
            await session.request(
                request["method"],
                request["path"],
                params=request.get("query") or None,
                accept=request["headers"]["Accept"],
            )
    assert type(caught.value) is cls
    assert caught.value.reason == reason
    assert request["path"] in str(caught.value)


def test_invalid_lists_causes(shared_dir: Path) -> None:
    response = _step(shared_dir, "03-errors.json", 16)["response"]
    assert isinstance(response, dict)
    error = api_error(422, orjson.dumps(response["body"]))
    assert isinstance(error, errors.Invalid)
    assert error.causes == (
        Cause(
            type="FieldValueRequired",
            message="Required value: name or generateName is required",
            field="metadata.name",
        ),
    )


def test_apply_conflict_names_the_field(shared_dir: Path) -> None:
    response = _step(shared_dir, "09-server-side-apply.json", 6)["response"]
    assert isinstance(response, dict)
    error = api_error(409, orjson.dumps(response["body"]))
    assert [(c.type, c.field) for c in error.causes] == [("FieldManagerConflict", ".data.x")]


def test_gone_carries_the_continue_token_when_the_status_has_one(shared_dir: Path) -> None:
    with_token = _step(shared_dir, "06-watch-gone.json", 11)["response"]
    without = _step(shared_dir, "06-watch-gone.json", 8)["response"]
    assert isinstance(with_token, dict) and isinstance(without, dict)
    gone = api_error(410, orjson.dumps(with_token["body"]))
    assert isinstance(gone, errors.Gone)
    assert gone.continue_token == "<continue:2>"
    plain = api_error(410, orjson.dumps(without["body"]))
    assert isinstance(plain, errors.Gone)
    assert plain.continue_token is None


def test_timeout_carries_retry_after_and_is_a_server_error(shared_dir: Path) -> None:
    response = _step(shared_dir, "10-labels-fields-pagination.json", 46)["response"]
    assert isinstance(response, dict)
    error = api_error(504, orjson.dumps(response["body"]))
    assert isinstance(error, errors.Timeout) and isinstance(error, errors.ServerError)
    assert error.retry_after == 1.0


def test_too_many_requests_from_status_and_header() -> None:
    body = orjson.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Too many requests, please try again later.",
            "reason": "TooManyRequests",
            "details": {"retryAfterSeconds": 3},
            "code": 429,
        }
    )
    from_details = api_error(429, body)
    assert isinstance(from_details, errors.TooManyRequests)
    assert from_details.retry_after == 3.0
    assert api_error(429, body, retry_after=7.0).retry_after == 7.0


def test_non_status_bodies_become_a_synthesized_status() -> None:
    html = api_error(503, b"<html>Service Unavailable</html>")
    assert isinstance(html, errors.ServerError)
    assert html.reason == "ServiceUnavailable"
    assert html.message == "<html>Service Unavailable</html>"
    assert html.body["code"] == 503
    not_status = api_error(400, b'{"kind":"Pod"}')
    assert isinstance(not_status, errors.BadRequest)
    assert not_status.message == '{"kind":"Pod"}'
    empty = api_error(404, b"")
    assert isinstance(empty, errors.NotFound) and empty.message == ""


def test_the_errors_that_are_not_api_errors() -> None:
    for cls in (
        errors.ConfigError,
        errors.ResourceNotFound,
        errors.TransportError,
        errors.StreamError,
    ):
        assert issubclass(cls, errors.KubeError)
        assert not issubclass(cls, errors.ApiError)


@pytest.mark.asyncio
async def test_error_reply_bodies_are_read_whole_over_http() -> None:
    server = FakeApiServer()
    big = {"kind": "Status", "code": 422, "reason": "Invalid", "message": "x" * 300_000}
    server.route("POST", "/api/v1/namespaces/a/configmaps", Reply.json(422, big))
    async with serve(server) as session:
        with pytest.raises(errors.Invalid) as caught:
            await session.request("POST", "/api/v1/namespaces/a/configmaps", body=b"{}")
    assert len(caught.value.message) == 300_000
