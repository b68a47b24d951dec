"""Checks run before a coordinator (or ``metashard run``) starts anything.

What can fail for a configuration reason is tried up front, so that the process stops with
one line and exit code 2 (``proto.runtime.startup``) instead of starting workers that crash-loop:

- ``check_cluster_config``: a kubeconfig (or in-cluster configuration) is found and readable.
- ``check_endpoints``: the metrics and health-probe addresses can be listened on now.
- ``check_bind``: the ZeroMQ endpoint workers connect to can be bound now (skipped by the
  caller under leader election, where another replica on the same host may hold it).
- ``check_reconciler``: ``--reconciler MODULE:CALLABLE`` names a module the workers can
  import (found with ``importlib.util.find_spec`` from the current directory, as ``python -m
  workers`` sees it; the coordinator never imports the worker code). Whether the callable
  exists is the worker's to say: it exits 2 and ``metashard run`` stops.

``check_coordinator`` runs the first three. Each raises ``StartupError`` (or
``ConfigError``) with a message naming the flag.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import zmq

from manager.settings import CoordinatorSettings
from proto.kube.config import load_config
from proto.runtime.addresses import check_bindable, parse_address
from proto.runtime.startup import StartupError


def check_coordinator(settings: CoordinatorSettings) -> None:
    """Everything a coordinator needs before it starts (the worker socket unless it waits
    for leadership)."""
    check_cluster_config(settings.common.kubeconfig)
    check_endpoints(metrics=settings.common.metrics_address, health=settings.common.health_address)
    if not settings.leader_election:
        check_bind(settings.bind)


def check_cluster_config(kubeconfig: str | None) -> None:
    load_config(kubeconfig)


def check_endpoints(*, metrics: str, health: str) -> None:
    check_bindable(parse_address(metrics), what="--metrics-address")
    if health != metrics:
        check_bindable(parse_address(health), what="--health-probe-bind-address")


def check_bind(endpoint: str) -> None:
    context = zmq.Context()
    sock = context.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.bind(endpoint)
    except zmq.ZMQError as e:
        raise StartupError(f"--bind {endpoint}: {e.strerror}") from e
    finally:
        sock.close()
        context.term()


def check_reconciler(spec: str) -> None:
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise StartupError(f"--reconciler {spec!r}: expected MODULE:CALLABLE")
    saved = list(sys.path)
    sys.path.insert(0, os.getcwd())
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    finally:
        sys.path[:] = saved
    if found is None:
        raise StartupError(f"--reconciler {spec!r}: no module named {module!r}")
