"""Near-duplicates by content at write time: precision and recall on the hand-written pairs, and the check's cost.

    python bench/near_duplicates.py               # writes docs/benchmarks/near-duplicates.md
    python bench/near_duplicates.py --memories 0  # quality only

Quality: each pair of ``tests/storage/data/near_duplicate_pairs.jsonl`` (the set the threshold and the guard
were chosen on) and ``near_duplicate_heldout.jsonl`` (written afterwards, not tuned on) is written through
``Engine.write`` into a scope of its own, the second text with ``on_near_duplicate="fold"``; a pair is found
when the second write folds into the first. Precision and recall against the hand labels, and every miss.

Cost: one store holding ``--memories`` realistic memories in one scope (``_common.Sentences``, embedded before
the timed calls); then new memories written one at a time, alternating the write with the check (``write``)
and without it (``write_many`` with ``near=None``, the path imports take), the projections settled (untimed)
after each. Medians and their ratio, in the same run.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import Sentences, load, machine  # noqa: E402

from storage import CachedEmbedder, Engine, MiniLMEmbedder, WriteItem  # noqa: E402

DATA = ROOT / "tests" / "storage" / "data"
SETS = (("calibration", "near_duplicate_pairs.jsonl"), ("held-out", "near_duplicate_heldout.jsonl"))


def quality(engine: Engine) -> tuple[list[str], list[str]]:
    rows, misses = [], []
    for name, file in SETS:
        pairs = [json.loads(x) for x in (DATA / file).read_text().splitlines() if x.strip()]
        tp = fp = fn = 0
        for n, pair in enumerate(pairs):
            scope = f"user:{name.replace('-', '')}{n}"
            engine.write(pair["a"], [scope])
            got = engine.write(pair["b"], [scope], on_near_duplicate="fold")
            found = got.status == "folded"
            tp += found and pair["near"]
            fp += found and not pair["near"]
            fn += pair["near"] and not found
            if found != pair["near"]:
                cos = f" (cosine {got.near_duplicates[0][1]:.3f})" if got.near_duplicates else ""
                what = "false positive" if found else "missed"
                misses.append(f"- {name}, {what}: '{pair['a']}' / '{pair['b']}'{cos}")
        positives, negatives = sum(p["near"] for p in pairs), sum(not p["near"] for p in pairs)
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / positives if positives else 1.0
        rows.append(f"| {name} | {positives} | {negatives} | {tp} | {fp} | {precision:.2f} | {recall:.2f} |")
    return rows, misses


def cost(engine: Engine, memories: int, writes: int) -> tuple[list[float], list[float]]:
    sentences = Sentences(seed=15)
    stored, fresh = sentences.memories(memories), sentences.memories(2 * writes)
    engine.embedder.embed(stored + fresh)
    engine.write_many([WriteItem(t, ["user:bench"]) for t in stored])
    engine.reconciler.wait_projected()
    on: list[float] = []
    off: list[float] = []
    for n, text in enumerate(fresh):
        start = time.perf_counter()
        if n % 2 == 0:
            engine.write(text, ["user:bench"], on_near_duplicate="report")
        else:  # what the default ``store`` does too
            engine.write_many([WriteItem(text, ["user:bench"])])
        (on if n % 2 == 0 else off).append((time.perf_counter() - start) * 1000)
        engine.reconciler.wait_projected()
    return on, off


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memories", type=int, default=2000, help="memories in the scope before timing (0: skip)")
    p.add_argument("--writes", type=int, default=150, help="timed writes per variant")
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "near-duplicates.md"))
    args = p.parse_args(argv)
    emb = CachedEmbedder(MiniLMEmbedder())
    emb.warm()
    with tempfile.TemporaryDirectory() as d:
        engine = Engine.open(Path(d) / "q", embedder=emb, warm=False)
        rows, misses = quality(engine)
        engine.close()
    table = [
        "| pairs | paraphrases | hard negatives | found | false positives | precision | recall |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *rows,
    ]
    print("\n".join(table))
    timing: list[str] = []
    if args.memories:
        with tempfile.TemporaryDirectory() as d:
            engine = Engine.open(Path(d) / "c", embedder=emb, warm=False)
            on, off = cost(engine, args.memories, args.writes)
            engine.close()
        m_on, m_off = statistics.median(on), statistics.median(off)
        timing = [
            "| write | calls | median ms | p90 ms | median / without |",
            "|---|---:|---:|---:|---:|",
            f"| with the check (`write`) | {len(on)} | {m_on:.2f} | {statistics.quantiles(on, n=10)[-1]:.2f} "
            f"| {m_on / m_off:.3f} |",
            f"| without (`write_many`, `near=None`) | {len(off)} | {m_off:.2f} | "
            f"{statistics.quantiles(off, n=10)[-1]:.2f} | 1.000 |",
        ]
        print("\n".join(timing))
    info = machine()
    doc = [
        "# Near-duplicates by content at write time",
        "",
        f"Generated by `python bench/near_duplicates.py {shlex.join(argv)}`".rstrip() + f" on "
        f"{datetime.now():%Y-%m-%d %H:%M}; load {load()}; {info['cores']} cores, {info['cpu']}.",
        "",
        "## Precision and recall on hand-written pairs",
        "",
        'Each pair written into a scope of its own, the second with `on_near_duplicate="fold"`; found = folded. '
        "`calibration` is the set the threshold and the guard were chosen on; `held-out` was written after "
        "them and not tuned on. Hard negatives: negated, hypothetical, uncertain, reported and ended statements, "
        "another tense, another number, date or time, another value (place, animal, relative, team), the "
        "opposite attitude, swapped comparisons, added detail.",
        "",
        *table,
        "",
        "Misses and false positives:",
        "",
        *(misses or ["- none"]),
        "",
    ]
    if timing:
        doc += [
            "## Cost on the write path",
            "",
            f"{args.memories} realistic memories in one scope, then {2 * args.writes} new ones written one at a "
            "time, alternating with and without the check, in the same store and run (every text embedded "
            "before the timed calls; projections settled after each call, untimed).",
            "",
            *timing,
            "",
        ]
    Path(args.out).write_text("\n".join(doc))


if __name__ == "__main__":
    main(sys.argv[1:])
