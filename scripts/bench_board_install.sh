#!/usr/bin/env bash
# The board's peers (benchmarks/board.py), pinned, into a bench-only folder outside the repository and its venv
# (RESPSTREAM_BENCH_DIR, default ~/.cache/respstream-bench). From PyPI and npm only; nothing runs at install time
# (npm --ignore-scripts). A peer that fails to install is reported and skipped: the board says so and goes on.
set -u
DIR="${RESPSTREAM_BENCH_DIR:-$HOME/.cache/respstream-bench}"
LITELLM_VERSION=1.108.7          # the version docs/benchmarks-notebook.md measured before (issue 16)
PORTKEY_VERSION=1.15.2
# Portkey's npm package ships no lockfile: hono and @hono/node-server pinned to the lowest versions its ranges allow
# that run on Node 20 here (docs/benchmarks.md, the board: Portkey).
HONO_VERSION=4.9.7
HONO_NODE_SERVER_VERSION=1.13.8
mkdir -p "$DIR"
if [ ! -x "$DIR/litellm/bin/litellm" ]; then
  echo "installing LiteLLM $LITELLM_VERSION into $DIR/litellm"
  { python3 -m venv "$DIR/litellm" && "$DIR/litellm/bin/pip" install -q "litellm[proxy]==$LITELLM_VERSION"; } \
    || echo "LiteLLM did not install: the board will skip it"
fi
if [ ! -f "$DIR/portkey/node_modules/@portkey-ai/gateway/build/start-server.js" ]; then
  if command -v npm >/dev/null 2>&1; then
    echo "installing the Portkey gateway $PORTKEY_VERSION into $DIR/portkey"
    mkdir -p "$DIR/portkey"
    printf '{"private": true, "dependencies": {"@portkey-ai/gateway": "%s", "hono": "%s", "@hono/node-server": "%s"}}\n' \
      "$PORTKEY_VERSION" "$HONO_VERSION" "$HONO_NODE_SERVER_VERSION" > "$DIR/portkey/package.json"
    npm install --no-audit --no-fund --ignore-scripts --loglevel=error --prefix "$DIR/portkey" \
      || echo "the Portkey gateway did not install: the board will skip it"
  else
    echo "npm is not installed: the board will skip the Portkey gateway (make system-deps installs it)"
  fi
fi
