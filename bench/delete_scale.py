"""What deleting one memory from the canonical store costs as the store grows: ``delete_memories`` of one memory
(what every erase, purge and withdrawn digest runs) on Kùzu stores of 500, 5,000 and 50,000 memories, the old
statements (copied here as the baseline: filters over whole tables) against the adapter's (lookups that start
from the deleted memories), in the same run, on the same memories.

    python bench/delete_scale.py --out docs/benchmarks/delete-scale.md
    python bench/delete_scale.py --sizes 500 --runs 5          # quick look, prints only

Each store is written straight into Kùzu's tables (``COPY FROM`` Parquet files): filling 50,000 memories through
the engine would take half an hour here, and what is measured is the graph's shape, not how it was written. The
shape follows a real store: every memory in one of 20 scopes and mentioning two or three entities, a third of
them recording a relation (half of those later ended by another memory), one in ten an amendment of an earlier
one, one in fifty raising a SAME_AS proposal, one in ten with a model pass record.

Each deletion runs in a transaction that is rolled back, so every variant deletes the same memories from the same
store; the variants alternate. At the smallest size the graph left by each variant is compared, row by row, for
every memory deleted: the new statements must leave exactly what the old ones left.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from _common import load, machine  # noqa: E402

from storage.adapters.kuzu import GraphStore  # noqa: E402
from storage.adapters.kuzu._cypher import _NEWER_ERASED, _exec, _rows  # noqa: E402
from storage.ports.canonical import Session  # noqa: E402

DIM = 384
SCOPES = 20
T0 = datetime(2025, 1, 1, tzinfo=UTC)


# -- the store -------------------------------------------------------------------------------------------------


def _columns(conn: Any, table: str) -> list[str]:
    return [r[1] for r in _rows(conn, f"CALL TABLE_INFO('{table}') RETURN *")]


def _copy(conn: Any, tmp: Path, table: str, cols: dict[str, pa.Array], ends: Sequence[str] = ()) -> None:
    """COPY ``cols`` into ``table`` (a rel table's two end columns first), in the table's column order."""
    names = [*ends, *_columns(conn, table)]
    path = tmp / f"{table}.parquet"
    pq.write_table(pa.table({n: cols[n] for n in names}), path)
    conn.execute(f"COPY {table} FROM '{path}'")


def build(directory: Path, n: int) -> dict[str, list[str]]:
    """A store of ``n`` memories; returns the memories to delete, by what they are (``picks``)."""
    g = GraphStore(directory / "graph", dim=DIM, embedder_name="bench")
    conn = g._writer  # outside any transaction: COPY runs on its own
    tmp = Path(tempfile.mkdtemp(prefix="delete-scale-"))
    ts = pa.timestamp("us")
    try:
        ids = [f"m{i:07d}" for i in range(n)]
        n_ent = max(10, n // 4)
        mentions: list[tuple[str, str]] = []
        for i in range(n):
            # a popular entity (one of 50), one of the long tail, and a third for every other memory
            mentions.append((ids[i], f"e{i % 50}"))
            mentions.append((ids[i], f"e{50 + (i * 7919) % (n_ent - 50)}"))
            if i % 2:
                mentions.append((ids[i], f"e{50 + (i * 104729) % (n_ent - 50)}"))
        mentions = list(dict.fromkeys(mentions))
        said: dict[str, list[str]] = {}
        for m, e in mentions:
            said.setdefault(m, []).append(e)
        supersedes: dict[str, str] = {}  # new -> old: every tenth memory amends the one before it
        for i in range(10, n, 10):
            supersedes[ids[i]] = ids[i - 1]
        superseded_by = {old: new for new, old in supersedes.items()}
        at = [T0 + timedelta(seconds=i) for i in range(n)]
        _copy(
            conn,
            tmp,
            "Memory",
            {
                "id": pa.array(ids),
                "content": pa.array([f"memory {i} says something about {said[ids[i]][1]}" for i in range(n)]),
                "kind": pa.array(["fact"] * n),
                "principal": pa.array(["bench"] * n),
                "client": pa.array(["bench"] * n),
                "source": pa.array([""] * n),
                "metadata": pa.array(["{}"] * n),
                "event_time": pa.array(at, ts),
                "event_time_source": pa.array(["recorded"] * n),
                "valid_from": pa.array(at, ts),
                "valid_to": pa.array([at[i] if ids[i] in superseded_by else None for i in range(n)], ts),
                "recorded_at": pa.array(at, ts),
                "retired_at": pa.array([None] * n, ts),
                "retire_reason": pa.array([""] * n),
                "supersedes": pa.array([supersedes.get(m) for m in ids], pa.string()),
                "superseded_by": pa.array([superseded_by.get(m) for m in ids], pa.string()),
                "vector": pa.array(
                    [[float((i + k) % 7) for k in range(DIM)] for i in range(n)], pa.list_(pa.float32(), DIM)
                ),
                "scopes": pa.array([[f"user:u{i % SCOPES:02d}"] for i in range(n)], pa.list_(pa.string())),
                "entity_names": pa.array([sorted(said[m]) for m in ids], pa.list_(pa.string())),
            },
        )
        ents = [f"e{k}" for k in range(n_ent)]
        _copy(
            conn,
            tmp,
            "Entity",
            {
                "id": pa.array(ents),
                "name": pa.array([f"E{k}" for k in range(n_ent)]),
                "type": pa.array(["thing"] * n_ent),
                "aliases": pa.array([[] for _ in ents], pa.list_(pa.string())),
            },
        )
        _copy(
            conn,
            tmp,
            "Scope",
            {
                "id": pa.array([f"user:u{k:02d}" for k in range(SCOPES)]),
                "created_at": pa.array([T0] * SCOPES, ts),
            },
        )
        _copy(
            conn,
            tmp,
            "CONTAINS",
            {
                "from": pa.array([f"user:u{i % SCOPES:02d}" for i in range(n)]),
                "to": pa.array(ids),
                "added_at": pa.array(at, ts),
            },
            ("from", "to"),
        )
        _copy(
            conn,
            tmp,
            "MENTIONS",
            {
                "from": pa.array([m for m, _ in mentions]),
                "to": pa.array([e for _, e in mentions]),
                "name": pa.array([f"E{e[1:]}" for _, e in mentions]),
                "type": pa.array(["thing"] * len(mentions)),
                "aliases": pa.array([[] for _ in mentions], pa.list_(pa.string())),
            },
            ("from", "to"),
        )
        # A third of the memories record a relation between the first two entities they mention; half of those
        # relations are ended by the next memory that mentions the same subject and records one too.
        rel_rows: list[dict[str, Any]] = []
        last_by_subject: dict[str, int] = {}
        for i in range(0, n, 3):
            a, b = said[ids[i]][1], said[ids[i]][0]
            rel_rows.append({"from": a, "to": b, "memory_id": ids[i], "i": i, "ended_by": None})
            prev = last_by_subject.get(a)
            if prev is not None and rel_rows[prev]["ended_by"] is None and prev % 2 == 0:
                rel_rows[prev]["ended_by"] = ids[i]
            last_by_subject[a] = len(rel_rows) - 1
        _copy(
            conn,
            tmp,
            "RELATES",
            {
                "from": pa.array([r["from"] for r in rel_rows]),
                "to": pa.array([r["to"] for r in rel_rows]),
                "predicate": pa.array(["works_with"] * len(rel_rows)),
                "memory_id": pa.array([r["memory_id"] for r in rel_rows]),
                "recorded_at": pa.array([at[r["i"]] for r in rel_rows], ts),
                "scopes": pa.array(
                    [[f"user:u{r['i'] % SCOPES:02d}"] for r in rel_rows], pa.list_(pa.string())
                ),
                "valid_from": pa.array([None] * len(rel_rows), ts),
                "valid_to": pa.array([at[r["i"]] if r["ended_by"] else None for r in rel_rows], ts),
                "ended_by": pa.array([r["ended_by"] for r in rel_rows], pa.string()),
            },
            ("from", "to"),
        )
        pairs = list(supersedes.items())
        _copy(
            conn,
            tmp,
            "SUPERSEDES",
            {
                "from": pa.array([new for new, _ in pairs]),
                "to": pa.array([old for _, old in pairs]),
                "reason": pa.array(["amended"] * len(pairs)),
                "at": pa.array([T0 + timedelta(seconds=int(new[1:])) for new, _ in pairs], ts),
            },
            ("from", "to"),
        )
        raisers = [ids[i] for i in range(5, n, 50)]
        _copy(
            conn,
            tmp,
            "SAME_AS",
            {
                "from": pa.array([said[m][1] for m in raisers]),
                "to": pa.array([said[m][0] for m in raisers]),
                "id": pa.array([f"p{m}" for m in raisers]),
                "tier": pa.array(["fuzzy"] * len(raisers)),
                "score": pa.array([0.9] * len(raisers), pa.float64()),
                "memory_id": pa.array(raisers),
                "status": pa.array(["pending"] * len(raisers)),
                "created_at": pa.array([T0] * len(raisers), ts),
                "decided_at": pa.array([None] * len(raisers), ts),
                "decided_by": pa.array([""] * len(raisers)),
                "scopes": pa.array([["user:u00"]] * len(raisers), pa.list_(pa.string())),
            },
            ("from", "to"),
        )
        enriched = [ids[i] for i in range(7, n, 10)]
        k = len(enriched)
        _copy(
            conn,
            tmp,
            "Enrichment",
            {
                "id": pa.array(enriched),
                "status": pa.array(["done"] * k),
                "detail": pa.array([""] * k),
                "model": pa.array(["bench"] * k),
                "input_tokens": pa.array([1] * k, pa.int64()),
                "output_tokens": pa.array([1] * k, pa.int64()),
                "cache_read_tokens": pa.array([0] * k, pa.int64()),
                "cache_write_tokens": pa.array([0] * k, pa.int64()),
                "at": pa.array([T0] * k, ts),
            },
        )
        _copy(
            conn,
            tmp,
            "Change",
            {
                "seq": pa.array(range(1, n + 1), pa.int64()),
                "op": pa.array(["add"] * n),
                "memory_id": pa.array(ids),
                "at": pa.array(at, ts),
            },
        )
        conn.execute("CHECKPOINT")
    finally:
        g.close()
        shutil.rmtree(tmp, ignore_errors=True)
    mid = n // 2
    ended = {r["ended_by"] for r in rel_rows if r["ended_by"]}
    return {
        "plain": [m for m in ids[mid:] if m not in supersedes and m not in superseded_by and int(m[1:]) % 3][
            :1
        ],
        "amended an older one": [m for m in ids[mid:] if m in supersedes and m not in ended][:1],
        "amended by a newer one": [m for m in ids[mid:] if m in superseded_by][:1],
        "recorded and ended relations": [m for m in ids[mid:] if m in ended][:1],
        "raised a proposal": [m for m in raisers[len(raisers) // 2 :]][:1],
        "has a model pass record": [m for m in enriched[len(enriched) // 2 :]][:1],
    }


# -- the old statements (before this change), the baseline ----------------------------------------------------


def old_delete_memories(g: GraphStore, conn: Session, ids: Sequence[str]) -> int:
    """``delete_memories`` as it was: every statement filters a whole node or edge table by ``IN $ids``."""
    ids = list(ids)
    touched = [
        r[0]
        for r in _rows(
            conn,
            "MATCH (m:Memory)-[:MENTIONS]->(e:Entity) WHERE m.id IN $ids RETURN DISTINCT e.id",
            {"ids": ids},
        )
    ]
    _exec(conn, "MATCH ()-[r:RELATES]->() WHERE r.memory_id IN $ids DELETE r", {"ids": ids})
    _exec(conn, "MATCH (x:Enrichment) WHERE x.id IN $ids DELETE x", {"ids": ids})
    _exec(conn, "MATCH ()-[r:SAME_AS]->() WHERE r.memory_id IN $ids DELETE r", {"ids": ids})
    _exec(
        conn,
        "MATCH ()-[r:RELATES]->() WHERE r.ended_by IN $ids SET r.valid_to = NULL, r.ended_by = NULL",
        {"ids": ids},
    )
    _exec(conn, "MATCH (m:Memory) WHERE m.supersedes IN $ids SET m.supersedes = NULL", {"ids": ids})
    _exec(
        conn,
        "MATCH (n:Memory)-[r:SUPERSEDES]->(o:Memory) WHERE n.id IN $ids AND NOT o.id IN $ids "
        "SET o.retire_reason = CASE WHEN o.retired_at IS NULL THEN $why ELSE o.retire_reason END, "
        "o.retired_at = coalesce(o.retired_at, r.at), o.superseded_by = NULL",
        {"ids": ids, "why": _NEWER_ERASED},
    )
    _exec(
        conn,
        "MATCH (m:Memory) WHERE m.superseded_by IN $ids "
        "SET m.retire_reason = CASE WHEN m.retired_at IS NULL THEN $why ELSE m.retire_reason END, "
        "m.retired_at = coalesce(m.retired_at, m.valid_to, m.recorded_at), m.superseded_by = NULL",
        {"ids": ids, "why": _NEWER_ERASED},
    )
    _exec(conn, "MATCH (m:Memory) WHERE m.id IN $ids DETACH DELETE m", {"ids": ids})
    orphans = _rows(
        conn,
        "MATCH (e:Entity) WHERE NOT EXISTS { MATCH (:Memory)-[:MENTIONS]->(e) } "
        "AND NOT EXISTS { MATCH (e)-[:RELATES]-(:Entity) } RETURN e.id",
    )
    _exec(conn, "MATCH (e:Entity) WHERE e.id IN $ids DETACH DELETE e", {"ids": [r[0] for r in orphans]})
    gone = {r[0] for r in orphans}
    for eid in touched:
        if eid not in gone:
            _old_regive(conn, eid)
    return len(orphans)


def _old_regive(conn: Session, entity: str) -> None:
    rows = _rows(
        conn,
        "MATCH (m:Memory)-[r:MENTIONS]->(e:Entity {id: $e}) RETURN r.name, r.type, r.aliases, e.name "
        "ORDER BY m.recorded_at, m.id",
        {"e": entity},
    )
    if not rows:
        rows = [
            [None, None, None, r[0]]
            for r in _rows(conn, "MATCH (e:Entity {id: $e}) RETURN e.name", {"e": entity})
        ]
    name = next((n for n, _, _, _ in rows if n), rows[0][3])
    etype = next((t for _, t, _, _ in rows if t), "thing")
    aliases = list(dict.fromkeys(a for _, _, given, _ in rows for a in (given or ())))
    _exec(
        conn,
        "MATCH (e:Entity {id: $e}) SET e.name = $name, e.type = $type, e.aliases = CAST($aliases AS STRING[])",
        {"e": entity, "name": name, "type": etype, "aliases": aliases},
    )


def new_delete_memories(g: GraphStore, conn: Session, ids: Sequence[str]) -> int:
    return g.delete_memories(conn, ids)


VARIANTS: dict[str, Callable[[GraphStore, Session, Sequence[str]], int]] = {
    "old": old_delete_memories,
    "new": new_delete_memories,
}


# -- measuring -------------------------------------------------------------------------------------------------


class _Rollback(Exception):
    pass


def _state(conn: Session) -> list[Any]:
    """Every row of every table the deletion touches, sorted: what a variant left behind."""
    queries = [
        "MATCH (m:Memory) RETURN m.id, m.supersedes, m.superseded_by, m.retired_at, m.retire_reason, m.valid_to",
        "MATCH (e:Entity) RETURN e.id, e.name, e.type, e.aliases",
        "MATCH (a)-[r:RELATES]->(b) RETURN a.id, b.id, r.memory_id, r.valid_to, r.ended_by",
        "MATCH (a)-[r:SAME_AS]->(b) RETURN a.id, b.id, r.id",
        "MATCH (a)-[r:SUPERSEDES]->(b) RETURN a.id, b.id",
        "MATCH (a)-[r:MENTIONS]->(b) RETURN a.id, b.id",
        "MATCH (a)-[r:CONTAINS]->(b) RETURN a.id, b.id",
        "MATCH (x:Enrichment) RETURN x.id",
    ]
    return [sorted(map(repr, _rows(conn, q))) for q in queries]


def once(g: GraphStore, variant: str, ids: Sequence[str], check: bool) -> tuple[float, int, Any]:
    """One deletion in a transaction that is then rolled back: seconds, entities deleted, and the graph it left
    (when ``check``)."""
    out: list[Any] = []
    try:
        with g.transaction() as conn:
            t = time.perf_counter()
            deleted = VARIANTS[variant](g, conn, ids)
            out += [time.perf_counter() - t, deleted, _state(conn) if check else None]
            raise _Rollback
    except _Rollback:
        pass
    return out[0], out[1], out[2]


def at_size(n: int, runs: int, check: bool) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix=f"delete-scale-{n}-"))
    try:
        t = time.perf_counter()
        picks = build(base, n)
        built = time.perf_counter() - t
        print(f"{n:,} memories: built in {built:.0f} s; load {load()}", flush=True)
        g = GraphStore(base / "graph", dim=DIM, embedder_name="bench")
        try:
            times: dict[str, list[float]] = {v: [] for v in VARIANTS}
            kinds = [(k, ms) for k, ms in picks.items() if ms]
            for _, ms in kinds:  # warm both: statement preparation and the buffer pool
                for v in VARIANTS:
                    once(g, v, ms, False)
            for r in range(runs):
                _kind, ms = kinds[r % len(kinds)]
                order = list(VARIANTS) if r % 2 == 0 else list(reversed(VARIANTS))
                for v in order:
                    times[v].append(once(g, v, ms, False)[0])
            if check:
                for kind, ms in kinds:
                    left = {v: once(g, v, ms, True)[1:] for v in VARIANTS}
                    if left["old"] != left["new"]:
                        raise SystemExit(f"{n:,} memories, {kind}: the new statements left another graph")
                print(
                    f"{n:,} memories: the new statements left the same graph for {len(kinds)} kinds",
                    flush=True,
                )
        finally:
            g.close()
        row = {"n": n, "built_s": built, **{v: statistics.median(ts) * 1000 for v, ts in times.items()}}
        print(f"{n:,} memories: old {row['old']:.2f} ms, new {row['new']:.2f} ms", flush=True)
        return row
    finally:
        shutil.rmtree(base, ignore_errors=True)


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| memories | old statements, median ms | new statements, median ms | old ÷ new |",
        "|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['n']:,} | {r['old']:.2f} | {r['new']:.2f} | {r['old'] / r['new']:.1f}× |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="500,5000,50000")
    ap.add_argument("--runs", type=int, default=24, help="deletions per variant and size (medians)")
    ap.add_argument("--out", type=Path, help="write the report (markdown) here")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    start_load = load()
    rows = [at_size(n, args.runs, check=(n == min(sizes))) for n in sizes]
    print(table(rows))
    if args.out:
        m = machine()
        cmd = "python bench/delete_scale.py" + (
            "" if args.sizes == "500,5000,50000" else f" --sizes {args.sizes}"
        )
        cmd += f" --runs {args.runs}" if args.runs != 24 else ""
        args.out.write_text(
            "# Deleting one memory as the store grows\n\n"
            f"Command: `{cmd} --out {os.path.relpath(args.out, ROOT)}`, "
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {m['cores']} cores ({m['cpu']}, {m['ram']}), kuzu "
            f"{m['kuzu']}, shared with other agents: load average {start_load} at the start, {load()} at the end.\n\n"
            + table(rows)
            + "\n"
        )


if __name__ == "__main__":
    main()
