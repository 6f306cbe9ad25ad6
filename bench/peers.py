"""Mnemograph beside the memory servers a user would otherwise install, on the same LongMemEval workload in one run.

    python bench/peers.py ../shared/bench-data/                       # 15 report-split questions (the headline)
    python bench/peers.py ../shared/bench-data/ --split dev --limit 3 --out /tmp/peers.md   # a quick try

Every server is driven the same way, through its own MCP tools over stdio with the SDK's ``Client``, from this
process: for each question (a shared subset of the split's scored questions, shared out over the question types
so that every type is in it, evenly spaced within each type), for each server in turn (the order rotates per question, so machine noise falls on all alike):

1. start it on a fresh data directory and write the question's haystack as a client would: the user turns, in
   order, one tool call per memory, waiting for each answer (write throughput = memories / seconds);
2. read the resident memory of its process tree from /proc (VmRSS summed over the process the client spawned,
   its descendants, and any process it detached and named, such as Mnemograph's owner);
3. search with the question (scored: session R@5 and NDCG@10, each returned memory mapped back to its session
   by what was recorded at write time; see ``_peers_rank``), then with every other question of the subset
   (latency only): recall p50/p95 over all those calls;
4. close it, stop anything it left running, start it again on the same directory and time spawn -> first
   search result (cold start to first answer).

A server that cannot be installed or started is reported with the reason, and the run goes on without it. The
peers are installed by ``bench/peers_install.sh`` into ``.cache/peers/``. Writes docs/benchmarks/peers.md and
peers.json beside it (``--out``).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory leads sys.path (bench/mcp.py would shadow the SDK): _sdk handles it.
sys.path.append(str(Path(__file__).resolve().parent))

import argparse
import json
import shlex
import shutil
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

import anyio
from _common import load as load_avg
from _common import machine
from _lme_data import Question, load, split
from _peers_proc import children, tree_rss
from _peers_rank import Written, mean, median, quantile, scores
from _peers_report import MARKER, report
from _peers_servers import (
    BasicMemory,
    McpMemoryService,
    Mnemograph,
    Peer,
    ServerMemory,
    Unavailable,
    mem0_reason,
)
from _sdk import Client

from storage.domain.models import MAX_CONTENT_CHARS

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "peers.md"
PEERS = {
    "mnemograph": Mnemograph,
    "server-memory": ServerMemory,
    "mcp-memory-service": McpMemoryService,
    "basic-memory": BasicMemory,
}


@dataclass(frozen=True, slots=True)
class Memory:
    text: str
    session: str
    when: datetime


def memories(q: Question) -> list[Memory]:
    """The user turns that say something, in order, cut to Mnemograph's content limit (the smallest here)."""
    return [
        Memory(t.content[:MAX_CONTENT_CHARS], q.session_ids[t.session], q.session_dates[t.session])
        for t in q.turns()
        if t.role == "user" and t.content.strip()
    ]


def subset(questions: Sequence[Question], limit: int) -> list[Question]:
    """``limit`` scored (non-abstention) questions: shared out over the question types in proportion to their
    counts, at least one each while ``limit`` allows, evenly spaced within each type, in split order."""
    scored = [q for q in questions if not q.abstention]
    if limit >= len(scored):
        return scored
    by_type: dict[str, list[Question]] = {}
    for q in scored:
        by_type.setdefault(q.type, []).append(q)
    # Largest remainder: every type gets its proportional share rounded down (at least one), the rest go to the
    # largest remainders; with fewer questions than types, the most common types come first.
    share = {t: limit * len(qs) / len(scored) for t, qs in by_type.items()}
    take = {t: max(1, int(v)) if limit >= len(by_type) else 0 for t, v in share.items()}
    for t in sorted(share, key=lambda t: (take[t] - share[t], -len(by_type[t]))):
        if sum(take.values()) >= limit:
            break
        take[t] += 1
    while sum(take.values()) > limit:  # the minimum of one each overshot: trim the most common types
        take[max(take, key=lambda t: take[t] - share[t])] -= 1
    picked: set[str] = set()
    for t, qs in by_type.items():
        step = len(qs) / take[t] if take[t] else 0
        picked.update(qs[int(i * step)].id for i in range(take[t]))
    return [q for q in scored if q.id in picked]


def interleaved(questions: Sequence[Question]) -> list[Question]:
    """The run order: one question of each type in turn (types in order of first appearance), so that a run cut
    short by ``--max-minutes`` still covers every type instead of dropping the types that come last in the split."""
    by_type: dict[str, list[Question]] = {}
    for q in questions:
        by_type.setdefault(q.type, []).append(q)
    out: list[Question] = []
    while any(by_type.values()):
        out += [qs.pop(0) for qs in by_type.values() if qs]
    return out


