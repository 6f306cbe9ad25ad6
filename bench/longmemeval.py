"""LongMemEval_S retrieval benchmark: session-level recall through the real engine API, no LLM.

    python bench/longmemeval.py ../shared/bench-data/                  # dev split (tune here), all 250
    python bench/longmemeval.py ../shared/bench-data/ --split report   # reporting split: the headline
    python bench/longmemeval.py ../shared/bench-data/ --limit 3 --out /tmp/lme.md   # smoke (CI)

Each question's haystack goes into its own data directory: every turn (scope ``run:lme-<n>-turn``) and a
per-session digest of the user turns (``run:lme-<n>-session``) become memories with ``metadata.session``, the
session date as event time and a precomputed vector (user text embedded once per machine, in a disk cache;
assistant turns carry the vector of the user turn they answer). Every variant is one ``Engine.recall``
(``now`` = the question date): the baselines over the turns, ``full`` = the engine's ``default`` recipe over
turns and digests, ablations = that recipe with one thing changed. A session ranks where its first unit
appears in the hits. Metrics count a session as retrieved when any of its units is (LongMemEval's
``recall_any``); abstention questions are left out. ``--save-lists`` also keeps per-lane lists for offline
tuning. Writes docs/benchmarks/longmemeval.md and longmemeval_<split>.png unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import pickle
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
from _common import load as load_avg
from _embcache import DiskCache
from _lme_data import Question, Turn, embed_texts, load, spaced, split
from _lme_metrics import Scores
from tqdm import tqdm

from storage import Engine, MiniLMEmbedder, WriteItem, content_id
from storage.models import MAX_CONTENT_CHARS, MAX_K
from storage.recipes import RECIPES, Recipe

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "longmemeval.md"
CACHE = Path.home() / ".cache" / "mnemograph-bench"
NEVER = 10**12  # an ann_threshold no per-question table reaches: exact search
GRANULARITIES = ("turn", "session")  # rounds measured on dev, not kept (see the notes)
LANES = ("bm25", "vector")


# -- units: what a haystack becomes -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unit:
    granularity: str
    content: str
    session: int
    turns: tuple[int, ...]
    role: str
    vector: np.ndarray


def _clip(text: str) -> str:
    return text if len(text) <= MAX_CONTENT_CHARS else text[:MAX_CONTENT_CHARS]


def _norm(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n else v


def units(q: Question, cache: DiskCache, granularities: Sequence[str]) -> list[Unit]:
    """Turns (assistant turns carry their round's user vector: embedding every long reply would cost more
    than the whole rest of the run), rounds (user turn + reply, the user vector) and a session digest
    (user turns joined, the mean of their vectors)."""
    out: list[Unit] = []
    for si, session in enumerate(q.sessions):
        user_vecs: list[np.ndarray] = []
        said = [t for t in session if t.content.strip()]
        if not said:
            continue
        # Replies before any user turn (some sessions open with the assistant) take the session's first user
        # vector; a session with no user turn at all takes its first reply's (see embed_texts).
        first = next((t for t in said if t.role == "user"), said[0])
        first_vec = cache.get(first.content)
        last_user = first_vec
        rounds: list[list[Turn]] = []
        for t in session:
            if not t.content.strip():
                continue
            if t.role == "user":
                last_user = cache.get(t.content)
                user_vecs.append(last_user)
                rounds.append([t])
            elif rounds:
                rounds[-1].append(t)
            else:
                rounds.append([t])
            if "turn" in granularities:
                out.append(Unit("turn", _clip(t.content), si, (t.index,), t.role, last_user))
        if "round" in granularities:
            for r in rounds:
                vec = cache.get(r[0].content) if r[0].role == "user" else first_vec
                text = _clip("\n".join(t.content for t in r))
                out.append(Unit("round", text, si, tuple(t.index for t in r), "round", vec))
        if "session" in granularities and user_vecs:
            text = _clip("\n".join(t.content for t in session if t.role == "user" and t.content.strip()))
            idx = tuple(t.index for t in session if t.role == "user")
            out.append(Unit("session", text, si, idx, "session", _norm(np.mean(user_vecs, axis=0))))
    return out


# -- one question through the engine --------------------------------------------------------------------------


@dataclass
class Asked:
    """One question's unit lists (``lane:granularity`` -> memory ids, best first) and how to map them back."""

    q: Question
    lists: dict[str, list[str]]
    sessions_of: dict[str, list[str]]  # memory id -> session ids (a text can recur in two sessions)
    turns_of: dict[str, list[str]]  # memory id -> "session#turn" keys
    role_of: dict[str, str]  # memory id -> user | assistant | round | session
    session_time: dict[str, datetime]
    write_s: float = 0.0
    recall_s: float = 0.0


