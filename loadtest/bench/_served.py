"""A benchmark's stand-in server, in a process of its own so its CPU is not the measured one's.

``served(target, *args, timeout=...)`` spawns ``target(port_queue, *args)``, which must put
the port it listens on (127.0.0.1) on ``port_queue``; it yields the server's URL once that
port arrived (within ``timeout`` seconds), and terminates the process on exit.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def served(target: Callable[..., None], *args: Any, timeout: float) -> Iterator[str]:
    ctx = multiprocessing.get_context("spawn")
    ports = ctx.Queue()
    server = ctx.Process(target=target, args=(ports, *args), daemon=True)
    server.start()
    try:
        yield f"http://127.0.0.1:{ports.get(timeout=timeout)}"
    finally:
        server.terminate()
        server.join(timeout=10)
