# metashard: two commands on a fresh machine (`make demo`, `make test`); `make bench` for numbers.
# Every target bootstraps its own virtual environment from pyproject.toml.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: test lint unit bench bench-fanout bench-scale demo docs chaos chaos-loaded clean image crds

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

unit: $(STAMP)
	$(PY) -m pytest tests/unit

test: lint
	$(PY) -m pytest

# The chaos test for longer than CI runs it, with CHAOS_BUSY busy processes saturating the CPU
# for the middle half of the run (about 300 disruptions in the default 480 s).
CHAOS_SECONDS ?= 480
CHAOS_BUSY ?= $(shell echo $$(( $$(nproc) + 1 )))
chaos: $(STAMP)
	METASHARD_CHAOS_SECONDS=$(CHAOS_SECONDS) METASHARD_CHAOS_BUSY=$(CHAOS_BUSY) \
		$(PY) -m pytest -s -p no:cacheprovider tests/e2e/test_chaos.py::test_chaos

# The CI chaos test CHAOS_RUNS times in a row with CHAOS_BUSY busy processes saturating the
# CPU throughout, then the test that shows a broken fence is caught, under the same load.
CHAOS_RUNS ?= 20
chaos-loaded: $(STAMP)
	$(PY) -m tests.e2e.burn --busy $(CHAOS_BUSY) --runs $(CHAOS_RUNS) -- \
		$(PY) -m pytest -q -s -p no:cacheprovider tests/e2e/test_chaos.py::test_chaos
	METASHARD_CHAOS_BROKEN_FENCE=1 $(PY) -m tests.e2e.burn --busy $(CHAOS_BUSY) -- \
		$(PY) -m pytest -q -s -p no:cacheprovider tests/e2e/test_chaos.py -k broken_fence

demo: $(STAMP)
	$(PY) -m loadtest.dev.demo

# docs/configuration.md from the commands' own flag definitions (a test checks it is current).
docs: $(STAMP)
	$(PY) -m tests.configdoc

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) -m loadtest.bench $(BENCH)

# The fanout job with its own flags, e.g. FANOUT="--full" or FANOUT="--kubeconfig ~/.kube/config".
bench-fanout: $(BENCH_STAMP)
	$(PY) -m loadtest.bench.fanout $(FANOUT)

# The scale benchmark with its own flags, e.g. SCALE="--n 20000 --hook-latency 0,0.05" or
# SCALE="--kubeconfig ~/.kube/config --controller 'metacontroller=...'" (see --help).
bench-scale: $(BENCH_STAMP)
	$(PY) -m loadtest.bench.scale $(SCALE)

# The container image (needs a Docker daemon with BuildKit; nothing in `make test` builds it).
IMAGE ?= metashard:dev
image:
	docker build -t $(IMAGE) .

# Rewrite the chart's CRDs from proto/api/crds/*.json (a test fails when they drift).
crds: $(STAMP)
	$(PY) -m proto.api.crds --yaml charts/metashard/crds

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