def scope(q: Question, granularity: str) -> str:
    return f"run:lme-{content_id(q.id)[:12]}-{granularity}"


# The engine's default recipe as it was merged (graph lane, time boost x1.5, memory-level RRF k 60, no
# grouping): measured beside the tuned default so the change shows in the same run.
MERGED_DEFAULT = Recipe("merged-default", {"bm25": 1.0, "vector": 1.0, "graph": 1.0})
BOTH = "turn+session"  # one recall over the turn and the session-digest scopes together
_DEFAULT = RECIPES["default"]

# Every variant is one Engine.recall: name -> (what it is, recipe, granularities searched). Sessions rank by
# the first appearance of one of their units in the hits.
VARIANTS: dict[str, tuple[str, str | Recipe, str]] = {
    "bm25": ("engine recipe `bm25`, turn units", "bm25", "turn"),
    "vector": ("engine recipe `vector`, turn units", "vector", "turn"),
    "hybrid": ("engine recipe `hybrid` (plain BM25 + vector RRF), turn units", "hybrid", "turn"),
    "default as merged": ("the engine's default recipe before tuning, turn units", MERGED_DEFAULT, "turn"),
    "full": ("the engine's `default` recipe, turns + session digests", "default", BOTH),
    # ablations: the default recipe with one thing changed
    "full − graph": (
        "no graph lane",
        _DEFAULT.with_(weights={k: w for k, w in _DEFAULT.weights.items() if k != "graph"}),
        BOTH,
    ),
    "full − time rule": ("time expressions ignored", _DEFAULT.with_(time={"enabled": False}), BOTH),
    "full − grouping": ("memory-level fusion (no group rule)", _DEFAULT.with_(group={"key": None}), BOTH),
    "full − session digest": ("turn units only", "default", "turn"),
    "full − keep top": (
        "each session listed by its best member only (`keep_top` 0)",
        _DEFAULT.with_(group={"keep_top": 0}),
        BOTH,
    ),
}

# Extra lists for offline tuning (--save-lists), one lane each. ``s-*`` see the query with its time
# expression stripped (as the default recipe's lanes do) but get no boost; ``g-*`` are grouped by session in
# the engine (the lane's whole candidate list collapsed to sessions): the tuner fuses these itself.
_STRIP = {"enabled": True, "boost": 0.0}


def _lane(lane: str, prefix: str, **changes: object) -> Recipe:
    return _DEFAULT.with_(
        name=f"{prefix}-{lane}",
        weights={lane: 1.0},
        time=_STRIP,
        dedup_cosine=None,
        history_questions=False,
        **changes,
    )


TUNING: dict[str, tuple[str | Recipe, tuple[str, ...]]] = {
    "s-bm25": (_lane("bm25", "s", group={"key": None}), ("turn",)),
    "s-vector": (_lane("vector", "s", group={"key": None}), ("turn",)),
    "s-graph": (_lane("graph", "s", group={"key": None}), ("turn",)),
    "g-bm25": (_lane("bm25", "g", group={"key": "session"}), ("turn", "session", BOTH)),
    "g-vector": (_lane("vector", "g", group={"key": "session"}), ("turn", BOTH)),
    "g-graph": (_lane("graph", "g", group={"key": "session"}), ("turn",)),
}


def recalls(variants: Sequence[str], tuning: bool) -> dict[str, tuple[str | Recipe, tuple[str, ...]]]:
    """The recalls a question needs: list name -> (recipe, granularities); lists are keyed ``name:gran``."""
    out = {name: (VARIANTS[name][1], (VARIANTS[name][2],)) for name in variants}
    return out | TUNING if tuning else out


