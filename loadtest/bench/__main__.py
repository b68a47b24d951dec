"""Run the benchmarks: ``python -m loadtest.bench [--quick] [NAME ...]``."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time

import loadtest.bench as package


def available() -> list[str]:
    return sorted(
        m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")
    )


def main(argv: list[str] | None = None) -> int:
    names = available()
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench")
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"one of {names} (default: all)")
    parser.add_argument("--quick", action="store_true", help="small workloads (smoke run)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(names))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; available: {names}")
    for name in args.names or names:
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        importlib.import_module(f"loadtest.bench.{name}").main(quick=args.quick)
        print(f"--- {name}: {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
