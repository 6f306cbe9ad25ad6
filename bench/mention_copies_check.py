"""What the check of the mentions' copies at open (and its note at close) costs on a large store, per variant.

    python bench/mention_copies_check.py --graph /tmp/copy/graph --variant main=/work/main \
        --variant branch=/work/wt-x [--rounds 3]

``--graph`` is the ``graph`` directory of an upgraded store (its mentions carry their copies already); it is
copied once per variant and never changed. Each measurement runs in a fresh process with the variant's code on
``PYTHONPATH`` (the ``GraphStore`` alone: no model, no projections):

- ``first open``: the first open of the store by the variant (``--graph`` as main leaves it: no note of a close,
  no mark of the check of empty columns), once per variant (not a median);
- ``open (clean)``: opening the store its last close left (nothing written since);
- ``close (no write)``: closing it again right after;
- ``close (1 write)``: closing after one change appended to the log (the head moved);
- ``open (after kill)``: opening after a process appended a change and was killed (SIGKILL) without closing.

Rounds alternate the variants. Results go to docs/benchmarks/mention-copies-check.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import load, machine

OUT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks" / "mention-copies-check.md"
EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"

# One measurement, in a child: argv = graph dir, what ("clean", "write", "kill", "open"), embedder name.
_CHILD = """
import json, os, signal, sys, time
from datetime import UTC, datetime
from pathlib import Path
from storage.adapters.kuzu.store import GraphStore
from storage.domain.records import Change

graph, what = Path(sys.argv[1]), sys.argv[2]
t = time.perf_counter()
g = GraphStore(graph, dim=384, embedder_name=sys.argv[3])
opened = time.perf_counter() - t
if what in ("write", "kill"):
    with g.transaction() as conn:
        head = g.max_seq(conn)
        g.append_changes(conn, [Change(head + 1, "retire", "bench")], datetime.now(UTC))
    if what == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
t = time.perf_counter()
g.close()
print(json.dumps({"open": opened, "close": time.perf_counter() - t}))
"""


def measure(code: Path, graph: Path, what: str) -> dict[str, float]:
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(graph), what, EMBEDDER],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"},
        cwd=str(code),
        check=False,
    )
    if what == "kill":
        assert child.returncode == -9, child.stderr
        return {}
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--graph", type=Path, required=True)
    p.add_argument("--variant", action="append", required=True, help="name=path of a checkout")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    variants = dict(v.split("=", 1) for v in a.variant)
    started = dt.datetime.now(dt.UTC)
    before = load()
    results: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
    with tempfile.TemporaryDirectory(prefix="rb21d-bench-", dir="/tmp") as tmp:
        copies = {}
        for name in variants:
            copies[name] = Path(tmp) / name / "graph"
            shutil.copytree(a.graph, copies[name], symlinks=True)
            first = measure(Path(variants[name]), copies[name], "clean")  # the variant's own close first
            results[name]["first open"] = [first["open"]]
        for _ in range(a.rounds):
            for name, code in variants.items():
                got = results[name]
                m = measure(Path(code), copies[name], "clean")
                got.setdefault("open (clean)", []).append(m["open"])
                got.setdefault("close (no write)", []).append(m["close"])
                m = measure(Path(code), copies[name], "write")
                got.setdefault("close (1 write)", []).append(m["close"])
                measure(Path(code), copies[name], "kill")
                m = measure(Path(code), copies[name], "open")
                got.setdefault("open (after kill)", []).append(m["open"])
                print(name, {k: round(v[-1], 3) for k, v in got.items()}, flush=True)
    after = load()
    box = machine()
    rows = list(next(iter(results.values())))
    base = next(iter(variants))
    lines = [
        "# The mentions' copies: their check at open and note at close (100,000 memories)",
        "",
        f"`python bench/mention_copies_check.py --graph {a.graph} "
        + " ".join(f"--variant {k}={v}" for k, v in variants.items())
        + f" --rounds {a.rounds}`",
        "",
        f"Run {started:%Y-%m-%d %H:%M} UTC; load before {before}, after {after}; {box['cores']} cores ({box['cpu']}), "
        f"kuzu {box.get('kuzu', '?')}.",
        "",
        "Medians of the rounds, in ms (ratio to the first variant).",
        "",
        "| | " + " | ".join(variants) + " |",
        "|---|" + "---|" * len(variants),
    ]
    for row in rows:
        b = statistics.median(results[base][row])
        cells = []
        for name in variants:
            med = statistics.median(results[name][row])
            cells.append(f"{med * 1000:,.0f}" + ("" if name == base else f" ({med / b:.2f}x)"))
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    table = "\n".join(lines) + "\n"
    print(table)
    OUT.write_text(table)


if __name__ == "__main__":
    main()
