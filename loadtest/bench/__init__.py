"""Benchmarks (``make bench``): every module here that does not start with ``_`` is one.

Contract for a benchmark module ``loadtest/bench/<name>.py``:
- it defines ``main(quick: bool) -> None``, which runs the measurement and prints its numbers
  through ``loadtest.bench._report``;
- every figure it prints comes with a baseline measured *in the same run* and the ratio
  between the two (machines here are noisy; a lone absolute time means little);
- ``quick=True`` shrinks the workload so the whole suite can be smoke-run in seconds.

Run all: ``make bench``; some: ``make bench BENCH="apply workqueue"``; smoke: ``BENCH=--quick``.
"""
