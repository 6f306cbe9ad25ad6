"""The background compactor's rewrite of the canonical file, attacked from where a user stands: what is
acknowledged while it runs stays, what is erased while it runs leaves no byte, recalls beside it see every
memory once, and a backup taken beside it opens."""

from __future__ import annotations

import io
import logging
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from storage import CachedEmbedder, Engine, EntityIn, NotFound, RelationIn, StorageUnavailable, WriteItem
from storage.engine import backup as snapshots
from storage.engine import compaction
from tests.conftest import files_containing


def _fill_with_free_pages(eng: Engine) -> list[str]:
    """Several commits, each checkpointed: the columns they grow leave free pages behind."""
    ids: list[str] = []
    for batch in range(5):
        items = [WriteItem(f"memory {batch}-{i} about Lisbon and Porto", ["user:a"]) for i in range(50)]
        ids += [r.id for r in eng.write_many(items)]
        eng.reconciler.wait_projected()
        eng.graph.checkpoint()
    eng.reconciler.wait_projected()
    assert eng.graph.file_space().free > 0
    eng.compactor.min_free, eng.compactor.min_share = 1, 0.0  # this small store is worth a rewrite too
    return ids


def _during_build(eng: Engine, action: Callable[[], None]) -> None:
    """Run ``action`` (in another thread, waited for) while the compactor's rewrite is built beside live
    traffic: between its snapshot and its switch."""
    graph: Any = eng.graph
    build = graph._rewrite_build

    def wrapped(job: Any) -> None:
        graph._rewrite_build = build
        errors: list[BaseException] = []

        def run() -> None:
            try:
                action()
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=run)
        t.start()
        t.join()
        assert not errors, errors
        build(job)

    graph._rewrite_build = wrapped


def _compact(eng: Engine) -> None:
    eng.reconciler.on_projector(eng.reconciler._maintain)
    assert eng.compactor.wait_idle(120)


