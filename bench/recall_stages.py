"""Where a recall's milliseconds go: recalls of new queries through the Engine, timed by stage, on a copy of a store.

    python bench/recall_stages.py --store DIR --code CHECKOUT [--code CHECKOUT2 ...] --recalls 200 [--writes]

Each checkout runs in its own process (``PYTHONPATH=<checkout>``) on its own fresh copy of ``--store`` (a store
from ``bench/erasure.py``'s ``build``: user scopes ``user:u00`` .. ``user:u19``), one after the other. Each
recalls ``--recalls`` distinct questions (``_common.Sentences``, never cached; 20 warm-up ones first), recipe
default, k=10, a user scope in turn, and then embeds the same questions bare. Stages are timed by wrapping the
lanes' ``prepare``/``search``, the Kùzu adapter's ``fetch`` and the pipeline (a lane's time is its own wall time;
the lanes run side by side, so their sum is not the recall's). ``--writes`` writes one memory (vector supplied)
and lets the projections settle, untimed, before each recall: nothing a store read before may be reused.
The ranked ids of every checkout are compared with the first's. Prints a table; ``--out`` appends it to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAGES = ("embed", "bm25", "vector", "graph", "lanes", "fetch", "pipeline")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def child(store: Path, n: int, seed: int, writes: bool) -> dict:
    sys.path.insert(0, str(HERE))
    import numpy as np
    from _common import Sentences

    import storage
    from storage import CachedEmbedder, Engine, MiniLMEmbedder, WriteItem
    from storage.adapters.kuzu import reads as kuzu_reads
    from storage.engine import reads as engine_reads
    from storage.recall.lanes import bm25, graph, vector

    events: list[tuple[int, str, float, float]] = []
    current = [0]
    lock = threading.Lock()

    def wrap(owner: object, name: str, label: str) -> None:
        original = getattr(owner, name)

        def timed(*args: object, **kwargs: object) -> object:
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                with lock:
                    events.append((current[0], label, t, time.perf_counter()))

        setattr(owner, name, timed)

    wrap(vector.VectorLane, "prepare", "embed")
    wrap(bm25.Bm25Lane, "search", "bm25")
    wrap(vector.VectorLane, "search", "vector")
    wrap(graph.GraphLane, "search", "graph")
    wrap(kuzu_reads._Reads, "fetch", "fetch")
    wrap(engine_reads, "run_recall", "pipeline")

    model = MiniLMEmbedder()
    eng = Engine.open(store, embedder=CachedEmbedder(model), warm=False)
    while not eng.reconciler.wait_projected(60):
        pass
    src = Sentences(seed)
    warm, questions = src.questions(20), src.questions(n)
    texts = Sentences(seed + 1000).memories(n)
    rng = np.random.default_rng(seed)
    for i, q in enumerate(warm):
        eng.recall(q, [f"user:u{i % 20:02d}"], k=10)
    events.clear()
    total, cpu, ids = [], 0.0, []
    for i, q in enumerate(questions):
        current[0] = i
        scope = f"user:u{i % 20:02d}"
        if writes:
            v = rng.standard_normal(384).astype("float32")
            eng.write_many([WriteItem(texts[i], [scope], vector=v / np.linalg.norm(v))])
            while not eng.reconciler.wait_projected(60):
                pass
        c, t = time.process_time(), time.perf_counter()
        hits = eng.recall(q, [scope], k=10)
        total.append((time.perf_counter() - t) * 1000)
        cpu += time.process_time() - c
        ids.append([h.memory.id for h in hits])
    embed = []
    for q in questions:
        t = time.perf_counter()
        model.embed([q])
        embed.append((time.perf_counter() - t) * 1000)
    eng.close()
    per: list[dict[str, float]] = [{} for _ in range(n)]
    spans: list[list[float]] = [[] for _ in range(n)]
    for r, label, a, b in events:
        per[r][label] = per[r].get(label, 0.0) + (b - a) * 1000
        if label in ("bm25", "vector", "graph"):
            spans[r] += [a, b]
    for d, s in zip(per, spans, strict=True):
        d["lanes"] = (max(s) - min(s)) * 1000 if s else 0.0
    return {
        "storage": storage.__file__,
        "ms": total,
        "embed_ms": embed,
        "cpu_ms": cpu * 1000 / n,
        "ids": ids,
        "stages_p50": {k: statistics.median(d.get(k, 0.0) for d in per) for k in STAGES},
        "stages_p95": {k: pct([d.get(k, 0.0) for d in per], 0.95) for k in STAGES},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--code", type=Path, action="append", default=[])
    ap.add_argument("--recalls", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--writes", action="store_true")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.store, a.recalls, a.seed, a.writes)))
        return
    sys.path.insert(0, str(HERE))
    from _common import load

    before = load()
    results = []
    for code in a.code:
        with tempfile.TemporaryDirectory(prefix="recall-stages-") as tmp:
            copy = Path(tmp) / "store"
            shutil.copytree(a.store, copy)
            argv = [sys.executable, __file__, "--child", "--store", str(copy), "--recalls", str(a.recalls)]
            argv += ["--seed", str(a.seed)] + (["--writes"] if a.writes else [])
            env = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1"}
            proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
            if proc.returncode:
                raise SystemExit(f"{code} failed:\n{proc.stderr[-3000:]}")
            results.append((code, json.loads(proc.stdout.strip().splitlines()[-1])))
    first = results[0][1]
    lines = [
        "| code | recall p50 / p95 / p99 ms | recall CPU ms | bare embedding p50 ms | recall p95 ÷ embedding p50 "
        "| stage medians: " + ", ".join(STAGES) + " | ids differ from the first |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for code, r in results:
        e50 = pct(r["embed_ms"], 0.5)
        differ = sum(x != y for x, y in zip(first["ids"], r["ids"], strict=True))
        stages = " / ".join(f"{r['stages_p50'][k]:.1f}" for k in STAGES)
        lines.append(
            f"| {code} | {pct(r['ms'], 0.5):.1f} / {pct(r['ms'], 0.95):.1f} / {pct(r['ms'], 0.99):.1f} "
            f"| {r['cpu_ms']:.1f} | {e50:.1f} | {pct(r['ms'], 0.95) / e50:.2f}× | {stages} | {differ} |"
        )
    table = "\n".join(lines)
    note = f"load before {before}, after {load()}; {a.recalls} recalls" + (
        ", a write before each" if a.writes else ""
    )
    print(table + "\n" + note)
    if a.out:
        with a.out.open("a") as f:
            f.write(table + "\n\n" + note + "\n")


if __name__ == "__main__":
    main()
