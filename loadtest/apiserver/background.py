"""Running the emulator from synchronous code: in a background thread or a subprocess.

``ClusterThread`` runs an ``EmbeddedCluster`` on its own event loop in a daemon thread;
``call(fn, *args)`` runs ``fn`` on that loop (the cluster's objects are loop-confined), so
``thread.call(thread.cluster.faults.drop_watches)`` works from a test.

``ClusterProcess`` runs ``python -m loadtest.apiserver`` (a real process, for end-to-end
tests whose workers run in other processes), reads the URL from its first stdout line, and
steers it over HTTP: ``process.faults`` has the same methods as ``cluster.faults``.
``stop()`` sends SIGTERM and waits for a clean exit. Both are context managers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from loadtest.apiserver.cluster import EmbeddedCluster

T = TypeVar("T")


class _Started(ABC):
    """A context manager over ``start()`` and ``stop()``: ``with`` starts, leaving stops."""

    @abstractmethod
    def start(self) -> Self: ...

    @abstractmethod
    def stop(self) -> object: ...

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ClusterThread(_Started):
    def __init__(self, **options: Any) -> None:
        self._options = options
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self.cluster: EmbeddedCluster | None = None

    def start(self) -> Self:
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()

        async def main() -> None:
            self._stopped = asyncio.Event()
            try:
                self.cluster = EmbeddedCluster(**self._options)
                await self.cluster.start()
            except BaseException as err:
                ready.set_exception(err)
                return
            ready.set_result(None)
            await self._stopped.wait()
            await self.cluster.stop()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(main())
            finally:
                self._loop.close()

        self._thread = threading.Thread(target=run, name="embedded-cluster", daemon=True)
        self._thread.start()
        ready.result(timeout=30)
        return self

    @property
    def url(self) -> str:
        assert self.cluster is not None
        return self.cluster.url

    @property
    def kubeconfig(self) -> Path:
        assert self.cluster is not None
        return self.cluster.kubeconfig

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` on the cluster's event loop and return its result."""
        assert self._loop is not None

        async def invoke() -> T:
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(invoke(), self._loop).result(timeout=30)

    def stop(self) -> None:
        if self._loop is not None and self._stopped is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(timeout=30)


class HttpFaults:
    """``FaultControl`` over the admin HTTP endpoints of a running emulator."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self._base = url.rstrip("/") + "/_emulator/faults"
        self._token = token

    def _post(self, path: str, body: dict[str, Any] | None = None, method: str = "POST") -> Any:
        data = json.dumps(body or {}).encode()
        request = urllib.request.Request(self._base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self._token:
            request.add_header("Authorization", f"Bearer {self._token}")
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"{}")

    def drop_watches(self) -> int:
        return int(self._post("/drop-watches")["dropped"])

    def expire_history(self) -> None:
        self._post("/expire-history")

    def compact(self) -> None:
        self._post("/compact")

    def fail(
        self,
        count: int = 1,
        *,
        status: int | str = 500,
        method: str = "",
        path: str = "",
        retry_after: int = 1,
        seconds: float | None = None,
    ) -> None:
        body = {
            "count": count,
            "status": status,
            "method": method,
            "path": path,
            "retryAfterSeconds": retry_after,
            "seconds": seconds,
        }
        self._post("/errors", body)

    def delay(
        self, seconds: float, *, method: str = "", path: str = "", count: int | None = None
    ) -> None:
        self._post("/latency", {"seconds": seconds, "method": method, "path": path, "count": count})

    def clear(self) -> None:
        self._post("", method="DELETE")


class ClusterProcess(_Started):
    """``python -m loadtest.apiserver`` in a subprocess."""

    def __init__(
        self,
        *,
        token: str | None = None,
        kubelet: bool = False,
        rbac: bool = False,
        args: list[str] | None = None,
    ) -> None:
        self.token = token
        self._extra = list(args or [])
        if kubelet:
            self._extra.append("--kubelet")
        if rbac:
            self._extra.append("--rbac")
        self._tempdir = tempfile.TemporaryDirectory(prefix="embedded-cluster-")
        self.kubeconfig = Path(self._tempdir.name) / "kubeconfig"
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.faults = HttpFaults("")

    def start(self, timeout: float = 30.0) -> Self:
        command = [
            sys.executable,
            "-m",
            "loadtest.apiserver",
            "--port",
            "0",
            "--kubeconfig",
            str(self.kubeconfig),
        ]
        if self.token:
            command += ["--token", self.token]
        self.process = subprocess.Popen(
            command + self._extra,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        stdout = self.process.stdout
        assert stdout is not None
        result: concurrent.futures.Future[str] = concurrent.futures.Future()
        threading.Thread(target=lambda: result.set_result(stdout.readline()), daemon=True).start()
        try:
            line = result.result(timeout=timeout).strip()
        except concurrent.futures.TimeoutError:
            self.process.kill()
            raise RuntimeError("the emulator did not print its URL in time") from None
        if not line.startswith("http"):
            self.process.kill()
            raise RuntimeError(f"the emulator failed to start: {line!r}")
        self.url = line
        self.faults = HttpFaults(line, self.token)
        return self

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait; returns the exit code."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._tempdir.cleanup()
        return self.process.returncode
