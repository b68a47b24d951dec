"""The scale benchmark's phases for one configuration, each measured and recorded as one line.

A configuration gets a namespace of its own with N Fanouts waiting (no children, no
status) and one checker watching it (``_scale_edits.edit_clock``); at the end its processes
are stopped and the namespace is deleted and waited for, so the next configuration's
informers see only their own objects; before its cold start the machine must be quiet for
``--settle`` seconds (waiting at most ``--settle-max`` s, then saying it is not), so the work
the last configuration's objects left to the control plane is not counted in the next one.
The phases, in order (each one only when the configuration has it, see ``_scale_config``):

- ``coldstart``: the clock starts, then the controller process is spawned (the raw client's:
  ``_coldraw``); ends when every parent has its K children and status. Afterwards the
  benchmark lists everything a controller caches (Fanouts and ConfigMaps of all namespaces,
  paged) and keeps its wire bytes, object count and the time the list took ("the initial list
  measured alone").
- ``resync``: nothing changes; the controller runs with its resync interval set to
  ``resync_interval``. The phase starts when the hook is called again (polled every
  ``POLL`` s: the flush began) and ends when it was called N times since; its requests
  should hold no write.
- ``edits``: the next flush; from its start, edits of random parents (``spec.data``, one at a
  time every 1/``edit_rate`` s) for as long as the clean resync took (N hook calls when it did
  not run), at least one; each edit is timed from its write to its K children holding it.
- ``update``: ``spec.data`` of the first ``update_fraction`` x N parents (harness client),
  until their children hold it (the raw client then writes their children and status).
- ``failover``: the controller is stopped; copy A starts with leader election and does its
  first pass (N hook calls, then quiet); copy B starts and waits for the Lease; the clock
  starts, A's process group gets SIGKILL and one parent, drawn at random, is edited (the
  first parent would be the first of the new leader's full pass, a random one is anywhere in
  it); the phase's ``seconds`` end when that edit's children hold it (B took the Lease,
  listed everything and reconciled it).

Every phase, after its end, waits until the hook is quiet (``QUIET_WINDOW`` s without a
call, at most ``QUIET_MAX``): what the phase caused after its end is counted in its cost
(CPU, requests). A record holds: ``seconds``, ``measured_seconds`` (to quiet),
``converged``, the sampler's ``cpu_processes``, ``peak_rss``, ``rss`` and ``series``
(``progress_of`` says what ``series.progress`` counts), ``requests`` (the API server's request
counts by ``VERB resource``, every client, Lease renewals left out), ``cpu`` (CPU seconds of
the API server when it is a local process, the hook, this process (``harness``) and the
machine (``box``)), ``other_load`` (cores busy outside all of those and the controller: the
noise), ``hook_calls``, metashard's ``relists`` and ``informer_objects`` from its metrics,
``cache_objects``/``cache_raw_bytes``/``list_seconds`` (after the cold start), and per phase
``latencies`` (edits, seconds), or ``edit_latency`` and ``leading_after`` (failover: from the
SIGKILL until metashard's standby answers ``/readyz``, which it does only while leading).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import signal
import sys
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from loadtest.bench._fanout_report import _labels
from loadtest.bench._proc import COORDINATOR, SETTLE_CORES, busy_seconds, settle
from loadtest.bench._scale_config import (
    COLDSTART,
    EDITS,
    FAILOVER,
    RESYNC,
    UPDATE,
    Config,
    Kind,
    Lease,
    Options,
)
from loadtest.bench._scale_edits import edit_clock
from loadtest.bench._scale_hook import HookClient
from loadtest.bench._scale_sampler import Progress, Sampler
from loadtest.bench.fanout import listening
from loadtest.dev.processes import free_port

POLL = 0.05
QUIET_WINDOW = 0.5
QUIET_MAX = 60.0
STANDBY_SETTLE = 5.0  # a command's standby copy: seconds to start before the leader dies
PAGE = 5000
CLEANUP_MAX = 1800.0  # seconds to delete a configuration's children
ROOT_CA = "kube-root-ca.crt"  # published into every namespace; not a child
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
PROGRESS_OF = {
    COLDSTART: "parents converged",
    RESYNC: "hook calls",
    EDITS: "hook calls",
    UPDATE: "parents converged",
    FAILOVER: "hook calls",
}


class PhaseFailed(RuntimeError):
    """A phase did not finish in time: the configuration's later phases cannot run."""


