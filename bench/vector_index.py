"""Vector index types for a store past the ANN threshold: disk, ranking fidelity, latency, build time, one run.

    python bench/vector_index.py                       # 100,000 rows, writes docs/benchmarks/vector-index.md
    python bench/vector_index.py --rows 20000 --out /tmp/vi.md

The corpus is real: ``Sentences(7)`` memories (bench/core.py's generator) and 200 of its questions, embedded by
MiniLM once and kept in the benchmark embedding cache (``--cache``, bench/_embcache.py), so a rerun embeds
nothing. Rows go through ``VectorIndex`` (the projection's schema: float16 vectors; scopes as in bench/core.py:
20 users, one row in ten in a shared team scope) and ``maintain`` (compaction, scalar indexes). Each candidate
index is then built on its own copy of that table the way ``maintain`` builds one (``create_index``, then the
optimisation that drops old versions), timed. Every search is the vector lane's: one user's scope plus the team
scope, live rows, k = 50 (the recipes' depth), the rows' vectors returned, at least ``NPROBES`` partitions. The
exact answer is a flat search of the copy without a vector index, same filter. Queries alternate the order of the
candidates so machine noise hits all alike.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lancedb
import numpy as np
from _common import Latency, Sentences, load, machine
from _embcache import DiskCache
from lancedb.index import IvfFlat, IvfPq, IvfRq, IvfSq

from storage import CachedEmbedder, Engine, MiniLMEmbedder
from storage.adapters.lance_vectors import NPROBES, PARTITION_ROWS, VectorIndex
from storage.domain.records import ProjectionRow

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "vector-index.md"
CACHE = Path.home() / ".cache" / "mnemograph-bench"
DIM = 384
USERS = 20
QUERIES = 200
K = 50  # the vector lane's depth (storage/recall/recipes.py ``Recipe.depth``) for a recall of k <= 10
# Bytes per memory of the rest of the 100,000-memory store after maintain (docs/benchmarks/scale.md, session 20:
# graph 2,931, text 115), to which each candidate's vector table is added.
OTHER_BYTES = 2_931 + 115
TARGET = 4_096
KEEP = "<!-- Hand-written notes below this line are kept when bench/vector_index.py rewrites this file. -->"

Config = Callable[[int], object]


@dataclass(frozen=True)
class Index:
    name: str
    config: Config  # partitions -> lancedb index config
    # Query variants: (None, None) the index's own distances; ("lance", r) Lance's refine_factor r (k·r candidates
    # re-ranked by exact distance); ("own", r) k·r candidates fetched with their vectors, re-ranked here.
    variants: tuple[tuple[str | None, int | None], ...]


PLAIN, OWN2 = (None, None), ("own", 2)
INDEXES = (
    Index("IVF_FLAT", lambda p: IvfFlat(distance_type="cosine", num_partitions=p), (PLAIN,)),
    Index("IVF_SQ", lambda p: IvfSq(distance_type="cosine", num_partitions=p), (PLAIN,)),
    # IVF_PQ trains a codebook per sub-vector: at 100,000 rows its build took more than 11 minutes at load 9-14
    # (not finished when stopped), against seconds for the others, so it runs only with --pq.
    Index(
        "IVF_PQ 96×8",
        lambda p: IvfPq(distance_type="cosine", num_partitions=p, num_sub_vectors=96),
        (("lance", 2),),
    ),
    Index(
        "IVF_PQ 48×8",
        lambda p: IvfPq(distance_type="cosine", num_partitions=p, num_sub_vectors=48),
        (("lance", 4),),
    ),
    Index(
        "IVF_RQ 1 bit",
        lambda p: IvfRq(distance_type="cosine", num_partitions=p, num_bits=1),
        (("lance", 2), ("lance", 4), ("lance", 8), OWN2),
    ),
    Index(
        "IVF_RQ 2 bits",
        lambda p: IvfRq(distance_type="cosine", num_partitions=p, num_bits=2),
        (PLAIN, ("lance", 2), ("lance", 4), OWN2),
    ),
    Index("IVF_RQ 4 bits", lambda p: IvfRq(distance_type="cosine", num_partitions=p, num_bits=4), (PLAIN,)),
)


def log(msg: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def corpus(rows: int, cache: Path, embed: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """The rows' and the questions' vectors, and how many rows are real embeddings.

    Without ``embed`` only the questions are embedded when missing; a row whose text is not in the cache gets a
    variation of two real ones (a normalised blend, 60-90% of one), so it lies among real vectors the way a
    paraphrase does, and the table has ``rows`` rows however far the cache has been filled.
    """
    src = Sentences(7)
    texts, questions = src.memories(rows), src.questions(QUERIES)
    disk = DiskCache(cache, MiniLMEmbedder())
    todo = disk.missing([*questions, *(texts if embed else ())])
    log(f"vectors from {disk.dir}: embedding {len(todo):,} not cached")
    if todo:
        disk.embedder.warm()
    asked = disk.vectors(questions).astype(np.float32)
    if embed:
        return disk.vectors(texts).astype(np.float32), asked, rows
    missing = set(disk.missing(texts))
    real = [i for i, t in enumerate(texts) if t not in missing]
    vectors = np.zeros((rows, DIM), np.float32)
    vectors[real] = disk.vectors([texts[i] for i in real])
    rng = np.random.default_rng(3)
    blend = [i for i, t in enumerate(texts) if t in missing]
    if blend:
        one, two = rng.choice(real, len(blend)), rng.choice(real, len(blend))
        share = rng.uniform(0.6, 0.9, (len(blend), 1)).astype(np.float32)
        mixed = share * vectors[one] + (1 - share) * vectors[two]
        vectors[blend] = mixed / np.linalg.norm(mixed, axis=1, keepdims=True)
    return vectors, asked, len(real)


def fill(directory: Path, vectors: np.ndarray) -> None:
    index = VectorIndex(directory, dim=DIM, ann_threshold=10**12, scalar_threshold=1)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    for lo in range(0, len(vectors), 10_000):
        batch = [
            ProjectionRow(
                f"{i:032x}",
                "",
                "note",
                ("team:core",) if i % 10 == 0 else (f"user:u{i % USERS}",),
                True,
                now,
                vectors[i].tolist(),
            )
            for i in range(lo, min(lo + 10_000, len(vectors)))
        ]
        index.apply(batch, [], fresh=[r.id for r in batch])
    index.maintain()


def build(directory: Path, spec: Index, rows: int) -> tuple[lancedb.table.Table, float, int, int]:
    """Index the copy as ``maintain`` does; returns the table, build seconds, and the vector index's bytes right
    after and after one more clean-up (the next ``maintain``'s): the optimisation that drops old versions also
    optimises the new index, after its clean-up, so the index can be on disk twice until then."""
    table = lancedb.connect(str(directory)).open_table("memories")
    before = size(directory / "memories.lance" / "_indices")
    start = time.perf_counter()
    table.create_index("vector", config=spec.config(max(1, rows // PARTITION_ROWS)), replace=True)
    table.optimize(cleanup_older_than=timedelta(seconds=0))
    seconds = time.perf_counter() - start
    first = size(directory / "memories.lance" / "_indices") - before
    table.optimize(cleanup_older_than=timedelta(seconds=0))
    return table, seconds, first, size(directory / "memories.lance" / "_indices") - before


def search(
    table: lancedb.table.Table, vec: np.ndarray, user: int, *, ann: bool, how: tuple[str | None, int | None]
) -> list[str]:
    mode, factor = how
    where = f"array_has_any(scopes, ['user:u{user}', 'team:core']) AND live"
    query = (
        table.search(vec, vector_column_name="vector").distance_type("cosine").where(where, prefilter=True)
    )
    query = query.select(["id", "_distance", "vector"]).limit(K * factor if mode == "own" and factor else K)
    if ann:
        query = query.minimum_nprobes(NPROBES).maximum_nprobes(0)
        if mode == "lance":
            query = query.refine_factor(factor)
    result = query.to_arrow()
    ids: list[str] = result["id"].to_pylist()
    if mode != "own" or not ids:
        return ids
    matrix = result["vector"].combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(len(ids), DIM)
    matrix = matrix.astype(np.float32)
    cosine = matrix @ vec / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(vec) + 1e-12)
    return [ids[i] for i in np.argsort(-cosine, kind="stable")[:K]]


def whole_store(source: Path, tmp: Path) -> str:
    """The product's maintenance of a copy of a store (``bench/erasure.py --build``): bytes per memory of each
    part before and after, the vector index's type, and how long ``maintain`` took (its index rebuild)."""
    data = tmp / "store"
    log(f"copying {source}")
    shutil.copytree(source, data)
    with Engine.open(data, embedder=CachedEmbedder(MiniLMEmbedder()), warm=False) as eng:
        n = eng.vectors.count()
        before = size(data) / n, parts(data, n), eng.vectors._indexes()[0]
        log(f"maintain ({n:,} memories, vector index {before[2]})")
        start = time.perf_counter()
        eng.reconciler.on_projector(eng.reconciler._maintain)
        seconds = time.perf_counter() - start
        after = size(data) / n, parts(data, n), eng.vectors._indexes()[0]
    closed = size(data) / n, parts(data, n)
    return "\n".join(
        [
            "| store | vector index | bytes per memory | parts |",
            "|---|---|--:|---|",
            f"| as given | {before[2]} | {before[0]:,.0f} | {before[1]} |",
            f"| after `maintain` ({seconds:.1f} s) | {after[2]} | {after[0]:,.0f} | {after[1]} |",
            f"| after close | {after[2]} | {closed[0]:,.0f} | {closed[1]} |",
        ]
    )


def parts(path: Path, n: int) -> str:
    return ", ".join(f"{d.name} {size(d) / n:,.0f}" for d in sorted(path.iterdir()) if d.is_dir())


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--out", type=Path, default=DOC)
    parser.add_argument("--pq", action="store_true", help="IVF_PQ too (its build takes many minutes)")
    parser.add_argument("--embed", action="store_true", help="embed every row's text not cached (slow)")
    parser.add_argument(
        "--store", type=Path, help="instead: maintain a copy of this store; append the result to --out"
    )
    args = parser.parse_args(argv)
    command = shlex.join(["python", "bench/vector_index.py", *(argv if argv is not None else sys.argv[1:])])
    started, load_start = datetime.now(UTC), load()
    if args.store is not None:
        with tempfile.TemporaryDirectory(prefix="mnemograph-vi-") as tmp:
            table_md = whole_store(args.store, Path(tmp))
        print(table_md)
        with args.out.open("a") as out:
            out.write(
                f"\n## The whole store after the product's maintenance\n\nGenerated by `{command}` on "
                f"{started:%Y-%m-%d %H:%M} UTC; load average at start {load_start}, at end {load()}. A copy of "
                "the store, opened by this code and maintained once (the reconciler's `_maintain`).\n\n"
                f"{table_md}\n"
            )
        print(f"appended to {args.out}")
        return
    vectors, questions, real = corpus(args.rows, args.cache, args.embed)
    rows = len(vectors)
    results: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mnemograph-vi-") as tmp:
        base = Path(tmp) / "base"
        log(f"filling {rows:,} rows")
        fill(base, vectors)
        flat = lancedb.connect(str(base)).open_table("memories")
        table_bytes = size(base)
        exact = [search(flat, q, n % USERS, ann=False, how=PLAIN) for n, q in enumerate(questions)]
        variants: dict[str, tuple[lancedb.table.Table, tuple[str | None, int | None]]] = {}
        built: dict[str, tuple[float, int, int, int]] = {}
        for spec in (s for s in INDEXES if args.pq or not s.name.startswith("IVF_PQ")):
            copy = Path(tmp) / spec.name.replace(" ", "-")
            shutil.copytree(base, copy)
            log(f"building {spec.name}")
            table, seconds, first, index_bytes = build(copy, spec, rows)
            built[spec.name] = (seconds, first, index_bytes, size(copy))
            for how in spec.variants:
                mode, factor = how
                suffix = {None: "", "lance": f", refine ×{factor}", "own": f", own re-rank ×{factor}"}[mode]
                variants[spec.name + suffix] = (table, how)
        labels = list(variants)
        overlap: dict[str, list[tuple[float, float]]] = {label: [] for label in labels}
        times: dict[str, list[float]] = {label: [] for label in labels}
        for rep in range(2):  # the first pass warms caches; only the second is timed
            for n, q in enumerate(questions):
                for label in labels if n % 2 == 0 else reversed(labels):
                    table, how = variants[label]
                    start = time.perf_counter()
                    ids = search(table, q, n % USERS, ann=True, how=how)
                    elapsed = time.perf_counter() - start
                    if rep == 1:
                        times[label].append(elapsed)
                        truth = exact[n]
                        overlap[label].append(
                            (
                                len(set(ids[:10]) & set(truth[:10])) / max(1, min(10, len(truth))),
                                len(set(ids) & set(truth)) / max(1, len(truth)),
                            )
                        )
        lat = {label: Latency.of(times[label]) for label in labels}
        ref = lat[labels[0]]
        for label in labels:
            seconds, first, index_bytes, total = built[
                next(s.name for s in INDEXES if label.split(",")[0] == s.name)
            ]
            top10, top50 = (float(np.mean([o[i] for o in overlap[label]])) for i in (0, 1))
            store = OTHER_BYTES + total / rows
            results.append(
                f"| {label} | {index_bytes / rows:,.0f} ({first / rows:,.0f}) | {total / rows:,.0f} | {store:,.0f}"
                f"{' ✓' if store <= TARGET else ''} | {top10:.4f} | {top50:.4f} | {lat[label].p50:.1f} / "
                f"{lat[label].p95:.1f} | {lat[label].p50 / ref.p50:.2f}× / {lat[label].p95 / ref.p95:.2f}× "
                f"| {seconds:.1f} |"
            )
    table_md = "\n".join(
        [
            "| index, query | index B/memory (right after the build) | vector table B/memory | store B/memory | top 10 | top 50 "
            "| p50 / p95 ms | ÷ IVF_FLAT | build s |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
            *results,
        ]
    )
    print(table_md)
    l1, l2 = load_start, load()
    previous = args.out.read_text() if args.out.exists() else ""
    kept = previous.split(KEEP, 1)[1] if KEEP in previous else "\n"
    args.out.write_text(
        "# Vector index types past the ANN threshold\n\n"
        f"Generated by `{command}` on {started:%Y-%m-%d %H:%M} UTC.\n\n"
        f"- Machine: {', '.join(f'{k} {v}' for k, v in machine().items())}\n"
        f"- Load average (1/5/15 min) at start: {l1}; at end: {l2}. Compare rows of the same run.\n"
        f"- {rows:,} MiniLM vectors of `Sentences(7)` memories (bench/core.py's generator): {real:,} embedded "
        f"from their own text, {rows - real:,} a normalised blend of two of those (60-90% of one: a paraphrase's "
        f"place); {QUERIES} of the generator's questions, embedded. One table filled through `VectorIndex` and `maintain`, copied once per index type. "
        f"Table without a vector index: {table_bytes / rows:,.0f} B/memory.\n"
        f"- Search: the vector lane's (one user's scope plus the team scope, live, k = {K}, vectors returned, at "
        f"least {NPROBES} partitions probed, {max(1, rows // PARTITION_ROWS)} partitions built). Top 10 / top 50: "
        "mean share of the exact (flat, same filter) top 10 / top 50 that the index returns.\n"
        f"- Store B/memory: the vector table plus the rest of the 100,000-memory store after `maintain` "
        f"({OTHER_BYTES:,} B: graph 2,931, text 115, docs/benchmarks/scale.md); target {TARGET:,} (✓).\n"
        "- Build: `create_index` plus the optimisation that drops old versions, as `maintain` runs them.\n\n"
        f"{table_md}\n\n{KEEP}{kept}"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
