"""Folding the canonical store's log into its file while recalls run: Kùzu's way against ours, in one run.

    python bench/checkpoint_beside_recalls.py [--memories 2000] [--rounds 8] [--readers 3]

Kùzu's CHECKPOINT holds the lock a query needs to end its transaction and then waits for every open transaction to
end, so a read under way when it starts holds it off until it gives up (about 6 s). Two places checkpoint:

- ``explicit``: the compactor's (after a maintenance, log >= 1 MiB) and a backup's, in the writer thread.
  ``kuzu`` runs CHECKPOINT beside the reads (as before); ``ours`` runs it alone (``GraphStore.checkpoint``).
- ``commit``: the commit that takes the log past the threshold (16 MiB; 64 KiB here so every round crosses it).
  ``kuzu`` lets Kùzu checkpoint inside the commit (as before); ``ours`` folds it after the commit, alone.

Each variant: a fresh store of ``--memories`` memories, ``--readers`` threads recalling without pause, and
``--rounds`` rounds of a 40-memory write followed (explicit) by a checkpoint. Reported: checkpoints that went
through, the time of the write + checkpoint, and every recall's latency while the rounds ran (p50/p99/max).
Results go to docs/benchmarks/checkpoint-beside-recalls.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Latency, Sentences, load, machine

from storage import CachedEmbedder, Engine, MiniLMEmbedder, StorageUnavailable, WriteItem

OUT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks" / "checkpoint-beside-recalls.md"
SMALL_LOG = 64 << 10


def _kuzu_checkpoint(graph: Any) -> None:
    """The checkpoint as it ran before: beside the reads under way (the store's shared lock)."""
    with graph._lock.shared():
        try:
            graph._writer.execute("CHECKPOINT")
        except RuntimeError as exc:
            raise StorageUnavailable(str(exc)[:80]) from exc


def run(place: str, variant: str, emb: CachedEmbedder, a: argparse.Namespace) -> dict[str, Any]:
    texts = Sentences(7).memories(a.memories)
    questions = Sentences(8).questions(50)
    with (
        tempfile.TemporaryDirectory() as tmp,
        Engine.open(Path(tmp) / "data", embedder=emb, warm=False) as eng,
    ):
        for i in range(0, len(texts), 500):
            eng.write_many([WriteItem(t, ["user:a"]) for t in texts[i : i + 500]])
        eng.reconciler.wait_projected()
        graph: Any = eng.graph
        eng.compactor.checkpoint_log = 1 << 40  # only the checkpoints this benchmark runs
        eng.reconciler.on_writer(graph.checkpoint)
        if place == "commit":
            if variant == "kuzu":
                graph.checkpoint_after = 1 << 40
                eng.reconciler.on_writer(lambda: graph._writer.execute("CALL auto_checkpoint=true"))
                eng.reconciler.on_writer(
                    lambda: graph._writer.execute(f"CALL checkpoint_threshold={SMALL_LOG}")
                )
            else:
                graph.checkpoint_after = SMALL_LOG
        stop = threading.Event()
        lat: list[float] = []

        def reader(n: int) -> None:
            i = n
            while not stop.is_set():
                t = time.perf_counter()
                eng.recall(questions[i % len(questions)], ["user:a"], k=10)
                lat.append(time.perf_counter() - t)
                i += 1

        threads = [threading.Thread(target=reader, args=(n,)) for n in range(a.readers)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        rounds, ok = [], 0
        try:
            for r in range(a.rounds):
                t = time.perf_counter()
                eng.write_many(
                    [WriteItem(f"later note {r}-{i} about the garden", ["user:a"]) for i in range(40)]
                )
                if place == "explicit":
                    try:
                        eng.reconciler.on_writer(
                            graph.checkpoint if variant == "ours" else lambda: _kuzu_checkpoint(graph)
                        )
                        ok += 1
                    except StorageUnavailable:
                        pass
                else:
                    ok += int(graph.file_space().log < SMALL_LOG)
                rounds.append(time.perf_counter() - t)
                time.sleep(0.2)
        finally:
            stop.set()
            for t in threads:
                t.join()
        rec = Latency.of(lat)
        return {
            "place": place,
            "variant": variant,
            "ok": ok,
            "rounds": a.rounds,
            "round_ms": statistics.median(rounds) * 1000,
            "round_max_ms": max(rounds) * 1000,
            "recalls": rec.n,
            "p50": rec.p50,
            "p99": rec.p99,
            "max": max(lat) * 1000,
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--readers", type=int, default=3)
    a = ap.parse_args()
    emb = CachedEmbedder(MiniLMEmbedder())
    emb.warm()
    started, load_start = dt.datetime.now(dt.UTC), load()
    rows = [run(place, v, emb, a) for place in ("explicit", "commit") for v in ("kuzu", "ours")]
    head = (
        "| checkpoint | variant | went through | write + checkpoint median (max) | recalls | recall p50 | "
        "recall p99 | recall max |\n|---|---|--:|--:|--:|--:|--:|--:|"
    )
    lines = [
        f"| {r['place']} | {r['variant']} | {r['ok']} of {r['rounds']} | {r['round_ms']:.0f} ms "
        f"({r['round_max_ms']:.0f}) | {r['recalls']} | {r['p50']:.0f} ms | {r['p99']:.0f} ms | {r['max']:.0f} ms |"
        for r in rows
    ]
    table = "\n".join([head, *lines])
    print(table)
    info = machine()
    doc = f"""# Checkpoints beside steady recalls

Generated by `bench/checkpoint_beside_recalls.py`; do not edit above the marker at the end.

- Command: `python bench/checkpoint_beside_recalls.py --memories {a.memories} --rounds {a.rounds} --readers {a.readers}`
- Date: {started:%Y-%m-%d %H:%M} UTC; machine: {info["cores"]} cores, {info["cpu"]}, {info["ram"]} RAM; kuzu {info["kuzu"]}
- Load average (1/5/15 min) at start: {load_start}; at end: {load()}

Kùzu's CHECKPOINT holds the lock a query needs to end its transaction, then waits for every open transaction to
end: a read under way when it starts holds it off until it gives up (about 6 s), with every other read and the
writer stalled meanwhile. `explicit` is the compactor's and a backup's checkpoint (`kuzu`: beside the reads, as
before; `ours`: alone, after the reads under way). `commit` is the checkpoint of the commit that takes the log past
its threshold (64 KiB here, 16 MiB in use; `kuzu`: inside the commit, as before; `ours`: after it, alone). Each
variant: {a.memories:,} memories, {a.readers} threads recalling without pause, {a.rounds} rounds of a 40-memory
write (+ checkpoint). "Went through": checkpoints that succeeded (`commit`: rounds after which the log was folded).

{table}

<!-- Hand-written notes below this line are kept when the benchmark rewrites this file. -->
"""
    notes = ""
    if OUT.exists():
        old = OUT.read_text()
        marker = "<!-- Hand-written notes below this line"
        if marker in old:
            notes = old.split(marker, 1)[1].split("\n", 1)[1]
    OUT.write_text(doc + notes)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
