"""Resource faults: a full or read-only file system, deleted projection directories, a damaged Tantivy index.

Each gives a clear error, never corrupts the canonical store, and service comes back (by itself at the next
open, or by ``reindex``) with nothing acknowledged lost. The full and read-only cases use a small tmpfs the
test mounts (the kernel enforces both; the test suite runs as root, which ignores file modes).
"""

from __future__ import annotations

import os
import random
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from storage import CachedEmbedder, Engine, StorageUnavailable, StoreFailed, WriteItem
from tests.e2e.conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def _tmpfs(mnt: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``mnt`` (created if missing) until the block ends."""
    mnt.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True
    )
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (needs root with CAP_SYS_ADMIN): {done.stderr.decode()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs mounted for this test (unmounted after it)."""
    with _tmpfs(tmp_path / "mnt", "24m") as mnt:
        yield mnt


def _remount(mnt: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mnt)], check=True)


def test_a_full_disk_refuses_writes_clearly_and_loses_nothing_acknowledged(
    small_fs: Path, embedder: CachedEmbedder
) -> None:
    data = small_fs / "data"
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("fault_child.py")), str(data)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    acked: dict[str, str] = {}
    sent: set[str] = set()
    refused = after = []
    for line in proc.stdout.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "SEND":
            sent.add(rest)
        elif kind == "ACK":
            mid, _, content = rest.partition(" ")
            acked[mid] = content
        elif kind == "REFUSED":
            refused = rest.split(" ", 1)
        elif kind == "AFTER":
            after.append(rest)
    assert len(acked) > 20, "the disk filled before anything was written"
    # The refusal says what happened, and the store then stays closed until it is reopened.
    assert refused[0] in ("storage_failed", "storage_unavailable"), refused
    assert "disk" in refused[1] or "write" in refused[1] or "commit" in refused[1], refused
    if refused[0] == "storage_failed":
        assert after == ["write storage_failed", "read storage_failed"]

    _remount(small_fs, "size=256m")  # the fault is removed
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        report = eng.verify()
        if not report.ok:
            report = eng.reindex()
        assert report.ok, report.drift
        with eng.graph.read() as conn:
            stored = set(eng.graph.all_ids(conn))
        assert set(acked) <= stored, "an acknowledged write was lost"
        assert stored <= sent, "a memory nobody sent appeared"
        for mid in random.Random(1).sample(sorted(acked), 20):
            assert eng.read(mid).memory.content == acked[mid]
        assert eng.write("Written after the disk was freed.", ["user:full"]).status == "added"
        assert eng.recall("disk was freed", ["user:full"], k=1)[0].memory.content.startswith("Written after")


def test_a_read_only_data_directory_gives_a_clear_error_and_opens_once_writable(
    small_fs: Path, embedder: CachedEmbedder
) -> None:
    data = small_fs / "data"
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        kept = eng.write("Stored before the disk went read-only.", ["user:ro"])
    _remount(small_fs, "ro")
    try:
        with pytest.raises(StorageUnavailable) as info:
            Engine.open(data, embedder=embedder, warm=False)
        assert "Read-only file system" in info.value.message or "read-only" in info.value.message.lower()
    finally:
        _remount(small_fs, "rw")
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        assert eng.verify().ok
        assert eng.read(kept.id).memory.content == "Stored before the disk went read-only."


def _segment_files(data: Path, suffix: str) -> list[Path]:
    current = (data / "text" / "CURRENT").read_text().strip() if (data / "text" / "CURRENT").exists() else ""
    folder = data / "text" / (current or "index-000001")
    return sorted(p for p in folder.iterdir() if p.name.endswith(suffix))


