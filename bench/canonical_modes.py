"""The canonical store's two modes side by side in one run: embedded Kùzu (the default) against FalkorDB on
loopback (scale-out mode, docs/scale-out.md), through storage's public API.

    .venv/bin/python bench/canonical_modes.py                      # 10k and 100k, writes docs/benchmarks/canonical-modes.md
    .venv/bin/python bench/canonical_modes.py --n 1000 --no-write  # smoke run, prints only

Rounds alternate the modes (kuzu, falkordb, kuzu, falkordb, ...) so machine noise hits both alike. Per round and
mode: a fresh data directory (and, for FalkorDB, a fresh graph on one server started here with AOF
``appendfsync always``), ingestion of ``--n`` memories with ``write_many`` in batches of 256 (vectors supplied),
then single writes (vectors supplied: the stores' and the engine's cost, not MiniLM's), then recalls (query
vectors cached before the clock starts). For FalkorDB it also times what read-your-writes across nodes costs:
``sync_head`` (one query for the log's head) and a recall on a second node right after a write on the first.
Corpus vectors come from the persistent embedding cache (``--cache``) when there is one.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import PACKAGES, Latency, Sentences, load, machine

from storage import CachedEmbedder, Engine, MiniLMEmbedder, WriteItem
from storage.adapters.falkordb import local as falkordb_local

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "canonical-modes.md"
SEED = 7
USERS = 10
BATCH = 256
MODES = ("kuzu", "falkordb")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def corpus_vectors(bare: MiniLMEmbedder, texts: list[str], cache: Path | None) -> np.ndarray:
    if cache is not None:
        from _embcache import DiskCache

        disk = DiskCache(cache, bare)
        log(f"corpus vectors: {len(texts) - len(disk.missing(texts)):,} cached, embedding the rest")
        disk.fill(texts)
        return disk.vectors(texts).astype(np.float32)
    log(f"embedding {len(texts):,} corpus texts")
    return np.asarray(bare.embed(texts), dtype=np.float32)


def scope(j: int) -> str:
    return f"user:u{j % USERS}"


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def one_round(mode: str, tmp: Path, rnd: str, server: falkordb_local.LocalServer, emb: CachedEmbedder,
              texts: list[str], vecs: np.ndarray, singles: list[str], svecs: np.ndarray,
              questions: list[str]) -> dict[str, object]:  # fmt: skip
    canonical = server.url(f"r{rnd}") if mode == "falkordb" else "kuzu"
    out: dict[str, object] = {}
    with Engine.open(tmp / f"{mode}-{rnd}-a", embedder=emb, warm=False, canonical=canonical) as e:
        items = [WriteItem(t, [scope(i)], vector=[float(x) for x in vecs[i]]) for i, t in enumerate(texts)]
        start = time.perf_counter()
        for lo in range(0, len(items), BATCH):
            e.write_many(items[lo : lo + BATCH])
        assert e.reconciler.wait_projected(600)
        out["ingest_s"] = time.perf_counter() - start
        out["writes"] = Latency.of(
            [
                timed(
                    lambda i=i, t=t: e.write_many(
                        [WriteItem(t, [scope(i)], vector=[float(x) for x in svecs[i]])]
                    )
                )
                for i, t in enumerate(singles)
            ]
        )
        out["recalls"] = Latency.of(
            [timed(lambda i=i, q=q: e.recall(q, [scope(i)], k=10)) for i, q in enumerate(questions)]
        )
        if mode == "falkordb":
            out["sync_head"] = Latency.of([timed(e.reconciler.sync_head) for _ in questions])
            with Engine.open(tmp / f"{mode}-{rnd}-b", embedder=emb, warm=False, canonical=canonical) as b:
                start = time.perf_counter()
                b.recall(questions[0], [scope(0)], k=10)  # the new node builds its projections from the log
                out["join_s"] = time.perf_counter() - start
                cross = []
                for i, q in enumerate(questions[:50]):
                    e.write_many(
                        [
                            WriteItem(
                                f"Cross-node note {rnd}-{i}: {q}",
                                [scope(i)],
                                vector=svecs[i % len(svecs)].tolist(),
                            )
                        ]
                    )
                    cross.append(timed(lambda i=i, q=q: b.recall(q, [scope(i)], k=10)))
                out["cross"] = Latency.of(cross)
        ok = e.verify().ok
        out["verify"] = ok
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--n",
        default="10000,100000",
        help="memories ingested per round; several sizes comma-separated (default 10000,100000)",
    )
    ap.add_argument(
        "--rounds",
        default="2,1",
        help="rounds per mode and size, interleaved; one number or one per size (default 2,1)",
    )
    ap.add_argument("--singles", type=int, default=100)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "mnemograph-bench")
    ap.add_argument("--no-write", action="store_true", help="print only; leave the docs page alone")
    args = ap.parse_args()
    sizes = [int(x) for x in str(args.n).split(",")]
    rounds = [int(x) for x in str(args.rounds).split(",")]
    rounds = rounds * len(sizes) if len(rounds) == 1 else rounds
    if len(rounds) != len(sizes):
        ap.error("--rounds takes one number or one per size")
    before = load()
    src = Sentences(SEED)
    texts = src.memories(max(sizes))
    singles = [f"{t} (single write {i})" for i, t in enumerate(src.memories(args.singles))]
    questions = src.questions(args.queries)
    bare = MiniLMEmbedder()
    bare.warm()
    vecs = corpus_vectors(bare, texts, args.cache if args.cache.exists() else None)
    svecs = np.asarray(bare.embed(singles), dtype=np.float32)
    emb = CachedEmbedder(MiniLMEmbedder())
    emb.warm()
    emb.embed(questions)  # query vectors cached: recall times the stores, not the model
    sections: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mnemograph-modes-") as tmp:
        server = falkordb_local.start(Path(tmp) / "falkordb")
        try:
            for n, nrounds in zip(sizes, rounds, strict=True):
                results: dict[str, list[dict[str, object]]] = {m: [] for m in MODES}
                begun = time.perf_counter()
                for rnd in range(nrounds):
                    for mode in MODES if rnd % 2 == 0 else reversed(MODES):
                        log(f"{n:,} memories, round {rnd + 1}: {mode}")
                        tag = f"{n}-{rnd}"
                        r = one_round(mode, Path(tmp), tag, server, emb, texts[:n], vecs[:n], singles, svecs,
                                      questions)  # fmt: skip
                        log(f"  {r}")
                        results[mode].append(r)
                sections.append(section(args, n, nrounds, results, time.perf_counter() - begun))
                print(sections[-1], flush=True)
        finally:
            server.stop()
    took = time.perf_counter() - started
    report(args, sizes, rounds, sections, before, took)


def med(rows: list[dict[str, object]], key: str, attr: str | None = None) -> float:
    values = [getattr(r[key], attr) if attr else r[key] for r in rows]
    return float(statistics.median(values))  # type: ignore[type-var]


def section(
    args: argparse.Namespace, n: int, nrounds: int, results: dict[str, list[dict[str, object]]], took: float
) -> str:
    k, f = results["kuzu"], results["falkordb"]
    rows = [
        (
            "ingestion, memories/s (write_many, vectors supplied)",
            n / med(k, "ingest_s"),
            n / med(f, "ingest_s"),
        ),
        ("single write p50, ms", med(k, "writes", "p50"), med(f, "writes", "p50")),
        ("single write p95, ms", med(k, "writes", "p95"), med(f, "writes", "p95")),
        ("recall p50, ms", med(k, "recalls", "p50"), med(f, "recalls", "p50")),
        ("recall p95, ms", med(k, "recalls", "p95"), med(f, "recalls", "p95")),
    ]
    lines = [
        f"## {n:,} memories ({nrounds} round{'s' if nrounds > 1 else ''} per mode; {took / 60:.0f} min)",
        "",
        "| measure | embedded Kùzu | FalkorDB (loopback) | FalkorDB / Kùzu |",
        "|---|---|---|---|",
        *(f"| {name} | {a:,.1f} | {b:,.1f} | {b / a:.2f} |" for name, a, b in rows),
        "",
        f"- `sync_head` (read the shared log's head before a recall): p50 {med(f, 'sync_head', 'p50'):.2f} ms, "
        f"p95 {med(f, 'sync_head', 'p95'):.2f} ms.",
        f"- Recall on node B right after a write on node A (B catches its projections up first): p50 "
        f"{med(f, 'cross', 'p50'):.1f} ms, p95 {med(f, 'cross', 'p95'):.1f} ms.",
        f"- A new node joining a graph of {n + args.singles:,} memories (its first recall, once open; the open "
        f"builds its indexes from the graph and is not timed): {med(f, 'join_s'):.1f} s.",
        f"- `verify` clean after every round: {all(r['verify'] for r in k + f)}.",
    ]
    return "\n".join(lines)


def report(
    args: argparse.Namespace,
    sizes: list[int],
    rounds: list[int],
    sections: list[str],
    before: str,
    took: float,
) -> None:
    if args.no_write:
        return
    info = machine()
    n_arg = ",".join(str(n) for n in sizes)
    r_arg = ",".join(str(r) for r in rounds)
    DOC.write_text(
        "# Canonical store modes: embedded Kùzu against FalkorDB\n\n"
        f"Written by `bench/canonical_modes.py` (command: `.venv/bin/python bench/canonical_modes.py --n {n_arg} "
        f"--rounds {r_arg}`) on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; rounds alternate the modes; "
        f"medians over rounds. Run took {took / 60:.0f} min; load average before: {before}, after: {load()}.\n\n"
        f"Each round: a fresh store, the memories ingested with `write_many` (batches of {BATCH}, vectors "
        f"supplied), {args.singles} single writes (vectors supplied), {args.queries} recalls (query vectors "
        f"cached). FalkorDB runs on the same machine (loopback) with AOF `appendfsync always`.\n\n"
        + "\n\n".join(sections) + "\n\n"
        "Machine: " + ", ".join(f"{k} {v}" for k, v in info.items() if k not in PACKAGES) + "; "
        + ", ".join(f"{p} {info.get(p, '?')}" for p in PACKAGES) + ".\n"
    )  # fmt: skip
    log(f"wrote {DOC}")


if __name__ == "__main__":
    main()
