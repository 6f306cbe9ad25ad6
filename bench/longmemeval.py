"""LongMemEval_S retrieval benchmark: session-level recall through the MCP tools, no LLM.

    python bench/longmemeval.py ../shared/bench-data/ --limit 60     # dev split (tune here), evenly spaced
    python bench/longmemeval.py ../shared/bench-data/ --split report   # reporting split: the headline (lead)
    python bench/longmemeval.py ../shared/bench-data/ --limit 3 --out /tmp/lme.md   # smoke (CI)
    python bench/longmemeval.py ../shared/bench-data/ --variants 'full; full, no group_by'   # a subset

Each question's haystack goes into its own data directory, written exactly as a client writes it: one
``memory_write`` call per turn through an MCP ``Client`` on the real server (kind ``message``, the session
date as ``event_time``, ``metadata`` {session, turn, role}: the client's own labels), the engine embedding
every turn itself (through a disk cache of the same model's vectors, so reruns are fast). Content longer
than the tool's limit is cut to it, as a client would have to. Nothing else is written: no digests.

The headline ``full`` is one ``recall`` tool call (``k`` 100, ``now`` = the question date, ``token_budget``
at its maximum so the list is long enough to score, ``group_by="session"``: the documented argument that
ranks a conversation as a whole). ``full, no group_by`` is the same call without it. Baselines and ablations
are ``Engine.recall`` calls on the same store with a named or changed recipe (the tool does not take
recipes). A session ranks where its first turn appears in the hits. Metrics count a session as retrieved
when any of its turns is (LongMemEval's ``recall_any``); abstention questions are left out. ``--save-lists``
also keeps per-lane lists for offline tuning. Writes docs/benchmarks/longmemeval.md and
longmemeval_<split>.png unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import pickle
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import anyio
from _common import load as load_avg
from _embcache import DiskCache
from _lme_data import Question, embed_texts, load, spaced, split
from _lme_metrics import Scores
from _sdk import Client, Implementation
from tqdm import tqdm

from server.app import build_server
from storage import Engine, MiniLMEmbedder, content_id
from storage.domain.models import MAX_CONTENT_CHARS, MAX_K, MAX_MESSAGES, MAX_TOKEN_BUDGET
from storage.recall.recipes import RECIPES, Recipe
from tools._wire import short_id

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "longmemeval.md"
CACHE = Path.home() / ".cache" / "mnemograph-bench"
NEVER = 10**12  # an ann_threshold no per-question table reaches: exact search


# -- units: what a haystack becomes -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unit:
    content: str
    session: int
    turn: int
    role: str


def _clip(text: str) -> str:
    return text if len(text) <= MAX_CONTENT_CHARS else text[:MAX_CONTENT_CHARS]


def units(q: Question) -> list[Unit]:
    """Every turn that says something, in order."""
    return [
        Unit(_clip(t.content), si, t.index, t.role)
        for si, session in enumerate(q.sessions)
        for t in session
        if t.content.strip()
    ]


# -- one question through the MCP tools ------------------------------------------------------------------------


@dataclass
class Asked:
    """One question's lists (variant name -> memory ids, best first) and how to map them back."""

    q: Question
    lists: dict[str, list[str]]
    sessions_of: dict[str, list[str]]  # short memory id -> session ids (a text can recur in two sessions)
    turns_of: dict[str, list[str]]  # memory id -> "session#turn" keys
    role_of: dict[str, str]  # memory id -> user | assistant
    session_time: dict[str, datetime]
    write_s: float = 0.0
    recall_s: float = 0.0
    digest_s: float = 0.0  # waiting for the product's consolidator after the conversations were handed over


def scope(q: Question) -> str:
    return f"run:lme-{content_id(q.id)[:12]}"


# The engine's default recipe as it was first merged (graph lane, time boost x1.5, memory-level RRF k 60):
# measured beside the tuned default so the change shows in the same run.
MERGED_DEFAULT = Recipe("merged-default", {"bm25": 1.0, "vector": 1.0, "graph": 1.0})
_DEFAULT = RECIPES["default"]
GROUP = "session"  # the metadata key the client labels its conversations with, asked for by group_by
TOOL = "tool"  # a variant answered by the recall tool itself
# Variants on a second store of the same haystack, each session handed over with conversation_write (the
# product builds the digests): answered by the recall tool before the digests exist, and after.
CONV, CONV_RAW = "conversation tool", "conversation tool, no digests yet"
CONV_GROUP = "conversation"  # the metadata key conversation_write labels messages with

