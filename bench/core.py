"""Core benchmark: write latency, bulk throughput and recall latency at scale, each beside the bare MiniLM
embedding time measured in the same loop (so machine noise hits both alike).

    python bench/core.py                       # sizes 10k and 100k, writes docs/benchmarks/core.md
    python bench/core.py --quick               # sizes 1k and 5k, ~1-2 minutes, prints only (smoke test)
    python bench/core.py --sizes 10000,100000 --out docs/benchmarks/core.md

Every text written or queried is distinct, so the engine's embedding cache never answers. The bare embedder
is a separate, warmed ``MiniLMEmbedder`` without a cache. Data directories live in a temporary directory that
is removed at the end.
"""

from __future__ import annotations

import argparse
import random
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from _common import PACKAGES, Latency, Sentences, load, machine

from storage import CachedEmbedder, Engine, MiniLMEmbedder, WriteItem
from storage.sync.reconciler import MAINTAIN_EVERY

SEED = 7
USERS = 20
TEAM = "team:core"
KINDS = ("note", "fact", "preference", "event")
DEFAULT_ANN_THRESHOLD = 50_000
NEVER = 10**12  # an ann_threshold no table reaches: flat search only
INGEST_CHUNK = 1024
RECIPES = ("default", "hybrid", "bm25", "vector")
DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "core.md"
KEEP = "<!-- Hand-written notes below this line are kept when bench/core.py rewrites this file. -->"


@dataclass(frozen=True, slots=True)
class Plan:
    sizes: tuple[int, ...]
    single_writes: int
    bulk_batches: int
    recalls: int
    writes_at_size: int
    pool: int | None = None  # embed only this many corpus texts and reuse their vectors (None: embed all)
    mixed: int = 300  # rounds of "one single write, then a recall" per store at size
    warmup: int = 20
    batch: int = 256


FULL = Plan(sizes=(10_000, 100_000), single_writes=300, bulk_batches=8, recalls=200, writes_at_size=100)
QUICK = Plan(
    sizes=(1_000, 5_000),
    single_writes=60,
    bulk_batches=2,
    recalls=40,
    writes_at_size=20,
    pool=1_000,
    mixed=40,
)


@dataclass(frozen=True, slots=True)
class Row:
    """A latency measurement beside the bare embedding latency taken in the same loop."""

    what: str
    size: int
    latency: Latency
    embed: Latency


