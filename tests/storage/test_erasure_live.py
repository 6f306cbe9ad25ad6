"""Erasure while the server is in use: recall keeps answering while the stores are rewritten, and nothing the
process holds in memory (embedding cache, entity lexicon) keeps an erased memory's vector, names or aliases."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from storage import CachedEmbedder, Engine, EntityIn, WriteItem
from tests.conftest import files_containing

FILLER = [
    f"Note {i}: the {topic} review moved to room {i % 17} on floor {i % 5}."
    for i, topic in enumerate(["budget", "hiring", "design", "security", "roadmap", "vendor"] * 40)
]


@pytest.mark.parametrize("op", ["erase", "purge"])
def test_recall_never_fails_and_never_returns_erased_memories_while_erasing(
    tmp_path: Path, embedder: CachedEmbedder, op: str
) -> None:
    # An IVF index (ann_threshold below the row count) makes the rebuild of the vector table take a while.
    with Engine.open(tmp_path / "data", embedder=embedder, warm=False, ann_threshold=64) as eng:
        eng.write_many([WriteItem(content=c, scopes=["user:ana"]) for c in FILLER])
        keep = eng.write("Ana's desk is by the window, next to the vault.", ["user:ana"])
        secrets = [
            eng.write(f"The vault code is {uuid.uuid4().hex}, round {n}.", [f"run:secret{n}", "user:ana"])
            for n in range(3)
        ]
        if op == "purge":  # a purge erases what is only in the purged scope
            for s in secrets:
                eng.unlink(s.id, "user:ana")
        erased: set[str] = set()  # ids whose erasure has returned, before the recall that reads it started
        errors: list[BaseException] = []
        leaked: list[str] = []
        missed = 0
        during = 0
        busy = threading.Event()
        stop = threading.Event()

        def recall_loop() -> None:
            nonlocal missed, during
            while not stop.is_set():
                gone = set(erased)
                running = busy.is_set()
                try:
                    hits = eng.recall(
                        "where is the vault code", ["user:ana"] if op == "erase" else None, k=20
                    )
                except BaseException as exc:
                    errors.append(exc)
                    continue
                ids = {h.memory.id for h in hits}
                leaked.extend(ids & gone)
                missed += keep.id not in ids
                during += running and busy.is_set()

        readers = [threading.Thread(target=recall_loop) for _ in range(2)]
        for t in readers:
            t.start()
        try:
            for n, s in enumerate(secrets):
                busy.set()
                if op == "erase":
                    eng.erase(s.id, confirm=s.id)
                else:
                    eng.purge(f"run:secret{n}", confirm=f"run:secret{n}")
                busy.clear()
                erased.add(s.id)
        finally:
            stop.set()
            for t in readers:
                t.join()
        assert during > 0, "no recall overlapped an erasure: the test proved nothing"
        assert errors == []
        assert leaked == []
        assert missed == 0  # the kept memory was found by every recall, also mid-rewrite
        assert eng.verify().ok
    assert not list((tmp_path / "data" / "vectors").glob("*.tmp"))


def _held(embedder: CachedEmbedder, text: str) -> bool:
    """Whether the cache held ``text``'s vector: embedding it again is then a hit, not a miss."""
    misses = embedder.misses
    embedder.embed([text])
    return embedder.misses == misses


def test_erase_evicts_the_memory_from_every_in_memory_cache(engine: Engine, embedder: CachedEmbedder) -> None:
    token = uuid.uuid4().hex[:8]
    first = f"Zorvath Quellin{token[:2]} (ZQ-{token}) signed the merger memo on Friday."
    second = f"Zorvath Quellin{token[:2]} (ZQ-{token}) signed the merger memo on Thursday."
    mid = engine.write(
        first,
        ["user:ana"],
        entities=[EntityIn(f"Zorvath Quellin{token[:2]}", "person", (f"ZQ-{token}",))],
    ).id
    newer = engine.amend(mid, second)
    engine.write("Ana Lima sits by the window.", ["user:ana"])
    # What the process held before: both versions' vectors, the name and its alias.
    assert _held(embedder, first)
    assert _held(embedder, second)
    assert [m.name for m in engine.lexicon.match(f"what did ZQ-{token} sign")] == [
        f"Zorvath Quellin{token[:2]}"
    ]
    assert engine.recall(f"ZQ-{token} merger memo", ["user:ana"], k=1)[0].memory.id == newer.id

    engine.erase(newer.id, confirm=newer.id)

    assert engine.lexicon.match(f"what did ZQ-{token} sign") == []
    assert engine.lexicon.match(f"Zorvath Quellin{token[:2]}") == []
    assert engine.lexicon.mentions(f"Zorvath Quellin{token[:2]}") == 0
    assert not _held(embedder, first)
    assert not _held(embedder, second)
    assert all(h.memory.id not in (mid, newer.id) for h in engine.recall(second, ["user:ana"]))
    # A write after the erasure learns nothing from the erased memory: the alias is just text now.
    receipt = engine.write(f"Lunch with ZQ-{token} was moved.", ["user:ana"])
    assert f"Zorvath Quellin{token[:2]}" not in receipt.entities


