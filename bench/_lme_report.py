"""Tables, the Markdown report and the per-type bar chart for bench/longmemeval.py."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from _common import machine
from _lme_data import FILE, checksum
from _lme_metrics import METRICS, mean

if TYPE_CHECKING:
    from longmemeval import Run

KEEP = "<!-- Hand-written notes below this line are kept when bench/longmemeval.py rewrites this file. -->"
BASELINES = ("bm25", "vector", "hybrid", "default as merged", "full")
TARGETS = {"NDCG@10": 0.95, "MRR": 0.95, "R@1": 0.92, "R@5": 0.99, "turn R@10": 0.90}
TYPE_R5 = 0.97
FULL_OVER_HYBRID = 0.04


def _row(name: str, m: dict[str, float]) -> str:
    return f"| {name} | " + " | ".join(f"{m[k]:.3f}" if k in m else "–" for k in METRICS) + " |"


def headline(r: Run) -> list[str]:
    out = ["| variant | " + " | ".join(METRICS) + " |", "|---|" + "---:|" * len(METRICS)]
    for name in r.scores:
        if name in BASELINES:
            out.append(_row(name, mean([s for _, s in r.scores[name]])))
    return out


def ablations(r: Run) -> list[str]:
    full = mean([s for _, s in r.scores["full"]]) if "full" in r.scores else {}
    out = [
        "| variant | " + " | ".join(METRICS) + " | Δ NDCG@10 vs full |",
        "|---|" + "---:|" * (len(METRICS) + 1),
    ]
    for name in r.scores:
        if name == "full" or name not in BASELINES:
            m = mean([s for _, s in r.scores[name]])
            delta = m["NDCG@10"] - full["NDCG@10"] if full else 0.0
            out.append(_row(name, m) + f" {delta:+.3f} |")
    return out


def per_type(r: Run) -> tuple[list[str], dict[str, dict[str, dict[str, float]]]]:
    by: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for name in r.scores:
        if name not in BASELINES:
            continue
        groups: dict[str, list] = defaultdict(list)
        for q, s in r.scores[name]:
            groups[q.type].append(s)
        for t, rows in groups.items():
            by[t][name] = mean(rows) | {"n": float(len(rows))}
    names = [n for n in BASELINES if n in r.scores]
    out = [
        "| question type | n | " + " | ".join(f"{n} R@5 / NDCG@10 / R@1" for n in names) + " |",
        "|---|---:|" + "---:|" * len(names),
    ]
    for t in sorted(by):
        cells = [f"{by[t][n]['R@5']:.3f} / {by[t][n]['NDCG@10']:.3f} / {by[t][n]['R@1']:.3f}" for n in names]
        out.append(f"| {t} | {int(by[t][names[0]]['n'])} | " + " | ".join(cells) + " |")
    return out, by


def target_check(r: Run) -> list[str]:
    if "full" not in r.scores:
        return []
    full = mean([s for _, s in r.scores["full"]])
    out = []
    for m, goal in TARGETS.items():
        v = full.get(m, 0.0)
        verdict = "met" if v >= goal else f"**missed by {goal - v:.3f}**"
        out.append(f"- {m} ≥ {goal:.2f}: {v:.3f} — {verdict}")
    _, by = per_type(r)
    for t in sorted(by):
        v = by[t]["full"]["R@5"]
        verdict = "met" if v >= TYPE_R5 else f"**missed by {TYPE_R5 - v:.3f}**"
        out.append(f"- R@5 ≥ {TYPE_R5:.2f} in {t}: {v:.3f} — {verdict}")
    if "hybrid" in r.scores:
        h = mean([s for _, s in r.scores["hybrid"]])["NDCG@10"]
        gain = full["NDCG@10"] - h
        verdict = "met" if gain >= FULL_OVER_HYBRID else f"**missed by {FULL_OVER_HYBRID - gain:.3f}**"
        out.append(
            f"- full beats plain hybrid on NDCG@10 by ≥ 0.04: {gain:+.3f} ({h:.3f} → {full['NDCG@10']:.3f}) — {verdict}"
        )
    return out


def print_tables(r: Run) -> None:
    print(
        f"\nLongMemEval_S, {r.split} split, {len(r.questions)} questions scored, wall {r.wall_s / 60:.1f} min"
    )
    for block in (headline(r), ablations(r), per_type(r)[0], target_check(r)):
        print("\n".join(block))
        print()


def chart(r: Run, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _, by = per_type(r)
    types = sorted(by)
    names = [n for n in BASELINES if n in r.scores]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), sharey=True)
    width = 0.8 / len(names)
    for ax, metric in zip(axes, ("R@5", "NDCG@10"), strict=True):
        for i, n in enumerate(names):
            xs = [j + i * width for j in range(len(types))]
            ax.bar(xs, [by[t][n][metric] for t in types], width, label=n)
        ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(types))])
        ax.set_xticklabels([t.replace("single-session-", "ss-") for t in types], rotation=20, ha="right")
        ax.set_ylim(0.5, 1.0)
        ax.set_title(f"{metric} by question type ({r.split} split, n={len(r.questions)})")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(r: Run, out: Path, cmd: str, data: Path, load: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    png = out.with_name(f"{out.stem}_{r.split}.png")
    chart(r, png)
    kept = ""
    if out.exists() and KEEP in out.read_text():
        kept = out.read_text().split(KEEP, 1)[1]
    info = machine()
    per, _ = per_type(r)
    lines = [
        "# LongMemEval_S retrieval benchmark",
        "",
        f"Generated by `{cmd}` on {datetime.now():%Y-%m-%d %H:%M}.",
        "",
        f"- Machine: {info['cores']} cores ({info['cpu']}), {info['ram']} RAM, Python {info['python']}; "
        + ", ".join(
            f"{k} {info[k]}" for k in ("lancedb", "tantivy", "kuzu", "torch", "sentence-transformers")
        ),
        f"- Load average at the end (1/5/15 min): {load} — the machine was shared with other work.",
        f"- Data: `{FILE}` SHA-256 `{checksum(data / FILE)}`",
        f"- Split: **{r.split}** ({'even' if r.split == 'dev' else 'odd' if r.split == 'report' else 'all'} positions), "
        f"{len(r.questions)} questions scored (abstention questions left out).",
        f"- Wall time {r.wall_s / 60:.1f} min: embedding {r.embed_s:.0f} s for {r.embedded:,} texts not yet cached, "
        f"writes {r.write_s:.0f} s, recalls {r.recall_s:.0f} s ({r.units:,} distinct units)"
        + (f", waiting for the product's digests {r.digest_s:.0f} s." if getattr(r, "digest_s", 0) else "."),
        "",
        "Session-level `recall_any` (a session counts when any of its units is retrieved); NDCG@10 with binary "
        "relevance, 1/log2(rank+1) discount and every evidence session in the ideal list; MRR of the first "
        "evidence session; turn R@10: a `has_answer` turn among the first 10 turns retrieved.",
        "",
        "## Headline",
        "",
        *headline(r),
        "",
        *(f"- `{name}`: {what}" for name, what in r.described.items()),
        "",
        "## Per question type (R@5 / NDCG@10 / R@1)",
        "",
        *per,
        "",
        f"![per-type chart]({png.name})",
        "",
        "## Ablations (one thing changed in `full`)",
        "",
        *ablations(r),
        "",
        "## Targets",
        "",
        *target_check(r),
        "",
    ]
    if r.failures:
        lines += [
            "## Dev-split misses at rank 1 (`full`)",
            "",
            "| id | type | question | evidence rank | top session (date) | evidence dates |",
            "|---|---|---|---:|---|---|",
            *r.failures,
            "",
        ]
    out.write_text("\n".join(lines) + "\n" + KEEP + (kept if kept else "\n"))