@dataclass(frozen=True, slots=True)
class Rate:
    what: str
    items: int
    acked: float  # memories/s until write_many returned (canonical commit)
    visible: float  # memories/s until the projections caught up (recallable)
    embed: float | None = None  # bare batch embedding, texts/s, same batches


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    rates: list[Rate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def log(msg: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def user(i: int) -> str:
    return f"user:u{i % USERS:02d}"


def open_engine(path: Path, model: MiniLMEmbedder, ann_threshold: int = DEFAULT_ANN_THRESHOLD) -> Engine:
    """The production configuration (a cache over MiniLM), sharing one loaded model between engines."""
    return Engine.open(path, embedder=CachedEmbedder(model), warm=False, ann_threshold=ann_threshold)


def settle(e: Engine) -> None:
    while not e.reconciler.wait_projected(60):
        log("waiting for the projections to catch up ...")


def make_scopes(e: Engine) -> None:
    """Twenty users under one team: recalling in a user scope also searches the shared team scope."""
    for j in range(USERS):
        e.create_scope(user(j), parent=TEAM)


def elapsed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# -- writes -----------------------------------------------------------------------------------------------


def interleave(
    rounds: range, probes: dict[str, Callable[[int], object]], seed: int
) -> dict[str, list[float]]:
    """Call every probe with each round's number, in a fresh random order each round; seconds per call."""
    rng = random.Random(seed)
    names = list(probes)
    out: dict[str, list[float]] = {name: [] for name in names}
    for i in rounds:
        rng.shuffle(names)
        for name in names:
            start = time.perf_counter()
            probes[name](i)
            out[name].append(time.perf_counter() - start)
    return out


class Settled:
    """Runs a write, then lets the projections settle, so the next probe runs on a quiet machine.

    ``acked`` keeps the time until the write returned (canonical commit); the probe's own time, as measured
    by ``interleave``, runs until the write is recallable.
    """

    def __init__(self, e: Engine) -> None:
        self.e = e
        self.acked: list[float] = []

    def __call__(self, write: Callable[[], object]) -> None:
        start = time.perf_counter()
        write()
        self.acked.append(time.perf_counter() - start)
        settle(self.e)


def single_writes(e: Engine, bare: MiniLMEmbedder, texts: Sequence[str], size: int) -> list[Row]:
    """Sequential ``Engine.write`` calls, each beside a bare embedding of the same text."""
    write = Settled(e)
    probes: dict[str, Callable[[int], object]] = {
        "embed": lambda i: bare.embed([texts[i]]),
        "write": lambda i: write(lambda: e.write(texts[i], [user(i)], kind=KINDS[i % len(KINDS)])),
    }
    times = interleave(range(len(texts)), probes, seed=size)
    embed = Latency.of(times["embed"])
    return [
        Row("single write (acknowledged)", size, Latency.of(write.acked), embed),
        Row("single write (until recallable)", size, Latency.of(times["write"]), embed),
    ]


def bulk_writes(e: Engine, bare: MiniLMEmbedder, src: Sentences, plan: Plan) -> list[Rate]:
    """``write_many`` batches with embedding and with vectors supplied, beside a bare embed of a batch."""
    n, total = plan.batch, plan.bulk_batches * plan.batch
    plain, given = src.memories(total), src.memories(total)
    vectors = bare.embed(given)  # untimed: with vectors supplied only the write is measured
    with_embedding, with_vectors = Settled(e), Settled(e)

    def batch(texts: list[str], b: int, vectors: np.ndarray | None = None) -> list[WriteItem]:
        return [
            WriteItem(
                texts[i], [user(i)], KINDS[i % len(KINDS)], vector=None if vectors is None else vectors[i]
            )
            for i in range(b * n, (b + 1) * n)
        ]

    probes: dict[str, Callable[[int], object]] = {
        "embed": lambda b: bare.embed(plain[b * n : (b + 1) * n]),
        "plain": lambda b: with_embedding(lambda: e.write_many(batch(plain, b))),
        "given": lambda b: with_vectors(lambda: e.write_many(batch(given, b, vectors))),
    }
    times = interleave(range(plan.bulk_batches), probes, seed=SEED)
    return [
        Rate(
            f"write_many × {n}, engine embeds",
            total,
            total / sum(with_embedding.acked),
            total / sum(times["plain"]),
            total / sum(times["embed"]),
        ),
        Rate(
            f"write_many × {n}, vectors supplied",
            total,
            total / sum(with_vectors.acked),
            total / sum(times["given"]),
        ),
    ]


def ingest(e: Engine, texts: Sequence[str], vectors: np.ndarray) -> Rate:
    """Load a store as fast as it takes it: pipelined ``write_many`` chunks, vectors supplied."""
    rng = random.Random(len(texts))
    start = time.perf_counter()
    for lo in range(0, len(texts), INGEST_CHUNK):
        items = [
            WriteItem(
                texts[i],
                [TEAM if rng.random() < 0.1 else user(rng.randrange(USERS))],
                KINDS[i % 4],
                vector=vectors[i],
            )
            for i in range(lo, min(lo + INGEST_CHUNK, len(texts)))
        ]
        e.write_many(items)
        if (lo // INGEST_CHUNK) % 10 == 9:
            log(f"  ingested {lo + len(items):,} of {len(texts):,}")
    acked = time.perf_counter() - start
    settle(e)
    visible = time.perf_counter() - start
    return Rate(
        f"ingest {len(texts):,}, pipelined chunks of {INGEST_CHUNK}, vectors supplied",
        len(texts),
        len(texts) / acked,
        len(texts) / visible,
    )


# -- recall -----------------------------------------------------------------------------------------------


def recall_probe(e: Engine, queries: list[str], recipe: str, empty: list[int]) -> Callable[[int], object]:
    def probe(i: int) -> None:
        if not e.recall(queries[i], [user(i)], k=10, recipe=recipe):
            empty[0] += 1

    return probe


def recall_rows(
    labelled: dict[str, tuple[Engine, str]], bare: MiniLMEmbedder, src: Sentences, plan: Plan, size: int
) -> tuple[list[Row], int]:
    """Recall latency per (engine, recipe) label beside the bare embedding of a query, interleaved.

    Each probe has its own distinct questions, so the engine's embedding cache never answers.
    """
    empty = [0]
    probes: dict[str, Callable[[int], object]] = {
        label: recall_probe(e, src.questions(plan.warmup + plan.recalls), recipe, empty)
        for label, (e, recipe) in labelled.items()
    }
    asked = src.questions(plan.warmup + plan.recalls)
    probes["embed"] = lambda i: bare.embed([asked[i]])
    interleave(range(plan.recalls, plan.recalls + plan.warmup), probes, seed=size + 1)  # warm-up
    empty[0] = 0
    times = interleave(range(plan.recalls), probes, seed=size)
    embed = Latency.of(times.pop("embed"))
    return [Row(label, size, Latency.of(t), embed) for label, t in times.items()], empty[0]


def reindex(e: Engine) -> float:
    """Rebuild the projections from the canonical store: one compact vector table, with an ANN index only
    when the engine's ``ann_threshold`` is reached. Seconds taken."""
    start = time.perf_counter()
    if not e.reindex().ok:
        raise RuntimeError("the stores disagree after reindex")
    return time.perf_counter() - start


@dataclass(frozen=True, slots=True)
class Kit:
    """What every stage of a run shares: the plan, the text source, and the two loaded models."""

    plan: Plan
    src: Sentences
    bare: MiniLMEmbedder  # for the bare-embedding baselines
    model: MiniLMEmbedder  # behind every engine's CachedEmbedder


def at_size(tmp: Path, size: int, texts: list[str], vectors: np.ndarray, kit: Kit) -> Results:
    """Ingest ``size`` memories, then measure recall as ingested, and reindexed flat vs. ANN side by side."""
    plan, src, bare, model = kit.plan, kit.src, kit.bare, kit.model
    res = Results()
    path, ann_path = tmp / f"n{size}", tmp / f"n{size}-ann"
    log(f"{size:,}: ingesting")
    with open_engine(path, model) as e:
        make_scopes(e)
        res.rates.append(ingest(e, texts[:size], vectors[:size]))
        log(f"{size:,}: recall as ingested (the engine's own maintenance only)")
        rows, empty = recall_rows(
            {f"recall {r}, as ingested": (e, r) for r in RECIPES}, bare, src, plan, size
        )
        res.rows += rows
        log(f"{size:,}: single writes into the loaded store")
        res.rows += single_writes(e, bare, src.memories(plan.writes_at_size), size)
    shutil.copytree(path, ann_path)
    threshold = min(DEFAULT_ANN_THRESHOLD, size)
    with open_engine(path, model, NEVER) as flat, open_engine(ann_path, model, threshold) as ann:
        log(f"{size:,}: reindexing a flat copy and an ANN copy")
        flat_s, ann_s = reindex(flat), reindex(ann)
        lowered = "" if threshold == DEFAULT_ANN_THRESHOLD else ", lowered from the default"
        res.notes.append(
            f"{size:,}: reindex without a vector index took {flat_s:.1f} s; with the IVF_FLAT build "
            f"(ann_threshold {threshold:,}{lowered}) {ann_s:.1f} s."
        )
        log(f"{size:,}: recall, reindexed flat vs. ANN")
        labelled = {
            "recall default, reindexed, flat": (flat, "default"),
            "recall default, reindexed, ANN": (ann, "default"),
            "recall vector, reindexed, flat": (flat, "vector"),
            "recall vector, reindexed, ANN": (ann, "vector"),
        }
        rows, empty2 = recall_rows(labelled, bare, src, plan, size)
        res.rows += rows
    if empty + empty2:
        res.notes.append(f"{size:,}: {empty + empty2} recalls returned no hit.")
    shutil.rmtree(path)
    log(f"{size:,}: recall after single writes, compaction by fragments vs. every {MAINTAIN_EVERY:,} changes")
    old_rule = tmp / f"n{size}-every-{MAINTAIN_EVERY}"
    shutil.copytree(ann_path, old_rule)
    with open_engine(ann_path, model, threshold) as now, open_engine(old_rule, model, threshold) as before:
        before.reconciler.maintain_fragments = before.reconciler.idle_fragments = NEVER
        engines = {
            "recall default, a single write before each, compaction by fragments": now,
            f"recall default, a single write before each, compaction every {MAINTAIN_EVERY:,} changes": before,
        }
        res.rows += mixed_rows(engines, bare, src, plan.mixed, size)
    shutil.rmtree(ann_path)
    shutil.rmtree(old_rule)
    return res


def mixed_rows(
    engines: dict[str, Engine], bare: MiniLMEmbedder, src: Sentences, n: int, size: int
) -> list[Row]:
    """An agent's pattern: each round writes one memory into each store and waits until it is recallable and
    the maintenance it set off is done (timed: "single write + maintenance"), then times a default recall in
    each and a bare embedding, in a shuffled order. Maintenance never overlaps a timed recall of either store."""
    texts = {label: src.memories(n) for label in engines}
    asked = {label: src.questions(n) for label in engines}
    said = src.questions(n)
    writes: dict[str, list[float]] = {label: [] for label in engines}
    times: dict[str, list[float]] = {label: [] for label in [*engines, "embed"]}
    rng = random.Random(size + 2)
    for i in range(n):
        for label, e in engines.items():
            start = time.perf_counter()
            e.write(texts[label][i], [user(i)])
            settle(e)
            e.reconciler.on_projector(lambda: None)  # and whatever maintenance followed the projection
            writes[label].append(time.perf_counter() - start)
        order = list(times)
        rng.shuffle(order)
        for label in order:
            start = time.perf_counter()
            if label == "embed":
                bare.embed([said[i]])
            else:
                engines[label].recall(asked[label][i], [user(i)], k=10)
            times[label].append(time.perf_counter() - start)
    embed = Latency.of(times.pop("embed"))
    rows = [Row(label, size, Latency.of(t), embed) for label, t in times.items()]
    rows += [
        Row(
            label.replace("recall default, a single write before each", "single write + maintenance"),
            size,
            Latency.of(t),
            embed,
        )
        for label, t in writes.items()
    ]
    return rows


# -- the run and the report ---------------------------------------------------------------------------------


def embed_corpus(
    bare: MiniLMEmbedder, texts: list[str], pool: int | None, cache: Path | None = None
) -> tuple[np.ndarray, str]:
    """Vectors for the corpus: every text embedded for real, or a pool whose vectors are reused cyclically.

    With ``cache``, corpus vectors come from (and go to) a persistent embedding cache: the corpus is seeded, so a
    rerun skips embedding it. The texts that are timed (single writes, queries) never come from the cache.
    """
    n = len(texts) if pool is None else min(pool, len(texts))
    if cache is not None:
        from _embcache import DiskCache

        disk = DiskCache(cache, bare)
        todo = len(disk.missing(texts[:n]))
        log(f"corpus vectors from {disk.dir}: {n - todo:,} cached, embedding {todo:,}")
        disk.fill(texts[:n])
        vectors = disk.vectors(texts[:n]).astype(np.float32)
        return vectors[np.arange(len(texts)) % n], (
            f"The {n:,} corpus vectors came from the embedding cache `{cache}` ({todo:,} embedded in this run, "
            "for real, by the bare embedder); the timed writes and queries are embedded afresh."
        )
    log(f"embedding {n:,} corpus texts with the bare embedder")
    start = time.perf_counter()
    vectors = np.concatenate([bare.embed(texts[lo : min(lo + 10_000, n)]) for lo in range(0, n, 10_000)])
    rate = n / (time.perf_counter() - start)
    if n == len(texts):
        return vectors, (
            f"All {n:,} corpus memories were embedded for real ({rate:,.0f} texts/s, bare embedder, batches "
            f"of 64); smaller sizes use a prefix of that corpus."
        )
    return vectors[np.arange(len(texts)) % n], (
        f"Only {n:,} of the {len(texts):,} corpus memories were embedded ({rate:,.0f} texts/s); the others "
        "reuse those vectors cyclically, so vector latency is representative but vector relevance is not."
    )


def run(plan: Plan, cache: Path | None = None) -> Results:
    src = Sentences(SEED)
    bare, model = MiniLMEmbedder(), MiniLMEmbedder()
    bare.warm()
    model.warm()
    res = Results()
    with tempfile.TemporaryDirectory(prefix="mnemograph-bench-") as tmp:
        log("single writes into a fresh store")
        with open_engine(Path(tmp) / "writes", model) as e:
            make_scopes(e)
            single_writes(e, bare, src.memories(plan.warmup), 0)
            res.rows += single_writes(e, bare, src.memories(plan.single_writes), 0)
            log("bulk writes")
            res.rates += bulk_writes(e, bare, src, plan)
        texts = src.memories(max(plan.sizes))
        vectors, note = embed_corpus(bare, texts, plan.pool, cache)
        res.notes.append(note)
        kit = Kit(plan, src, bare, model)
        for n in plan.sizes:
            part = at_size(Path(tmp), n, texts, vectors, kit)
            res.rows += part.rows
            res.rates += part.rates
            res.notes += part.notes
    return res


def table(res: Results) -> str:
    lines = [
        "| measurement | store size | n | p50 ms | p95 ms | bare embed p50 ms | p50 ÷ embed p50 | p95 ÷ embed p50 |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in res.rows:
        lat, emb = r.latency, r.embed
        lines.append(
            f"| {r.what} | {f'{r.size:,}' if r.size else 'fresh'} | {lat.n} | {lat.p50:.1f} | {lat.p95:.1f} | {emb.p50:.1f} "
            f"| {lat.p50 / emb.p50:.2f}× | {lat.p95 / emb.p50:.2f}× |"
        )
    lines += [
        "",
        "| throughput | memories | acknowledged /s | recallable /s | bare batch embed texts/s |",
        "|---|--:|--:|--:|--:|",
    ]
    for t in res.rates:
        embed = f"{t.embed:,.0f}" if t.embed else "–"
        lines.append(f"| {t.what} | {t.items:,} | {t.acked:,.0f} | {t.visible:,.0f} | {embed} |")
    return "\n".join(lines)


def row(res: Results, what: str, size: int) -> Row:
    return next(r for r in res.rows if r.what == what and r.size == size)


def verdicts(res: Results) -> list[str]:
    """Each target, with its ratio, met or missed; then how the costs move with store size."""
    write = row(res, "single write (acknowledged)", 0)
    ratio = write.latency.p50 / write.embed.p50
    out = [
        f"- **Write p50 ≤ 2× single-text embedding p50: {'met' if ratio <= 2 else 'missed'}.** Write p50 "
        f"{write.latency.p50:.1f} ms vs. embedding p50 {write.embed.p50:.1f} ms = {ratio:.2f}× (fresh store)."
    ]
    top = max(r.size for r in res.rows)
    for what in ("recall default, as ingested", "recall default, reindexed, ANN"):
        r = row(res, what, top)
        ratio = r.latency.p95 / r.embed.p50
        scale = (
            "" if top == 100_000 else f" (the target is set at 100,000; this run's largest size is {top:,})"
        )
        out.append(
            f"- **Recall p95 ≤ 3× query embedding ({what}, {top:,} memories): "
            f"{'met' if ratio <= 3 else 'missed'}.** p95 {r.latency.p95:.1f} ms vs. embedding p50 "
            f"{r.embed.p50:.1f} ms = {ratio:.2f}× (p95 ÷ embedding p95: {r.latency.p95 / r.embed.p95:.2f}×){scale}."
        )
    big = row(res, "single write (acknowledged)", top)
    ratio = big.latency.p50 / big.embed.p50
    out.append(
        f"- Single writes into the loaded store: acknowledged p50 {write.latency.p50:.1f} ms fresh vs. "
        f"{big.latency.p50:.1f} ms at {top:,} = {ratio:.2f}× embedding p50 "
        f"(the write target {'holds' if ratio <= 2 else 'would be missed'} there)."
    )
    flat, ann = (
        row(res, "recall default, reindexed, flat", top),
        row(res, "recall default, reindexed, ANN", top),
    )
    bm25 = [
        row(res, "recall bm25, as ingested", n).latency.p50 for n in sorted({r.size for r in res.rows} - {0})
    ]
    out.append(
        f"- At {top:,}, the IVF_FLAT index takes default recall p50 from {flat.latency.p50:.1f} ms (flat) to "
        f"{ann.latency.p50:.1f} ms ({ann.latency.p50 / flat.latency.p50:.2f}×). BM25-only recall p50 across "
        f"sizes: {' → '.join(f'{x:.1f}' for x in bm25)} ms."
    )
    ingest = [t for t in res.rates if t.what.startswith("ingest")]
    out.append(
        "- Ingestion with vectors supplied: "
        + ", ".join(f"{t.visible:,.0f}/s for {t.items:,}" for t in ingest)
        + " (recallable rate, whole load)."
    )
    return out


def report(
    res: Results, plan: Plan, command: str, started: datetime, loads: tuple[str, str], previous: str
) -> str:
    import torch  # loaded by then; imported here so that the embedder's OpenMP defaults apply to the run

    info = machine()
    versions = ", ".join(f"{k} {info[k]}" for k in PACKAGES)
    kept = previous.split(KEEP, 1)[1] if KEEP in previous else "\n"
    return f"""# Core benchmark

Generated by `bench/core.py`; do not edit above the marker at the end.

- Command: `{command}`
- Date: {started:%Y-%m-%d %H:%M} UTC
- Machine: {info["cores"]} cores, {info["cpu"]}, {info["ram"]} RAM
- Python {info["python"]}; torch threads {torch.get_num_threads()} (the default); OMP_WAIT_POLICY {info["OMP_WAIT_POLICY"]}
- Versions: {versions}
- Load average (1/5/15 min) at start: {loads[0]}; at end: {loads[1]}. The machine is shared with other
  work: compare rows of the same run, not runs.

## Method

Every latency is beside the bare embedding time of one text (a separate warmed `MiniLMEmbedder`, no cache),
taken in the same loop in alternating or shuffled order, so machine noise hits both. Every text written or
queried is distinct, so the engine's embedding cache (a `CachedEmbedder`) never answers.

- **Single writes**: sequential `Engine.write` of distinct memory sentences, each let settle (projected) before
  the next step. "Acknowledged" is the call (canonical commit); "until recallable" adds the wait for LanceDB and
  Tantivy. "Fresh" is a new store (after {plan.warmup} warm-up writes); larger sizes write into the loaded store.
- **Bulk**: `write_many` batches, round-robin with a bare embedding of the same batch; each batch settles.
- **Recall**: `Engine.recall(k=10)` in one of 20 user scopes, all children of a shared team scope (about 10% of
  the memories), so each query searches one user's memories plus the team's. Recipes: `default` (all lanes),
  `hybrid` (BM25 + vector), `bm25`, `vector`. "As ingested" is the store as the engine leaves it after loading,
  its own periodic maintenance included (compaction, and an IVF_FLAT index once the table passes
  `ann_threshold`, {DEFAULT_ANN_THRESHOLD:,} by default). "Reindexed, flat" and "reindexed, ANN" are two copies of
  it rebuilt by `Engine.reindex()`, opened with an `ann_threshold` no table reaches and with the default one
  (lowered to the store size below {DEFAULT_ANN_THRESHOLD:,}), so they differ only in the IVF_FLAT index
  (one partition per 2,048 rows at build, at least 16 probed); they are queried side by side.
- **Recall after single writes**: an agent's pattern. Two copies of the ANN store; each round writes one memory
  into each and waits until it is recallable and the maintenance it set off is done (timed: "single write +
  maintenance"), then times a default recall in each and a bare embedding in a shuffled order. One copy runs the engine's rule (small LanceDB fragments compacted once 128 pile up, or from 16
  once writes pause for a second), the other only the rule before it (every 2,000 changes).

## Results

{table(res)}

Notes:

{chr(10).join(f"- {n}" for n in res.notes)}

## What this shows

{chr(10).join(verdicts(res))}

{KEEP}{kept}"""


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (1k, 5k) and fewer samples")
    parser.add_argument("--sizes", help="comma-separated store sizes, e.g. 10000,100000")
    parser.add_argument(
        "--out", type=Path, help="markdown report (default: docs/benchmarks/core.md, none with --quick)"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        help="persistent cache for the (seeded) corpus vectors, e.g. ~/.cache/mnemograph-bench; reruns skip "
        "embedding the corpus",
    )
    args = parser.parse_args(argv)
    # A plain `kill` should still remove the temporary data directories.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    plan = QUICK if args.quick else FULL
    if args.sizes:
        plan = replace(plan, sizes=tuple(int(s) for s in args.sizes.split(",")))
    out = args.out if args.out else (None if args.quick else DOC)
    command = shlex.join(["python", "bench/core.py", *(argv if argv is not None else sys.argv[1:])])
    started, load_start = datetime.now(UTC), load()
    res = run(plan, args.cache)
    print(table(res))
    print("\n".join(verdicts(res)))
    if out is not None:
        previous = out.read_text() if out.exists() else ""
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report(res, plan, command, started, (load_start, load()), previous))
        log(f"wrote {out}")


if __name__ == "__main__":
    main()
