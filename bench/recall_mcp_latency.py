"""``recall`` through MCP on a conversation's fresh store, checkout against checkout in the same run.

The workload of ``bench/peers.py`` (issue 17), cut down so it can run often: for each LongMemEval question, a
fresh store per checkout, the haystack's user turns written one ``memory_write`` per turn through ``mnemograph
serve`` (stdio, the SDK ``Client``), then two phases of recalls (``k`` 20, ``token_budget`` 100,000, as
peers.py asks), every query new to the server (a repeated query finds its embedding cached):

- ``after the writes``: the question, then other questions of the split, one after the other, right after the
  last write was acknowledged (as peers.py searches);
- ``right after a write``: a client's conversation, ``--cycles`` times: one more ``memory_write`` (a turn of
  another question), then a recall with a new query.

Two checkouts (``--a``, ``--b``) are driven call by call: each turn is written to A then B, and each recall
goes to both in a random order, so both stores have the same age and see the same machine load; the ranked ids
of every recall are compared between the two. Per recall it records the client's round trip and the CPU the
owner process used for it (``/proc/<pid>/stat``, 10 ms ticks: read the mean). ``--profile FILE`` samples B's
owner with py-spy during the recalls (raw folded stacks, one line per stack).

Usage: ``PYTHONPATH=. .venv/bin/python bench/recall_mcp_latency.py ../shared/bench-data --a /path/to/base --b .``
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # bench/mcp.py would shadow the SDK package
sys.path.append(str(Path(__file__).resolve().parent))

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
from _common import load as load_avg
from _common import machine
from _lme_data import Question, load, split
from _sdk import Client
from mcp import StdioServerParameters

from server._runtime import RuntimePaths
from server.settings import load_settings
from storage.domain.models import MAX_CONTENT_CHARS, MAX_TOKEN_BUDGET

MNEMOGRAPH = str(Path(sys.executable).parent / "mnemograph")
PY_SPY = str(Path(sys.executable).parent / "py-spy")
PHASES = ("after the writes", "right after a write")


@dataclass
class Side:
    name: str
    checkout: Path
    data: Path = Path()
    round_trip: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PHASES})
    owner_cpu: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PHASES})
    ids: list[list[str]] = field(default_factory=list)
    answers: list[Any] = field(default_factory=list)
    write_s: float = 0.0
    writes: int = 0

    def params(self) -> StdioServerParameters:
        env = {"PYTHONPATH": str(self.checkout), "MNEMOGRAPH_IDLE_TIMEOUT": "600"}
        return StdioServerParameters(
            command=MNEMOGRAPH, args=["serve", "--data-dir", str(self.data)], env=env
        )

    def paths(self) -> RuntimePaths:
        settings = load_settings({}, data_dir=str(self.data))
        return RuntimePaths.of(settings.runtime_dir, settings.data_dir)

    def owner(self) -> int:
        return int(json.loads(self.paths().info_file.read_text())["pid"])

    def stop(self) -> None:
        with contextlib.suppress(FileNotFoundError, ValueError, KeyError, ProcessLookupError):
            pid = self.owner()
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 120
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        shutil.rmtree(self.paths().root, ignore_errors=True)


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Turn = tuple[str, str, datetime]


def _turns(q: Question) -> list[Turn]:
    return [
        (t.content[:MAX_CONTENT_CHARS], q.session_ids[t.session], q.session_dates[t.session])
        for t in q.turns()
        if t.role == "user" and t.content.strip()
    ]


async def _write(side: Side, client: Client, turn: Turn) -> None:
    text, session, when = turn
    t0 = time.perf_counter()
    result = await client.call_tool(
        "memory_write",
        {
            "content": text,
            "kind": "message",
            "event_time": when.isoformat(),
            "metadata": {"session": session},
        },
    )
    side.write_s += time.perf_counter() - t0
    side.writes += 1
    assert not result.is_error, result


async def _recall(
    sides: list[Side],
    clients: dict[str, Client],
    owners: dict[str, int],
    query: str,
    phase: str,
    k: int,
    turn: Turn | None = None,
) -> None:
    """One recall on every side, in a random order; with ``turn``, each side first writes it (so that no other
    side's store is still projecting a write of its own while this side recalls)."""
    order = list(sides)
    random.shuffle(order)
    got: dict[str, list[str]] = {}
    for s in order:
        if turn is not None:
            await _write(s, clients[s.name], turn)
        before = _cpu(owners[s.name])
        t0 = time.perf_counter()
        result = await clients[s.name].call_tool(
            "recall", {"query": query, "k": k, "token_budget": MAX_TOKEN_BUDGET}
        )
        s.round_trip[phase].append(time.perf_counter() - t0)
        s.owner_cpu[phase].append(_cpu(owners[s.name]) - before)
        assert not result.is_error, result
        results: list[dict[str, Any]] = result.structured_content["results"]  # type: ignore[index]
        got[s.name] = [r["id"] for r in results]
        s.answers.append([(r["id"], r["kind"], r.get("why", "")) for r in results])
    for s in sides:
        s.ids.append(got[s.name])


async def _question(
    sides: list[Side], q: Question, queries: list[str], extra: list[Turn], args: argparse.Namespace
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        clients = {s.name: await stack.enter_async_context(Client(s.params(), mode="legacy")) for s in sides}
        for turn in _turns(q):
            for s in sides:
                await _write(s, clients[s.name], turn)
        owners = {s.name: s.owner() for s in sides}
        spy = None
        if args.profile:
            spy = subprocess.Popen(  # noqa: ASYNC220 (started once, before the timed calls)
                [
                    *(PY_SPY, "record", "--pid", str(owners[sides[-1].name]), "--format", "raw", "-r", "200"),
                    *("-o", args.profile, "--nonblocking", "--threads"),
                    *(["--idle"] if args.idle else []),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        try:
            fresh, later = queries[: args.queries], queries[args.queries :]
            for query in fresh:
                await _recall(sides, clients, owners, query, PHASES[0], args.k)
            for turn, query in zip(extra, later, strict=False):
                await _recall(sides, clients, owners, query, PHASES[1], args.k, turn)
        finally:
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(60)
    for s in sides:
        s.stop()


def _q(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def _table(sides: list[Side]) -> list[str]:
    rows = [
        "| phase | checkout | recalls | round trip p50 ms | p95 ms | owner CPU per recall, mean ms |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for phase in PHASES:
        for s in sides:
            rt, cpu = s.round_trip[phase], s.owner_cpu[phase]
            rows.append(
                f"| {phase} | {s.name} | {len(rt)} | {_q(rt, 0.5) * 1000:.1f} | {_q(rt, 0.95) * 1000:.1f} | "
                f"{statistics.fmean(cpu) * 1000 if cpu else float('nan'):.1f} |"
            )
    if len(sides) == 2:
        a, b = sides
        for phase in PHASES:
            ra, rb = a.round_trip[phase], b.round_trip[phase]
            rows.append(
                f"| {phase} | **B / A** | | **{_q(rb, 0.5) / _q(ra, 0.5):.2f}** | **{_q(rb, 0.95) / _q(ra, 0.95):.2f}** | "
                f"{statistics.fmean(b.owner_cpu[phase]) / max(1e-9, statistics.fmean(a.owner_cpu[phase])):.2f} |"
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data", help="folder with the LongMemEval files")
    parser.add_argument("--a", default=None, help="the checkout before (default: only --b)")
    parser.add_argument("--b", default=".", help="the checkout after")
    parser.add_argument("--split", default="dev")
    parser.add_argument(
        "--questions", type=int, default=2, help="fresh stores per checkout, one per question"
    )
    parser.add_argument("--queries", type=int, default=20, help="recalls right after the writes, per store")
    parser.add_argument("--cycles", type=int, default=20, help="write + recall cycles after those, per store")
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--profile", default=None, help="py-spy raw output for B's owner during the recalls")
    parser.add_argument("--idle", action="store_true", help="py-spy samples waiting threads too (wall time)")
    parser.add_argument("--out", default=None, help="write the Markdown table here")
    parser.add_argument("--json", default=None, help="write every recall's figures here")
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args()
    random.seed(args.seed)
    qs = [q for q in split(load(Path(args.data)), args.split) if not q.abstention]
    step = max(1, len(qs) // args.questions)
    chosen = qs[::step][: args.questions]
    others = [q for q in qs if q not in chosen]
    load_start = load_avg()
    started = datetime.now(UTC)
    named = [("A", args.a), ("B", args.b)] if args.a else [("B", args.b)]
    sides = [Side(f"{n} {Path(c).resolve()}", Path(c).resolve()) for n, c in named]
    with tempfile.TemporaryDirectory(prefix="lat-") as tmp:
        for i, q in enumerate(chosen):
            for s in sides:
                s.data = Path(tmp) / f"{s.name[0]}{i}"
            # Every query new to this store's server; the extra turns come from another question's haystack.
            pool = [o.text for o in others[i::2]]
            queries = [q.text, *pool][: args.queries + args.cycles]
            extra = _turns(others[(i * 7 + 3) % len(others)])[: args.cycles]
            anyio.run(_question, sides, q, queries, extra, args)
            print(f"question {i + 1}/{len(chosen)} {q.id}: done", file=sys.stderr, flush=True)
    lines = _table(sides)
    if len(sides) == 2:
        a, b = sides
        same = [x == y for x, y in zip(a.ids, b.ids, strict=True)]
        differ = [i for i, ok in enumerate(same) if not ok]
        lines += [
            "",
            f"Ranked ids identical between A and B in {sum(same)} of {len(same)} recalls (differ: {differ}).",
        ]
    lines += [
        "",
        f"- Command: `{' '.join(sys.argv)}`",
        f"- Date: {started:%Y-%m-%d %H:%M} UTC; {len(chosen)} questions ({', '.join(q.id for q in chosen)}), "
        f"{sum(len(_turns(q)) for q in chosen)} memories written per checkout before the recalls; "
        f"{args.queries} recalls after the writes and {args.cycles} write + recall cycles per store",
        f"- Machine: {machine()}; load average at start {load_start}, at end {load_avg()}",
    ]
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    s.name: {"round_trip": s.round_trip, "owner_cpu": s.owner_cpu, "answers": s.answers}
                    for s in sides
                }
            )
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