@pytest.mark.parametrize("damage", ["truncate", "scramble", "delete"])
def test_a_damaged_text_index_is_rebuilt_at_open(
    data_dir: Path, embedder: CachedEmbedder, damage: str
) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        for n in range(30):
            eng.write(f"Inventory note {n}: shelf {n * 3} holds {n} crates of quinces.", ["user:inv"])
        expected = [h.memory.id for h in eng.recall("crates of quinces shelf 21", ["user:inv"], k=5)]
    if damage == "truncate":
        for f in _segment_files(data_dir, ".store"):
            os.truncate(f, f.stat().st_size // 2)
    elif damage == "scramble":
        rng = random.Random(3)
        for f in _segment_files(data_dir, ".term") + _segment_files(data_dir, ".store"):
            raw = bytearray(f.read_bytes())
            for i in range(len(raw) // 4, 3 * len(raw) // 4):
                raw[i] = rng.randrange(256)
            f.write_bytes(bytes(raw))
    else:
        for f in _segment_files(data_dir, ".term"):
            f.unlink()
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        assert eng.text.damaged is not None
        report = eng.verify()
        assert report.ok, report.drift
        assert report.counts == {"kuzu": 30, "lancedb": 30, "tantivy": 30}
        # (lower ranks may tie differently: BM25 statistics depend on how documents fall into segments)
        found = [h.memory.id for h in eng.recall("crates of quinces shelf 21", ["user:inv"], k=5)]
        assert found[0] == expected[0]
        assert len(found) == 5


def test_deleted_projection_directories_are_rebuilt_at_open_or_by_reindex(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        ids = [eng.write(f"Garden fact {n}: the {n}th rose is red.", ["user:g"]).id for n in range(10)]
    shutil.rmtree(data_dir / "text")
    shutil.rmtree(data_dir / "vectors")
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:  # rebuilt at open
        report = eng.verify()
        assert report.ok, report.drift
        assert report.counts == {"kuzu": 10, "lancedb": 10, "tantivy": 10}
        # Deleted while serving: writes are still acknowledged (the canonical store is intact), and a reindex
        # brings both projections back.
        shutil.rmtree(data_dir / "text")
        shutil.rmtree(data_dir / "vectors")
        ids.append(eng.write("Garden fact 10: the tulips are late.", ["user:g"]).id)
        report = eng.reindex()
        assert report.ok, report.drift
        assert report.counts == {"kuzu": 11, "lancedb": 11, "tantivy": 11}
        hits = eng.recall("tulips late", ["user:g"], k=1)
        assert hits[0].memory.id == ids[-1]
        assert all(eng.read(i).memory.id == i for i in ids)


def test_a_failed_projection_is_retried_without_waiting_for_another_write(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """The vector projection's file system turns read-only after a write was acknowledged: the write stays
    acknowledged (canonical), the projector reports why it is behind, and once the fault is gone its own
    retry catches up, with no further write to wake it."""
    data = tmp_path / "data"
    vectors = data / "vectors"
    with _tmpfs(vectors, "64m"), Engine.open(data, embedder=embedder, warm=False) as eng:
        eng.write("The greenhouse thermometer reads twenty degrees.", ["user:retry"])
        assert eng.reconciler.wait_projected()
        _remount(vectors, "ro")
        try:
            receipt = eng.write("The canary fern needs water on Fridays.", ["user:retry"])
            assert not eng.reconciler.wait_projected(timeout=3)
            assert eng.reconciler.projection_error is not None
        finally:
            _remount(vectors, "rw")
        assert eng.reconciler.wait_projected(timeout=60), "the projector did not retry by itself"
        assert eng.reconciler.projection_error is None
        hit = eng.recall("canary fern water", ["user:retry"], k=1, recipe="vector")[0]
        assert hit.memory.id == receipt.id
        assert eng.verify().ok


def _fill(mnt: Path) -> Path:
    """Fill the file system at ``mnt`` to its last byte with one file (returned, to be deleted)."""
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 16, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError:
                    break
    finally:
        os.close(fd)
    return filler


def test_a_checkpoint_is_not_started_on_a_full_disk_and_the_store_goes_on(
    small_fs: Path, embedder: CachedEmbedder
) -> None:
    data = small_fs / "data"
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        kept = [eng.write(f"Tide table {n}: high water at {n}:40.", ["user:tide"]).id for n in range(100)]
        eng.reconciler.wait_projected()
        filler = _fill(small_fs)
        with pytest.raises(StorageUnavailable) as info:
            eng.reconciler.on_writer(eng.graph.checkpoint)
        assert "free disk space" in info.value.message
        assert "nothing changed" in info.value.hint
        with pytest.raises(StorageUnavailable):
            eng.backup(small_fs.parent / "backup")  # a backup checkpoints first: refused the same way
        assert not eng.failed
        assert eng.read(kept[0]).memory.content.startswith("Tide table 0")
        filler.unlink()
        assert eng.write("Written once there was room.", ["user:tide"]).status == "added"
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        assert eng.verify().ok
        assert all(eng.read(mid).memory.content.startswith("Tide table") for mid in kept)


def test_a_checkpoint_that_fails_on_a_full_disk_closes_the_store_and_loses_nothing(
    small_fs: Path, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The room check above is not a promise (another program may fill the disk during a checkpoint): one that
    fails part way closes the store, as a failed commit does."""
    from storage.adapters.kuzu import store as kuzu_store

    monkeypatch.setattr(kuzu_store, "CHECKPOINT_ROOM_FACTOR", 0)
    monkeypatch.setattr(kuzu_store, "CHECKPOINT_ROOM_MARGIN", 0)
    data = small_fs / "data"
    eng = Engine.open(data, embedder=embedder, warm=False)
    eng.compactor.checkpoint_log = 1 << 40  # its own checkpoint (at 1 MiB of log) would empty the log first
    try:
        kept = [
            eng.write(f"Logbook entry {n}: the ferry left at {n}:15.", ["user:log"]).id for n in range(200)
        ]
        eng.reconciler.wait_projected()
        assert eng.graph.file_space().log > 0  # the entries are in Kùzu's log, not yet in its file
        filler = _fill(small_fs)
        with pytest.raises(StoreFailed) as info:
            eng.reconciler.on_writer(eng.graph.checkpoint)
        assert "checkpoint" in info.value.message
        # Nothing more is read or acknowledged through a database whose pages ran ahead of its files.
        assert eng.failed
        with pytest.raises(StoreFailed):
            eng.write("one more entry", ["user:log"])
    finally:
        eng.close()
    filler.unlink()
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        report = eng.verify()
        if not report.ok:
            report = eng.reindex()
        assert report.ok, report.drift
        assert all(eng.read(mid).memory.content.startswith("Logbook entry") for mid in kept)
        assert eng.write("Written after the disk was freed.", ["user:log"]).status == "added"


def test_the_compactor_does_not_checkpoint_without_room_on_the_disk(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    """A checkpoint that fails part way on a full disk can leave a store that does not open again (above): the
    compactor, whose checkpoint is optional, runs one only with room for it."""
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        eng.write_many([WriteItem(f"memory {i} in Faro", ["user:a"]) for i in range(200)])
        eng.reconciler.wait_projected()
        eng.compactor.checkpoint_log = 1  # this small log counts as a large one
        log_before = eng.graph.file_space().log
        assert log_before > 0

        eng.compactor._disk_free = lambda: log_before  # far less than the checkpoint could need
        eng.reconciler.on_projector(eng.reconciler._maintain)
        assert eng.compactor.wait_idle(60)
        assert eng.graph.file_space().log >= log_before  # not checkpointed

        eng.compactor._disk_free = lambda: 1 << 40
        eng.reconciler.on_projector(eng.reconciler._maintain)
        assert eng.compactor.wait_idle(60)
        assert eng.graph.file_space().log < log_before  # checkpointed once there was room
        assert not eng.failed


def test_a_commit_whose_own_checkpoint_fails_on_a_full_disk_says_truly_whether_it_was_kept(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """Kùzu checkpoints inside a commit once its log passes 16 MiB, after the commit reached the log: when that
    checkpoint runs out of disk the commit is refused, yet the next open replays it. The refusal said "nothing
    from this call was kept" while the 1,000 memories it refused were all there after the restart."""
    with _tmpfs(tmp_path / "mnt", "40m") as mnt:
        data = mnt / "data"
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("fault_child.py")), str(data), "1000"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        sent: list[str] = []
        acked: set[str] = set()
        refusal = ""
        for line in proc.stdout.splitlines():
            kind, _, rest = line.partition(" ")
            if kind == "SEND":
                sent.append(rest)
            elif kind == "ACK":
                acked.add(rest.partition(" ")[0])
            elif kind == "REFUSED":
                refusal = rest
        refused = set(sent) - acked
        assert len(acked) >= 1000, (len(acked), refusal)
        assert len(refused) == 1000, (len(refused), refusal)
        assert refusal.startswith("storage_failed"), refusal

        _remount(mnt, "size=256m")  # the fault is removed
        with Engine.open(data, embedder=embedder, warm=False) as eng:
            with eng.graph.read() as conn:
                stored = set(eng.graph.all_ids(conn))
            assert acked <= stored, "an acknowledged write was lost"
            assert eng.verify().ok
        if refused <= stored:
            assert "nothing from this call was kept" not in refusal, refusal
            assert "kept" in refusal, refusal  # says the refused call's changes are there after a restart
        else:
            assert not refused & stored, "part of one refused commit was kept"


def test_a_backup_to_a_full_disk_is_refused_clearly_and_leaves_nothing_behind(
    data_dir: Path, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A backup whose copy ran out of room (a small or full backup disk) raised shutil.Error with a list of
    tuples for a message, outside the error tree: the owner's admin route answered it with a bare 500."""
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        kept = eng.write("Kept while the backup disk was full.", ["user:bk"]).id
        eng.write_many([WriteItem(f"Ledger line {n}: paid {n} euros.", ["user:bk"]) for n in range(50)])
        with _tmpfs(tmp_path / "usb", "1m") as usb:
            with pytest.raises(StorageUnavailable) as info:
                eng.backup(usb / "backup")
            assert "No space left on device" in info.value.message
            assert str(usb / "backup") in info.value.message
            assert "free space" in info.value.hint
            assert list(usb.iterdir()) == []  # the partial copy is gone
        assert not eng.failed
        assert eng.write("Written after the refused backup.", ["user:bk"]).status == "added"
        assert eng.read(kept).memory.content == "Kept while the backup disk was full."
        assert eng.verify().ok


def test_a_call_that_failed_its_own_check_gets_its_own_error_when_its_group_commit_fails(
    small_fs: Path, embedder: CachedEmbedder
) -> None:
    """Calls queued together commit together. When the commit fails (here on a full disk), a call
    that had already been refused by its own check changed nothing and must hear that, not the store's
    failure (which would tell it its changes were lost, or kept, when there were none). The disk fills while
    they wait."""
    from concurrent.futures import ThreadPoolExecutor

    from storage.domain.errors import NotFound

    data = small_fs / "data"
    eng = Engine.open(data, embedder=embedder, warm=False)
    try:
        eng.write("Stored before the disk filled.", ["user:ro"])
        gate = threading.Event()

        def refused(_tx: object) -> None:
            raise NotFound("no memory 0123 here", hint="recall to find the id")

        with ThreadPoolExecutor(3) as pool:
            try:
                held = pool.submit(
                    eng.reconciler.on_writer, gate.wait
                )  # the writer waits: the next two queue
                wait_for(
                    lambda: eng.reconciler._queue.empty(), timeout=30, what="the writer to take the gate"
                )
                own = pool.submit(eng.reconciler.submit, refused)
                other = pool.submit(eng.write, "Sent as the disk filled.", ["user:ro"])
                wait_for(lambda: eng.reconciler._queue.qsize() == 2, timeout=60, what="both calls queued")
                filler = _fill(small_fs)
            finally:
                gate.set()
            held.result()
            with pytest.raises(NotFound) as mine:
                own.result()
            assert mine.value.hint == "recall to find the id"
            with pytest.raises(StoreFailed):
                other.result()
    finally:
        eng.close()
    filler.unlink()


def test_a_text_index_commit_that_failed_on_a_full_disk_takes_the_write_at_its_retry(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """The text index's file system fills while it commits a write: once space is freed, the projector's retry
    must put the write into the index. Tantivy's writer drops every document added after a failed commit
    without an error (its indexing thread is gone), so the retry's commit "succeeded" without the memory: its
    watermark moved on, and the acknowledged memory was never found by its words (verify: tantivy_missing)."""
    data = tmp_path / "data"
    text = data / "text"
    with _tmpfs(text, "64m"), Engine.open(data, embedder=embedder, warm=False) as eng:
        eng.write("The greenhouse thermometer reads twenty degrees.", ["user:full"])
        assert eng.reconciler.wait_projected()
        filler = _fill(text)
        try:
            receipt = eng.write("The canary fern needs water on Fridays.", ["user:full"])
            assert not eng.reconciler.wait_projected(timeout=2)
            assert eng.reconciler.projection_error is not None
        finally:
            filler.unlink()
        assert eng.reconciler.wait_projected(timeout=60), "the projector did not retry by itself"
        found = eng.text.search("canary fern", scopes=["user:full"], k=5, live_only=True, kinds=None)
        assert [i for i, _ in found] == [receipt.id]
        report = eng.verify()
        assert report.ok, report.drift


@pytest.mark.parametrize("projection", ["text", "vectors"])
def test_a_watermark_that_could_not_be_written_costs_no_duplicate_rows(
    data_dir: Path, embedder: CachedEmbedder, projection: str
) -> None:
    """A projection applied a batch, then could not write its watermark (a full disk, an I/O error): the batch
    is retried. The retry must not take its new memories for never projected (the ``fresh`` shortcut, which
    adds without deleting first): each retry added them again, one more row each (4 text documents or 6
    vectors for one memory after a few seconds), crowding other memories out of the lane and counted as
    records by erase receipts, while ``verify`` (id by id) saw nothing wrong."""
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        eng.write("The greenhouse thermometer reads twenty degrees.", ["user:wm"])
        assert eng.reconciler.wait_projected()
        blocker = data_dir / projection / "WATERMARK.tmp"
        blocker.mkdir()  # the watermark's write fails (IsADirectoryError) after the projection's own commit
        try:
            receipt = eng.write("The canary fern needs water on Fridays.", ["user:wm"])
            # Several retries (0.25, 0.5, 1 s apart) while the fault lasts.
            wait_for(lambda: eng.reconciler._retry_s >= 2.0, timeout=30, what="a few retries")
            assert not eng.reconciler.wait_projected(timeout=0)
        finally:
            blocker.rmdir()
        assert eng.reconciler.wait_projected(timeout=60), "the projector did not retry by itself"
        assert eng.text.count() == eng.vectors.count() == 2
        words = eng.text.search("canary fern", scopes=["user:wm"], k=10, live_only=True, kinds=None)
        assert [i for i, _ in words] == [receipt.id]
        hits = eng.recall("canary fern", ["user:wm"], k=5)
        assert hits[0].memory.id == receipt.id
        assert (hits[0].lanes.get("bm25"), hits[0].lanes.get("vector")) == (1, 1), hits[0].lanes
        assert eng.verify().ok


def test_an_index_that_cannot_be_rebuilt_at_open_names_the_command_that_repairs_it(
    small_fs: Path, embedder: CachedEmbedder
) -> None:
    """A vector index that cannot be trusted (its watermark scrambled) on a disk with no room to rebuild it: the
    open fails saying which index, why, and ``mnemograph reindex``; it releases the stores, so that the same
    process opens them once there is room (the owner retries so), and the rebuild then happens."""
    data = small_fs / "tide's data"  # the command in the hint must come out shell-quoted
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        for n in range(20):
            eng.write(f"Tide table {n}: high water at {n}:40.", ["user:tide"])
    (data / "vectors" / "WATERMARK").write_text("not a number")
    filler = _fill(small_fs)
    os.truncate(filler, filler.stat().st_size - 16384)  # room for Kùzu's open, none for a new table
    try:
        with pytest.raises(StorageUnavailable) as info:
            Engine.open(data, embedder=embedder, warm=False)
    finally:
        filler.unlink()
    assert "lancedb" in info.value.message
    assert "could not be rebuilt" in info.value.message
    assert f"`mnemograph reindex --data-dir {shlex.quote(str(data))}`" in info.value.hint
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        report = eng.verify()
        assert report.ok, report.drift
        assert report.counts == {"kuzu": 20, "lancedb": 20, "tantivy": 20}


def test_a_replay_at_open_that_fails_on_a_full_disk_is_retried_not_a_permanent_failure(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A write acknowledged while the text index's disk was full, the store closed; the next open replays it
    into the still full disk. The raw LanceError/ValueError it raised the owner took for a store that can never
    open (no retry, not even once the disk was freed); a StorageUnavailable is retried, as a failed rebuild is."""
    data = tmp_path / "data"
    text = data / "text"
    text.mkdir(parents=True)
    with _tmpfs(text, "64m"):
        with Engine.open(data, embedder=embedder, warm=False) as eng:
            for n in range(20):
                eng.write(f"Tide table {n}: high water at {n}:40.", ["user:tide"])
            assert eng.reconciler.wait_projected()
            filler = _fill(text)
            # Tantivy may free files of a merge just after the disk was filled, and a write then fits: filled
            # again until one write stays unprojected (the premise; the CI once met a write that fit).
            words = ("alder", "birch", "cedar", "dogwood", "elm")
            for word in words:
                receipt = eng.write(f"The canary fern by the {word} needs water on Fridays.", ["user:tide"])
                if not eng.reconciler.wait_projected(timeout=2):
                    break
                _fill(text)
            else:
                pytest.fail("the text index kept taking writes on a full disk")
        with pytest.raises(StorageUnavailable) as info:
            Engine.open(data, embedder=embedder, warm=False)
        assert "could not catch up" in info.value.message
        assert "mnemograph reindex --data-dir" in (info.value.hint or "")
        filler.unlink()
        with Engine.open(data, embedder=embedder, warm=False) as eng:
            report = eng.verify()
            assert report.ok, report.drift
            n = 21 + words.index(word)
            assert report.counts == {"kuzu": n, "lancedb": n, "tantivy": n}
            assert eng.recall(f"canary fern by the {word}", ["user:tide"], k=1)[0].memory.id == receipt.id
