"""One HTTP session per process to one API server: TLS, auth, rate limit, retries.

Contract:
- ``Session(config, ...)`` is an async context manager owning one ``aiohttp.ClientSession``
  (keep-alive connection pool, TLS from the CA or ``insecure_skip_tls_verify``, client
  certificate, ``User-Agent: metashard/<version>``, ``Accept: application/json``).
- Every attempt of every request, watches included, first takes a token from the client-side
  ``TokenBucket`` (client-go's defaults: qps 5, burst 10; ``qps=0`` disables it).
- A 429, or a 5xx that carries ``Retry-After``, is retried after the advertised number of
  seconds, at most ``max_retries`` (10) times like client-go; then the error is raised
  (``TooManyRequests`` with ``retry_after``). A 401 re-reads a rotating credential and retries
  once. Other error statuses raise the ``ApiError`` subclass built from the body at once.
- Connection failures and client-side timeouts raise ``TransportError``; nothing else from
  aiohttp leaks out.
- ``on_response(method, status_code, seconds)`` is called once per attempt that got response
  headers (status 0 for a transport failure), so applications can count requests in their own
  metrics. Waits and durations use the injected ``Clock``.
- ``request()`` returns the whole body; ``stream()`` yields the body as chunks of at most
  ``chunk_size`` bytes (1 MiB), with an optional inactivity deadline between chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import aiohttp
import orjson
from yarl import URL

from proto.clock import SYSTEM_CLOCK, Clock
from proto.kube.auth import Authorization
from proto.kube.config import ClusterConfig
from proto.kube.errors import ConfigError, StreamError, TransportError, api_error

JSON = "application/json"
CHUNK_SIZE = 1 << 20
DEFAULT_QPS = 5.0
DEFAULT_BURST = 10
DEFAULT_MAX_RETRIES = 10

OnResponse = Callable[[str, int, float], None]
Params = Mapping[str, str]


def _version() -> str:
    try:
        return metadata.version("metashard")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


USER_AGENT = f"metashard/{_version()}"


def _no_metrics(method: str, status: int, seconds: float) -> None:
    return None


class TokenBucket:
    """client-go's token-bucket rate limiter (``flowcontrol.NewTokenBucketRateLimiter``).

    The bucket holds up to ``burst`` tokens and refills at ``qps`` per second. Each call takes
    one token, waiting on the clock when the bucket is empty; waiters are served in the order
    they arrived (each reserves its token before sleeping). ``qps <= 0`` means no limit.
    """

    def __init__(self, qps: float, burst: int, *, clock: Clock = SYSTEM_CLOCK) -> None:
        if qps > 0 and burst < 1:
            raise ValueError(f"burst must be at least 1 when qps > 0, got {burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.now()

    def reserve(self) -> float:
        """Take a token now; return how long the caller must wait before using it."""
        if self.qps <= 0:
            return 0.0
        now = self._clock.now()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay <= 0:
            return
        try:
            await self._clock.sleep(delay)
        except asyncio.CancelledError:
            self._tokens += 1.0  # give the unused token back
            raise


@dataclass(frozen=True, slots=True)
class Response:
    """A complete, successful (< 400) response."""

    status: int
    content_type: str
    body: bytes

    def json(self) -> Any:
        """The decoded body; ``StreamError`` if it is not JSON."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError as exc:
            raise StreamError(
                f"the response body is not JSON ({exc}): {self.body[:200]!r}"
            ) from exc


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _ssl_context(config: ClusterConfig) -> ssl.SSLContext | None:
    if not config.server.startswith("https://"):
        return None
    try:
        ctx = ssl.create_default_context(cafile=config.ca_file)
        if config.insecure_skip_tls_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if config.client_cert_file is not None and config.client_key_file is not None:
            ctx.load_cert_chain(config.client_cert_file, config.client_key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"TLS set-up for {config.server} failed: {exc}") from exc
    return ctx