@dataclass(frozen=True, slots=True)
class Context:
    """What every configuration's phases share: the harness, the cluster, the hook."""

    h: Any
    kube: Any
    hook: HookClient
    meter: Any  # the harness's CpuMeter of the local API server (if any) and of the hook
    opts: Options
    kubeconfig: str
    env: dict[str, str]
    logs: Path
    record: Callable[[dict[str, Any]], None]


@dataclass(slots=True)
class _Window:
    """A phase's starting point: request counts, hook calls, metrics, then CPU and time."""

    requests: dict[str, float]
    calls: int
    metrics: str
    cpu: dict[str, float] = field(default_factory=dict)
    t0: float = 0.0


def metric_sums(text: str, name: str) -> dict[str, float]:
    """The samples of metric ``name`` summed per ``resource`` label (Prometheus text)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            resource = _labels(line).get("resource", "")
            out[resource] = out.get(resource, 0.0) + float(line.rpartition(" ")[2])
    return out


def _scrape(port: int | None) -> str:
    if port is None:
        return ""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text: str = r.read().decode()
            return text
    except OSError:
        return ""


async def delete_children(kube: Any, namespace: str) -> None:
    """Delete the ConfigMaps of ``namespace`` (with the harness's client ``kube``) before its
    Fanouts. Deleted after their owners, each child is left to the garbage collector, which
    GETs it at kube-controller-manager's client rate (20 a second by default): at 100,000
    parents, hours of requests counted in the next configurations' runs. Deleted first, no
    owner has a dependent left when it goes. One DELETE of the collection at a time, until
    only the root CA ConfigMap is left: the API server's request timeout cuts a large one
    short (a 5xx, or it closes the connection), and the next goes on from what is left."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    # The answer lists what was deleted: its metadata only, not 100 MB of objects, where
    # the server offers that (406 where it does not: then the whole objects).
    accepts = [METADATA_LIST, "application/json"]
    async with asyncio.timeout(CLEANUP_MAX):
        while True:
            headers = {"Accept": accepts[0]}
            try:
                async with kube.session.delete(kube.cfg.server + path, headers=headers) as r:
                    await r.read()
                    if r.status == 406 and len(accepts) > 1:
                        accepts.pop(0)
                        continue
                    if r.status != 200 and r.status < 500:
                        r.raise_for_status()
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError):
                pass
            _, page = await kube.request("GET", path, params={"limit": "2"}, ok=(200, 404))
            items = (page or {}).get("items") or []
            if all(i["metadata"]["name"] == ROOT_CA for i in items):
                return


