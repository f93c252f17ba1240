#!/usr/bin/env bash
# The board's peers (benchmarks/board.py), pinned, into a bench-only folder outside the repository and its venv
# (RESPSTREAM_BENCH_DIR, default ~/.cache/respstream-bench). From PyPI and npm only; nothing runs at install time
# (npm --ignore-scripts). A peer that fails to install is reported and skipped: the board says so and goes on.
set -u
DIR="${RESPSTREAM_BENCH_DIR:-$HOME/.cache/respstream-bench}"
LITELLM_VERSION=1.108.7          # the version docs/benchmarks-notebook.md measured before (issue 16)
PORTKEY_VERSION=1.15.2
# Portkey's npm package ships no lockfile, and its ranges (@hono/node-server ^1.3.3, @hono/node-ws ^1.2.0) now resolve
# to @hono/node-ws 1.3.x, whose peer range (@hono/node-server ^1.19) makes npm nest @hono/node-server 1.19.x under the
# gateway whatever is pinned at the top. node-server 1.19's lightweight Response keeps the fetched upstream Response's
# (immutable) Headers by reference, and Portkey appends its x-portkey-* headers to them: every request is a 500
# "TypeError: immutable". Pinned instead: @hono/node-server 1.13.5 (the version Portkey's own repository patches, so
# the one its lockfile carried; it copies the headers) and @hono/node-ws 1.2.0 (the newest whose peer range allows
# it). Portkey's patch to node-server (an awaited response write) is applied by its postinstall in its repository
# only: the npm package ships no patches, so the board runs the package as npm installs it.
HONO_VERSION=4.9.7
HONO_NODE_SERVER_VERSION=1.13.5
HONO_NODE_WS_VERSION=1.2.0
PORTKEY_PINS="$PORTKEY_VERSION hono@$HONO_VERSION @hono/node-server@$HONO_NODE_SERVER_VERSION @hono/node-ws@$HONO_NODE_WS_VERSION"
mkdir -p "$DIR"
if [ ! -x "$DIR/litellm/bin/litellm" ]; then
  echo "installing LiteLLM $LITELLM_VERSION into $DIR/litellm"
  { python3 -m venv "$DIR/litellm" && "$DIR/litellm/bin/pip" install -q "litellm[proxy]==$LITELLM_VERSION"; } \
    || echo "LiteLLM did not install: the board will skip it"
fi
PORTKEY_DIR="$DIR/portkey"
if [ ! -f "$PORTKEY_DIR/node_modules/@portkey-ai/gateway/build/start-server.js" ] \
   || [ "$(cat "$PORTKEY_DIR/pins" 2>/dev/null)" != "$PORTKEY_PINS" ]; then
  if command -v npm >/dev/null 2>&1; then
    echo "installing the Portkey gateway $PORTKEY_VERSION into $PORTKEY_DIR ($PORTKEY_PINS)"
    rm -rf "$PORTKEY_DIR/node_modules" "$PORTKEY_DIR/package-lock.json" "$PORTKEY_DIR/pins"
    mkdir -p "$PORTKEY_DIR"
    printf '{"private": true, "dependencies": {"@portkey-ai/gateway": "%s", "hono": "%s", "@hono/node-server": "%s", "@hono/node-ws": "%s"}}\n' \
      "$PORTKEY_VERSION" "$HONO_VERSION" "$HONO_NODE_SERVER_VERSION" "$HONO_NODE_WS_VERSION" > "$PORTKEY_DIR/package.json"
    if npm install --no-audit --no-fund --ignore-scripts --loglevel=error --prefix "$PORTKEY_DIR"; then
      # The pins only hold if npm put no other copy under the gateway (a nested one is what the gateway loads).
      nested="$PORTKEY_DIR/node_modules/@portkey-ai/gateway/node_modules/@hono"
      if [ -d "$nested" ]; then
        echo "the Portkey gateway got its own copies of $(ls "$nested"): the pins do not hold; the board will skip it"
        rm -rf "$PORTKEY_DIR/node_modules"
      else
        echo "$PORTKEY_PINS" > "$PORTKEY_DIR/pins"
      fi
    else
      echo "the Portkey gateway did not install: the board will skip it"
    fi
  else
    echo "npm is not installed: the board will skip the Portkey gateway (make system-deps installs it)"
  fi
fi
