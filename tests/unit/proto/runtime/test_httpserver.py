"""The operations HTTP server, spoken to over raw sockets: answers, refusals and slow clients."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from structlog.testing import capture_logs

from proto.runtime.addresses import TcpAddress, UnixAddress
from proto.runtime.httpserver import MAX_HEAD, Handler, HttpServer, Reply

ROOT = Path(__file__).resolve().parents[4]


async def _ok() -> Reply:
    return Reply(200, b"ok")


async def _broken() -> Reply:
    raise RuntimeError("boom")


class Slow:
    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.cancelled = False

    async def __call__(self) -> Reply:
        self.entered.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return Reply(200, b"late")


@pytest_asyncio.fixture
async def server() -> AsyncIterator[tuple[HttpServer, int, Slow]]:
    slow = Slow()
    routes: dict[str, Handler] = {"/ok": _ok, "/broken": _broken, "/slow": slow}
    http = HttpServer(routes, read_timeout=0.3)
    port = await http.start(TcpAddress("127.0.0.1", 0))
    yield http, port, slow
    await http.stop()


async def _exchange(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)  # the server closes the connection
    writer.close()
    return answer


def _split(answer: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return status, headers, body


@pytest.mark.asyncio
async def test_get_and_head_of_a_known_path(server: tuple[HttpServer, int, Slow]) -> None:
    _, port, _ = server
    status, headers, body = _split(
        await _exchange(port, b"GET /ok?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
    )
    assert status == "HTTP/1.1 200 OK" and body == b"ok"
    assert headers["Content-Length"] == "2" and headers["Connection"] == "close"
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    status, headers, body = _split(await _exchange(port, b"HEAD /ok HTTP/1.0\r\n\r\n"))
    assert status == "HTTP/1.1 200 OK" and headers["Content-Length"] == "2" and body == b""


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("request_bytes", "status", "allow"),
    [
        (b"GET /nowhere HTTP/1.1\r\n\r\n", "HTTP/1.1 404 Not Found", None),
        (
            b"POST /ok HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 405 Method Not Allowed",
            "GET, HEAD",
        ),
        (b"GET /ok\r\n\r\n", "HTTP/1.1 400 Bad Request", None),
        (b"GET /ok SPDY/3\r\n\r\n", "HTTP/1.1 400 Bad Request", None),
        (b"\x16\x03\x01\x02\x00\r\n\r\n", "HTTP/1.1 400 Bad Request", None),
        (
            b"GET /ok HTTP/1.1\r\nX: " + b"a" * MAX_HEAD + b"\r\n\r\n",
            "HTTP/1.1 431 Request Header Fields Too Large",
            None,
        ),
    ],
)
async def test_what_is_refused(
    server: tuple[HttpServer, int, Slow], request_bytes: bytes, status: str, allow: str | None
) -> None:
    _, port, _ = server
    got, headers, _ = _split(await _exchange(port, request_bytes))
    assert got == status and headers.get("Allow") == allow
    assert _split(await _exchange(port, b"GET /ok HTTP/1.1\r\n\r\n"))[2] == b"ok"  # still serving


@pytest.mark.asyncio
async def test_a_failing_handler_is_a_500_and_a_log_line(
    server: tuple[HttpServer, int, Slow],
) -> None:
    _, port, _ = server
    with capture_logs() as logs:
        request = b"GET /broken?token=s3cr3t HTTP/1.1\r\n\r\n"
        status, _, _ = _split(await _exchange(port, request))
    assert status == "HTTP/1.1 500 Internal Server Error"
    assert [(r["event"], r["path"]) for r in logs] == [("ops endpoint failed", "/broken")]
    assert "boom" in logs[0]["error"] and "s3cr3t" not in repr(logs)


@pytest.mark.asyncio
async def test_a_client_that_sends_no_head_is_dropped(server: tuple[HttpServer, int, Slow]) -> None:
    _, port, _ = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /ok HTTP/1.1\r\n")  # and never the blank line
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 5) == b""  # closed after read_timeout
    writer.close()


@pytest.mark.asyncio
async def test_stop_cancels_the_requests_under_way(server: tuple[HttpServer, int, Slow]) -> None:
    http, port, slow = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /slow HTTP/1.1\r\n\r\n")
    await asyncio.wait_for(slow.entered.wait(), 5)
    await asyncio.wait_for(http.stop(), 5)
    assert slow.cancelled
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


@pytest.mark.asyncio
async def test_a_unix_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "ops.sock")
    http = HttpServer({"/ok": _ok})
    saved = os.umask(0)  # the socket is the owner's alone whatever the umask
    try:
        assert await http.start(UnixAddress(path)) == 0
    finally:
        os.umask(saved)
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        reader, writer = await asyncio.open_unix_connection(path)
        writer.write(b"GET /ok HTTP/1.1\r\n\r\n")
        assert _split(await asyncio.wait_for(reader.read(), 5))[2] == b"ok"
        writer.close()
    finally:
        await http.stop()


def test_a_worker_process_does_not_load_aiohttp() -> None:
    """Workers serve their metrics and probes with this server and write with
    proto.runtime.http1."""
    code = "import sys, workers.__main__; print(sorted({'aiohttp', 'yarl'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