class Phases:
    """The phases of one configuration (see the module docstring)."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config
        self.label = config.label
        self.ns = ""
        self.clock: Any = None
        self.proc: Any = None  # the controller of the phases before failover
        self.port: int | None = None
        self.cache: dict[str, float] = {}
        self.resync_seconds: float | None = None

    # --- the configuration's run -----------------------------------------------------------

    async def run(self) -> None:
        ctx, opts = self.ctx, self.ctx.opts
        h, kube = ctx.h, ctx.kube
        phases = [p for p in self.config.phases() if p in opts.phases]
        await ctx.hook.set_latency(self.config.hook_latency)
        self.ns = f"scale-{uuid.uuid4().hex[:6]}"
        await h.runner.create_namespace(kube, self.ns)
        try:
            cold = h.workload.payload(f"cold-{self.label}", 100)
            await h.runner.create_parents(kube, self.ns, opts.n, opts.k, cold, opts.concurrency)
            self.clock = edit_clock(h, kube, self.ns, opts.n, opts.k)
            await self.clock.start()
            self.clock.set_target(cold)
            await self.coldstart(record=COLDSTART in phases)
            self.clock.set_target(None)
            self.cache = await self._cache_size()
            for phase, step in (
                (RESYNC, self.resync),
                (EDITS, self.edits),
                (UPDATE, self.update),
                (FAILOVER, self.failover),
            ):
                if phase in phases:
                    await step()
        finally:
            if self.proc is not None:
                self.proc.stop()
            if self.clock is not None:
                await self.clock.stop()
            try:
                await delete_children(kube, self.ns)
            finally:  # the namespace goes even when its children could not go first
                await h.runner.delete_namespaces(kube, [self.ns])

    def _spawn(self, tag: str, lease: Lease | None = None) -> tuple[Any, int | None]:
        """Start the controller (the raw client for ``raw``); its process and metrics port."""
        ctx = self.ctx
        log = ctx.logs / f"{self.label}-{tag}-{self.ns}.log"
        if self.config.kind is Kind.RAW:
            argv = [sys.executable, "-m", "loadtest.bench._coldraw", "--kubeconfig"]
            argv += [ctx.kubeconfig, "--namespace", self.ns]
            argv += ["--concurrency", str(ctx.opts.concurrency)]
            argv += ["--children", self.config.children]
            return ctx.h.runner.Proc(argv, ctx.env, log), None
        port = free_port()
        argv = self.config.argv(
            kubeconfig=ctx.kubeconfig, flush=ctx.opts.resync_interval, port=port, lease=lease
        )
        return ctx.h.runner.Proc(argv, ctx.env, log), (
            port if self.config.kind is Kind.METASHARD else None
        )

    # --- measuring -------------------------------------------------------------------------

    async def _open(self, port: int | None) -> _Window:
        ctx = self.ctx
        requests = await ctx.h.runner.api_requests(ctx.kube)
        metrics = await asyncio.to_thread(_scrape, port)
        return _Window(requests=requests, calls=await ctx.hook.calls(), metrics=metrics)

    def _begin(self, window: _Window, sampler: Sampler) -> None:
        window.cpu = {**self.ctx.meter.snap(), "box": busy_seconds()}
        window.t0 = time.perf_counter()
        sampler.start(window.t0)

    def _sampler(self, progress: Progress) -> Sampler:
        root = {Kind.RAW: "client", Kind.COMMAND: "controller"}.get(self.config.kind, COORDINATOR)
        interval = self.ctx.opts.sample_interval
        return Sampler(
            progress=progress, root_role=root, interval=interval, clock=time.perf_counter
        )

    def _calls_since(self, calls0: int) -> Progress:
        async def progress() -> int:
            return await self.ctx.hook.calls() - calls0

        return progress

    async def _settle(self) -> None:
        """Before a cold start: wait until the machine is quiet for ``--settle`` seconds, so
        the API server's, etcd's and the garbage collector's work left from the last
        configuration's objects (a namespace gone is not a collector done) is not counted in
        this one's."""
        opts = self.ctx.opts
        if opts.settle <= 0:
            return
        waited, load = await settle(window=opts.settle, limit=opts.settle_max)
        if load > SETTLE_CORES:
            print(
                f"  {self.label}: machine still busy after {waited:.0f} s ({load:.2f} cores,"
                f" more than {SETTLE_CORES:g}; --settle-max {opts.settle_max:g}): measured anyway",
                file=sys.stderr,
            )
        else:
            print(f"  {self.label}: machine quiet after {waited:.0f} s ({load:.2f} cores busy)")

    async def _quiet(self) -> tuple[int, float]:
        """Wait until the hook has not been called for ``QUIET_WINDOW`` s (at most
        ``QUIET_MAX``); the calls so far and when the last one was seen."""
        hook = self.ctx.hook
        deadline = time.perf_counter() + QUIET_MAX
        last, changed = await hook.calls(), time.perf_counter()
        while time.perf_counter() < deadline:
            await asyncio.sleep(POLL * 4)
            now = await hook.calls()
            if now != last:
                last, changed = now, time.perf_counter()
            elif time.perf_counter() - changed >= QUIET_WINDOW:
                break
        return last, changed

    async def _until(
        self,
        what: str,
        done: Callable[[float], Awaitable[bool]],
        proc: Any = None,
        progress: Callable[[], str] | None = None,
    ) -> bool:
        """Wait for ``done(timeout)`` up to the run's timeout, printing progress every 10 s;
        False on timeout or when ``proc`` died (one that exited 0 may have finished: the raw
        client)."""
        deadline = time.perf_counter() + self.ctx.opts.timeout
        while (left := deadline - time.perf_counter()) > 0:
            if await done(min(10.0, left)):
                return True
            if proc is not None and not proc.alive() and proc.p.returncode != 0:
                print(f"  {what}: exited {proc.p.returncode}; see {proc.logfile}", file=sys.stderr)
                return False
            said = progress() if progress else f"{self.clock.edits.pending} edits pending"
            print(f"  {what}: {said}", file=sys.stderr, flush=True)
        return False

    async def _calls_reach(self, target: int, within: float) -> bool:
        """True once the hook was called ``target`` times in all; False after ``within`` s."""
        deadline = time.perf_counter() + within
        while time.perf_counter() < deadline:
            if await self.ctx.hook.calls() >= target:
                return True
            await asyncio.sleep(POLL)
        return False

    async def _close(
        self,
        phase: str,
        window: _Window,
        sampler: Sampler,
        *,
        seconds: float,
        converged: bool,
        port: int | None = None,
        **extra: Any,
    ) -> None:
        """Wait for quiet, then record the phase (see the module docstring); ``port``: the
        metrics of the process measured, when not the phases' controller."""
        ctx = self.ctx
        calls, _ = await self._quiet() if converged else (await ctx.hook.calls(), 0.0)
        measured = time.perf_counter() - window.t0
        await sampler.stop()
        cpu = ctx.h.cpu.CpuMeter.delta(window.cpu, {**ctx.meter.snap(), "box": busy_seconds()})
        result = sampler.result()
        ours = sum(v for k, v in cpu.items() if k != "box") + sum(result["cpu_processes"].values())
        requests = ctx.h.runner.requests_delta(
            window.requests, await ctx.h.runner.api_requests(ctx.kube)
        )
        metrics = await asyncio.to_thread(_scrape, port or self.port)
        relists0 = metric_sums(window.metrics, "metashard_informer_relists_total")
        relists = metric_sums(metrics, "metashard_informer_relists_total")
        opts = ctx.opts
        rec: dict[str, Any] = {
            "label": self.label,
            "name": self.config.name,
            "kind": self.config.kind.value,
            "hook_latency": self.config.hook_latency,
            "phase": phase,
            "n": opts.n,
            "k": opts.k,
            "seconds": round(seconds, 3),
            "measured_seconds": round(measured, 3),
            "converged": converged,
            "progress_of": PROGRESS_OF[phase],
            "requests": requests,
            "cpu": cpu,
            "other_load": round(max(0.0, cpu["box"] - ours) / measured, 3),
            "hook_calls": calls - window.calls,
            "resync_interval": opts.resync_interval,
            **result,
            **self.cache,
            **extra,
        }
        if metrics:
            rec["relists"] = {r: v - relists0.get(r, 0.0) for r, v in relists.items()}
            rec["informer_objects"] = sum(
                metric_sums(metrics, "metashard_informer_objects").values()
            )
        ctx.record(rec)
        if not converged:
            raise PhaseFailed(f"{self.label} {phase}: not done in time; logs in {ctx.logs}")

    # --- the phases ------------------------------------------------------------------------

    async def coldstart(self, *, record: bool) -> None:
        clock = self.clock

        async def converged() -> int:
            return len(clock.ok)

        await self._settle()
        window = await self._open(None)
        sampler = self._sampler(converged)
        self._begin(window, sampler)
        self.proc, self.port = self._spawn("cold")
        sampler.attach(self.proc.p.pid)
        ok = await self._until(f"{self.label} cold start", clock.wait, self.proc, clock.progress)
        t1 = clock.converged_at if ok and clock.converged_at else time.perf_counter()
        if not record:
            await sampler.stop()
            await self._quiet()
            return
        await self._close(
            COLDSTART,
            window,
            sampler,
            seconds=t1 - window.t0,
            converged=ok,
        )

    async def _cache_size(self) -> dict[str, float]:
        """What a controller of this job caches, as the API server sends it (see the module
        docstring)."""
        kube, w = self.ctx.kube, self.ctx.h.workload
        parents = w.parents_path("x").replace("/namespaces/x", "")
        objects = size = 0
        t0 = time.perf_counter()
        for path in (parents, "/api/v1/configmaps"):
            params = {"limit": str(PAGE)}
            while True:
                async with kube.session.get(kube.cfg.server + path, params=params) as r:
                    r.raise_for_status()
                    body = await r.read()
                page = orjson.loads(body)
                size += len(body)
                objects += len(page.get("items") or [])
                token = page["metadata"].get("continue")
                if not token:
                    break
                params["continue"] = token
        return {
            "cache_objects": objects,
            "cache_raw_bytes": size,
            "list_seconds": round(time.perf_counter() - t0, 3),
        }

    async def _flush(self, calls0: int) -> bool:
        """Wait for the controller's next flush: the hook called again with nothing changed."""
        return await self._calls_reach(calls0 + 1, self.ctx.opts.resync_interval * 1.1 + 5)

    async def _at_flush(self, phase: str) -> tuple[_Window, Sampler]:
        """The controller's next flush has begun: the phase's window and sampler, started."""
        window = await self._open(self.port)
        sampler = self._sampler(self._calls_since(window.calls))
        if not await self._flush(window.calls):
            raise PhaseFailed(f"{self.label} {phase}: no flush within the resync interval")
        self._begin(window, sampler)
        sampler.attach(self.proc.p.pid)
        return window, sampler

    async def resync(self) -> None:
        window, sampler = await self._at_flush(RESYNC)
        ok = await self._calls_reach(window.calls + self.ctx.opts.n, self.ctx.opts.timeout)
        self.resync_seconds = time.perf_counter() - window.t0
        await self._close(RESYNC, window, sampler, seconds=self.resync_seconds, converged=ok)

    async def edits(self) -> None:
        opts, edits = self.ctx.opts, self.clock.edits
        window, sampler = await self._at_flush(EDITS)
        resolved0 = len(edits.latencies)
        names = random.Random(self.label).sample(range(opts.n), opts.n)
        tasks: list[asyncio.Task[Any]] = []
        end = window.t0 + (self.resync_seconds or math.inf)
        while len(tasks) < opts.n:  # at least one edit, however short the resync
            if tasks and time.perf_counter() >= end:
                break
            if self.resync_seconds is None and await self.ctx.hook.calls() >= window.calls + opts.n:
                break
            name = self.ctx.h.workload.parent_name(names[len(tasks)])
            tasks.append(asyncio.create_task(self._edit(name, f"edit{len(tasks)}")))
            await asyncio.sleep(1 / opts.edit_rate)
        await asyncio.gather(*tasks)
        ok = await self._until(f"{self.label} edits", edits.wait)
        latencies = edits.latencies[resolved0:]
        await self._close(
            EDITS,
            window,
            sampler,
            seconds=time.perf_counter() - window.t0,
            converged=ok,
            edits=len(tasks),
            latencies=[round(x, 4) for x in latencies],
        )

    async def _edit(self, name: str, data: str) -> float:
        """Write ``spec.data`` of one parent, expected by the clock; when it was written."""
        h, kube = self.ctx.h, self.ctx.kube
        at = time.perf_counter()
        self.clock.edits.expect(name, data, at)
        path = f"{h.workload.parents_path(self.ns)}/{name}"
        await kube.request("PATCH", path, {"spec": {"data": data}}, ctype=h.kube.MERGE)
        return at

    async def update(self) -> None:
        h, kube, opts, edits = self.ctx.h, self.ctx.kube, self.ctx.opts, self.clock.edits
        count = max(1, math.ceil(opts.n * opts.update_fraction))
        data = h.workload.payload(f"update-{self.label}", 100)
        resolved0 = len(edits.latencies)

        async def resolved() -> int:
            return len(edits.latencies) - resolved0

        window = await self._open(self.port)
        sampler = self._sampler(resolved)
        self._begin(window, sampler)
        if self.config.kind is not Kind.RAW:
            sampler.attach(self.proc.p.pid)
        for i in range(count):
            edits.expect(h.workload.parent_name(i), data, window.t0)
        parents = await h.runner.patch_parents_data(kube, self.ns, count, data, opts.concurrency)
        if self.config.kind is Kind.RAW:
            await self._raw_writes(parents)
        ok = await self._until(f"{self.label} update", edits.wait, self.proc)
        t1 = edits.last_resolved if ok and edits.last_resolved else time.perf_counter()
        extra: dict[str, Any] = {}
        if self.config.kind is Kind.RAW:  # the raw client is this process
            harness = self.ctx.meter.snap()["harness"] - window.cpu["harness"]
            extra["cpu_processes"] = {"client": round(harness, 3)}
        await self._close(
            UPDATE,
            window,
            sampler,
            seconds=t1 - window.t0,
            converged=ok,
            **extra,
        )

    async def _raw_writes(self, parents: list[dict[str, Any]]) -> None:
        """What a perfect controller writes for updated parents: each child's data, then the
        status (the raw client's share of the update wave)."""
        h, kube, c = self.ctx.h, self.ctx.kube, self.ctx.opts.concurrency
        w, merge = h.workload, h.kube.MERGE
        cms = w.configmaps_path(self.ns)
        children = [cm for p in parents for cm in w.desired_children(p)]

        async def child(cm: dict[str, Any]) -> Any:
            path = f"{cms}/{cm['metadata']['name']}"
            return await kube.request("PATCH", path, {"data": cm["data"]}, ctype=merge)

        async def status(p: dict[str, Any]) -> Any:
            path = f"{w.parents_path(self.ns)}/{p['metadata']['name']}/status"
            return await kube.request("PATCH", path, {"status": w.desired_status(p)}, ctype=merge)

        await h.kube.bounded(children, child, c)
        await h.kube.bounded(parents, status, c)

    async def failover(self) -> None:
        ctx, opts, edits = self.ctx, self.ctx.opts, self.clock.edits
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        lease = Lease(f"scale-{uuid.uuid4().hex[:6]}", self.ns, opts.lease_duration)
        calls0 = await ctx.hook.calls()
        leader, _ = self._spawn("leader", lease)
        standby: Any = None
        try:
            if not await self._calls_reach(calls0 + opts.n, opts.timeout):
                raise PhaseFailed(f"{self.label} failover: the first leader did not reconcile all")
            await self._quiet()
            standby, port = self._spawn("standby", lease)
            await self._started(standby, port)
            window = await self._open(port)
            sampler = self._sampler(self._calls_since(window.calls))
            sampler.attach(standby.p.pid)
            self._begin(window, sampler)
            os.killpg(leader.p.pid, signal.SIGKILL)
            leading = asyncio.create_task(self._leading(port))
            name = ctx.h.workload.parent_name(random.Random(self.label).randrange(opts.n))
            at = await self._edit(name, "failover")
            ok = await self._until(f"{self.label} failover", edits.wait, standby)
            t1 = edits.last_resolved if ok and edits.last_resolved else time.perf_counter()
            leading.cancel()
            led = await asyncio.gather(leading, return_exceptions=True)
            led_at = led[0] if isinstance(led[0], float) else None
            await self._close(
                FAILOVER,
                window,
                sampler,
                seconds=t1 - window.t0,
                converged=ok,
                port=port,
                edit_latency=round(t1 - at, 3) if ok else None,
                leading_after=None if led_at is None else round(led_at - window.t0, 3),
                lease_duration=opts.lease_duration,
            )
        finally:
            leader.stop()
            if standby is not None:
                standby.stop()

    @staticmethod
    async def _leading(port: int | None) -> float | None:
        """When a metashard coordinator's ``/readyz`` first answers 200 (it is ready only
        while it leads); None for a command (no port)."""
        if port is None:
            return None
        url = f"http://127.0.0.1:{port}/readyz"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            while True:
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with http.get(url) as resp:
                        if resp.status == 200:
                            return time.perf_counter()
                await asyncio.sleep(POLL)

    async def _started(self, proc: Any, port: int | None) -> None:
        """Wait until a standby copy serves (metashard: its probe port answers; a command:
        ``STANDBY_SETTLE`` s)."""
        if port is None:
            await asyncio.sleep(STANDBY_SETTLE)
            return
        deadline = time.perf_counter() + 60
        while not await asyncio.to_thread(listening, port):
            if time.perf_counter() > deadline or not proc.alive():
                raise PhaseFailed(f"{self.label} failover: the standby did not start")
            await asyncio.sleep(0.2)
