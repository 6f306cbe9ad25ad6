"""What salience costs a recall: latency with salience off (counting accesses or not) and on, in one run.

    python bench/salience.py                       # rewrites the latency section of docs/benchmarks/salience.md
    python bench/salience.py --n 1000 --rounds 3 --out /tmp/s.md   # quick

A store of ``--n`` realistic memories (``_common.Sentences``) in ``user:ana``, their valid-from times spread
over two years (recency then varies). Only ``--pool`` texts are embedded; the others reuse a pool vector with a
little noise (latency does not depend on which vectors they are). Every question is recalled once first (the
query embeddings are cached, and each principal's access counts exist, as after some use). Then, in
``--rounds`` interleaved rounds, every question is timed through ``Engine.recall`` in three states, their
order rotating per round so a change in the machine's load hits all of them alike:

- ``before``: salience off and access counting off: the recall as it was before salience existed;
- ``off``: salience off, counting on (the default): a dict update per result after the answer;
- ``on``: salience on: the caller's counts read from memory and a bonus for the re-scored candidates.

Quoted: p50 and p95 per state over all timed recalls, and the median over rounds of each round's ratio of
p50s to ``before``.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from _common import Latency, Sentences, machine
from _common import load as load_avg

from storage import CachedEmbedder, Engine, MiniLMEmbedder, WriteItem

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "salience.md"
BEGIN, END = "<!-- latency:begin -->", "<!-- latency:end -->"
KINDS = ("fact", "preference", "event", "note")
STATES = ("before", "off", "on")
NOW = datetime(2026, 11, 1, tzinfo=UTC)


def log(msg: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def store(e: Engine, model: MiniLMEmbedder, src: Sentences, n: int, pool: int) -> None:
    texts = src.memories(n)
    base = model.embed(texts[:pool])
    rng = np.random.default_rng(18)
    items = []
    for i, t in enumerate(texts):
        v = base[i % pool] + (rng.normal(0, 0.02, base.shape[1]) if i >= pool else 0)
        when = NOW - timedelta(days=int(rng.integers(0, 730)))
        kind = KINDS[i % len(KINDS)]
        timed = {"event_time": when} if kind == "event" else {"valid_from": when}
        items.append(WriteItem(t, ["user:ana"], kind, vector=v / np.linalg.norm(v), **timed))  # type: ignore[arg-type]
    for lo in range(0, len(items), 1000):
        e.write_many(items[lo : lo + 1000])


def timed(e: Engine, questions: Sequence[str], state: str) -> list[float]:
    e.count_accesses = state != "before"
    out = []
    for q in questions:
        start = time.perf_counter()
        e.recall(q, ["user:ana"], k=10, now=NOW, salience=state == "on")
        out.append(time.perf_counter() - start)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=5_000, help="memories in user:ana")
    p.add_argument("--pool", type=int, default=500, help="texts embedded for real")
    p.add_argument("--questions", type=int, default=40)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=str(DOC))
    args = p.parse_args(argv)
    cmd = " ".join(["python bench/salience.py", *(shlex.quote(a) for a in (argv or sys.argv[1:]))])
    src = Sentences(seed=18)
    model = MiniLMEmbedder()
    times: dict[str, list[float]] = {s: [] for s in STATES}
    ratios: dict[str, list[float]] = {s: [] for s in STATES}
    with tempfile.TemporaryDirectory(prefix="salience-") as tmp:
        e = Engine.open(Path(tmp) / "data", embedder=CachedEmbedder(model), warm=False)
        try:
            log(f"writing {args.n:,} memories ({args.pool} embedded)")
            store(e, model, src, args.n, args.pool)
            e.reconciler.wait_projected()
            questions = src.questions(args.questions)
            timed(e, questions, "off")  # warm-up: query embeddings cached, access counts recorded
            for r in range(args.rounds):
                order = STATES[r % 3 :] + STATES[: r % 3]
                p50: dict[str, float] = {}
                for state in order:
                    t = timed(e, questions, state)
                    times[state] += t
                    p50[state] = statistics.median(t)
                for state in STATES:
                    ratios[state].append(p50[state] / p50["before"])
                log(
                    f"round {r + 1}/{args.rounds}: "
                    + ", ".join(f"{s} {p50[s] * 1000:.1f} ms" for s in STATES)
                )
            counted = e.accesses.total()
        finally:
            e.close()
    write(args, cmd, times, ratios, counted)
    return 0


def write(
    args: argparse.Namespace,
    cmd: str,
    times: dict[str, list[float]],
    ratios: dict[str, list[float]],
    counted: int,
) -> None:
    what = {
        "before": "salience off, no access counting (as before salience existed)",
        "off": "salience off, access counting on (the default)",
        "on": "salience on (`salience=true`)",
    }
    lines = [
        BEGIN,
        "## Recall latency: salience off and on, same run",
        "",
        f"Command: `{cmd}`. Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average {load_avg()} "
        f"(1/5/15 min; the machine is shared). {machine()['cpu']}, {machine().get('cores', '?')} cores.",
        "",
        f"{args.n:,} memories in one scope, {args.questions} questions x {args.rounds} interleaved rounds per "
        f"state through `Engine.recall` (k 10); {counted:,} accesses counted by the end.",
        "",
        "| state | what | recalls | p50 ms | p95 ms | p50 / before (median of rounds) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for s in STATES:
        lat = Latency.of(times[s])
        lines.append(
            f"| {s} | {what[s]} | {lat.n} | {lat.p50:.1f} | {lat.p95:.1f} | {statistics.median(ratios[s]):.3f} |"
        )
    lines += [END]
    section = "\n".join(lines)
    print(section)
    out = Path(args.out)
    text = out.read_text() if out.exists() else ""
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END) :]
    else:
        text = (text.rstrip() + "\n\n" if text else "") + section + "\n"
    out.write_text(text)


if __name__ == "__main__":
    raise SystemExit(main())
