"""Where the owner's cold start goes: its steps up to the first recall answer, one after the other in fresh
interpreters, with the CPU time, wall time and resident memory (all, and anonymous) each one adds.

The steps are what the owner process does before it can answer (``server.owner`` and ``server._engine``): the
front's own imports, the MCP SDK and web stack, the tools, the store libraries, the model, ``Engine.open`` and a
first recall. The owner runs the SDK import on its main thread and the rest in its engine thread; here they run
in sequence, so that each one's cost can be read on its own (imports are GIL-bound: the owner cannot overlap them
much). Medians over ``--runs`` fresh processes, on a copy of a store of ``--memories`` memories; read the CPU
column on a loaded machine. ``--checkout DIR`` profiles another source tree.

Usage: ``.venv/bin/python bench/coldstart_steps.py [--runs 3] [--memories 2000] [--checkout DIR]``
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory leads sys.path, and bench/mcp.py would shadow the `mcp` SDK package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
sys.path.append(str(Path(__file__).resolve().parent))

import argparse
import json
import os
import statistics
import subprocess
import tempfile

from _common import load

ROOT = Path(__file__).resolve().parents[1]

# One fresh interpreter: each step is (label, code), run in order; prints one JSON list of
# [label, cpu s, wall s, rss MiB, anon MiB] deltas.
_CHILD = r"""
import json, sys, time
from pathlib import Path

def memory():
    fields = dict(l.split(":", 1) for l in Path("/proc/self/status").read_text().splitlines() if ":" in l)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["RssAnon"].split()[0]) / 1024

steps = json.loads(sys.argv[2])
env = {"data_dir": Path(sys.argv[1])}
out = []
cpu, wall, (rss, anon) = time.process_time(), time.perf_counter(), memory()
for label, code in steps:
    exec(code, env)
    c, w, (r, a) = time.process_time(), time.perf_counter(), memory()
    out.append([label, c - cpu, w - wall, r - rss, a - anon])
    cpu, wall, rss, anon = c, w, r, a
env["engine"].close()
print(json.dumps(out))
"""

STEPS: list[tuple[str, str]] = [
    ("interpreter + the front's imports (`server.cli`)", "import server.cli"),
    ("pydantic", "import pydantic"),
    ("MCP SDK: `mcp_types` (the version-free models)", "import mcp_types"),
    ("MCP SDK: `mcp_types.methods` (both protocol versions' models)", "import mcp_types.methods"),
    (
        "MCP SDK: the rest (`mcp.server`, its client, auth, starlette, httpx2, opentelemetry)",
        "import mcp.server.mcpserver",
    ),
    ("the owner's own modules and the tools (`server.owner`)", "import server.owner"),
    (
        "building the MCP server and HTTP app",
        "import anyio\n"
        "from server._activity import Activity\n"
        "from server._auth import FileTokenVerifier\n"
        "from server._engine import EngineHolder\n"
        "from server._owner_http import owner_app\n"
        "from server._tokens import TokenStore\n"
        "from server.app import build_server\n"
        "holder = EngineHolder(data_dir, wait=1.0)\n"
        "server = build_server(holder.get, default_scopes=('team:eng',))\n"
        "app = owner_app(server, holder, Activity(), data_dir=data_dir, stopping=anyio.Event(),\n"
        "                started=anyio.Event(), verifier=FileTokenVerifier(TokenStore(data_dir)))",
    ),
    ("numpy", "import numpy"),
    ("pyarrow (+ dataset, compute)", "import pyarrow, pyarrow.dataset, pyarrow.compute"),
    ("lancedb", "import storage.adapters, lancedb"),
    ("kuzu, tantivy, tokenizers", "import kuzu, tantivy, tokenizers"),
    ("the engine's modules (`storage`)", "from storage import CachedEmbedder, Engine, MiniLMEmbedder"),
    (
        "model load + one embedding",
        "embedder = CachedEmbedder(MiniLMEmbedder(runtime='numpy')); embedder.warm()",
    ),
    (
        "`Engine.open` (Kùzu, LanceDB, Tantivy, projections)",
        "engine = Engine.open(data_dir, embedder=embedder, warm=False)",
    ),
    ("first recall", "engine.recall('who maintains the billing service', scopes=['team:eng'])"),
    ("second recall (warm)", "engine.recall('who works on identity', scopes=['team:eng'])"),
]


def _populate(data_dir: Path, memories: int, checkout: Path) -> None:
    code = (
        "import sys; from pathlib import Path; sys.path.append(sys.argv[3]); from coldstart import _populate; "
        "_populate(Path(sys.argv[1]), int(sys.argv[2]))"
    )
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    bench = str(Path(__file__).resolve().parent)
    subprocess.run(
        [sys.executable, "-P", "-c", code, str(data_dir), str(memories), bench], env=env, check=True
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes (medians)")
    parser.add_argument("--memories", type=int, default=2000, help="memories in the store")
    parser.add_argument(
        "--checkout", default=str(ROOT), help="the source tree to profile (default: this one)"
    )
    args = parser.parse_args()
    checkout = Path(args.checkout).resolve()
    before = load()
    runs: list[list[list[float | str]]] = []
    with tempfile.TemporaryDirectory(prefix="mnemograph-steps-") as tmp:
        data_dir = Path(tmp) / "data"
        print(f"populating {args.memories} memories...", file=sys.stderr)
        _populate(data_dir, args.memories, checkout)
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        for r in range(args.runs):
            done = subprocess.run(
                [sys.executable, "-P", "-c", _CHILD, str(data_dir), json.dumps(STEPS)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(json.loads(done.stdout.splitlines()[-1]))
            print(f"run {r}: {sum(float(s[1]) for s in runs[-1]):.2f} s CPU", file=sys.stderr)
    print(f"Checkout `{checkout}`; {args.runs} fresh processes; load average {before} -> {load()}")
    print()
    print("| step | CPU | wall | RSS added | anonymous added |")
    print("|---|--:|--:|--:|--:|")
    for i, (label, _) in enumerate(STEPS):
        cpu, wall, rss, anon = (statistics.median(float(run[i][k]) for run in runs) for k in (1, 2, 3, 4))
        print(f"| {label} | {cpu:.3f} s | {wall:.3f} s | {rss:+.1f} MiB | {anon:+.1f} MiB |")
    totals = [sum(float(s[1]) for s in run) for run in runs]
    print(f"| **total** | {statistics.median(totals):.2f} s | | | |")


if __name__ == "__main__":
    main()