# name -> (what it is, recipe or TOOL, group_by). Sessions rank by their first turn in the hits.
VARIANTS: dict[str, tuple[str, str | Recipe, str | None]] = {
    "bm25": ("engine recipe `bm25`", "bm25", None),
    "vector": ("engine recipe `vector`", "vector", None),
    "hybrid": ("engine recipe `hybrid` (plain BM25 + vector RRF)", "hybrid", None),
    "default as merged": ("the engine's default recipe before tuning", MERGED_DEFAULT, None),
    "full": ("the `recall` tool, defaults, `group_by=session`", TOOL, GROUP),
    "full, no group_by": ("the `recall` tool, defaults, no grouping", TOOL, None),
    "conversations": (
        "sessions handed over with `conversation_write`, digests built by the product; the `recall` tool, "
        "`group_by=conversation`",
        CONV,
        CONV_GROUP,
    ),
    "conversations no group_by": ("the same store, the `recall` tool with defaults", CONV, None),
    "conversations before digests": (
        "the same store before the consolidator ran, `group_by=conversation`",
        CONV_RAW,
        CONV_GROUP,
    ),
    # ablations: the default recipe with one thing changed, group_by=session, through Engine.recall
    "full − graph": (
        "no graph lane",
        _DEFAULT.with_(weights={k: w for k, w in _DEFAULT.weights.items() if k != "graph"}),
        GROUP,
    ),
    "full − time rule": ("time expressions ignored", _DEFAULT.with_(time={"enabled": False}), GROUP),
    "full − keep top": (
        "each session listed by its best member only (`keep_top` 0)",
        _DEFAULT.with_(group={"keep_top": 0}),
        GROUP,
    ),
    "full − relevance rule": ("no relevance floor", _DEFAULT.with_(relevance_floor=0.0), GROUP),
    # salience (docs/benchmarks/salience.md): the haystack has no earlier recalls, so only recency can act;
    # "engine default" is the same call without salience, the pair to compare it with.
    "engine default": ("the default recipe through `Engine.recall`, `group_by=session`", _DEFAULT, GROUP),
    "full + salience": (
        "the default recipe with salience on (recency; no accesses), `group_by=session`",
        _DEFAULT.with_(salience={"enabled": True}),
        GROUP,
    ),
    "engine default, no group_by": (
        "the default recipe through `Engine.recall`, no grouping",
        _DEFAULT,
        None,
    ),
    "no group_by + salience": (
        "the default recipe with salience on (recency; no accesses), no grouping",
        _DEFAULT.with_(salience={"enabled": True}),
        None,
    ),
}

# Extra lists for offline tuning (--save-lists), one lane each. ``s-*`` see the query with its time
# expression stripped (as the default recipe's lanes do) but get no boost; ``g-*`` are grouped by session in
# the engine (the lane's whole candidate list collapsed to sessions): the tuner fuses these itself.
_STRIP = {"enabled": True, "boost": 0.0}


def _lane(lane: str, prefix: str) -> Recipe:
    return _DEFAULT.with_(
        name=f"{prefix}-{lane}",
        weights={lane: 1.0},
        time=_STRIP,
        dedup_cosine=None,
        history_questions=False,
        relevance_floor=0.0,
    )


TUNING: dict[str, tuple[str, str | Recipe, str | None]] = {
    f"{p}-{lane}": ("tuning list", _lane(lane, p), GROUP if p == "g" else None)
    for p in ("s", "g")
    for lane in ("bm25", "vector", "graph")
}


async def _write_all(client: Client, q: Question, us: Sequence[Unit]) -> None:
    """One memory_write per turn, a few in flight at a time (as several agents would write)."""
    limiter = anyio.Semaphore(16)

    async def one(u: Unit) -> None:
        async with limiter:
            result = await client.call_tool(
                "memory_write",
                {
                    "content": u.content,
                    "scopes": [scope(q)],
                    "kind": "message",
                    "event_time": q.session_dates[u.session].isoformat(),
                    "metadata": {"session": q.session_ids[u.session], "turn": u.turn, "role": u.role},
                },
            )
            if result.is_error:
                raise RuntimeError(f"memory_write failed: {result.content}")

    async with anyio.create_task_group() as tg:
        for u in us:
            tg.start_soon(one, u)


