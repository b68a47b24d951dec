"""``python -m workers`` / ``metashard worker``: run one worker process until SIGTERM/SIGINT.

A worker that cannot start for a configuration reason (bad flags, no usable kubeconfig, a
reconciler that cannot be loaded, an endpoint it cannot serve) prints one line and exits 2
(``proto.runtime.startup``); ``metashard run`` then stops instead of restarting it.
"""

from __future__ import annotations

import asyncio
import signal
import sys

import uvloop

from proto.runtime import gctune, logs
from proto.runtime.flags import log_notices
from proto.runtime.startup import StartupError, exit_cleanly_on_sigterm, guard
from workers.settings import WorkerSettings, from_args
from workers.worker import Worker


async def _main(worker: Worker) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await worker.run(stop)


def _start(settings: WorkerSettings) -> int:
    try:
        worker = Worker(settings)
    except ValueError as e:  # the --reconciler cannot be loaded
        raise StartupError(str(e)) from e
    gctune.settle()
    uvloop.run(_main(worker))
    exit_cleanly_on_sigterm()  # the loop's handler is gone: a late SIGTERM finds nothing to do
    return 0


def main(argv: list[str] | None = None) -> int:
    exit_cleanly_on_sigterm()
    settings = from_args(sys.argv[1:] if argv is None else argv)
    shared = settings.common
    logs.configure(fmt=shared.log_format, level=shared.log_level)  # type: ignore[arg-type]
    log_notices(shared.notices)
    return guard("metashard worker", lambda: _start(settings), debug=shared.log_level == "debug")


if __name__ == "__main__":
    sys.exit(main())
