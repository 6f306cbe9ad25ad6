"""Scale points through the bulk import: ``import --from jsonl`` throughput (vectors supplied, and the engine
embedding), the same import one write per intent (the path before bulk writes) in the same run, then recall
p50/p95/p99 beside the bare query embedding, single writes, disk bytes per memory (as ingested and after
maintenance), the time to open the store again and the resident memory of the process that holds it
(its threads sharing two malloc arenas, as in the owner `mnemograph serve` starts).

    python bench/scale.py --sizes 10000 --compare 2000 --out docs/benchmarks/scale.md
    python bench/scale.py --sizes 10000,100000 --compare 0 --embed-max 10000 --out ... --plot docs/benchmarks/scale.png
    python bench/scale.py --quick                   # 1,000 memories, prints only
    python bench/scale.py --sizes 100000 --store /tmp/s100k/store   # a copy of a store built by bench/erasure.py

Memories are the synthetic corpus of ``_common.Sentences`` (names, places, facts that supersede each other) in 20
user scopes. "Vectors supplied" lines carry random unit vectors: the store they make is measured at every size
(recall, single writes, disk, reopen, memory), since at 100,000 and beyond embedding every memory would take
hours on a small machine; its recall latency is that of a store of that size (the same lanes, index and
filters), not a ranking. The "engine embeds" store (real MiniLM vectors) is made and measured too up to
``--embed-max`` memories. Recall: 200 questions, each embedded once, beside a bare embedding of a different
question of the same set, interleaved. Single writes: 60 ``Engine.write`` calls of new texts, the engine embedding
each (what a client's ``memory_write`` costs below MCP). With ``--store``, no import: a copy of a store that
``bench/erasure.py --build`` made (the same corpus, scopes and random unit vectors, maintained and closed) is
opened and measured as the "vectors supplied" store, its first state being "as built" rather than "as ingested".
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

from server._daemon import limit_malloc_arenas  # noqa: E402
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


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def single_writes(eng: Engine, texts: list[str]) -> Latency:
    times = []
    for i, text in enumerate(texts):
        t = time.perf_counter()
        eng.write(text, [f"user:u{i % USERS:02d}"])
        times.append(time.perf_counter() - t)
    return Latency.of(times)


def measure_store(data: Path, n: int, eng: Engine, model: MiniLMEmbedder) -> dict[str, Any]:
    """Recall as ingested and after maintenance, single writes, disk, reopen time and resident memory."""
    out: dict[str, Any] = {"disk_as_ingested": du(data) / n, "parts_as_ingested": parts(data, n)}
    questions = Sentences(99).questions(400)
    log("  recall, as ingested")
    out["as_ingested"] = {k: dataclasses.asdict(v) for k, v in recall_rows(eng, model, questions).items()}
    log("  maintenance")
    t = time.perf_counter()
    maintain(eng)
    out["maintain_s"] = time.perf_counter() - t
    out["disk_maintained"] = du(data) / n
    out["parts_maintained"] = parts(data, n)
    out["maintained"] = {
        k: dataclasses.asdict(v) for k, v in recall_rows(eng, model, questions[::-1]).items()
    }
    log("  single writes")
    out["write"] = dataclasses.asdict(single_writes(eng, Sentences(n + 7).memories(60)))
    eng.close()
    out["disk_closed"] = du(data) / n
    out["parts_closed"] = parts(data, n)
    log("  reopen")
    t = time.perf_counter()
    eng = Engine.open(data, embedder=CachedEmbedder(model), warm=False)
    out["open_s"] = time.perf_counter() - t
    try:
        eng.recall(questions[0], ["user:u00"], k=10)
        out["open_first_recall_s"] = time.perf_counter() - t
        for i, q in enumerate(questions[1:51]):
            eng.recall(q, [f"user:u{i % USERS:02d}"], k=10)
        out["rss_mib"] = rss_mib()
    finally:
        eng.close()
    return out


def maintain(eng: Engine) -> None:
    """What the engine does on its own after a burst of writes and at checkpoints: compaction, old versions
    dropped, the ANN index (past its threshold), the rewrite of the canonical file when it is mostly free pages
    (``storage.engine.compaction``, in a thread of its own: waited for here), and a Kùzu checkpoint."""
    eng.reconciler.on_projector(eng.reconciler._maintain)
    compactor = getattr(eng, "compactor", None)  # absent before it came: the same script measures both
    if compactor is not None:
        compactor.wait_idle()
    eng.graph.checkpoint()


def prebuilt(tmp: Path, n: int, store: Path, model: MiniLMEmbedder) -> dict[str, Any]:
    """The measures of ``measure_store`` on a copy of ``store`` (``n`` memories), the original left untouched."""
    log(f"{n:,} memories, a copy of {store}")
    shutil.copytree(store, tmp / "given")
    t = time.perf_counter()
    eng = Engine.open(tmp / "given", embedder=CachedEmbedder(model), warm=False)
    out: dict[str, Any] = {"n": n, "store": str(store), "first_open_s": time.perf_counter() - t}
    out["given_store"] = measure_store(tmp / "given", n, eng, model)
    shutil.rmtree(tmp / "given")
    return out


def at_size(tmp: Path, n: int, compare: int, embed_max: int, model: MiniLMEmbedder) -> dict[str, Any]:
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
    del vecs
    out["given_store"] = measure_store(tmp / "given", n, eng, model)
    shutil.rmtree(tmp / "given")
    if n > embed_max:
        return out
    log(f"{n:,} memories, the engine embeds, bulk")
    t = time.perf_counter()
    model.embed(texts[: min(n, 2000)])
    out["bare_embed_per_s"] = min(n, 2000) / (time.perf_counter() - t)
    data = tmp / "embedded"
    eng, out["embedded"] = load(data, source(tmp / "plain.jsonl", texts, None), n, model)
    out["embedded_store"] = measure_store(data, n, eng, model)
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
        if "given" not in r:  # a store built before (--store): no import measured
            lines.append(f"| {r['n']:,} | none: a copy of a store built before | | |")
            continue
        lines.append(
            f"| {r['n']:,} | vectors supplied, bulk | {r['given']['acked_per_s']:.0f} | "
            f"{r['given']['visible_per_s']:.0f} |"
        )
        if "embedded" in r:
            lines.append(
                f"| {r['n']:,} | engine embeds, bulk (bare embedding alone: {r['bare_embed_per_s']:.0f}/s) | "
                f"{r['embedded']['acked_per_s']:.0f} | {r['embedded']['visible_per_s']:.0f} |"
            )
    lines += [
        "",
        "| memories | store | state | recall p50 / p95 / p99 ms | bare query embedding p50 / p95 ms "
        "| recall p95 ÷ embedding p50 | disk bytes per memory |",
        "|---:|---|---|---:|---:|---:|---:|",
    ]
    for r in results:
        for store, label in (("given_store", "random vectors"), ("embedded_store", "MiniLM vectors")):
            if store not in r:
                continue
            m = r[store]
            for key, disk in (("as_ingested", "disk_as_ingested"), ("maintained", "disk_maintained")):
                rec, emb = m[key]["recall"], m[key]["embed"]
                lines.append(
                    f"| {r['n']:,} | {label} | {state(r, key)} | {rec['p50']:.1f} / {rec['p95']:.1f} / "
                    f"{rec.get('p99', 0):.1f} | {emb['p50']:.1f} / {emb['p95']:.1f} | "
                    f"{rec['p95'] / emb['p50']:.2f}× | {m[disk]:,.0f} ({m['parts_' + key]}) |"
                )
            lines.append(
                f"| {r['n']:,} | {label} | after close | | | | {m['disk_closed']:,.0f} ({m['parts_closed']}) |"
            )
    lines += [
        "",
        "| memories | store | single write p50 / p95 ms | maintenance s | reopen s | reopen + first recall s "
        "| process RSS MiB after 50 recalls |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for store, label in (("given_store", "random vectors"), ("embedded_store", "MiniLM vectors")):
            if store in r:
                m = r[store]
                lines.append(
                    f"| {r['n']:,} | {label} | {m['write']['p50']:.1f} / {m['write']['p95']:.1f} | "
                    f"{m['maintain_s']:.1f} | {m['open_s']:.2f} | {m['open_first_recall_s']:.2f} | "
                    f"{m['rss_mib']:.0f} |"
                )
    return "\n".join(lines)


def state(r: dict[str, Any], key: str) -> str:
    return "as built, reopened" if key == "as_ingested" and "store" in r else key.replace("_", " ")


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Recall latency against store size, log-log (the random-vector store, after maintenance)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["n"] for r in results]
    fig, ax = plt.subplots(figsize=(6, 4))
    for q in ("p50", "p95", "p99"):
        ax.plot(
            ns,
            [r["given_store"]["maintained"]["recall"][q] for r in results],
            marker="o",
            label=f"recall {q}",
        )
    ax.plot(
        ns,
        [r["given_store"]["maintained"]["embed"]["p50"] for r in results],
        "k--",
        label="query embedding p50",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories in the store")
    ax.set_ylabel("ms")
    ax.set_title("Recall latency against store size (engine call, after maintenance)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000")
    ap.add_argument("--compare", type=int, default=2000, help="size of the before/after import comparison")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--embed-max",
        type=int,
        default=10_000,
        help="largest size that also imports with the engine embedding",
    )
    ap.add_argument("--plot", type=Path, help="write a log-log plot of recall latency against size here")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--store", type=Path, help="measure a copy of this store, no import")
    args = ap.parse_args()
    # As the owner does (``mnemograph serve``), before any thread allocates: the resident figure is then the
    # owner's, not that of a process keeping one glibc arena of freed peaks per thread (docs/benchmarks/scale.md,
    # "Resident memory, session 22").
    limit_malloc_arenas()
    sizes = [1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    if args.store and len(sizes) != 1:
        raise SystemExit("--store takes one size (--sizes N)")
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
            if args.store:
                results.append(prebuilt(sub, n, args.store, model))
            else:
                results.append(at_size(sub, n, compare, args.embed_max, model))
            log(json.dumps(results[-1]))
    text = table(results)
    print(text)
    if args.plot and len(results) > 1:
        plot(results, args.plot)
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