async def _hand_over(client: Client, q: Question, us: Sequence[Unit]) -> dict[str, Unit]:
    """One conversation_write call per session (at most 200 messages each), a few sessions in flight at once;
    each turn's time is its session's date plus its turn number in seconds (the order it was said), and its
    message id the turn number. Returns memory id -> the turn it stores."""
    limiter = anyio.Semaphore(4)
    stored: dict[str, Unit] = {}
    by_session: dict[int, list[Unit]] = {}
    for u in us:
        by_session.setdefault(u.session, []).append(u)

    async def one(si: int, part: list[Unit]) -> None:
        async with limiter:
            result = await client.call_tool(
                "conversation_write",
                {
                    "conversation": q.session_ids[si],
                    "scopes": [scope(q)],
                    "messages": [
                        {
                            "role": u.role if u.role in ("user", "assistant") else "user",
                            "content": u.content,
                            "time": (q.session_dates[si] + timedelta(seconds=u.turn)).isoformat(),
                            "id": str(u.turn),
                        }
                        for u in part
                    ],
                },
            )
            if result.is_error or not isinstance(result.structured_content, dict):
                raise RuntimeError(f"conversation_write failed: {result.content}")
            for u, m in zip(part, result.structured_content["messages"], strict=True):
                stored[m["id"]] = u

    async with anyio.create_task_group() as tg:
        for si, turns in by_session.items():
            for i in range(0, len(turns), MAX_MESSAGES):
                tg.start_soon(one, si, turns[i : i + MAX_MESSAGES])
    return stored


async def _recall_tool(client: Client, q: Question, group_by: str | None) -> list[str]:
    args: dict[str, object] = {
        "query": q.text,
        "scopes": [scope(q)],
        "k": MAX_K,
        "now": q.date.isoformat(),
        "token_budget": MAX_TOKEN_BUDGET,
    }
    if group_by:
        args["group_by"] = group_by
    result = await client.call_tool("recall", args)
    if result.is_error or not isinstance(result.structured_content, dict):
        raise RuntimeError(f"recall failed: {result.content}")
    return [r["id"] for r in result.structured_content["results"]]


def ask(
    q: Question,
    cache: DiskCache,
    root: Path,
    variants: Mapping[str, tuple[str, str | Recipe, str | None]],
) -> Asked:
    """Write ``q``'s haystack through the MCP tools into a fresh data directory, run every variant, close."""
    path = root / content_id(q.id)[:12]
    us = units(q)
    sessions_of: dict[str, list[str]] = {}
    turns_of: dict[str, list[str]] = {}
    role_of: dict[str, str] = {}
    for u in us:
        mid = short_id(content_id(u.content))  # ids as the tools show them (12 hex characters)
        sid = q.session_ids[u.session]
        if sid not in sessions_of.setdefault(mid, []):
            sessions_of[mid].append(sid)
        turns_of.setdefault(mid, []).append(f"{sid}#{u.turn}")
        role_of.setdefault(mid, u.role)
    e = Engine.open(path, embedder=cache, warm=False, ann_threshold=NEVER)
    # One variant's recall must not count as an access for the next one's salience: the haystack has no earlier
    # recalls, so salience variants measure recency alone (docs/benchmarks/salience.md).
    e.count_accesses = False
    lists: dict[str, list[str]] = {}
    spent = [0.0, 0.0, 0.0]

    async def session() -> None:
        async def source() -> Engine:
            return e

        server = build_server(source, default_scopes=(scope(q),))
        async with Client(server, mode="legacy", client_info=Implementation(name="lme", version="1")) as c:
            start = time.perf_counter()
            await _write_all(c, q, us)
            e.reconciler.wait_projected()
            spent[0] = time.perf_counter() - start
            start = time.perf_counter()
            for name, (_, recipe, group_by) in variants.items():
                if recipe in (CONV, CONV_RAW):
                    continue
                if recipe == TOOL:
                    lists[name] = await _recall_tool(c, q, group_by)
                else:
                    hits = e.recall(q.text, [scope(q)], k=MAX_K, recipe=recipe, now=q.date, group_by=group_by)
                    lists[name] = [short_id(h.memory.id) for h in hits]
            spent[1] = time.perf_counter() - start

    conv = {n: v for n, v in variants.items() if v[1] in (CONV, CONV_RAW)}

    async def conversations() -> None:
        ce = Engine.open(path.with_name(path.name + "-conv"), embedder=cache, warm=False, ann_threshold=NEVER)
        ce.digest_quiet = 0.0  # digest as soon as a session is in (each arrives in one call)

        async def source() -> Engine:
            return ce

        server = build_server(source, default_scopes=(scope(q),))
        try:
            async with Client(
                server, mode="legacy", client_info=Implementation(name="lme", version="1")
            ) as c:
                start = time.perf_counter()
                stored = await _hand_over(c, q, us)
                ce.reconciler.wait_projected()
                spent[0] += time.perf_counter() - start
                for mid, u in stored.items():
                    sid = q.session_ids[u.session]
                    sessions_of.setdefault(mid, [sid])
                    turns_of.setdefault(mid, []).append(f"{sid}#{u.turn}")
                    role_of.setdefault(mid, u.role)
                for name, (_, kind, group_by) in conv.items():
                    if kind == CONV_RAW:
                        lists[name] = await _recall_tool(c, q, group_by)
                start = time.perf_counter()
                if not await anyio.to_thread.run_sync(ce.wait_digested, 600.0):
                    raise RuntimeError("the consolidator did not digest every session in 10 minutes")
                spent[2] += time.perf_counter() - start
                ce.reconciler.wait_projected()
                for name, (_, kind, group_by) in conv.items():
                    if kind == CONV:
                        lists[name] = await _recall_tool(c, q, group_by)
        finally:
            ce.close()
            shutil.rmtree(path.with_name(path.name + "-conv"), ignore_errors=True)

    try:
        anyio.run(session)
        if conv:
            anyio.run(conversations)
    finally:
        e.close()
        shutil.rmtree(path, ignore_errors=True)
    times = {}
    for sid, d in zip(q.session_ids, q.session_dates, strict=True):
        times.setdefault(sid, d)
    return Asked(q, lists, sessions_of, turns_of, role_of, times, spent[0], spent[1], spent[2])


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
    """The turns retrieved, in hit order."""
    out: dict[str, None] = {}
    for u in units:
        for t in a.turns_of.get(u, ()):
            out.setdefault(t, None)
    return list(out)