@dataclass
class Result:
    """One server's figures; lists hold one entry per question (or per call, for latencies)."""

    name: str
    version: str = "?"
    setup: str = ""
    failure: str = ""  # why it could not run at all, or stopped
    note: str = ""  # what the run showed beyond the table
    errors: list[str] = field(default_factory=list)  # per-question failures
    questions: list[str] = field(default_factory=list)
    written: int = 0
    write_s: float = 0.0
    rss_mib: list[float] = field(default_factory=list)
    rss_parts: list[dict[str, float]] = field(default_factory=list)
    cold_s: list[float] = field(default_factory=list)
    cold_same: list[bool] = field(default_factory=list)  # the cold answer equals the warm one
    handshake_s: list[float] = field(default_factory=list)
    scores: dict[str, list[dict[str, float]]] = field(default_factory=dict)  # variant -> per question
    latency_s: dict[str, list[float]] = field(default_factory=dict)  # variant -> every search call
    returned: dict[str, list[int]] = field(default_factory=dict)  # variant -> results per scored search
    # variant -> per question, the top 10 sessions of the scored search (to see why a question scored as it did)
    ranked: dict[str, list[list[str]]] = field(default_factory=dict)

    def summary(self) -> dict[str, dict[str, float]]:
        """variant -> the table's figures."""
        out: dict[str, dict[str, float]] = {}
        for variant, rows in self.scores.items():
            lat = self.latency_s.get(variant, [])
            out[variant] = {
                "questions": len(rows),
                "R@5": mean([r["R@5"] for r in rows]),
                "NDCG@10": mean([r["NDCG@10"] for r in rows]),
                "recall p50 ms": quantile(lat, 0.5) * 1000,
                "recall p95 ms": quantile(lat, 0.95) * 1000,
                "writes/s": self.written / self.write_s if self.write_s else float("nan"),
                "cold start s": median(self.cold_s),
                "RSS MiB": median(self.rss_mib),
                "results per search": mean([float(n) for n in self.returned.get(variant, [])]),
            }
        return out


