"""What a recall answer costs a model to read, and whether one scope's metadata moves another scope's latency.

    python bench/recall_answer.py                    # writes docs/benchmarks/recall-answer.md
    python bench/recall_answer.py --n 1000 --out /tmp/ra.md   # quick

Bytes: a store of realistic memories (``_common.Sentences``: facts, preferences, events, notes, and a few
long notes of 5 to 30 KB) in ``user:bytes``, every one embedded for real. Each question goes once through the
``recall`` tool (in-memory MCP ``Client`` on the real server, default arguments), and the bytes of the JSON a
model reads (the tool result's text) are counted. Beside it, in the same run, the answer the tool gave before
issue 14 is rebuilt from ``Engine.recall`` hits with the old wire shape (``Legacy*`` below: every field, full
scores, whole content): for the old defaults (``k`` results, no relevance rule, no budget) and for exactly
the results of the new default answer ("same results"). ``explain=true`` is measured too, and the new answer
with every id in full (32 hex characters), then also with ``"stale":false,"warning":null`` as every answer
carried them (both as at 289c7c4), to show what each saving is worth.

Cross-scope latency: ``user:ana`` holds ``--n`` memories; recall there is timed (p50/p95 over the questions)
before and after one memory with ``metadata.session`` is written in ``user:bob`` (before issue 14 that one
memory switched grouping on for every scope), and with ``group_by="session"`` asked for explicitly. The states
are interleaved: each round times "before", writes the memory, times "after" and "group_by", then erases it,
so a change in the machine's load hits both sides of a round alike; the ratio quoted is the median of the
rounds' ratios. Only
``--pool`` corpus texts are embedded; the others reuse a pool vector with a little noise (latency does not
depend on which vectors they are).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import anyio
import numpy as np
from _common import Latency, Sentences, machine
from _common import load as load_avg
from _sdk import Client, Implementation
from pydantic import BaseModel

from server.app import build_server
from storage import CachedEmbedder, Engine, MiniLMEmbedder, WriteItem
from storage.domain.models import Hit, MemoryKind, Status
from storage.recall.recipes import RECIPES
from tools.recall import CUT_CHARS, DEFAULT_TOKEN_BUDGET

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "recall-answer.md"
KINDS = ("fact", "preference", "event", "note")


# -- the answer as it was before issue 14 (tools/recall.py at 0a747b1), rebuilt from the same hits -----------


class LegacyLanes(BaseModel):
    bm25: int | None
    vector: int | None
    graph: int | None


class LegacyTime(BaseModel):
    rule: Literal["in_interval", "near_interval", "outside_interval"]
    expression: str
    interval: list[datetime | None]
    factor: float


class LegacyProvenance(BaseModel):
    principal: str
    client: str
    source: str


class LegacyItem(BaseModel):
    id: str
    content: str
    kind: MemoryKind
    score: float
    lanes: LegacyLanes
    scopes: list[str]
    status: Status
    superseded_by: str | None
    event_time: datetime
    valid_from: datetime
    valid_to: datetime | None
    time: LegacyTime | None
    paths: list[str]
    collapsed: list[str]
    provenance: LegacyProvenance

    @classmethod
    def of(cls, h: Hit) -> LegacyItem:
        m = h.memory
        t = h.time
        return cls(
            id=m.id,
            content=m.content,
            kind=m.kind,
            score=h.score,
            lanes=LegacyLanes(
                bm25=h.lanes.get("bm25"), vector=h.lanes.get("vector"), graph=h.lanes.get("graph")
            ),
            scopes=list(m.scopes),
            status=m.status,
            superseded_by=m.superseded_by,
            event_time=m.event_time,
            valid_from=m.valid_from,
            valid_to=m.valid_to,
            time=LegacyTime(rule=t.rule, expression=t.expression, interval=list(t.interval), factor=t.factor)
            if t
            else None,
            paths=list(h.paths),
            collapsed=list(h.collapsed),
            provenance=LegacyProvenance(
                principal=m.provenance.principal, client=m.provenance.client, source=m.provenance.source
            ),
        )


class LegacyOut(BaseModel):
    results: list[LegacyItem]


def legacy_bytes(hits: Sequence[Hit]) -> int:
    return len(LegacyOut(results=[LegacyItem.of(h) for h in hits]).model_dump_json().encode())


# -- the corpus ---------------------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def long_note(src: Sentences, chars: int) -> str:
    out: list[str] = []
    while sum(len(s) + 1 for s in out) < chars:
        out.extend(src.memories(20))
    return " ".join(out)[:chars]


def bytes_store(e: Engine, model: MiniLMEmbedder, src: Sentences, n: int) -> None:
    texts = src.memories(n) + [long_note(src, c) for c in (5_000, 12_000, 20_000, 30_000)]
    vectors = model.embed(texts)
    e.write_many(
        [
            WriteItem(t, ["user:bytes"], KINDS[i % len(KINDS)], vector=v)
            for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
        ]
    )


def latency_store(e: Engine, model: MiniLMEmbedder, src: Sentences, n: int, pool: int) -> None:
    texts = src.memories(n)
    base = model.embed(texts[:pool])
    rng = np.random.default_rng(7)
    items = []
    for i, t in enumerate(texts):
        v = base[i % pool] + (rng.normal(0, 0.02, base.shape[1]) if i >= pool else 0)
        items.append(WriteItem(t, ["user:ana"], KINDS[i % len(KINDS)], vector=v / np.linalg.norm(v)))
    for lo in range(0, len(items), 1000):
        e.write_many(items[lo : lo + 1000])


# -- measurements -------------------------------------------------------------------------------------------


async def answer_bytes(e: Engine, questions: Sequence[str]) -> dict[str, list[int]]:
    async def source() -> Engine:
        return e

    server = build_server(source, default_scopes=("user:bytes",))
    out: dict[str, list[int]] = {
        "today": [],
        "same": [],
        "compact": [],
        "explain": [],
        "full_ids": [],  # the new answer with 32-character ids
        "at_289c7c4": [],  # and with "stale":false,"warning":null, as every answer had them
        "n_today": [],
        "n_new": [],
        "cut": [],  # 1 when the answer holds a long memory cut short (0 otherwise)
    }
    async with Client(server, mode="legacy", client_info=Implementation(name="bench", version="1")) as c:
        for q in questions:
            res = await c.call_tool("recall", {"query": q})
            text = res.content[0].text  # type: ignore[union-attr]
            ids = [r["id"] for r in json.loads(text)["results"]]
            explained = await c.call_tool("recall", {"query": q, "explain": True})
            hits = await anyio.to_thread.run_sync(
                lambda q=q: e.recall(
                    q, ["user:bytes"], k=10, token_budget=DEFAULT_TOKEN_BUDGET, cut_chars=CUT_CHARS
                )
            )
            assert [h.memory.id[: len(i)] for h, i in zip(hits, ids, strict=True)] == ids, "tool != engine"
            out["full_ids"].append(with_full_ids(text, [h.memory.id for h in hits]))
            out["at_289c7c4"].append(with_full_ids(text, [h.memory.id for h in hits], stale_fields=True))
            old = await anyio.to_thread.run_sync(
                lambda q=q: e.recall(
                    q, ["user:bytes"], k=10, recipe=RECIPES["default"].with_(relevance_floor=0.0)
                )
            )
            out["today"].append(legacy_bytes(old))
            out["same"].append(legacy_bytes(hits))
            out["compact"].append(len(text.encode()))
            out["explain"].append(len(explained.content[0].text.encode()))  # type: ignore[union-attr]
            out["n_today"].append(len(old))
            out["n_new"].append(len(ids))
            out["cut"].append(int(any(len(h.memory.content) > CUT_CHARS for h in hits)))
    return out


def with_full_ids(text: str, full: Sequence[str], stale_fields: bool = False) -> int:
    """Bytes of the answer ``text`` with each result's short id in full (and, with ``stale_fields``, the
    ``stale`` and ``warning`` fields every answer used to carry)."""
    data = json.loads(text)
    for r, f in zip(data["results"], full, strict=True):
        r["id"] = f
    if stale_fields:
        data = {"results": data["results"], "stale": data.get("stale", False), "warning": data.get("warning")}
    out = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    # (ids quoted in a reason, an earlier version's or a digest's, were 8 characters at 289c7c4: left as shown)
    return len(out.encode())


def timed(e: Engine, questions: Sequence[str], group_by: str | None = None) -> Latency:
    times = []
    for q in questions:
        start = time.perf_counter()
        e.recall(q, ["user:ana"], k=10, group_by=group_by)
        times.append(time.perf_counter() - start)
    return Latency.of(times)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=5_000, help="memories in user:ana (latency)")
    p.add_argument("--pool", type=int, default=500, help="corpus texts embedded for real (latency store)")
    p.add_argument("--bytes-n", type=int, default=300, help="memories in user:bytes (all embedded)")
    p.add_argument("--questions", type=int, default=40)
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (one timed pass per state each)")
    p.add_argument("--out", default=str(DOC))
    args = p.parse_args(argv)
    cmd = "python bench/recall_answer.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    src = Sentences(seed=14)
    model = MiniLMEmbedder()
    with tempfile.TemporaryDirectory(prefix="recall-answer-") as tmp:
        e = Engine.open(Path(tmp) / "data", embedder=CachedEmbedder(model), warm=False)
        try:
            log(f"writing {args.bytes_n} memories (+4 long notes) to user:bytes")
            bytes_store(e, model, src, args.bytes_n)
            log(f"writing {args.n:,} memories to user:ana ({args.pool} embedded)")
            latency_store(e, model, src, args.n, args.pool)
            e.reconciler.wait_projected()
            questions = src.questions(args.questions)
            model.embed(questions)  # warm
            log("bytes per answer")
            sizes = anyio.run(answer_bytes, e, questions)
            log("latency in user:ana")
            timed(e, questions[:5])  # warm-up
            rows: dict[str, list[Latency]] = {"before": [], "after": [], "group_by": []}
            for r in range(args.rounds):
                rows["before"].append(timed(e, questions))
                bob = e.write(
                    f"Unrelated: the printer is out of toner ({r}).",
                    ["user:bob"],
                    metadata={"session": "s-1"},
                ).id
                e.reconciler.wait_projected()
                rows["after"].append(timed(e, questions))
                rows["group_by"].append(timed(e, questions, group_by="session"))
                e.erase(bob, confirm=bob, reason="bench: back to the state before")
                e.reconciler.wait_projected()
        finally:
            e.close()
    report(args, cmd, sizes, rows)
    return 0


def report(
    args: argparse.Namespace, cmd: str, sizes: dict[str, list[int]], rows: dict[str, list[Latency]]
) -> None:
    med = {k: statistics.median(v) for k, v in sizes.items()}
    ratio = med["compact"] / med["same"]
    # Long memories dominate the old shape's bytes (they came back whole), so the ratio is also given per
    # question and for the answers made only of short memories, where the saving is the shape itself.
    per_q = [c / s for c, s in zip(sizes["compact"], sizes["same"], strict=True)]
    short = [r for r, cut in zip(per_q, sizes["cut"], strict=True) if not cut]
    lines = [
        "# Recall answer size and cross-scope latency",
        "",
        f"Command: `{cmd}`. Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average {load_avg()} "
        f"(1/5/15 min; the machine is shared). {machine()['cpu']}",
        "",
        "## Bytes per answer (the JSON text a model reads), median over "
        f"{len(sizes['compact'])} questions, {args.bytes_n} memories + 4 long notes",
        "",
        "| answer | median bytes | vs. old shape, same results | results (median) |",
        "|---|---:|---:|---:|",
        f"| before issue 14: old shape, old defaults (k 10, no relevance rule or budget) | {med['today']:,.0f} | "
        f"{med['today'] / med['same']:.2f} | {med['n_today']:.0f} |",
        f"| old shape, the same results as the new default | {med['same']:,.0f} | 1.00 | {med['n_new']:.0f} |",
        f"| **new default (compact)** | **{med['compact']:,.0f}** | **{ratio:.2f}** | {med['n_new']:.0f} |",
        f"| the compact answer at 289c7c4: 32-character ids, `stale`/`warning` always sent | "
        f"{med['at_289c7c4']:,.0f} | {med['at_289c7c4'] / med['same']:.2f} | {med['n_new']:.0f} |",
        f"| new, but with 32-character ids | {med['full_ids']:,.0f} | {med['full_ids'] / med['same']:.2f} | "
        f"{med['n_new']:.0f} |",
        f"| new, `explain=true` (full ids) | {med['explain']:,.0f} | {med['explain'] / med['same']:.2f} | "
        f"{med['n_new']:.0f} |",
        "",
        f"Target: the compact answer at most 0.40 of the old shape for the same results: **{ratio:.2f}**. "
        f"Against the old default answer the new one is {med['compact'] / med['today']:.2f} of the bytes.",
        "",
        f"Per question, compact ÷ old shape for the same results: median **{statistics.median(per_q):.2f}** "
        f"(max {max(per_q):.2f}); over the {len(short)} answers holding no long memory (the shape alone): median "
        + (f"**{statistics.median(short):.2f}** (max {max(short):.2f})." if short else "none."),
        "",
        f"## Recall latency in `user:ana` ({args.n:,} memories), ms, {args.questions} questions x {args.rounds} "
        "interleaved rounds",
        "",
        "| state | p50 (median of rounds) | p95 (median of rounds) |",
        "|---|---:|---:|",
    ]
    what = {
        "before": "before any memory with `metadata.session` exists",
        "after": "after one memory with `metadata.session` is written in `user:bob`",
        "group_by": 'same, with `group_by="session"` asked for in `user:ana`',
    }
    p50 = {k: statistics.median(x.p50 for x in v) for k, v in rows.items()}
    # Each round's states ran back to back, so their ratio is what load swings disturb least.
    paired = {
        k: statistics.median(a.p50 / b.p50 for a, b in zip(rows[k], rows[base], strict=True))
        for k, base in (("after", "before"), ("group_by", "after"))
    }
    spread = [a.p50 / b.p50 for a, b in zip(rows["after"], rows["before"], strict=True)]
    for k, v in rows.items():
        lines.append(f"| {what[k]} | {p50[k]:.1f} | {statistics.median(x.p95 for x in v):.1f} |")
    lines += [
        "",
        f"Another scope's metadata: p50 after / before, median of the {len(spread)} rounds' ratios = "
        f"**{paired['after']:.2f}** (rounds {min(spread):.2f} to {max(spread):.2f}; 1.00 = no effect; before "
        f"issue 14 this was 3.7 at 5,000 memories). Grouping asked for explicitly costs "
        f"{paired['group_by']:.2f}x, in the calling scope only.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    raise SystemExit(main())
