"""A lean HTTP/1.1 client for unary requests: the hot path of API writes and hook calls.

Why not aiohttp's client here: a reconcile makes several small requests (child writes, the
status write, the hook call), and aiohttp's client spends several times what the bytes cost
on each; this client spends a fraction of that (``make bench BENCH=http1`` prints both and
their ratio on the machine it runs on).
aiohttp still serves the long-lived streams (watches) and every server.

Contract:
- ``HttpClient(...)`` is an async context manager; ``await client.request(method, url,
  headers=..., body=...)`` sends one request and returns the whole ``HttpResponse`` (status,
  headers with lower-case names, body), whatever the status.
- ``request(..., ready=check)`` calls ``check()`` right before the request's bytes are written,
  each time they are (a resend too), once a connection is at hand: nothing is awaited between
  the two, so what ``check`` decides holds when the bytes leave. An exception from ``check``
  aborts the request unsent and is raised as it is; the connection stays reusable. What
  ``check`` returns, if not None, is called right after the bytes were handed to the
  connection (``Ready``: the caller can measure how long that took).
- ``request(..., time_limit=s)`` raises ``TimeoutError`` when the whole request (waiting for a
  connection, connecting, the exchange and a resend) has taken ``s`` seconds; the connection
  is closed. It costs a timer, where ``asyncio.timeout`` costs a task cancellation scope on
  every request; the caller's own cancellation (``asyncio.timeout``) works as well.
- ``url`` is an absolute ``http://`` or ``https://`` URL, already percent-encoded. Its userinfo
  (``http://user:password@host/``, percent-decoded) is sent as ``Authorization: Basic
  base64(user:password)`` when the request has no ``Authorization`` header, as Go's net/http
  does (``userinfo_authorization``); it is never sent otherwise, nor put into a message.
- Keep-alive: a connection returns to its origin's idle pool when its response is complete and
  neither side asked to close; an idle connection that the peer closed, or idle for longer than
  ``idle_timeout``, is discarded. At most ``limit_per_origin`` connections are open per origin;
  further requests wait for one. The most recently used idle connection is reused first.
- A request written on a reused connection that the peer closed without answering a byte is
  sent once more on a new connection (the peer dropped an idle connection as we wrote).
- Failures: ``HttpTransportError`` for connection failures (also a connect, TLS handshake
  included, not done within ``connect_timeout``), resets, a close before the response is
  complete and malformed responses. A connection that saw a failure, a cancellation or its
  time limit is closed, never reused.
- Response bodies: ``Content-Length``, ``chunked`` or until close; none for ``HEAD``, 204 and
  304; interim 1xx responses are skipped. Header names and values containing CR or LF are
  refused (``ValueError``, naming the header but never quoting the value) before anything is
  sent.
- Body size: ``request(..., max_body=n)`` refuses a response body longer than ``n`` bytes
  with ``BodyTooLarge`` as soon as that is known: at once from ``Content-Length``, else as
  soon as the chunks or the bytes read until close pass ``n``; at most ``n`` plus one read's
  worth of bytes is ever buffered, and the connection is closed.
- TLS: ``ssl_context`` for ``https`` origins (default: the system's trust store), with an
  optional ``server_hostname`` override; ``request(..., ssl_context=ctx)`` uses ``ctx`` for
  that request instead. Connections are pooled per (origin, context), so a connection made
  with one context (CA, client certificate) never carries a request meant for another;
  ``discard(ctx)`` closes the idle connections made with ``ctx`` and forgets their pools.
  ``proxy`` (``http://[user:pass@]host:port``) carries plain requests in absolute form and
  ``https`` ones through a ``CONNECT`` tunnel.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import re
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast
from urllib.parse import unquote, urlsplit

from proto.runtime.redact import masked_url

MAX_HEAD_BYTES = 64 * 1024
_NO_BODY_STATUSES = (204, 304)


Ready = Callable[[], Callable[[], object] | None]
"""Called right before a request's bytes are written; raises to stop it, or returns what to call
once they are (module docstring)."""


class HttpTransportError(Exception):
    """The exchange failed below HTTP semantics: connect, reset, early close, bad framing."""


class BodyTooLarge(HttpTransportError):
    """The response body is longer than the ``max_body`` the caller allowed."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"response body larger than {limit} bytes")
        self.limit = limit


