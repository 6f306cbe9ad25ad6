"""Extraction and reconciliation benchmark: the curated write sequences, and the write-path cost.

    python bench/extraction.py                  # writes docs/benchmarks/extraction.md
    python bench/extraction.py --json out.json  # also the scores as JSON (the test suite reads them)
    python bench/extraction.py --latency 0      # skip the latency comparison

Each case of ``tests/storage/data/extraction_cases.jsonl`` (written by hand: people, places, jobs,
preferences, negations, hypotheticals, aliases, misspellings, namesakes, updates out of order) is written
through ``Engine.write`` into its own scope of one real data directory, with ``metadata.speaker`` "Sam".
Scored: the relations recorded (all, and those still open at the end) against the expected ones, entity
mentions and types, and the supersessions, contradictions and duplicates the receipts report.

Latency: the same few hundred realistic memories (``_common.Sentences``) written one at a time with the
offline enrichment and with the previous extractor (capitalised spans only, no reconciliation), alternating
in the same run; medians and their ratio.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Before anything imports ``storage`` (``_resolution`` does): the checkout under test, not an installed copy.
sys.path.insert(0, str(ROOT))

import _resolution  # noqa: E402
from _common import Sentences, load, machine  # noqa: E402
from _resolution import Tally  # noqa: E402

from storage import Engine, EntityIn, RelationIn  # noqa: E402
from storage.adapters.kuzu._cypher import _rows  # noqa: E402
from storage.engine import writes as engine_module  # noqa: E402
from storage.enrich import Enriched  # noqa: E402
from storage.language.extraction import extract  # noqa: E402

DATA = ROOT / "tests" / "storage" / "data"
# The development set (the extractor was tuned on it) and a held-out set written before running it.
SETS = {"development": DATA / "extraction_cases.jsonl", "held-out": DATA / "extraction_heldout.jsonl"}
RESOLUTION = {"development": DATA / "resolution_cases.jsonl", "held-out": DATA / "resolution_heldout.jsonl"}
SPEAKER = "Sam"
Triple = tuple[str, str, str]


def norm(s: str) -> str:
    words = s.casefold().split()
    if words and words[0] == "the":
        words = words[1:]
    return " ".join(words)


def triple(t: Iterable[str]) -> Triple:
    s, p, o = t
    return norm(s), p, norm(o)


@dataclass
class Scores:
    tallies: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    by_tag: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    types_right: int = 0
    types_total: int = 0
    failures: list[str] = field(default_factory=list)
    cases: int = 0


def run_case(engine: Engine, case: dict[str, Any], scores: Scores) -> None:
    scope = f"project:case-{case['id']}"
    ids: list[str] = []
    got: dict[str, set[Any]] = {"supersedes": set(), "contradicts": set(), "duplicates": set()}
    receipts = []
    for raw in case["writes"]:
        w = {"text": raw} if isinstance(raw, str) else raw
        r = engine.write(
            w["text"],
            [scope],
            event_time=datetime.fromisoformat(w["event_time"]) if "event_time" in w else None,
            entities=[EntityIn(n, t, tuple(a)) for n, t, a in w.get("entities", [])] or None,
            relations=[RelationIn(*t) for t in w.get("relations", [])] or None,
            metadata={"speaker": SPEAKER},
        )
        ids.append(r.id)
        receipts.append(r)
    index = {mid: i for i, mid in enumerate(ids)}
    for j, r in enumerate(receipts):
        got["supersedes"] |= {(index[m], j) for m in r.supersedes if m in index}
        if r.superseded_by in index:
            got["supersedes"].add((j, index[r.superseded_by]))
        got["contradicts"] |= {tuple(sorted((index[m], j))) for m in r.contradicts if m in index}
        got["duplicates"] |= {(index[m], j) for m in r.duplicates if m in index}
    with engine.graph.read() as conn:
        history = engine.graph.relation_history(conn, ids)
        live = engine.graph.all_ids(conn)
        types = {
            k: t
            for k, t in _rows(
                conn,
                "MATCH (m:Memory)-[:MENTIONS]->(e:Entity) WHERE m.id IN $ids RETURN e.id, e.type",
                {"ids": ids},
            )
        }
    recorded = {triple((h.subject, h.predicate, h.object)) for h in history}
    current = {
        triple((h.subject, h.predicate, h.object))
        for h in history
        if h.valid_to is None and live.get(h.memory_id)
    }
    want = {triple(t) for t in case["relations"]}
    scores.tallies["relations"].add(recorded, want)
    for tag in case.get("tags", []):
        scores.by_tag[tag].add(recorded, want)
    if "current" in case:
        scores.tallies["current state"].add(current, {triple(t) for t in case["current"]})
    for key in ("supersedes", "contradicts", "duplicates"):
        expected = {tuple(sorted(p)) if key == "contradicts" else tuple(p) for p in case.get(key, [])}
        scores.tallies[key].add(got[key], expected)
        if got[key] != expected:
            scores.failures.append(f"{case['id']}: {key} {sorted(got[key])} != {sorted(expected)}")
    for name, kind in case.get("entities", []):
        scores.types_total += 1
        scores.types_right += types.get(" ".join(name.casefold().split())) == kind
        scores.tallies["entities"].add({norm(n) for n in types} & {norm(name)}, {norm(name)})
    if recorded != want:
        scores.failures.append(
            f"{case['id']}: relations {sorted(recorded - want)} extra, {sorted(want - recorded)} missing"
        )
    scores.cases += 1


def evaluate(data_dir: Path) -> dict[str, Scores]:
    """Every set's scores; all cases go through one store, each in its own scope (the entity lexicon is
    shared, as in a real store: names learnt in one case can make another's ambiguous)."""
    out: dict[str, Scores] = {}
    with Engine.open(data_dir, warm=False) as engine:
        for name, path in SETS.items():
            scores = out[name] = Scores()
            for line in path.read_text().splitlines():
                if line.strip():
                    run_case(engine, json.loads(line), scores)
    return out