def engine_ranker(name: str) -> Ranker:
    """A variant's engine recall; a session ranks where its first unit in the hits does."""

    def rank(a: Asked) -> Ranked:
        units = a.lists[name]
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
    digest_s: float = 0.0
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
    if args.types:
        # Tuning on the weak question types only (development split): the headline always scores them all.
        kinds = set(args.types.split(","))
        qs = [q for q in qs if q.type in kinds]
    scored = [q for q in qs if not q.abstention]
    log(f"{len(qs)} questions in the {args.split} split ({len(scored)} scored, abstention left out)")
    cache = DiskCache(Path(args.cache), MiniLMEmbedder())
    todo = cache.missing(embed_texts(scored))
    log(f"embedding cache: {len(cache):,} vectors on disk, {len(todo):,} texts to embed")
    t0 = time.perf_counter()
    with tqdm(total=len(todo), desc="embed", unit="text", disable=not todo) as bar:
        cache.fill(todo, bar.update)
    r = Run(args.split, scored, embed_s=time.perf_counter() - t0, embedded=len(todo))
    chosen = set(args.variants)
    names = [n for n in VARIANTS if not chosen or n in chosen]
    table = {n: (VARIANTS[n][0], engine_ranker(n)) for n in names}
    wanted = {n: VARIANTS[n] for n in names} | (TUNING if args.save_lists else {})
    r.scores = {name: [] for name in table}
    r.described = {name: what for name, (what, _) in table.items()}
    root = Path(tempfile.mkdtemp(prefix="lme-", dir=args.work))
    saved: list[Asked] = []
    journal = Journal.open(Path(args.journal), args.split, list(table)) if args.journal else None
    todo_qs = scored
    if journal:
        todo_qs = [q for q in scored if q.id not in journal.done]
        journal.restore(r, scored)
        log(f"journal {args.journal}: {len(journal.done)} questions already scored, {len(todo_qs)} to go")
    try:
        for q in tqdm(todo_qs, desc=f"questions ({args.split})", unit="q"):
            q_start = time.perf_counter()
            a = ask(q, cache, root, wanted)
            r.write_s += a.write_s
            r.recall_s += a.recall_s
            r.digest_s += a.digest_s
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
            if journal:
                journal.add(q, r, a, time.perf_counter() - q_start)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if args.save_lists:
            Path(args.save_lists).write_bytes(pickle.dumps(saved))
    r.wall_s = time.perf_counter() - start + (journal.earlier_wall_s if journal else 0.0)
    return r


