#!/usr/bin/env bash
# Install Node 22 and the pinned MCP Inspector into .cache/ (idempotent; a stamp records what is installed).
# Usage: tests/e2e/install_inspector.sh   -> prints the two executables' paths (node, inspector entry point).
set -euo pipefail
cd "$(dirname "$0")/../.."

NODE_SPEC="node@22"                       # the Inspector needs Node >= 22.19
INSPECTOR_VERSION="2.12.0"                # pinned: bump deliberately, the e2e tests parse its output
CACHE=".cache"
NODE_DIR="$CACHE/node22"
INSPECTOR_DIR="$CACHE/inspector-$INSPECTOR_VERSION"
STAMP="$INSPECTOR_DIR/.installed"

NODE_BIN="$NODE_DIR/node_modules/node/bin/node"
if [ ! -x "$NODE_BIN" ]; then
    mkdir -p "$NODE_DIR"
    npm install --silent --no-audit --no-fund --prefix "$NODE_DIR" "$NODE_SPEC" >&2
fi

if [ ! -f "$STAMP" ]; then
    mkdir -p "$INSPECTOR_DIR"
    # Install with Node 22 first on PATH so lifecycle scripts and engine checks see the right version.
    PATH="$(cd "$(dirname "$NODE_BIN")" && pwd):$PATH" \
        npm install --silent --no-audit --no-fund --prefix "$INSPECTOR_DIR" \
        "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" >&2
    touch "$STAMP"
fi

echo "$(pwd)/$NODE_BIN"
echo "$(pwd)/$INSPECTOR_DIR/node_modules/@modelcontextprotocol/inspector"