def test_writes_amends_and_retires_acknowledged_during_a_rewrite_survive_it(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        ids = _fill_with_free_pages(eng)
        acked: dict[str, str] = {}
        amended: dict[str, str] = {}
        retired: list[str] = []

        def traffic() -> None:
            for i in range(20):
                r = eng.write(f"written during the rewrite {i} in Faro", ["user:a", f"project:p{i % 3}"])
                acked[r.id] = f"written during the rewrite {i} in Faro"
            for old in ids[:10]:
                amended[old] = eng.amend(old, f"{old[:6]} amended during the rewrite").id
            for old in ids[10:20]:
                eng.retire(old, reason="retired during the rewrite")
                retired.append(old)

        _during_build(eng, traffic)
        _compact(eng)
        assert eng.compactor.rewrites == 1

        def check(e: Engine) -> None:
            for mid, content in acked.items():
                assert e.read(mid).memory.content == content
            for old, new in amended.items():
                assert e.read(new).memory.supersedes == old
                assert e.read(old).memory.status.value != "current"
            for old in retired:
                assert e.read(old).memory.status.value != "current"
            for mid in ids[20:]:
                assert e.read(mid).memory.status.value == "current"
            hits = e.recall("amended during the rewrite", ["user:a"], k=50)
            got = [h.memory.id for h in hits]
            assert len(got) == len(set(got))
            assert not set(got) & set(amended)
            assert not set(got) & set(retired)
            assert e.verify().ok

        check(eng)
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        check(eng)


@pytest.mark.parametrize("op", ["erase", "purge"])
def test_an_erasure_committed_during_a_rewrite_leaves_no_byte_once_it_returns(
    op: str, data_dir: Path, embedder: CachedEmbedder
) -> None:
    token = uuid.uuid4().hex
    secret = f"The vault code of Quarnelius is {token}"
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        _fill_with_free_pages(eng)
        sid = eng.write(secret, ["run:secret"] if op == "purge" else ["user:a"]).id
        vector = np.asarray(embedder.embed([secret])[0], dtype=np.float32).tobytes()
        eng.reconciler.wait_projected()
        done: list[BaseException | None] = []

        def erase() -> None:
            try:
                if op == "erase":
                    eng.erase(sid, confirm=sid)
                else:
                    eng.purge("run:secret", confirm="run:secret")
                done.append(None)
            except BaseException as exc:
                done.append(exc)

        eraser = threading.Thread(target=erase)

        def start_erase() -> None:
            eraser.start()
            while True:  # until its delete is committed (it then waits for the compactor's rewrite)
                try:
                    eng.read(sid)
                except NotFound:
                    return

        _during_build(eng, start_erase)
        _compact(eng)
        eraser.join(120)
        assert done == [None]
        for needle in (token.encode(), sid.encode(), vector[:64]):
            assert files_containing(data_dir, needle) == [], needle
        assert eng.verify().ok
        assert all(h.memory.id != sid for h in eng.recall(f"vault code {token}", ["user:a"]))
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        try:
            eng.read(sid)
            raise AssertionError("an erased memory came back after a restart")
        except NotFound:
            pass


def test_recalls_beside_maintenance_and_rewrite_find_every_memory_once(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        ids = _fill_with_free_pages(eng)
        target = ids[3 * 50 + 7]
        stop = threading.Event()
        errors: list[BaseException] = []
        missed: list[list[str]] = []
        dupes: list[list[str]] = []
        count = [0]

        def recall_loop() -> None:
            while not stop.is_set():
                try:
                    hits = eng.recall("memory 3-7 about Lisbon and Porto", ["user:a"], k=10)
                except BaseException as exc:
                    errors.append(exc)
                    continue
                got = [h.memory.id for h in hits]
                count[0] += 1
                if target not in got:
                    missed.append(got)
                if len(got) != len(set(got)):
                    dupes.append(got)

        readers = [threading.Thread(target=recall_loop) for _ in range(3)]
        for t in readers:
            t.start()
        try:
            # Rounds until two rewrites ran beside the recalls (a look that finds too little free passes).
            for round_ in range(12):
                eng.write_many([WriteItem(f"later {round_}-{i} in Braga", ["user:a"]) for i in range(40)])
                eng.reconciler.wait_projected()
                eng.compactor.checkpoint_log = 1  # the compactor checkpoints first (recalls may hold it off)
                _compact(eng)
                if eng.compactor.rewrites >= 2:
                    break
        finally:
            stop.set()
            for t in readers:
                t.join()
        assert eng.compactor.rewrites >= 1, f"no rewrite in 12 looks: {dict(eng.compactor.passed)}"
        assert count[0] > 0
        assert errors == []
        assert missed == []
        assert dupes == []


def test_checkpoints_beside_steady_recalls_go_through(data_dir: Path, embedder: CachedEmbedder) -> None:
    """Kùzu's CHECKPOINT waited in vain for a read that was under way when it started (the read could not end
    its transaction while the checkpoint held on): beside steady recalls nearly every checkpoint gave up after
    about 6 s, with reads and writes stalled all along, so the compactor never rewrote a busy store and a
    backup taken beside recalls failed."""
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        _fill_with_free_pages(eng)
        stop = threading.Event()
        errors: list[BaseException] = []
        count = [0]

        def recall_loop() -> None:
            while not stop.is_set():
                try:
                    eng.recall("memory 3-7 about Lisbon and Porto", ["user:a"], k=10)
                    count[0] += 1
                except BaseException as exc:
                    errors.append(exc)

        readers = [threading.Thread(target=recall_loop) for _ in range(3)]
        for t in readers:
            t.start()
        held_off = []
        try:
            for round_ in range(4):
                eng.write_many([WriteItem(f"later {round_}-{i} in Braga", ["user:a"]) for i in range(40)])
                eng.reconciler.wait_projected()
                try:
                    eng.reconciler.on_writer(eng.graph.checkpoint)
                except StorageUnavailable as exc:
                    held_off.append(str(exc))
        finally:
            stop.set()
            for t in readers:
                t.join()
        assert held_off == []
        assert errors == []
        assert count[0] > 0


def test_a_commit_that_fills_the_log_folds_it_beside_steady_recalls(
    data_dir: Path, embedder: CachedEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    """Kùzu folded its log inside the commit that took it past 16 MiB, and that checkpoint waited in vain for the
    reads under way: beside steady recalls it gave up after about 6 s (the write stalled, every read too), and
    each later commit tried again, so the log kept growing. The store now folds it after the commit, alone."""
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        eng.write("memory about Lisbon and Porto", ["user:a"])
        limit = 64 << 10  # a small log counts as a full one
        eng.reconciler.on_writer(lambda: eng.graph._writer.execute(f"CALL checkpoint_threshold={limit}"))  # type: ignore[attr-defined]
        eng.graph.checkpoint_after = limit  # type: ignore[attr-defined]
        stop = threading.Event()
        errors: list[BaseException] = []

        def recall_loop() -> None:
            while not stop.is_set():
                try:
                    eng.recall("memory about Lisbon and Porto", ["user:a"], k=10)
                except BaseException as exc:
                    errors.append(exc)

        readers = [threading.Thread(target=recall_loop) for _ in range(3)]
        for t in readers:
            t.start()
        logs = []
        try:
            with caplog.at_level(logging.WARNING, logger="mnemograph"):
                for round_ in range(6):
                    eng.write_many([WriteItem(f"later {round_}-{i} in Braga", ["user:a"]) for i in range(40)])
                    logs.append(eng.graph.file_space().log)
        finally:
            stop.set()
            for t in readers:
                t.join()
        assert errors == []
        assert [r.getMessage() for r in caplog.records if "checkpoint" in r.getMessage()] == []
        assert max(logs) < limit, logs  # folded after each commit that filled it


class _SlowReader(io.StringIO):
    """An export's destination that a slow client drains: each write waits until the reader is let go."""

    def __init__(self) -> None:
        super().__init__()
        self.started, self.go = threading.Event(), threading.Event()

    def write(self, s: str) -> int:
        self.started.set()
        self.go.wait()
        return super().write(s)


def test_recalls_and_writes_go_on_while_a_slow_export_runs_beside_a_compaction(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    """An export holds one snapshot for as long as its client takes to read it. The compactor's switch to the
    new file must not wait for that export with the writer paused (every write waiting behind it, and every
    recall behind the switch): the compactor waits for the export instead."""
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        ids = _fill_with_free_pages(eng)
        out = _SlowReader()
        exporter = threading.Thread(target=lambda: eng.export(out))
        exporter.start()
        assert out.started.wait(60)  # the export's snapshot is open
        eng.reconciler.on_projector(eng.reconciler._maintain)  # the compactor starts (or waits)
        served: list[str] = []

        def user() -> None:
            served.append(eng.recall("memory 3-7 about Lisbon and Porto", ["user:a"], k=3)[0].memory.id)
            served.append(eng.write("written while the export runs", ["user:a"]).id)

        client = threading.Thread(target=user)
        try:
            # Give the compactor every chance to reach its switch first: a rewrite of this store takes well
            # under a second; the client is then served or waits for the export.
            eng.compactor.wait_idle(5)
            client.start()
            client.join(60)
            assert served[:1] == [ids[3 * 50 + 7]]
            assert len(served) == 2, "a write waited for the export to end"
        finally:
            out.go.set()
            exporter.join(60)
            client.join(60)
        assert eng.compactor.wait_idle(120)
        assert eng.compactor.rewrites == 1  # done once the export ended
        assert eng.read(served[1]).memory.content == "written while the export runs"
        assert eng.verify().ok


def test_a_rewrite_keeps_every_record_exactly(data_dir: Path, embedder: CachedEmbedder) -> None:
    """What the compactor rewrites, record by record, as an export sees it: odd text, both time axes, entities
    with aliases, relations, metadata, versions, a retirement, made before the rewrite and beside it."""
    odd = "quotes ' \" `, a backslash \\, a tab\t, newlines\n\n, emoji 🧠, RTL שלום, NUL-free " + "x" * 3000

    def varied(tag: str) -> list[WriteItem]:
        return [
            WriteItem(
                f"{tag} {odd}",
                ["user:a", "project:odd"],
                kind="event",
                event_time=datetime(1901, 2, 3, 4, 5, 6, 789000, tzinfo=UTC),
                valid_from=datetime(1900, 1, 1, tzinfo=UTC),
                valid_to=datetime(2999, 12, 31, 23, 59, 59, tzinfo=UTC),
                entities=[EntityIn(f"Zé Ñandú {tag}", "person", (f"ZN-{tag}", f"Ñ {tag}"))],
                relations=[RelationIn(f"Zé Ñandú {tag}", "works_at", "Acme Ltda")],
                metadata={"nested": {"list": [1, 2.5, None, "três"]}, "empty": "", "tag": tag},
                source="file:///tmp/odd name.txt",
            ),
            WriteItem(f"{tag} plain fact", ["user:a"], kind="fact"),
        ]

    def dump(eng: Engine, *, locked: bool = False) -> list[str]:
        out = io.StringIO()
        if locked:  # inside the rewrite, which holds the lock exports take
            snapshots.export(eng, out, vectors=True)
        else:
            eng.export(out, vectors=True)
        return sorted(line for line in out.getvalue().splitlines() if '"type": "header"' not in line)

    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        _fill_with_free_pages(eng)
        first = eng.write_many(varied("before"))
        eng.amend(first[1].id, "before plain fact, amended")
        eng.retire(first[0].id, reason="retired before")

        def beside() -> None:
            second = eng.write_many(varied("beside"))
            eng.amend(second[1].id, "beside plain fact, amended")
            eng.retire(second[0].id, reason="retired beside")

        _during_build(eng, beside)
        expected: list[list[str]] = []
        graph: Any = eng.graph
        finish = graph._rewrite_finish

        def dumped_before_switch(job: Any) -> None:
            expected.append(dump(eng, locked=True))  # writes paused: the old file holds everything
            finish(job)

        graph._rewrite_finish = dumped_before_switch
        _compact(eng)
        assert eng.compactor.rewrites == 1
        assert any("retired beside" in line for line in expected[0])
        assert dump(eng) == expected[0]
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        assert dump(eng) == expected[0]


class _WatchedLock:
    """The engine's rewrite lock, seen from the side of whoever asks for it: ``on_wait`` is called when a caller
    finds it held and has to wait (the lock itself is the engine's: the compactor holds the same one)."""

    def __init__(self, inner: Any, on_wait: Callable[[], None]) -> None:
        self._inner, self._on_wait, self.waited = inner, on_wait, False

    def __enter__(self) -> None:
        if not self._inner.acquire(blocking=False):
            self.waited = True
            self._on_wait()
            self._inner.acquire()

    def __exit__(self, *exc: object) -> None:
        self._inner.release()


def test_a_backup_asked_for_while_a_rewrite_exports_waits_for_it_and_opens_with_every_memory(
    data_dir: Path, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """The rewrite's snapshot stays open while its export runs (seconds at 10,000 memories, more beyond): a
    backup asked for then must wait for the rewrite, not fail on a checkpoint that waits for that snapshot ("a
    long read holds off its checkpoint", which names nothing the user ran). The export is held, its snapshot
    open, until the backup has either ended (failed, before the fix: Kùzu gives its checkpoint up after about
    5 s) or is waiting for the rewrite; no sleep decides it."""
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        ids = _fill_with_free_pages(eng)
        extra = eng.write("written just before the backup", ["user:a"]).id
        errors: list[BaseException] = []
        settled = threading.Event()  # the backup ended, or waits for the rewrite
        lock = _WatchedLock(eng._erasure_lock, on_wait=settled.set)
        eng._erasure_lock = lock  # type: ignore[assignment]  # the same lock, watched

        def backup() -> None:
            try:
                eng.backup(tmp_path / "bk")
            except BaseException as exc:
                errors.append(exc)
            finally:
                settled.set()

        backer = threading.Thread(target=backup)
        graph: Any = eng.graph
        build = graph._rewrite_build

        def held_export(job: Any) -> None:
            graph._rewrite_build = build
            backer.start()  # the rewrite's snapshot is open: the export is about to run
            settled.wait()
            build(job)

        graph._rewrite_build = held_export
        _compact(eng)
        backer.join()
        assert errors == []
        assert lock.waited  # for the rewrite
        assert eng.compactor.rewrites == 1
    with Engine.open(tmp_path / "bk", embedder=embedder, warm=False) as eng:
        assert eng.verify().ok
        for mid in [*ids, extra]:
            assert eng.read(mid).memory.id == mid


def test_a_compaction_without_room_on_the_disk_does_not_start_and_runs_once_there_is(
    data_dir: Path, embedder: CachedEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    """A compaction is housekeeping: with less free disk than its copy of the store needs (3x the used bytes
    and 8 MiB), it must not start, so that its export cannot fill the disk under a user's write (which would be
    refused, and the store left failed until a restart). The disk's free space is what the compactor is told
    (``disk_free``): no real disk is filled, and Kùzu never meets a full one."""
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        ids = _fill_with_free_pages(eng)
        free = {"bytes": 1 << 20}  # 1 MiB: room for writes, not for a copy of the store
        eng.compactor._disk_free = lambda: free["bytes"]
        graph_files = sorted(p.name for p in (data_dir / "graph").iterdir())
        with caplog.at_level(logging.WARNING, logger="mnemograph.compaction"):
            _compact(eng)
        space = eng.graph.file_space()
        need = (compaction.ROOM_FACTOR * (space.total - space.free) + compaction.ROOM_MARGIN) / 1e6
        assert eng.compactor.rewrites == 0
        assert eng.compactor.no_room
        assert sorted(p.name for p in (data_dir / "graph").iterdir()) == graph_files  # no export, no new file
        assert f"needs {need:.1f} MB free on its disk and 1.0 MB are" in caplog.text
        w = eng.write("written while the disk was nearly full", ["user:a"])
        assert not eng.failed
        assert eng.read(w.id).memory.content == "written while the disk was nearly full"

        free["bytes"] = 1 << 40  # the owner freed the disk: the next maintenance rewrites
        before = eng.graph.file_space()
        _compact(eng)
        assert eng.compactor.rewrites == 1
        assert not eng.compactor.no_room
        assert eng.graph.file_space().free < before.free
        for mid in [*ids, w.id]:
            assert eng.read(mid).memory.id == mid
        assert eng.verify().ok