class _StaleConnection(HttpTransportError):
    """A reused connection closed by the peer before any byte of the response."""


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    headers: Mapping[str, str]
    """Lower-case names; repeated headers joined with ``", "``."""
    body: bytes


@dataclass(frozen=True, slots=True)
class _Origin:
    scheme: str
    host: str
    port: int
    authority: str
    """``host:port`` as ``CONNECT`` names it (IPv6 addresses in brackets)."""
    host_header: str
    """The authority without a default port, as ``Host`` names it."""

    @property
    def tls(self) -> bool:
        return self.scheme == "https"


_AUTHORITY = re.compile(r"[^/?#]*")


def _authority(rest: str) -> str:
    """The authority (``[userinfo@]host[:port]``) at the start of a URL's part after ``://``."""
    match = _AUTHORITY.match(rest)
    return match[0] if match else ""


def userinfo_authorization(url: str) -> str | None:
    """``Basic base64(user:password)`` from the userinfo of ``url``, percent-decoded (no
    password: ``user:``); ``None`` when ``url`` has none."""
    _, _, rest = url.partition("://")
    userinfo, at, _ = _authority(rest).rpartition("@")
    if not at:
        return None
    user, _, password = userinfo.partition(":")
    return "Basic " + base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()


def _origin(scheme: str, netloc: str) -> _Origin:
    parts = urlsplit(f"{scheme}://{netloc}")
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an absolute http(s) URL: {scheme}://{netloc}")
    default = 443 if scheme == "https" else 80
    port = parts.port or default
    host = parts.hostname
    shown = f"[{host}]" if ":" in host else host
    authority = f"{shown}:{port}"
    return _Origin(scheme, host, port, authority, shown if port == default else authority)


def _check_header(text: str, what: str, name: str = "") -> str:
    """``text``, to go into the request head; ``ValueError`` naming ``what`` (and the header
    ``name``; never ``text``, which may be a credential) if it holds CR or LF."""
    if "\r" in text or "\n" in text:
        raise ValueError(f"CR or LF in {what}{f' {name!r}' if name else ''}")
    return text