def test_purge_evicts_its_memories_from_every_in_memory_cache(
    engine: Engine, embedder: CachedEmbedder
) -> None:
    token = uuid.uuid4().hex[:8]
    secret = f"Brakken Vollard{token[:2]} owes {token} to the club."
    engine.write(
        secret, ["run:gone"], entities=[EntityIn(f"Brakken Vollard{token[:2]}", aliases=(f"BV-{token}",))]
    )
    shared = f"The shared calendar link is {token}-cal."
    sid = engine.write(shared, ["run:gone", "user:ana"]).id
    assert _held(embedder, secret)
    assert engine.lexicon.match(f"BV-{token}")

    engine.purge("run:gone", confirm="run:gone")

    assert engine.lexicon.match(f"BV-{token}") == []
    assert engine.lexicon.match(f"Brakken Vollard{token[:2]}") == []
    assert engine.recall(shared, ["user:ana"], k=1)[0].memory.id == sid
    assert not _held(embedder, secret)
    assert _held(embedder, shared)  # still stored in user:ana: not erased, so its vector may stay


def test_writes_and_recalls_complete_while_an_erasure_rewrites_the_canonical_store(
    engine: Engine, data_dir: Path
) -> None:
    """The rewrite no longer holds the writer: a write and a recall issued once the canonical store's rewrite has
    started are answered before it ends, and the write (journaled after the rewrite's snapshot) is in the new
    file. On the old code the rewrite ran in the writer thread under the store's exclusive lock, so the write
    could only be answered after it."""
    secret = engine.write(f"The vault code is {uuid.uuid4().hex}.", ["user:ana"])
    engine.write("Ana's desk is by the window.", ["user:ana"])
    written: list[str] = []
    recalled: list[int] = []
    done = threading.Event()

    def client() -> None:
        written.append(engine.write("Written while the store was being rewritten.", ["user:ana"]).id)
        recalled.append(len(engine.recall("desk window", ["user:ana"])))
        done.set()

    original = engine.graph.rebuild
    answered_during: list[bool] = []

    def rebuild(*args: object) -> None:
        threading.Thread(target=client).start()
        if args:  # the rewrite beside live traffic: hold its final pause until the client was answered
            paused = args[0]
            calls: list[int] = []

            def hold(fn: object) -> None:
                calls.append(1)
                if len(calls) == 2:
                    answered_during.append(done.wait(60))
                paused(fn)  # type: ignore[operator]

            original(hold)
        else:
            original()
            answered_during.append(done.is_set())

    engine.graph.rebuild = rebuild  # type: ignore[method-assign,assignment]
    engine.erase(secret.id, confirm=secret.id)
    done.wait(60)
    assert answered_during == [True]
    assert recalled
    assert recalled[0] >= 1
    assert engine.read(written[0]).memory.content == "Written while the store was being rewritten."
    assert engine.verify().ok


def test_writes_committed_while_the_rebuilt_indexes_wait_for_their_switch_are_found_after_it(
    engine: Engine, data_dir: Path
) -> None:
    """Between the rebuild of the search indexes and their switch, the projector applies each new batch of
    changes to the live indexes and then to the rebuilt ones, so that the switch itself applies nothing (a
    staged commit inside it made every recall wait). Writes made in that stretch are found once the erasure
    returns, by words and by meaning, and the erased memory is in no file."""
    secret = engine.write(f"The vault code is {uuid.uuid4().hex}.", ["user:ana"])
    engine.write("Ana's desk is by the window.", ["user:ana"])
    rec = engine.reconciler
    original = rec.follow
    written: list[str] = []

    def follow(fn: object) -> None:
        original(fn)  # type: ignore[arg-type]
        if fn is not None and not written:  # in the projector thread: a client writes meanwhile
            box: list[str] = []
            t = threading.Thread(
                target=lambda: box.append(
                    engine.write("Bruno parks his bicycle in the courtyard.", ["user:ana"]).id
                )
            )
            t.start()
            t.join(60)
            written.extend(box)

    rec.follow = follow  # type: ignore[method-assign]
    engine.erase(secret.id, confirm=secret.id)
    assert len(written) == 1, "no write was made while the rebuilt indexes followed: the test proved nothing"
    by_words = engine.recall("bicycle courtyard", ["user:ana"], recipe="bm25")
    by_meaning = engine.recall("where does Bruno keep his bike", ["user:ana"], recipe="vector")
    assert written[0] in {h.memory.id for h in by_words}
    assert written[0] in {h.memory.id for h in by_meaning}
    assert secret.id not in {h.memory.id for h in engine.recall("vault code", ["user:ana"])}
    assert engine.verify().ok
    assert files_containing(data_dir, secret.id.encode()) == []
