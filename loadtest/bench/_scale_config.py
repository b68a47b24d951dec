"""The scale benchmark's configurations: what runs, under which label, with which command line.

- ``raw``: the raw-client baseline. Phases ``coldstart`` (a new client process lists the
  waiting parents and writes their children and status) and ``update`` (the benchmark's own
  client writes what a perfect controller writes for the wave).
- ``raw-mc`` (``--raw-metacontroller``): the same raw client, its children written as a
  Metacontroller-compatible controller must create them (label and last-applied annotation:
  ``_coldraw.metacontroller_child``); ``coldstart`` only. What such a controller's children
  cost the API server by themselves, apart from everything the controller does.
- ``metashard-<P>p``: ``metashard run --processes P``, every phase. Its resync is
  ``--cache-flush-interval``; in ``failover`` two copies run with leader election on one
  Lease.
- a command given as ``LABEL=COMMAND`` (Metacontroller, say): every phase its placeholders
  allow. ``{kubeconfig}``, ``{python}`` (this interpreter) and ``{port}`` (a free port, for
  its metrics address: two copies run at once in ``failover``) are always filled in;
  ``resync`` and ``edits`` run only when it has ``{flush}`` (the resync interval as a Go
  duration, for its own flag, Metacontroller's ``--cache-flush-interval``); ``failover`` only
  when it has ``{lease}`` (a Lease name, new for each start) and it may use ``{namespace}``
  (the benchmark's namespace, which holds that Lease).

A configuration with a slow hook runs the same phases under the label ``<label>+hook<ms>ms``;
the raw client calls no hook and runs once.
"""

from __future__ import annotations

import shlex
import string
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from loadtest.bench._coldraw import METACONTROLLER, PLAIN

COLDSTART, RESYNC, EDITS, UPDATE, FAILOVER = "coldstart", "resync", "edits", "update", "failover"
PHASES = (COLDSTART, RESYNC, EDITS, UPDATE, FAILOVER)
RAW = "raw"
RAW_MC = "raw-mc"
PLACEHOLDERS = frozenset({"kubeconfig", "python", "port", "flush", "lease", "namespace"})


@dataclass(frozen=True, slots=True)
class Options:
    """One run of the scale benchmark, from its flags (``scale.parse``)."""

    n: int
    k: int
    configs: tuple[Config, ...]
    phases: frozenset[str]
    resync_interval: float  # seconds
    lease_duration: float  # seconds
    edit_rate: float  # edits per second during a resync
    update_fraction: float
    kubeconfig: str | None
    apiserver_pid: int | None
    out: Path  # the output directory
    concurrency: int
    timeout: float  # seconds to wait for one phase
    sample_interval: float  # seconds
    settle: float  # seconds of a quiet machine before each cold start (0: no wait)
    settle_max: float  # seconds to wait for them at most
    repeat: int = 1  # rounds: every configuration runs once per round (``rounds``)


def rounds(configs: Sequence[Config], repeat: int) -> list[tuple[int, Config]]:
    """``(round, configuration)`` in the order they run: every configuration once per round,
    in the given order and reversed every other round, so that none is always first after the
    set-up or last on a control plane that has served the others."""
    return [
        (r, config)
        for r in range(repeat)
        for config in (configs if r % 2 == 0 else list(reversed(configs)))
    ]


class Kind(Enum):
    RAW = "raw"
    METASHARD = "metashard"
    COMMAND = "command"