def ask(
    q: Question,
    cache: DiskCache,
    root: Path,
    granularities: Sequence[str],
    recalls: Mapping[str, tuple[str | Recipe, tuple[str, ...]]],
) -> Asked:
    """Ingest ``q``'s haystack into a fresh data directory, run every (recipe, granularity) recall, close."""
    path = root / content_id(q.id)[:12]
    us = units(q, cache, granularities)
    sessions_of: dict[str, list[str]] = {}
    turns_of: dict[str, list[str]] = {}
    role_of: dict[str, str] = {}
    for u in us:
        mid = content_id(u.content)
        sid = q.session_ids[u.session]
        if sid not in sessions_of.setdefault(mid, []):
            sessions_of[mid].append(sid)
        turns_of.setdefault(mid, []).extend(f"{sid}#{i}" for i in u.turns)
        role_of.setdefault(mid, u.role)
    e = Engine.open(path, embedder=cache, warm=False, ann_threshold=NEVER)
    try:
        start = time.perf_counter()
        items = [
            WriteItem(
                u.content,
                [scope(q, u.granularity)],
                "message",
                event_time=q.session_dates[u.session],
                metadata={"session": q.session_ids[u.session], "turns": list(u.turns), "role": u.role},
                source="longmemeval",
                vector=u.vector,
            )
            for u in us
        ]
        for lo in range(0, len(items), 1024):
            e.write_many(items[lo : lo + 1024])
        e.reconciler.wait_projected()
        mid_write = time.perf_counter()
        lists = {}
        for name, (recipe, gs) in recalls.items():
            for g in gs:
                if set(g.split("+")) <= set(granularities):
                    scopes = [scope(q, x) for x in g.split("+")]
                    hits = e.recall(q.text, scopes, k=MAX_K, recipe=recipe, now=q.date)
                    lists[f"{name}:{g}"] = [h.memory.id for h in hits]
        end = time.perf_counter()
    finally:
        e.close()
        shutil.rmtree(path, ignore_errors=True)
    times = {}
    for sid, d in zip(q.session_ids, q.session_dates, strict=True):
        times.setdefault(sid, d)
    return Asked(q, lists, sessions_of, turns_of, role_of, times, mid_write - start, end - mid_write)


# -- variants: how unit lists become a session ranking ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ranked:
    sessions: list[str]
    turns: list[str]


Ranker = Callable[[Asked], Ranked]


def _first_sessions(a: Asked, units: Sequence[str]) -> list[str]:
    out: dict[str, None] = {}
    for u in units:
        for s in a.sessions_of.get(u, ()):
            out.setdefault(s, None)
    return list(out)


def _turn_keys(a: Asked, units: Sequence[str]) -> list[str]:
    """The turns retrieved, in hit order; session digests are not turns and are skipped."""
    out: dict[str, None] = {}
    for u in units:
        if a.role_of.get(u) != "session":
            for t in a.turns_of.get(u, ()):
                out.setdefault(t, None)
    return list(out)


def engine_ranker(name: str) -> Ranker:
    """A variant's engine recall; a session ranks where its first unit in the hits does."""

    def rank(a: Asked) -> Ranked:
        units = a.lists[f"{name}:{VARIANTS[name][2]}"]
        return Ranked(_first_sessions(a, units), _turn_keys(a, units))

    return rank


# -- the run ---------------------------------------------------------------------------------------------------