@dataclass
class Journal:
    """One JSON line per scored question, appended as the run goes, so a long run (the reporting split takes
    hours on two shared cores) can stop and go on later with the same command: questions already in the
    journal are not asked again, and the report covers all of them."""

    path: Path
    rows: dict[str, dict] = field(default_factory=dict)

    @property
    def done(self) -> set[str]:
        return set(self.rows)

    @property
    def earlier_wall_s(self) -> float:
        return sum(row["wall_s"] for row in self.rows.values())

    @classmethod
    def open(cls, path: Path, split_name: str, variants: list[str]) -> Journal:
        j = cls(path)
        if path.exists():
            lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            head, rows = lines[0], lines[1:]
            if head != {"split": split_name, "variants": variants}:
                raise SystemExit(f"{path} was written for {head}; use another --journal for this run")
            j.rows = {row["q"]: row for row in rows}
        else:
            path.write_text(json.dumps({"split": split_name, "variants": variants}) + "\n")
        return j

    def restore(self, r: Run, scored: list[Question]) -> None:
        for q in scored:
            row = self.rows.get(q.id)
            if row is None:
                continue
            for name, values in row["scores"].items():
                r.scores[name].append((q, Scores(values)))
            r.failures.extend(row["failures"])
            r.write_s += row["write_s"]
            r.recall_s += row["recall_s"]
            r.digest_s += row["digest_s"]
            r.units += row["units"]

    def add(self, q: Question, r: Run, a: Asked, wall_s: float) -> None:
        row = {
            "q": q.id,
            "scores": {name: dict(r.scores[name][-1][1].values) for name in r.scores},
            "failures": [line for line in r.failures if line.startswith(f"| {q.id} |")],
            "write_s": a.write_s,
            "recall_s": a.recall_s,
            "digest_s": a.digest_s,
            "units": sum(1 for _ in a.sessions_of),
            "wall_s": wall_s,
        }
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
        self.rows[q.id] = row


def pick_variants(values: Sequence[str], known: Sequence[str]) -> list[str]:
    """The variant names selected by the ``--variants`` values, in the order given, each once.

    A value is one name ("full, no group_by"), or names separated by ``;``, or (as before) by ``,``. Names may
    themselves hold commas, so a comma list is read greedily: at each point the longest run of comma-separated
    pieces that names a variant is taken. Raises ``ValueError`` naming the first piece that is no variant.
    """
    out: dict[str, None] = {}
    for value in values:
        for part in value.split(";") if ";" in value else [value]:
            pieces = part.split(",")
            i = 0
            while i < len(pieces):
                for j in range(len(pieces), i, -1):
                    name = ",".join(pieces[i:j]).strip()
                    if name in known:
                        out.setdefault(name, None)
                        i = j
                        break
                else:
                    bad = pieces[i].strip()
                    if bad:
                        raise ValueError(f"no variant named {bad!r}")
                    i += 1
    return list(out)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, with ``args.variants`` resolved to a list of variant names (empty: all of them)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "data", nargs="?", default="../shared/bench-data/", help="folder with the LongMemEval files"
    )
    p.add_argument("--split", choices=("dev", "report", "all"), default="dev")
    p.add_argument("--limit", type=int, default=None, help="only N questions, evenly spaced over the split")
    p.add_argument("--out", default=str(DOC), help="the Markdown report (the PNG goes beside it)")
    p.add_argument("--cache", default=str(CACHE), help="embedding cache directory (kept between runs)")
    p.add_argument("--work", default=None, help="where the per-question data directories go (temp)")
    p.add_argument(
        "--variants",
        action="append",
        default=[],
        help="a subset of variants to score: repeat the flag, or separate names with ';' (or ','; a name may "
        "hold a comma, as in 'full, no group_by')",
    )
    p.add_argument("--types", default="", help="comma-separated question types to keep (tuning on dev)")
    p.add_argument("--no-write", action="store_true", help="print the tables only")
    p.add_argument(
        "--save-lists", default="", help="pickle every question's unit lists here (offline tuning)"
    )
    p.add_argument(
        "--journal",
        default="",
        help="append each question's scores here and skip questions already in it (stop and go on later)",
    )
    args = p.parse_args(argv)
    try:
        given = args.variants
        args.variants = pick_variants(given, [*VARIANTS])
        if given and not args.variants:  # "--variants ''" or "--variants ';'": no selection is not "all"
            raise ValueError(f"{'; '.join(given)!r} names no variant")
    except ValueError as e:
        p.error(f"--variants: {e}; the variants are: " + "; ".join(VARIANTS))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cmd = "python bench/longmemeval.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    r = run(args)
    from _lme_report import print_tables, write_report

    print_tables(r)
    if not args.no_write:
        write_report(r, Path(args.out), cmd, Path(args.data), load_avg())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