def log(msg: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


async def one_question(
    peer: Peer,
    res: Result,
    q: Question,
    probes: Sequence[Question],
    data: Path,
    k: int,
    limits: argparse.Namespace,
) -> None:
    """Steps 1-4 of the module docstring for one server and one question."""
    peer.prepare(data)
    written = Written()
    mems = memories(q)
    lists: dict[str, list[str]] = {}
    lat: dict[str, list[float]] = {v: [] for v in peer.variants}
    try:
        started = time.perf_counter()
        async with Client(peer.params(data), mode="legacy") as c:
            res.handshake_s.append(time.perf_counter() - started)
            with anyio.fail_after(limits.write_timeout):
                t0 = time.perf_counter()
                for n, m in enumerate(mems):
                    written.record(await peer.write(c, m.text, n, m.when, m.session), m.session)
                spent = time.perf_counter() - t0
            rss, parts = tree_rss(children() + peer.extra_pids(data))
            for variant in peer.variants:
                for i, p in enumerate([q, *probes]):
                    t0 = time.perf_counter()
                    keys = await peer.search(c, p.text, k, p.date, variant)
                    lat[variant].append(time.perf_counter() - t0)
                    if i == 0:
                        lists[variant] = keys
    finally:
        peer.stop(data)
    started = time.perf_counter()
    try:
        with anyio.fail_after(limits.cold_timeout):
            async with Client(peer.params(data), mode="legacy") as c:
                cold_keys = await peer.search(c, q.text, k, q.date, peer.variants[0])
                cold = time.perf_counter() - started
    finally:
        peer.stop(data)
    # Only now, with every step done, does the question count for this server.
    res.questions.append(q.id)
    res.written += len(mems)
    res.write_s += spent
    res.rss_mib.append(rss)
    res.rss_parts.append(parts)
    res.cold_s.append(cold)
    res.cold_same.append(cold_keys == lists[peer.variants[0]])
    for variant, keys in lists.items():
        sessions = written.rank(keys)
        res.scores.setdefault(variant, []).append(scores(sessions, q.answer_sessions))
        res.ranked.setdefault(variant, []).append(sessions[:10])
        res.latency_s.setdefault(variant, []).extend(lat[variant])
        res.returned.setdefault(variant, []).append(len(keys))


def run(args: argparse.Namespace) -> tuple[list[Question], list[Result]]:
    qs = interleaved(subset(split(load(Path(args.data)), args.split), args.limit))
    types = Counter(q.type for q in qs)
    log(
        f"{len(qs)} questions from the {args.split} split: {dict(types)}; {sum(len(memories(q)) for q in qs):,} memories each server"
    )
    wanted = [p for p in args.peers.split(",") if p]
    peers: list[tuple[Peer, Result]] = []
    for key in wanted:
        peer = PEERS[key]()
        res = Result(peer.name)
        try:
            peer.install()
        except Unavailable as e:
            res.failure = str(e)
            log(f"{peer.name}: unavailable: {e}")
        res.version, res.setup = peer.version, peer.setup
        peers.append((peer, res))
    mem0 = Result("Mem0 (open source)", failure=mem0_reason())
    root = Path(tempfile.mkdtemp(prefix="peers-", dir=args.work))
    deadline = time.monotonic() + args.max_minutes * 60 if args.max_minutes else None
    try:
        for i, q in enumerate(qs):
            if deadline is not None and time.monotonic() > deadline:
                log(f"--max-minutes reached: stopping after {i} questions")
                qs = qs[:i]  # the report covers the questions that ran
                break
            probes = [p for p in qs if p is not q]
            order = peers[i % len(peers) :] + peers[: i % len(peers)]
            for peer, res in order:
                if res.failure:
                    continue
                peer.log = root / f"{type(peer).__name__}.log"
                data = root / type(peer).__name__ / q.id
                t0 = time.perf_counter()
                try:
                    anyio.run(one_question, peer, res, q, probes, data, args.k, args)
                    s = res.summary()[peer.variants[0]]
                    log(
                        f"q{i + 1} {q.id} {peer.name}: {time.perf_counter() - t0:.0f} s, "
                        f"R@5 {s['R@5']:.3f} NDCG@10 {s['NDCG@10']:.3f} so far"
                    )
                except (
                    Exception
                ) as e:  # a server's failure is a result: recorded with its cause, and on we go
                    inner: BaseException = e
                    while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
                        inner = inner.exceptions[0]  # the SDK's task groups wrap the real cause
                    why = f"{type(inner).__name__}: {inner}"
                    tail = (
                        peer.log.read_text(errors="replace").strip().splitlines()[-3:]
                        if peer.log.exists()
                        else []
                    )
                    res.errors.append(
                        f"{q.id}: {why}" + (f" (server log: {' / '.join(tail)})" if tail else "")
                    )
                    log(f"q{i + 1} {q.id} {peer.name}: FAILED {why}")
                    if args.verbose:
                        traceback.print_exc()
                    if len(res.errors) >= 2 and not res.questions:
                        res.failure = (
                            f"failed on its first {len(res.errors)} questions; the first: {res.errors[0]}"
                        )
                finally:
                    shutil.rmtree(data, ignore_errors=True)
    finally:
        for peer, res in peers:
            if res.questions:
                res.note = peer.note(res.written)
            if args.logs and peer.log.exists():
                shutil.copy(peer.log, Path(args.logs) / peer.log.name)
        shutil.rmtree(root, ignore_errors=True)
    return qs, [res for _, res in peers] + [mem0]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "data", nargs="?", default="../shared/bench-data/", help="folder with the LongMemEval files"
    )
    p.add_argument("--split", choices=("dev", "report", "all"), default="report")
    p.add_argument(
        "--limit", type=int, default=15, help="questions, evenly spaced over the split's scored ones"
    )
    p.add_argument(
        "--k", type=int, default=20, help="results asked of each search, where the tool takes a limit"
    )
    p.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated subset of {', '.join(PEERS)}")
    p.add_argument("--out", default=str(DOC), help="the Markdown report (the JSON goes beside it)")
    p.add_argument("--work", default=None, help="where the data directories go (temp)")
    p.add_argument("--logs", default="", help="copy each server's stderr log into this folder")
    p.add_argument("--write-timeout", type=float, default=1800, help="seconds for one question's writes")
    p.add_argument("--cold-timeout", type=float, default=300, help="seconds for one cold start")
    p.add_argument(
        "--max-minutes", type=float, default=0, help="start no new question after this long (0: none)"
    )
    p.add_argument("--verbose", action="store_true", help="print tracebacks of failures")
    p.add_argument("--from-json", default="", help="only rewrite --out from this run's JSON (no run)")
    args = p.parse_args(argv)
    cmd = "python bench/peers.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    if args.from_json:  # rewrite the Markdown from a run's JSON (after a change to the report's wording)
        saved = json.loads(Path(args.from_json).read_text())
        names = {f.name for f in fields(Result)}
        results = [Result(**{k: v for k, v in r.items() if k in names}) for r in saved.pop("servers")]
        write(saved, results, Path(args.out), json_too=False)
        return 0
    load_before = load_avg()
    started = time.perf_counter()
    qs, results = run(args)
    info = {
        "command": cmd,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "load": [load_before, load_avg()],
        "wall_s": time.perf_counter() - started,
        "split": args.split,
        "k": args.k,
        "planned": args.limit,
        "max_minutes": args.max_minutes,
        "questions": [
            {"id": q.id, "type": q.type, "memories": len(memories(q)), "evidence": sorted(q.answer_sessions)}
            for q in qs
        ],
    }
    write(info, results, Path(args.out), json_too=True)
    return 0


def write(info: dict[str, Any], results: list[Result], out: Path, json_too: bool) -> None:
    text = report(info, results)
    if out.exists() and MARKER in (old := out.read_text()):  # keep the hand-written notes
        text = text[: text.index(MARKER)] + old[old.index(MARKER) :]
    print(text.split("\n## ", 2)[1] if "\n## " in text else text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    if json_too:
        payload = info | {"servers": [asdict(r) | {"summary": r.summary()} for r in results]}
        out.with_suffix(".json").write_text(json.dumps(payload, indent=1, default=str) + "\n")
    log(f"wrote {out}" + (f" and {out.with_suffix('.json')}" if json_too else ""))


if __name__ == "__main__":
    raise SystemExit(main())
