"""One HTTP session per process to one API server: TLS, auth, rate limit, retries.

Contract:
- ``Session(config, ...)`` is an async context manager owning the process's connections to the
  API server: a lean keep-alive pool (``proto.runtime.http1``) for whole-body requests, the hot
  path of writes, and an ``aiohttp.ClientSession`` for streams (watches), made (and aiohttp
  imported) on the first stream, so a process that never watches never loads it. Both use the same
  TLS set-up (the CA or ``insecure_skip_tls_verify``, client certificate,
  ``tls-server-name``) and proxy, and send ``User-Agent: metashard/<version>`` and
  ``Accept: application/json``.
- Every attempt of every request, watches included, first takes a token from the client-side
  ``TokenBucket`` (client-go's defaults: qps 5, burst 10; ``qps=0`` disables it).
- A 429, or a 5xx that carries ``Retry-After`` (whole seconds; anything else is ignored, as
  client-go does), is retried after the advertised number of seconds, at most
  ``max_retries`` (10) times like client-go; then the error is raised (``TooManyRequests``
  with ``retry_after``). A 401 re-reads a rotating credential and retries once. Other error
  statuses raise the ``ApiError`` subclass built from the body at once.
- A credential holding a line break (a token, a token file's content or an auth plugin's
  answer) raises ``ConfigError`` before anything is sent; the message does not quote it.
- Connection failures and client-side timeouts (``request_timeout`` over a whole request,
  ``connect_timeout``) raise ``TransportError``; nothing from the HTTP libraries leaks out.
  Its message names the library's exception class and its text without credentials (not its
  ``repr``, which shows request headers such as ``Proxy-Authorization``, nor a URL's userinfo),
  and the library's exception is not chained.
- ``metrics`` (a ``RequestMetrics``; ``proto.kube.metrics.RestClientMetrics`` exports
  client-go's ``rest_client_*`` families) hears of every attempt: ``attempted`` once it got
  response headers (``status``) or failed without an answer (``None``), with the seconds it
  took, and ``throttled`` with the seconds the token bucket held it, when a limit is set.
  ``host`` is the server's ``host:port``. Waits and durations use the injected ``Clock``.
- ``unreachable`` is None while the last attempt got an answer, else why it got none (the
  ``TransportError``'s text): so a process can say its API server is unreachable from the
  first failed request on, and stop saying so with the first answer.
- ``request(..., ready=check)`` calls ``check()`` right before each attempt's bytes are written
  (after the rate limit, credentials and connection are at hand; again before a retry), with
  nothing awaited in between (``proto.runtime.http1``, which also says what its return value is
  for). An exception from ``check`` stops the request unsent and is raised as it is, uncounted.
- ``request()`` returns the whole body; ``stream()`` yields the body as chunks of at most
  ``chunk_size`` bytes (1 MiB), with an optional inactivity deadline between chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar
from urllib.parse import urlencode, urlsplit

import orjson

from proto.kube.auth import Authorization
from proto.kube.cluster import ClusterConfig
from proto.kube.errors import ConfigError, StreamError, TransportError, api_error
from proto.runtime.clock import SYSTEM_CLOCK, Clock
from proto.runtime.http1 import HttpClient, HttpTransportError, Ready
from proto.runtime.redact import safe_url, scrub

if TYPE_CHECKING:
    import aiohttp

JSON = "application/json"
CHUNK_SIZE = 1 << 20
DEFAULT_QPS = 5.0
DEFAULT_BURST = 10
DEFAULT_MAX_RETRIES = 10

Params = Mapping[str, str]
T = TypeVar("T")


def _version() -> str:
    try:
        return metadata.version("metashard")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


USER_AGENT = f"metashard/{_version()}"


class RequestMetrics(Protocol):
    """What the session reports of each attempt (see the module docstring)."""

    def attempted(self, *, host: str, method: str, status: int | None, seconds: float) -> None:
        """An attempt ended: ``status`` of its answer, None when none came."""
        ...

    def throttled(self, *, host: str, method: str, seconds: float) -> None:
        """An attempt waited ``seconds`` for the client-side rate limit."""
        ...


class _NoMetrics:
    def attempted(self, *, host: str, method: str, status: int | None, seconds: float) -> None:
        pass

    def throttled(self, *, host: str, method: str, seconds: float) -> None:
        pass


NO_REQUEST_METRICS: RequestMetrics = _NoMetrics()


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


@dataclass(frozen=True, slots=True)
class _Attempt(Generic[T]):
    """One attempt's answer: enough for the retry loop, and what the caller gets on success."""

    status: int
    headers: Mapping[str, str]
    """Looked up with lower-case names (aiohttp's headers are case-insensitive)."""
    read_error: Callable[[], Awaitable[bytes]]
    """Reads an error answer's body (and releases the connection)."""
    value: T