def _old_enrich(content: str, **kw: Any) -> Enriched:
    """The write path before enrichment: capitalised spans and known names, the caller's relations only."""
    found = extract(
        content,
        written_at=kw["written_at"],
        lexicon=kw["lexicon"],
        given=kw.get("given", ()),
        times=kw.get("event_time") is None,
    )
    return Enriched(found.entities, tuple(found.times), tuple(kw.get("relations", ())), (), ())


def latency(data_dir: Path, n: int) -> dict[str, float]:
    """Median write acknowledgement (ms) with the new enrichment and with the old extractor, interleaved."""
    texts = Sentences(seed=15).memories(2 * n)
    new_enrich = engine_module.enrich
    times: dict[str, list[float]] = {"old": [], "new": []}
    with Engine.open(data_dir, warm=False) as engine:
        engine.embedder.embed(texts)  # embeddings cached: the comparison is the write path, not the model
        for i, text in enumerate(texts):
            variant = "new" if i % 2 else "old"
            engine_module.enrich = new_enrich if variant == "new" else _old_enrich  # type: ignore[assignment]
            t0 = time.perf_counter()
            engine.write(text, ["user:sam"])
            times[variant].append((time.perf_counter() - t0) * 1000)
        engine_module.enrich = new_enrich
    ext = {"old": [], "new": []}
    from storage.enrich import enrich
    from storage.language.extraction import EntityLexicon

    lex = EntityLexicon()
    now = datetime.now(UTC)
    for text in texts:
        for variant in ("old", "new"):
            f = enrich if variant == "new" else _old_enrich
            t0 = time.perf_counter()
            f(text, written_at=now, lexicon=lex, speaker="sam")
            ext[variant].append((time.perf_counter() - t0) * 1000)
    return {
        "write_old_ms": statistics.median(times["old"]),
        "write_new_ms": statistics.median(times["new"]),
        "extract_old_ms": statistics.median(ext["old"]),
        "extract_new_ms": statistics.median(ext["new"]),
        "n": float(n),
    }