class Session:
    """The process's HTTP session to the API server (see the module docstring)."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        max_retries: int = DEFAULT_MAX_RETRIES,
        clock: Clock = SYSTEM_CLOCK,
        on_response: OnResponse | None = None,
        request_timeout: float = 60.0,
        connect_timeout: float = 10.0,
        connection_limit: int = 100,
        user_agent: str = USER_AGENT,
    ) -> None:
        self.config = config
        self.clock = clock
        self.bucket = TokenBucket(qps, burst, clock=clock)
        self.max_retries = max_retries
        self._auth = Authorization.from_config(config, clock=clock)
        self._on_response = on_response or _no_metrics
        self._request_timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._connection_limit = connection_limit
        self._headers = {"User-Agent": user_agent, "Accept": JSON}
        self._base = config.server.rstrip("/")
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Session:
        ctx = _ssl_context(self.config)
        connector = aiohttp.TCPConnector(
            limit=self._connection_limit,
            ssl=ctx if ctx is not None else True,
            keepalive_timeout=30.0,
        )
        self._http = aiohttp.ClientSession(
            connector=connector,
            headers=self._headers,
            read_bufsize=CHUNK_SIZE,
            timeout=aiohttp.ClientTimeout(
                total=self._request_timeout, sock_connect=self._connect_timeout
            ),
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        accept: str = JSON,
    ) -> Response:
        """Send one request (with throttling and retries) and return the whole response.

        Raises the matching ``ApiError`` for a status >= 400, ``TransportError`` otherwise.
        """
        resp = await self._send(method, path, params, body, content_type, accept, None)
        try:
            content = await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransportError(f"{method} {path}: reading the response failed: {exc}") from exc
        finally:
            resp.release()
        return Response(resp.status, resp.headers.get("Content-Type", ""), content)

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        read_timeout: float | None = None,
        chunk_size: int = CHUNK_SIZE,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Open a streaming response and yield an iterator over its body chunks.

        ``read_timeout`` is an inactivity deadline: no byte for that long raises
        ``TransportError``. The connection is closed when the block exits.
        """
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._connect_timeout, sock_read=read_timeout
        )
        resp = await self._send(method, path, params, None, None, JSON, timeout)
        try:
            yield self._chunks(resp, f"{method} {path}", chunk_size, read_timeout)
        finally:
            resp.release()

    @staticmethod
    async def _chunks(
        resp: aiohttp.ClientResponse, what: str, size: int, read_timeout: float | None
    ) -> AsyncIterator[bytes]:
        content = resp.content
        try:
            while True:
                chunk = await content.read(size)
                if not chunk:
                    return
                yield chunk
        except aiohttp.ServerTimeoutError as exc:
            raise TransportError(f"{what}: no data for {read_timeout} s") from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransportError(f"{what}: the stream broke: {exc!r}") from exc

    async def _send(
        self,
        method: str,
        path: str,
        params: Params | None,
        body: bytes | None,
        content_type: str | None,
        accept: str,
        client_timeout: aiohttp.ClientTimeout | None,
    ) -> aiohttp.ClientResponse:
        """Throttle, authenticate, send, retry; return a successful response (unread)."""
        if self._http is None:
            raise RuntimeError("Session is not open: use `async with Session(config) as s`")
        url = URL(self._base + path, encoded=True)
        headers = {"Accept": accept}
        if content_type is not None:
            headers["Content-Type"] = content_type
        extra: dict[str, Any] = {}
        if self.config.proxy:
            extra["proxy"] = self.config.proxy
        if self.config.tls_server_name:
            extra["server_hostname"] = self.config.tls_server_name
        if client_timeout is not None:
            extra["timeout"] = client_timeout
        retries = 0
        reauthenticated = False
        while True:
            await self.bucket.acquire()
            authorization = await self._auth.header()
            if authorization is not None:
                headers["Authorization"] = authorization
            started = self.clock.now()
            try:
                resp = await self._http.request(
                    method, url, params=params, data=body, headers=headers, **extra
                )
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                self._on_response(method, 0, self.clock.now() - started)
                raise TransportError(f"{method} {path}: {exc!r}") from exc
            self._on_response(method, resp.status, self.clock.now() - started)
            if resp.status < 400:
                return resp
            retry_after = _retry_after(resp.headers)
            try:
                content = await resp.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise TransportError(f"{method} {path}: reading the error failed: {exc}") from exc
            finally:
                resp.release()
            retryable = resp.status == 429 or resp.status >= 500
            if retryable and retry_after is not None and retries < self.max_retries:
                retries += 1
                await self.clock.sleep(retry_after)
                continue
            if resp.status == 401 and not reauthenticated and self._auth.invalidate():
                reauthenticated = True
                continue
            raise api_error(resp.status, content, retry_after=retry_after, method=method, path=path)
