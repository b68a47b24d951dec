"""``python -m workers`` / ``metashard worker``: run one worker process until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import signal
import sys

import uvloop

from proto import logs
from workers.settings import from_args
from workers.worker import Worker


async def _main(worker: Worker) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await worker.run(stop)


def main(argv: list[str] | None = None) -> int:
    settings = from_args(sys.argv[1:] if argv is None else argv)
    logs.configure(fmt=settings.log_format, level=settings.log_level)  # type: ignore[arg-type]
    try:
        worker = Worker(settings)
    except ValueError as e:
        logs.get_logger().error("cannot start", error=str(e))
        return 2
    uvloop.run(_main(worker))
    return 0


if __name__ == "__main__":
    sys.exit(main())