def _parse_head(head: bytes) -> tuple[int, bool, dict[str, str]]:
    """Status, whether the server keeps the connection, and the headers of a response head."""
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise HttpTransportError(f"malformed HTTP status line: {lines[0][:100]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise HttpTransportError(f"malformed HTTP header line: {line[:100]!r}")
        name = name.lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    connection = headers.get("connection", "").lower()
    if version == "HTTP/1.0":
        keep = "keep-alive" in connection
    else:
        keep = "close" not in connection
    return int(code), keep, headers


class _Connection(asyncio.Protocol):
    """One connection, one exchange at a time; the response is parsed as bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False
        self.keep_alive = True
        self.idle_since = 0.0
        self._buffer = bytearray()
        self._waiter: asyncio.Future[HttpResponse] | None = None
        self._head_only = False
        self._received = False
        # the response being parsed
        self._status = 0
        self._headers: dict[str, str] = {}
        self._framing = ""  # "", "length", "chunked", "close"
        self._length = 0
        self._chunks: list[bytes] = []
        self._chunked_size = 0
        self._max_body: int | None = None

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._received = True
        if self._waiter is None:
            self.keep_alive = False  # bytes nobody asked for: the connection is unusable
            return
        try:
            self._parse()
        except HttpTransportError as exc:
            self._fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is None or self._waiter.done():
            return
        if self._framing == "close":
            self._finish(bytes(self._buffer))
        elif self.reused and not self._received:
            self._fail(_StaleConnection("the server closed the idle connection"))
        else:
            reason = f": {exc}" if exc else ""
            self._fail(HttpTransportError(f"connection closed before the response ended{reason}"))

    # --- one exchange -------------------------------------------------------------------------

    def exchange(
        self, data: bytes, *, head_only: bool, max_body: int | None = None
    ) -> asyncio.Future[HttpResponse]:
        assert self.transport is not None and self._waiter is None
        self._waiter = asyncio.get_running_loop().create_future()
        self._head_only = head_only
        self._max_body = max_body
        self._received = bool(self._buffer)
        self._framing = ""
        self.transport.write(data)
        return self._waiter

    def expire(self) -> None:
        """The caller's deadline passed: fail the exchange in progress with ``TimeoutError``."""
        if self._waiter is not None and not self._waiter.done():
            self._fail(TimeoutError("no complete response before the deadline"))

    def close(self) -> None:
        self.closed = True
        self.keep_alive = False
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: Exception) -> None:
        self.keep_alive = False
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.close()

    def _finish(self, body: bytes) -> None:
        if self._buffer:
            self.keep_alive = False  # bytes past the response: the framing cannot be trusted
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(HttpResponse(self._status, self._headers, body))

    def _parse(self) -> None:
        buffer = self._buffer
        while not self._framing:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_HEAD_BYTES:
                    raise HttpTransportError(f"response head larger than {MAX_HEAD_BYTES} bytes")
                return
            status, keep, headers = _parse_head(bytes(buffer[:end]))
            del buffer[: end + 4]
            if 100 <= status < 200 and status != 101:
                continue  # interim response: the real one follows
            self._status, self._headers = status, headers
            self.keep_alive = self.keep_alive and keep
            if self._head_only or status in _NO_BODY_STATUSES:
                self._framing, self._length = "length", 0
            elif "chunked" in headers.get("transfer-encoding", "").lower():
                self._framing, self._chunks, self._chunked_size = "chunked", [], 0
            elif "content-length" in headers:
                try:
                    self._length = int(headers["content-length"])
                except ValueError:
                    raise HttpTransportError(
                        f"bad Content-Length: {headers['content-length'][:50]!r}"
                    ) from None
                if self._length < 0:
                    raise HttpTransportError(f"negative Content-Length: {self._length}")
                if self._max_body is not None and self._length > self._max_body:
                    raise BodyTooLarge(self._max_body)
                self._framing = "length"
            else:
                self._framing, self.keep_alive = "close", False
        if self._framing == "close":
            if self._max_body is not None and len(buffer) > self._max_body:
                raise BodyTooLarge(self._max_body)
        elif self._framing == "length":
            if len(buffer) >= self._length:
                body = bytes(buffer[: self._length])
                del buffer[: self._length]
                self._finish(body)
        elif self._framing == "chunked":
            self._parse_chunks()

    def _parse_chunks(self) -> None:
        buffer = self._buffer
        while True:
            line_end = buffer.find(b"\r\n")
            if line_end < 0:
                return
            size_text = bytes(buffer[:line_end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise HttpTransportError(f"bad chunk size: {size_text[:20]!r}") from None
            if size == 0:
                trailers_end = buffer.find(b"\r\n\r\n", line_end)
                if trailers_end < 0:
                    return
                del buffer[: trailers_end + 4]
                self._finish(b"".join(self._chunks))
                return
            start = line_end + 2
            limit = self._max_body
            if limit is not None and self._chunked_size + size > limit:
                raise BodyTooLarge(limit)
            if len(buffer) < start + size + 2:
                return
            if buffer[start + size : start + size + 2] != b"\r\n":
                raise HttpTransportError("chunk not followed by CRLF")
            self._chunks.append(bytes(buffer[start : start + size]))
            self._chunked_size += size
            del buffer[: start + size + 2]


class _Pool:
    """The connections of one origin: idle ones, how many are open, and who waits for one."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.idle: list[_Connection] = []
        self.open = 0
        self.waiters: collections.deque[asyncio.Future[_Connection | None]] = collections.deque()
        self.discarded = False

    def wake(self, conn: _Connection | None) -> bool:
        """Hand ``conn`` (or a free slot: ``None``) to the first live waiter."""
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return True
        return False


class HttpClient:
    """Unary HTTP/1.1 requests over pooled keep-alive connections (see the module docstring)."""

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        proxy: str | None = None,
        connect_timeout: float = 10.0,
        idle_timeout: float = 30.0,
        limit_per_origin: int = 100,
    ) -> None:
        if limit_per_origin < 1:
            raise ValueError(f"limit_per_origin must be at least 1, got {limit_per_origin}")
        self._ssl = ssl_context
        self._server_hostname = server_hostname
        self._connect_timeout = connect_timeout
        self._idle_timeout = idle_timeout
        self._limit = limit_per_origin
        self._pools: dict[tuple[_Origin, ssl.SSLContext | None], _Pool] = {}
        self._origins: dict[str, tuple[_Origin, str | None]] = {}
        """``scheme://netloc`` -> its origin and the ``Authorization`` value of its userinfo."""
        self._proxy: _Origin | None = None
        self._proxy_auth: str | None = None
        if proxy:
            parts = urlsplit(proxy)
            if parts.scheme != "http":
                shown = masked_url(proxy)
                raise ValueError(f"only http:// proxies are supported, got {shown!r}")
            self._proxy = _origin("http", parts.netloc.rpartition("@")[2])
            self._proxy_auth = userinfo_authorization(proxy)
        self._closed = False

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every idle connection; connections in use close when their exchange ends."""
        self._closed = True
        for pool in self._pools.values():
            for conn in pool.idle:
                conn.close()
            pool.idle.clear()
            while pool.wake(None):
                pass

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        ssl_context: ssl.SSLContext | None = None,
        max_body: int | None = None,
        time_limit: float | None = None,
        ready: Ready | None = None,
    ) -> HttpResponse:
        """Send one request and return its response (any status). See the module docstring."""
        origin, target, basic = self._split(url)
        data = self._encode(method, origin, target, headers or {}, body, basic)
        pool = (origin, ssl_context if origin.tls else None)
        loop = asyncio.get_running_loop()
        deadline = None if time_limit is None else loop.time() + time_limit
        for attempt in (1, 2):
            conn = self._idle(pool)
            if conn is None:
                async with asyncio.timeout_at(deadline):
                    conn = await self._acquire(pool)
            sent = None
            if ready is not None:
                try:
                    sent = ready()
                except BaseException:
                    self._release(pool, conn, reusable=True)
                    raise
            try:
                waiter = conn.exchange(data, head_only=method == "HEAD", max_body=max_body)
                if sent is not None:
                    sent()
                expiry = None if deadline is None else loop.call_at(deadline, conn.expire)
                try:
                    response = await waiter
                finally:
                    if expiry is not None:
                        expiry.cancel()
            except _StaleConnection:
                self._release(pool, conn, reusable=False)
                if attempt == 2:
                    raise HttpTransportError("the server closed the connection twice") from None
                continue
            except BaseException:
                self._release(pool, conn, reusable=False)
                raise
            self._release(pool, conn, reusable=conn.keep_alive and not conn.closed)
            return response
        raise AssertionError("unreachable")

    def discard(self, ssl_context: ssl.SSLContext) -> None:
        """Close the idle connections made with ``ssl_context`` and forget their pools.

        Connections of that context still in use close when their exchange ends.
        """
        for key in [k for k in self._pools if k[1] is ssl_context]:
            pool = self._pools[key]
            pool.discarded = True
            for conn in pool.idle:
                conn.close()
                pool.open -= 1
            pool.idle.clear()
            if pool.open == 0 and not pool.waiters:
                del self._pools[key]

    # --- requests -----------------------------------------------------------------------------

    def _split(self, url: str) -> tuple[_Origin, str, str | None]:
        """The origin, the request target and the ``Authorization`` value of the userinfo."""
        scheme, sep, rest = url.partition("://")
        if not sep:
            raise ValueError(f"not an absolute URL: {masked_url(url)!r}")
        netloc = _authority(rest)
        target = rest[len(netloc) :]
        if not target.startswith("/"):
            target = "/" + target
        key = f"{scheme}://{netloc}"
        known = self._origins.get(key)
        if known is None:
            origin = _origin(scheme, netloc.rpartition("@")[2])
            known = self._origins[key] = (origin, userinfo_authorization(key))
        return known[0], target, known[1]

    def _encode(
        self,
        method: str,
        origin: _Origin,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None,
        basic: str | None,
    ) -> bytes:
        if self._proxy is not None and not origin.tls:
            target = f"http://{origin.host_header}{target}"
        lines = [
            f"{_check_header(method, 'the method')} "
            f"{_check_header(target, 'the request target')} HTTP/1.1"
        ]
        lines.append(f"Host: {origin.host_header}")
        if self._proxy_auth is not None and not origin.tls:
            lines.append(f"Proxy-Authorization: {self._proxy_auth}")
        for name, value in headers.items():
            name = _check_header(name, "an HTTP header name")
            lines.append(f"{name}: {_check_header(value, 'the value of HTTP header', name)}")
        if basic is not None and not any(name.lower() == "authorization" for name in headers):
            lines.append(f"Authorization: {basic}")
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        elif method in ("POST", "PUT", "PATCH"):
            lines.append("Content-Length: 0")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head + body if body else head

    # --- connections --------------------------------------------------------------------------

    def _idle(self, key: tuple[_Origin, ssl.SSLContext | None]) -> _Connection | None:
        """The most recently used idle connection that can be reused, if any; the unusable
        ones met on the way are closed."""
        pool = self._pools.get(key)
        if pool is None or self._closed:
            return None
        now = time.monotonic()
        while pool.idle:
            conn = pool.idle.pop()
            if conn.keep_alive and not conn.closed and now - conn.idle_since < self._idle_timeout:
                conn.reused = True
                return conn
            conn.close()
            pool.open -= 1
        return None

    async def _acquire(self, key: tuple[_Origin, ssl.SSLContext | None]) -> _Connection:
        if self._closed:
            raise HttpTransportError("the HTTP client is closed")
        origin, context = key
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = _Pool(self._limit)
        while True:
            conn = self._idle(key)
            if conn is not None:
                return conn
            if pool.open < pool.limit:
                pool.open += 1
                try:
                    return await self._connect(origin, context)
                except BaseException:
                    pool.open -= 1
                    pool.wake(None)
                    raise
            waiter: asyncio.Future[_Connection | None] = asyncio.get_running_loop().create_future()
            pool.waiters.append(waiter)
            try:
                conn_or_slot = await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():  # pass on what was handed over
                    handed = waiter.result()
                    if handed is not None:
                        self._release(key, handed, reusable=True)
                    else:
                        pool.wake(None)
                raise
            if self._closed:
                raise HttpTransportError("the HTTP client is closed")
            if conn_or_slot is not None:
                conn_or_slot.reused = True
                return conn_or_slot

    def _release(
        self, key: tuple[_Origin, ssl.SSLContext | None], conn: _Connection, *, reusable: bool
    ) -> None:
        pool = self._pools[key]
        if not reusable or self._closed or pool.discarded:
            conn.close()
            pool.open -= 1
            if not pool.wake(None) and pool.discarded and pool.open == 0:
                del self._pools[key]
            return
        conn.idle_since = time.monotonic()
        if not pool.wake(conn):
            pool.idle.append(conn)

    async def _connect(self, origin: _Origin, context: ssl.SSLContext | None) -> _Connection:
        loop = asyncio.get_running_loop()
        if not origin.tls:
            context = None
        elif context is None:
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            context = self._ssl
        hostname = self._server_hostname or origin.host
        target = self._proxy or origin
        try:
            async with asyncio.timeout(self._connect_timeout):
                if self._proxy is not None and origin.tls:
                    return await self._tunnel(origin, context, hostname)
                _, conn = await loop.create_connection(
                    _Connection,
                    target.host,
                    target.port,
                    ssl=context,
                    server_hostname=hostname if context is not None else None,
                )
        except TimeoutError:  # an OSError too: its text is empty
            raise HttpTransportError(
                f"cannot connect to {target.host_header} ({origin.scheme}): "
                f"not within {self._connect_timeout:g} s"
            ) from None
        except OSError as exc:
            raise HttpTransportError(
                f"cannot connect to {target.host_header} ({origin.scheme}): {exc}"
            ) from exc
        return conn

    async def _tunnel(
        self, origin: _Origin, context: ssl.SSLContext | None, hostname: str
    ) -> _Connection:
        """A connection to ``origin`` through the proxy's ``CONNECT``, then TLS over it."""
        assert self._proxy is not None and context is not None
        loop = asyncio.get_running_loop()
        transport, conn = await loop.create_connection(
            _Connection, self._proxy.host, self._proxy.port
        )
        authority = origin.authority
        auth = f"Proxy-Authorization: {self._proxy_auth}\r\n" if self._proxy_auth else ""
        request = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{auth}\r\n"
        try:
            answer = await conn.exchange(request.encode("latin-1"), head_only=True)
        except BaseException:
            conn.close()
            raise
        if answer.status != 200:
            conn.close()
            raise HttpTransportError(f"the proxy refused CONNECT {authority}: {answer.status}")
        tls = await loop.start_tls(transport, conn, context, server_hostname=hostname)
        if tls is None:
            conn.close()
            raise HttpTransportError(f"TLS through the proxy to {authority} failed")
        conn.transport = tls
        return conn
