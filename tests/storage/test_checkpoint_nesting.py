"""Reads that nest inside a read of the canonical store, beside commits that checkpoint.

The store runs each CHECKPOINT alone (the exclusive side of its readers-writer lock, which lets no new reader in
while a checkpoint waits): a thread that took a second read while holding one waited for the checkpoint, which
waited for that thread's first read, and every read and write of the process stopped for good.
"""

from __future__ import annotations

import threading
from pathlib import Path

from scopes import Grant, Principal
from storage import CachedEmbedder, Engine, RelationIn
from storage.engine.explore import neighbourhood

# A bounded wait for work that takes well under a second a round: far past it, the threads are stuck for good.
STUCK_AFTER = 120.0
ROUNDS = 60


def test_the_web_uis_entity_graph_beside_writes_that_checkpoint_never_stops_the_store(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    """The web UI's graph of an entity (``neighbourhood``) read each memory it shows (``Engine.read``) inside
    its own read of the store: with a commit's checkpoint waiting between the two, the page, every recall and
    every write hung until the owner process was restarted."""
    eng = Engine.open(data_dir, embedder=embedder, warm=False)
    stuck = False
    try:
        ana = Principal("ana", client="tests", grants=(Grant.parse("user:ana=w"),))
        for i in range(6):
            eng.write(
                f"Lisbon trip note {i}", ["user:ana"], relations=[RelationIn("Lisbon", f"near_{i}", "Sintra")]
            )
        eng.graph.checkpoint_after = 1  # type: ignore[attr-defined]  # every commit folds the log
        stop = threading.Event()
        errors: list[BaseException] = []
        done = {"pages": 0, "writes": 0}

        def pages() -> None:
            while not stop.is_set() and done["pages"] < ROUNDS:
                try:
                    hood = neighbourhood(eng, entity="Lisbon", principal=ana)
                    assert {"Sintra", "Portugal"} & {n.label for n in hood.nodes}
                    done["pages"] += 1
                except BaseException as exc:
                    errors.append(exc)
                    return

        def writes() -> None:
            i = 0
            while not stop.is_set() and done["writes"] < ROUNDS:
                try:
                    eng.write(
                        f"Lisbon later note {i}",
                        ["user:ana"],
                        relations=[RelationIn("Lisbon", "in", "Portugal")],
                    )
                    done["writes"] += 1
                    i += 1
                except BaseException as exc:
                    errors.append(exc)
                    return

        threads = [threading.Thread(target=pages, daemon=True), threading.Thread(target=writes, daemon=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(STUCK_AFTER)
        stop.set()
        stuck = any(t.is_alive() for t in threads)
        assert not stuck, f"the store stopped: {done} calls done before it"
        assert errors == []
        assert done == {"pages": ROUNDS, "writes": ROUNDS}
        page = neighbourhood(eng, entity="Lisbon", principal=ana)
        assert any(n.label == "Portugal" for n in page.nodes)
    finally:
        if not stuck:  # closing waits for the stuck reads: left to the process's exit
            eng.close()


def test_a_read_inside_a_read_while_a_commits_checkpoint_waits_returns(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    """Any code path that reads the store again while it holds a read (the neighbourhood view did; an
    extension or a later change may) gets its answer: the checkpoint after a commit waits for the outer read to
    end, and the inner one does not wait for the checkpoint."""
    eng = Engine.open(data_dir, embedder=embedder, warm=False)
    stuck = False
    try:
        first = eng.write("Lisbon trip note", ["user:ana"]).id
        eng.graph.checkpoint_after = 1  # type: ignore[attr-defined]
        lock = eng.graph._lock  # type: ignore[attr-defined]
        got: list[str] = []
        written: list[str] = []
        inner_may_go = threading.Event()

        def reader() -> None:
            with eng.graph.read():
                inner_may_go.wait(STUCK_AFTER)
                got.append(eng.read(first).memory.content)  # a second read of the store, in the same thread

        def writer() -> None:
            written.append(eng.write("Porto trip note", ["user:ana"]).id)

        r = threading.Thread(target=reader, daemon=True)
        r.start()
        w = threading.Thread(target=writer, daemon=True)
        w.start()
        # The commit's checkpoint now waits for the reader's first read (a waiting exclusive holder).
        for _ in range(int(STUCK_AFTER * 10)):
            if lock._waiting_writers:
                break
            threading.Event().wait(0.1)
        assert lock._waiting_writers, "the commit's checkpoint never waited for the read"
        inner_may_go.set()
        r.join(STUCK_AFTER)
        w.join(STUCK_AFTER)
        stuck = r.is_alive() or w.is_alive()
        assert not stuck, "the read inside a read and the write stopped for good"
        assert got == ["Lisbon trip note"]
        assert eng.read(written[0]).memory.content == "Porto trip note"
    finally:
        if not stuck:
            eng.close()