def report(
    sets: dict[str, Scores],
    lat: dict[str, float] | None,
    argv: list[str],
    resolution: list[str] | None = None,
) -> str:
    dev, held = sets["development"], sets["held-out"]
    lines = [
        "# Extraction and reconciliation benchmark",
        "",
        f"Command: `python bench/extraction.py {shlex.join(argv)}`. Cases: {dev.cases} hand-written write "
        "sequences in `tests/storage/data/extraction_cases.jsonl` (the development set: the extractor's word "
        f"lists and rules were tuned on it) and {held.cases} in `extraction_heldout.jsonl` (written before the "
        "extractor was run on them, not tuned on). Offline path only: the Claude path is not built yet. "
        "Machine load: " + load() + ".",
        "",
        "## Headline",
        "",
        "| what | set | precision | recall | tp | fp | fn |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in dev.tallies:
        for set_name, scores in sets.items():
            t = scores.tallies[key]
            lines.append(
                f"| {key} | {set_name} | {t.precision:.3f} | {t.recall:.3f} | {t.tp} | {t.fp} | {t.fn} |"
            )
    scores = dev
    if scores.types_total:
        lines += ["", f"Entity types right (development): {scores.types_right}/{scores.types_total}."]
    lines += [
        "",
        "## Relations by tag (development)",
        "",
        "| tag | precision | recall | tp | fp | fn |",
        "|---|---|---|---|---|---|",
    ]
    for tag, t in sorted(scores.by_tag.items()):
        lines.append(f"| {tag} | {t.precision:.3f} | {t.recall:.3f} | {t.tp} | {t.fp} | {t.fn} |")
    if lat:
        ratio = lat["write_new_ms"] / lat["write_old_ms"]
        lines += [
            "",
            "## Write acknowledgement latency",
            "",
            f"{int(lat['n'])} realistic memories per variant, written one at a time alternately into one store "
            "(embeddings cached so the model does not dominate); median ms.",
            "",
            "| variant | write (ms) | extraction alone (ms) |",
            "|---|---|---|",
            f"| previous extractor | {lat['write_old_ms']:.2f} | {lat['extract_old_ms']:.3f} |",
            f"| offline enrichment + reconciliation | {lat['write_new_ms']:.2f} | {lat['extract_new_ms']:.3f} |",
            f"| ratio | {ratio:.3f} | {lat['extract_new_ms'] / lat['extract_old_ms']:.2f} |",
        ]
    lines += resolution or []
    lines += ["", "## Cases that differ from the expectation", ""]
    lines += [f"- {f}" for s in sets.values() for f in s.failures] or ["(none)"]
    info = machine()
    lines += ["", "## Machine", ""] + [f"- {k}: {v}" for k, v in info.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "extraction.md"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--latency", type=int, default=300, help="memories per variant (0: skip)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        scores = evaluate(Path(tmp) / "cases")
        resolved = {
            name: _resolution.evaluate(Path(tmp) / f"resolution-{i}", path)
            for i, (name, path) in enumerate(RESOLUTION.items())
        }
        lat = latency(Path(tmp) / "latency", args.latency) if args.latency else None
        lookup = _resolution.lookup_cost() if args.latency else None
        texts = Sentences(seed=16).memories(2 * args.latency) if args.latency else []
        writes = _resolution.write_cost(Path(tmp) / "resolution-writes", texts) if texts else None
    text = report(scores, lat, argv, _resolution.report(resolved, lookup, writes))
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.json:
        out = {
            name: {"cases": s.cases}
            | {k: {"precision": t.precision, "recall": t.recall} for k, t in s.tallies.items()}
            for name, s in scores.items()
        }
        for name, res in resolved.items():
            key = "resolution" if name == "development" else f"resolution {name}"
            out[key] = {"cases": res.cases, "as_expected": [res.as_expected, res.expected]} | {
                k: {"precision": t.precision, "recall": t.recall} for k, t in res.tallies.items()
            }
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
