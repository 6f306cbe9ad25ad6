"""Scale points through the bulk import: ``import --from jsonl`` throughput (vectors supplied, and the engine
embedding), the same import one write per intent (the path before bulk writes) in the same run, then recall
p50/p95 beside the bare query embedding and disk bytes per memory, as ingested and after maintenance.

    python bench/scale.py --sizes 10000 --compare 2000 --out docs/benchmarks/scale.md
    python bench/scale.py --quick                   # 1,000 memories, prints only

Memories are the synthetic corpus of ``_common.Sentences`` (names, places, facts that supersede each other) in 20
user scopes. "Vectors supplied" lines carry random unit vectors (only the write is measured); the "engine embeds"
store is the one recall runs on (real MiniLM vectors; 200 questions, each embedded once, beside a bare embedding of
a different question of the same set, interleaved).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from _common import Latency, Sentences, machine  # noqa: E402

from storage import CachedEmbedder, Engine, MiniLMEmbedder  # noqa: E402
from storage.importers import import_into  # noqa: E402

USERS = 20


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def parts(path: Path, n: int) -> str:
    """Bytes per memory in each store of the data directory."""
    return ", ".join(f"{d.name} {du(d) / n:,.0f}" for d in sorted(path.iterdir()) if d.is_dir())


def source(path: Path, texts: list[str], vectors: np.ndarray | None) -> Path:
    with path.open("w") as out:
        for i, text in enumerate(texts):
            rec: dict[str, Any] = {"content": text, "scopes": [f"user:u{i % USERS:02d}"]}
            if vectors is not None:
                rec["vector"] = [round(float(x), 6) for x in vectors[i]]
            out.write(json.dumps(rec) + "\n")
    return path


def load(
    data: Path, src: Path, n: int, model: MiniLMEmbedder, *, chunk: int | None = None
) -> tuple[Engine, dict[str, float]]:
    eng = Engine.open(data, embedder=CachedEmbedder(model), warm=False)
    if chunk is not None:
        eng.bulk_chunk = chunk
    start = time.perf_counter()
    report = import_into(eng, "jsonl", src, "user:u00")
    acked = time.perf_counter() - start
    while not eng.reconciler.wait_projected(60):
        log("  waiting for the projections ...")
    visible = time.perf_counter() - start
    assert report.added == n, report
    return eng, {"acked_per_s": n / acked, "visible_per_s": n / visible, "seconds": visible}


def recall_rows(eng: Engine, model: MiniLMEmbedder, questions: list[str]) -> dict[str, Latency]:
    recall, bare = [], []
    half = len(questions) // 2
    for i in range(half):  # interleaved, each text embedded once (no cache hit on either side)
        t = time.perf_counter()
        eng.recall(questions[i], [f"user:u{i % USERS:02d}"], k=10)
        recall.append(time.perf_counter() - t)
        t = time.perf_counter()
        model.embed([questions[half + i]])
        bare.append(time.perf_counter() - t)
    return {"recall": Latency.of(recall), "embed": Latency.of(bare)}


def maintain(eng: Engine) -> None:
    """What the engine does on its own after a burst of writes and at checkpoints: compaction, old versions
    dropped, the ANN index (past its threshold), and a Kùzu checkpoint."""
    eng.reconciler.on_projector(eng.reconciler._maintain)
    eng.graph.checkpoint()


def at_size(tmp: Path, n: int, compare: int, model: MiniLMEmbedder) -> dict[str, Any]:
    texts = Sentences(11).memories(n)
    rng = np.random.default_rng(n)
    vecs = rng.standard_normal((n, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    out: dict[str, Any] = {"n": n}
    m = min(compare, n)
    if m:
        small = source(tmp / f"given-{m}.jsonl", texts[:m], vecs[:m])
        for name, chunk in (("one intent per write", 1), ("bulk", None)):
            log(f"{m:,} memories, vectors supplied, {name}")
            eng, rate = load(tmp / f"cmp-{chunk}", small, m, model, chunk=chunk)
            eng.close()
            out[f"compare {name}"] = {**rate, "n": m}
    log(f"{n:,} memories, vectors supplied, bulk")
    eng, out["given"] = load(tmp / "given", source(tmp / "given.jsonl", texts, vecs), n, model)
    eng.close()
    shutil.rmtree(tmp / "given")
    log(f"{n:,} memories, the engine embeds, bulk")
    t = time.perf_counter()
    model.embed(texts[: min(n, 2000)])
    out["bare_embed_per_s"] = min(n, 2000) / (time.perf_counter() - t)
    data = tmp / "embedded"
    eng, out["embedded"] = load(data, source(tmp / "plain.jsonl", texts, None), n, model)
    try:
        out["disk_as_ingested"] = du(data) / n
        out["parts_as_ingested"] = parts(data, n)
        log("recall, as ingested")
        questions = Sentences(99).questions(400)
        out["as_ingested"] = {k: dataclasses.asdict(v) for k, v in recall_rows(eng, model, questions).items()}
        log("maintenance")
        maintain(eng)
        out["disk_maintained"] = du(data) / n
        out["parts_maintained"] = parts(data, n)
        out["maintained"] = {
            k: dataclasses.asdict(v) for k, v in recall_rows(eng, model, questions[::-1]).items()
        }
    finally:
        eng.close()
    out["disk_closed"] = du(data) / n
    out["parts_closed"] = parts(data, n)
    shutil.rmtree(data)
    return out


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| memories | import | memories/s acknowledged | memories/s searchable |",
        "|---:|---|---:|---:|",
    ]
    for r in results:
        for key, label in (
            ("compare one intent per write", "vectors supplied, one intent per write (before)"),
            ("compare bulk", "vectors supplied, bulk"),
        ):
            if key in r:
                c = r[key]
                lines.append(f"| {c['n']:,} | {label} | {c['acked_per_s']:.0f} | {c['visible_per_s']:.0f} |")
        lines.append(
            f"| {r['n']:,} | vectors supplied, bulk | {r['given']['acked_per_s']:.0f} | "
            f"{r['given']['visible_per_s']:.0f} |"
        )
        lines.append(
            f"| {r['n']:,} | engine embeds, bulk (bare embedding alone: {r['bare_embed_per_s']:.0f}/s) | "
            f"{r['embedded']['acked_per_s']:.0f} | {r['embedded']['visible_per_s']:.0f} |"
        )
    lines += [
        "",
        "| memories | store | recall p50 / p95 ms | bare query embedding p50 / p95 ms | recall p95 ÷ embedding p50 "
        "| disk bytes per memory |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for r in results:
        for key, disk in (("as_ingested", "disk_as_ingested"), ("maintained", "disk_maintained")):
            rec, emb = r[key]["recall"], r[key]["embed"]
            lines.append(
                f"| {r['n']:,} | {key.replace('_', ' ')} | {rec['p50']:.1f} / {rec['p95']:.1f} | "
                f"{emb['p50']:.1f} / {emb['p95']:.1f} | {rec['p95'] / emb['p50']:.2f}× | {r[disk]:,.0f} "
                f"({r['parts_' + key]}) |"
            )
        lines.append(f"| {r['n']:,} | after close | | | | {r['disk_closed']:,.0f} ({r['parts_closed']}) |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000")
    ap.add_argument("--compare", type=int, default=2000, help="size of the before/after import comparison")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    sizes = [1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    compare = 500 if args.quick else args.compare
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = MiniLMEmbedder()
    model.warm()
    load_before = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        for n in sizes:
            sub = Path(tmp) / str(n)
            sub.mkdir()
            results.append(at_size(sub, n, compare, model))
            log(json.dumps(results[-1]))
    text = table(results)
    print(text)
    if args.out:
        load_after = os.getloadavg()
        info = machine()
        args.out.write_text(
            "# Scale points through the bulk import\n\n"
            f"Command: `python bench/scale.py {' '.join(sys.argv[1:])}`, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {info['cores']} cores ({info['cpu']}, "
            f"{info['ram']}), shared with other agents: load average {load_before[0]:.1f} at the start, "
            f"{load_after[0]:.1f} at the end. Read the ratios, not the absolutes.\n\n"
            f"{text}\n\n<!-- notes -->\n\n"
            f"Raw: `{json.dumps(results)}`\n"
        )


if __name__ == "__main__":
    main()
