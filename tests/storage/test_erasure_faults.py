"""Erasure and backup under hostile conditions: a data directory whose path holds quotes, a disk that fills
during the rewrite that removes erased bytes, a backup target whose ``.partial`` sibling is the user's, and a
commit whose checkpoint times out behind a long read. None of them may brick the store or lose anything."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage import CachedEmbedder, Engine, StorageUnavailable
from tests.conftest import files_containing
from tests.storage.test_resource_faults import _tmpfs


@pytest.mark.parametrize("name", ["o'brien", 'say "hi"', "back\\slash; DROP", "pct%41 `x` $y"])
def test_purge_and_erase_work_under_a_path_with_quotes(
    tmp_path: Path, embedder: CachedEmbedder, name: str
) -> None:
    data = tmp_path / name / "data"
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        eng.write(f"The vault code is {canary}.", ["run:secret"])
        other = eng.write(f"The safe code is {canary}-2.", ["user:ana"])
        keep = eng.write("The lobby opens at 8am.", ["user:ana"])
        assert eng.purge("run:secret", confirm="run:secret").memories_deleted == 1
        eng.erase(other.id, confirm=other.id)
    assert files_containing(data, canary.encode()) == []
    with Engine.open(data, embedder=embedder, warm=False) as eng:  # and it opens again
        assert eng.verify().ok
        assert eng.read(keep.id).memory.content == "The lobby opens at 8am."


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    with _tmpfs(tmp_path / "mnt", "64m") as mnt:
        yield mnt


def test_a_disk_that_fills_during_the_rewrite_never_bricks_the_store(
    small_fs: Path, embedder: CachedEmbedder
) -> None:
    data = small_fs / "data"
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    eng = Engine.open(data, embedder=embedder, warm=False)
    try:
        eng.write(f"The vault code is {canary}.", ["run:secret"])
        keep = eng.write("The lobby opens at 8am.", ["user:ana"])
        eng.reconciler.wait_projected()
        # Leave 256 KiB: enough for the purge's commit, not for a second copy of the canonical store.
        free = os.statvfs(small_fs).f_bavail * os.statvfs(small_fs).f_frsize
        (small_fs / "ballast").write_bytes(b"\0" * (free - 256 * 1024))
        with pytest.raises(StorageUnavailable, match="could not be rewritten") as info:
            eng.purge("run:secret", confirm="run:secret")
        assert "retried" in (info.value.hint or "")
        # The store still serves, and the purged memory is gone from every answer already.
        assert not eng.failed
        assert [h.memory.id for h in eng.recall("lobby opens", ["user:ana"])] == [keep.id]
        assert eng.recall("vault code", ["run:secret"], descendants=False) == []
    finally:
        eng.close()
    # A start while the disk is still full opens the store (the rewrite waits) instead of refusing to.
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        assert eng.read(keep.id).memory.content == "The lobby opens at 8am."
    (small_fs / "ballast").unlink()
    # With space again, the next start finishes the rewrite: no byte of the purged memory is left.
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        assert eng.verify().ok
    assert files_containing(data, canary.encode()) == []


def test_backup_never_deletes_the_users_partial_directory(engine: Engine, tmp_path: Path) -> None:
    engine.write("The lobby opens at 8am.", ["user:ana"])
    mine = tmp_path / "snap.partial"
    mine.mkdir()
    (mine / "thesis.txt").write_text("three years of work")
    engine.backup(tmp_path / "snap")
    assert (mine / "thesis.txt").read_text() == "three years of work"
    assert (tmp_path / "snap" / "graph").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "snap", "snap.partial"]  # no leftovers


def test_a_commit_whose_checkpoint_times_out_behind_a_long_read_is_kept_and_the_store_stays_usable(
    engine: Engine,
) -> None:
    first = engine.write("Written before the long read.", ["user:ana"])
    # Make every commit checkpoint (as one does once the WAL passes 16 MiB), then hold a read transaction open
    # the way a long export does, on another thread, while a write commits.
    engine.graph.checkpoint_after = 1  # type: ignore[attr-defined]
    opened, release = threading.Event(), threading.Event()

    def long_read() -> None:
        with engine.graph.snapshot():
            opened.set()
            release.wait(60)

    reader = threading.Thread(target=long_read)
    reader.start()
    try:
        assert opened.wait(60)
        during = engine.write("Written while an export was reading.", ["user:ana"])
    finally:
        release.set()
        reader.join()
    assert not engine.failed
    assert engine.read(during.id).memory.content == "Written while an export was reading."
    after = engine.write("Written after the long read.", ["user:ana"])
    assert {h.memory.id for h in engine.recall("Written", ["user:ana"], k=10)} == {
        first.id,
        during.id,
        after.id,
    }


@pytest.mark.parametrize("fault", ["rename", "sync"])
def test_a_failure_at_the_switch_to_the_rewritten_file_loses_nothing(
    tmp_path: Path, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """The rewrite that removes erased bytes ends by renaming CURRENT to name the new file and syncing the
    directory. An I/O error at either step must leave one database both the process and a restart use: the
    writes acknowledged after it are there after a restart, and the erased bytes go at the next start."""
    import errno

    from storage.adapters.kuzu import store as kuzu_store

    data = tmp_path / "data"
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    failed: list[str] = []
    if fault == "rename":
        replace = Path.replace

        def flaky_replace(self: Path, target: str | os.PathLike[str]) -> Path:
            if Path(target).name == "CURRENT" and not failed:
                failed.append(str(target))
                raise OSError(errno.EIO, "Input/output error")
            return replace(self, target)

        monkeypatch.setattr(Path, "replace", flaky_replace)
    else:
        sync = kuzu_store._fsync_dir

        def flaky_sync(path: Path) -> None:
            if not failed:
                failed.append(str(path))
                raise OSError(errno.EIO, "Input/output error")
            sync(path)

        monkeypatch.setattr(kuzu_store, "_fsync_dir", flaky_sync)
    eng = Engine.open(data, embedder=embedder, warm=False)
    try:
        eng.write(f"The vault code is {canary}.", ["run:secret"])
        keep = eng.write("The lobby opens at 8am.", ["user:ana"])
        if fault == "rename":
            with pytest.raises(StorageUnavailable, match="could not be rewritten"):
                eng.purge("run:secret", confirm="run:secret")
        else:
            eng.purge("run:secret", confirm="run:secret")
        assert failed, "the fault was never reached: the test no longer exercises the switch"
        later = eng.write("The pool closes at 10pm.", ["user:ana"])  # the store still takes writes
        assert {h.memory.id for h in eng.recall("lobby pool", ["user:ana"])} == {keep.id, later.id}
    finally:
        eng.close()
    monkeypatch.undo()
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        assert eng.verify().ok
        assert eng.read(later.id).memory.content == "The pool closes at 10pm."
        assert eng.read(keep.id).memory.content == "The lobby opens at 8am."
        assert eng.recall("vault code", ["run:secret"]) == []
    assert files_containing(data, canary.encode()) == []