@dataclass
class Run:
    split: str
    questions: list[Question]
    scores: dict[str, list[tuple[Question, Scores]]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    described: dict[str, str] = field(default_factory=dict)
    write_s: float = 0.0
    recall_s: float = 0.0
    embed_s: float = 0.0
    embedded: int = 0
    units: int = 0
    wall_s: float = 0.0


def log(msg: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def failure_line(a: Asked, ranked: Ranked) -> str | None:
    """A dev-split miss at rank 1: the question, its type, the evidence's rank and the session that won."""
    truth = a.q.answer_sessions
    if ranked.sessions and ranked.sessions[0] in truth:
        return None
    where = next((i for i, s in enumerate(ranked.sessions, start=1) if s in truth), None)
    top = ranked.sessions[0] if ranked.sessions else "-"
    top_date = a.session_time.get(top)
    gold = sorted(truth)
    gold_dates = ", ".join(f"{a.session_time[g]:%Y-%m-%d}" for g in gold if g in a.session_time)
    return (
        f"| {a.q.id} | {a.q.type} | {a.q.text[:110]} | {where or '>'} | {top} ({top_date:%Y-%m-%d}) | {gold_dates} |"
        if top_date
        else f"| {a.q.id} | {a.q.type} | {a.q.text[:110]} | {where or '>'} | {top} | {gold_dates} |"
    )


def run(args: argparse.Namespace) -> Run:
    start = time.perf_counter()
    data = Path(args.data)
    qs = spaced(split(load(data), args.split), args.limit)
    scored = [q for q in qs if not q.abstention]
    log(f"{len(qs)} questions in the {args.split} split ({len(scored)} scored, abstention left out)")
    cache = DiskCache(Path(args.cache), MiniLMEmbedder())
    todo = cache.missing(embed_texts(scored))
    log(f"embedding cache: {len(cache):,} vectors on disk, {len(todo):,} texts to embed")
    t0 = time.perf_counter()
    with tqdm(total=len(todo), desc="embed", unit="text", disable=not todo) as bar:
        cache.fill(todo, bar.update)
    r = Run(args.split, scored, embed_s=time.perf_counter() - t0, embedded=len(todo))
    names = [n for n in VARIANTS if not args.variants or n in set(args.variants.split(","))]
    table = {n: (VARIANTS[n][0], engine_ranker(n)) for n in names}
    wanted = recalls(names, bool(args.save_lists))
    r.scores = {name: [] for name in table}
    r.described = {name: what for name, (what, _) in table.items()}
    root = Path(tempfile.mkdtemp(prefix="lme-", dir=args.work))
    saved: list[Asked] = []
    try:
        for q in tqdm(scored, desc=f"questions ({args.split})", unit="q"):
            a = ask(q, cache, root, GRANULARITIES, wanted)
            r.write_s += a.write_s
            r.recall_s += a.recall_s
            r.units += sum(1 for _ in a.sessions_of)
            if args.save_lists:
                saved.append(a)
            truth_turns = frozenset(
                f"{q.session_ids[t.session]}#{t.index}" for t in q.turns() if t.has_answer
            )
            for name, (_, rank) in table.items():
                ranked = rank(a)
                r.scores[name].append(
                    (q, Scores.of(ranked.sessions, q.answer_sessions, ranked.turns, truth_turns))
                )
                if name == "full" and args.split == "dev":
                    line = failure_line(a, ranked)
                    if line:
                        r.failures.append(line)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if args.save_lists:
            Path(args.save_lists).write_bytes(pickle.dumps(saved))
    r.wall_s = time.perf_counter() - start
    return r


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "data", nargs="?", default="../shared/bench-data/", help="folder with the LongMemEval files"
    )
    p.add_argument("--split", choices=("dev", "report", "all"), default="dev")
    p.add_argument("--limit", type=int, default=None, help="only N questions, evenly spaced over the split")
    p.add_argument("--out", default=str(DOC), help="the Markdown report (the PNG goes beside it)")
    p.add_argument("--cache", default=str(CACHE), help="embedding cache directory (kept between runs)")
    p.add_argument("--work", default=None, help="where the per-question data directories go (temp)")
    p.add_argument("--variants", default="", help="comma-separated subset of variants to score")
    p.add_argument("--no-write", action="store_true", help="print the tables only")
    p.add_argument(
        "--save-lists", default="", help="pickle every question's unit lists here (offline tuning)"
    )
    args = p.parse_args(argv)
    cmd = "python bench/longmemeval.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    r = run(args)
    from _lme_report import print_tables, write_report

    print_tables(r)
    if not args.no_write:
        write_report(r, Path(args.out), cmd, Path(args.data), load_avg())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