_SECONDS = re.compile(r"\+?[0-9]+")
_INT64_MAX = 2**63 - 1


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """The ``Retry-After`` seconds, ``None`` unless a non-negative integer that fits in 64 bits.

    client-go reads it with ``strconv.Atoi`` and ignores what does not parse, so ``1.5``,
    ``1e12`` or ``inf`` mean no retry, not a wait (a float would wait for ever on ``inf``).
    """
    value = headers.get("retry-after")
    if value is None or not _SECONDS.fullmatch(value):
        return None
    seconds = int(value)
    return float(seconds) if seconds <= _INT64_MAX else None


def _describe(exc: BaseException) -> str:
    """``Class: text`` of an exception from aiohttp or the socket layer, without credentials.

    A ``ClientResponseError`` (a proxy refusing ``CONNECT``, say) gives its status, reason and
    the URL it came from without userinfo: its text and ``repr`` carry the proxy URL with
    userinfo and the request headers, ``Proxy-Authorization`` included.
    """
    import aiohttp

    if isinstance(exc, aiohttp.ClientResponseError):
        where = safe_url(str(exc.request_info.real_url))
        text = f"{exc.status} {scrub(exc.message)} from {where}"
    else:
        text = scrub(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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
        metrics: RequestMetrics = NO_REQUEST_METRICS,
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
        self._metrics = metrics
        self._host = urlsplit(config.server).netloc
        self.unreachable: str | None = None
        self._request_timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._connection_limit = connection_limit
        self._user_agent = user_agent
        self._base = config.server.rstrip("/")
        self._http: aiohttp.ClientSession | None = None
        self._unary: HttpClient | None = None
        self._ssl: ssl.SSLContext | None = None

    async def __aenter__(self) -> Session:
        self._ssl = _ssl_context(self.config)
        self._unary = HttpClient(
            ssl_context=self._ssl,
            server_hostname=self.config.tls_server_name,
            proxy=self.config.proxy,
            connect_timeout=self._connect_timeout,
            limit_per_origin=self._connection_limit,
        )
        return self

    def _streams(self) -> aiohttp.ClientSession:
        """The session streams go through, made on first use."""
        self._require(self._unary)  # open, and not closed
        if self._http is None:
            import aiohttp

            connector = aiohttp.TCPConnector(
                limit=self._connection_limit,
                ssl=self._ssl if self._ssl is not None else True,
                keepalive_timeout=30.0,
            )
            self._http = aiohttp.ClientSession(connector=connector, read_bufsize=CHUNK_SIZE)
        return self._http

    async def __aexit__(self, *exc_info: object) -> None:
        if self._unary is not None:
            await self._unary.close()
            self._unary = None
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
        ready: Ready | None = None,
    ) -> Response:
        """Send one request (with throttling and retries) and return the whole response.

        Raises the matching ``ApiError`` for a status >= 400, ``TransportError`` otherwise.
        """
        unary = self._require(self._unary)
        url = self._base + path
        if params:
            url = f"{url}?{urlencode(params)}"

        async def attempt(headers: dict[str, str]) -> _Attempt[Response]:
            if body is not None:
                headers["Content-Type"] = content_type or JSON
            try:
                answer = await unary.request(
                    method,
                    url,
                    headers=headers,
                    body=body,
                    time_limit=self._request_timeout,
                    ready=ready,
                )
            except TimeoutError:
                raise TransportError(
                    f"{method} {path}: no answer within {self._request_timeout:g} s"
                ) from None
            except HttpTransportError as exc:
                raise TransportError(f"{method} {path}: {exc}") from exc
            content = answer.body

            async def read_error() -> bytes:
                return content

            reply = Response(answer.status, answer.headers.get("content-type", ""), content)
            return _Attempt(answer.status, answer.headers, read_error, reply)

        return await self._send(method, path, accept, attempt)

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
        import aiohttp
        from yarl import URL

        http = self._streams()
        url = URL(self._base + path, encoded=True)
        extra: dict[str, Any] = {
            "timeout": aiohttp.ClientTimeout(
                total=None, sock_connect=self._connect_timeout, sock_read=read_timeout
            )
        }
        if self.config.proxy:
            extra["proxy"] = self.config.proxy
        if self.config.tls_server_name:
            extra["server_hostname"] = self.config.tls_server_name

        async def attempt(headers: dict[str, str]) -> _Attempt[aiohttp.ClientResponse]:
            try:
                resp = await http.request(method, url, params=params, headers=headers, **extra)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise TransportError(f"{method} {path}: {_describe(exc)}") from None

            async def read_error() -> bytes:
                try:
                    return await resp.read()
                except (aiohttp.ClientError, TimeoutError) as exc:
                    raise TransportError(
                        f"{method} {path}: reading the error failed: {_describe(exc)}"
                    ) from None
                finally:
                    resp.release()

            return _Attempt(resp.status, resp.headers, read_error, resp)

        resp = await self._send(method, path, JSON, attempt)
        try:
            yield self._chunks(resp, f"{method} {path}", chunk_size, read_timeout)
        finally:
            resp.release()

    @staticmethod
    async def _chunks(
        resp: aiohttp.ClientResponse, what: str, size: int, read_timeout: float | None
    ) -> AsyncIterator[bytes]:
        import aiohttp

        content = resp.content
        try:
            while True:
                chunk = await content.read(size)
                if not chunk:
                    return
                yield chunk
        except aiohttp.ServerTimeoutError:
            raise TransportError(f"{what}: no data for {read_timeout} s") from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransportError(f"{what}: the stream broke: {_describe(exc)}") from None

    @staticmethod
    def _require(client: T | None) -> T:
        if client is None:
            raise RuntimeError("Session is not open: use `async with Session(config) as s`")
        return client

    async def _send(
        self,
        method: str,
        path: str,
        accept: str,
        attempt: Callable[[dict[str, str]], Awaitable[_Attempt[T]]],
    ) -> T:
        """Throttle, authenticate, attempt, retry; return a successful attempt's value."""
        retries = 0
        reauthenticated = False
        while True:
            if self.bucket.qps > 0:
                waiting = self.clock.now()
                await self.bucket.acquire()
                waited = self.clock.now() - waiting
                self._metrics.throttled(host=self._host, method=method, seconds=waited)
            headers = {"User-Agent": self._user_agent, "Accept": accept}
            authorization = await self._auth.header()
            if authorization is not None:
                if "\r" in authorization or "\n" in authorization:
                    where = self.config.source or safe_url(self.config.server)
                    raise ConfigError(
                        f"{method} {path}: the credentials of {where} hold a line break,"
                        " which cannot go into the Authorization header"
                    )
                headers["Authorization"] = authorization
            started = self.clock.now()
            try:
                answer = await attempt(headers)
            except TransportError as e:
                seconds = self.clock.now() - started
                self._metrics.attempted(
                    host=self._host, method=method, status=None, seconds=seconds
                )
                self.unreachable = str(e)
                raise
            seconds = self.clock.now() - started
            self._metrics.attempted(
                host=self._host, method=method, status=answer.status, seconds=seconds
            )
            self.unreachable = None
            if answer.status < 400:
                return answer.value
            retry_after = _retry_after(answer.headers)
            content = await answer.read_error()
            retryable = answer.status == 429 or answer.status >= 500
            if retryable and retry_after is not None and retries < self.max_retries:
                retries += 1
                await self.clock.sleep(retry_after)
                continue
            if answer.status == 401 and not reauthenticated and self._auth.invalidate():
                reauthenticated = True
                continue
            raise api_error(
                answer.status, content, retry_after=retry_after, method=method, path=path
            )
