"""Busy processes that saturate the CPU, for chaos runs on a loaded machine.

``busy(n)`` is a context manager: ``n`` processes spinning in a loop (``python -c "while
True: pass"``) for as long as the block runs, stopped (SIGKILL, by their own process ids)
when it ends. ``python -m tests.e2e.burn --busy N --runs R -- COMMAND...`` runs ``COMMAND``
``R`` times in a row under ``N`` busy processes, stops at the first failure, and prints how
many runs passed and how loaded the machine was (``make chaos-loaded``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator


@contextlib.contextmanager
def busy(n: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(n)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(10)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.burn")
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    passed = 0
    with busy(args.busy):
        for run in range(1, args.runs + 1):
            started = time.monotonic()
            code = subprocess.call(command)
            load = os.getloadavg()[0]
            print(
                f"burn: run {run}/{args.runs} exited {code} after "
                f"{time.monotonic() - started:.0f}s, 1-minute load {load:.1f} "
                f"on {os.cpu_count()} cores with {args.busy} busy processes",
                flush=True,
            )
            if code != 0:
                break
            passed += 1
    print(f"burn: {passed}/{args.runs} runs passed", flush=True)
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