@dataclass(frozen=True, slots=True)
class Config:
    name: str  # raw, raw-mc, metashard-<P>p or the label of a command
    kind: Kind
    processes: int = 0  # metashard
    command: str = ""  # a command's template
    hook_latency: float = 0.0

    @property
    def children(self) -> str:
        """How the raw client writes its children (``_coldraw``'s ``--children``)."""
        return METACONTROLLER if self.name == RAW_MC else PLAIN

    @property
    def label(self) -> str:
        if self.hook_latency <= 0:
            return self.name
        return f"{self.name}+hook{round(self.hook_latency * 1000)}ms"

    def phases(self) -> tuple[str, ...]:
        """The phases this configuration can run (see the module docstring)."""
        if self.kind is Kind.RAW:
            return (COLDSTART, UPDATE) if self.name == RAW else (COLDSTART,)
        if self.kind is Kind.METASHARD:
            return PHASES
        fields = _fields(self.command)
        return tuple(
            p
            for p in PHASES
            if (p not in (RESYNC, EDITS) or "flush" in fields)
            and (p != FAILOVER or "lease" in fields)
        )

    def argv(self, *, kubeconfig: str, flush: float, port: int, lease: Lease | None) -> list[str]:
        """The controller's command line; ``lease``: with leader election on that Lease (a
        command without ``{lease}`` ignores it)."""
        if self.kind is Kind.RAW:
            raise ValueError("the raw client is not a controller")
        if self.kind is Kind.COMMAND:
            values = {
                "kubeconfig": kubeconfig,
                "python": sys.executable,
                "port": str(port),
                "flush": go_duration(flush),
                "lease": lease.name if lease else "metashard-scale-bench",
                "namespace": lease.namespace if lease else "default",
            }
            return shlex.split(self.command.format(**values))
        argv = [sys.executable, "-m", "manager.cli", "run", "--processes", str(self.processes)]
        argv += ["--kubeconfig", kubeconfig, "--cache-flush-interval", go_duration(flush)]
        address = f"127.0.0.1:{port}"
        argv += ["--metrics-address", address, "--health-probe-bind-address", address]
        argv += ["--log-format", "json", "--log-level", "warning"]
        if lease is not None:
            argv += ["--leader-election", "--leader-election-id", lease.name]
            argv += ["--leader-election-namespace", lease.namespace]
            argv += ["--leader-election-lease-duration", go_duration(lease.duration)]
            argv += ["--leader-election-renew-deadline", go_duration(lease.duration * 2 / 3)]
            argv += ["--leader-election-retry-period", go_duration(lease.duration / 7.5)]
        return argv


@dataclass(frozen=True, slots=True)
class Lease:
    """Leader election for one start: the Lease's name and namespace, and its duration."""

    name: str
    namespace: str
    duration: float


def go_duration(seconds: float) -> str:
    """``seconds`` as a Go duration (``1.5s``, ``20s``)."""
    return f"{seconds:g}s"


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def parse_command(spec: str) -> Config:
    """``LABEL=COMMAND`` as a configuration; ``ValueError`` saying what is wrong."""
    label, sep, command = spec.partition("=")
    label = label.strip()
    if not sep or not label or not command.strip():
        raise ValueError(f"want LABEL=COMMAND, got {spec!r}")
    if (
        label in (RAW, RAW_MC)
        or label.startswith("metashard-")
        or not label.replace("-", "").isalnum()
    ):
        raise ValueError(
            f"label {label!r}: letters, digits and '-', not 'raw', 'raw-mc' nor 'metashard-...'"
        )
    try:
        fields = _fields(command)
    except ValueError as err:
        raise ValueError(f"{label}: the command is not a valid template: {err}") from None
    unknown = fields - PLACEHOLDERS
    if unknown or "" in fields:
        raise ValueError(
            f"{label}: unknown placeholder(s) {sorted(unknown)}; known: {sorted(PLACEHOLDERS)}"
        )
    if "kubeconfig" not in fields:
        raise ValueError(f"{label}: the command must name the cluster with {{kubeconfig}}")
    return Config(name=label, kind=Kind.COMMAND, command=command.strip())


def configurations(
    *,
    raw: bool,
    processes: Sequence[int],
    commands: Sequence[Config],
    hook_latencies: Sequence[float],
    raw_mc: bool = False,
) -> list[Config]:
    """Every configuration in run order: per hook latency, the raw client and ``raw-mc`` (once
    each, at the first latency), metashard by process count, then the commands."""
    out: list[Config] = []
    for i, latency in enumerate(hook_latencies):
        if raw and i == 0:
            out.append(Config(name=RAW, kind=Kind.RAW))
        if raw_mc and i == 0:
            out.append(Config(name=RAW_MC, kind=Kind.RAW))
        out += [
            Config(name=f"metashard-{p}p", kind=Kind.METASHARD, processes=p, hook_latency=latency)
            for p in processes
        ]
        out += [
            Config(name=c.name, kind=c.kind, command=c.command, hook_latency=latency)
            for c in commands
        ]
    return out
