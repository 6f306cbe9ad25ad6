#!/usr/bin/env bash
# Install the reference MCP memory server into .cache/ (idempotent), for the importer's tests, which drive it
# through its MCP tools to produce its real memory.jsonl. Prints the path of its entry point.
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION="2026.8.31"                       # pinned: bump deliberately, the importer parses its file format
DIR=".cache/server-memory-$VERSION"
ENTRY="$DIR/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
if [ ! -f "$ENTRY" ]; then
    mkdir -p "$DIR"
    npm install --silent --no-audit --no-fund --prefix "$DIR" "@modelcontextprotocol/server-memory@$VERSION" >&2
fi
echo "$(pwd)/$ENTRY"
