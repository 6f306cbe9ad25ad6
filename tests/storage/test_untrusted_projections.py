"""Search indexes (projections) that cannot be trusted are rebuilt from the canonical store when it opens.

What a data directory removed (or half-copied) under a running owner can leave: a watermark file that is empty,
scrambled or a directory, a watermark ahead of the canonical store, a LanceDB table whose directory, versions or
data files are gone, a Tantivy index directory that is gone while its watermark says it was filled, a ``CURRENT``
pointer that names nothing, projections of a canonical store made anew. Each used to fail the open (a LanceError,
"Table 'memories' was not found", IsADirectoryError) or open with silent drift that only ``reindex`` repaired.
Real stores in tmp_path, damaged on disk as a person or a race would; then opened as the next owner would.
Also: rows a projection holds twice are counted and reported by ``verify`` and removed by ``reindex``, and the
watermark is written durably.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from server._admin import perform, report_json
from server.cli import _format_report
from storage import CachedEmbedder, Engine
from storage import _durable as durable_module
from storage.adapters.watermark import Watermark

ROOT = Path(__file__).resolve().parents[2]
N = 6


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A directory name a shell must have quoted: the repair commands named here are run as given."""
    return tmp_path / "my data's dir"


def _build(data: Path, embedder: CachedEmbedder) -> str:
    """A small store; returns the id recall puts first for the test's query."""
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        for n in range(N):
            eng.write(f"Inventory note {n}: shelf {n * 3} holds {n} crates of quinces.", ["user:inv"])
        return eng.recall("crates of quinces shelf 15", ["user:inv"], k=3)[0].memory.id


def _lance_table(data: Path) -> Path:
    return next((data / "vectors").glob("*.lance"))


def _text_index(data: Path) -> Path:
    return next(p for p in (data / "text").iterdir() if p.is_dir() and p.name.startswith("index-"))


def _dir_for_watermark(path: Path) -> None:
    path.unlink()
    path.mkdir()


DAMAGE: dict[str, tuple[str, Callable[[Path], None]]] = {
    "vector watermark emptied": ("lancedb", lambda d: (d / "vectors" / "WATERMARK").write_bytes(b"")),
    "text watermark scrambled": (
        "tantivy",
        lambda d: (d / "text" / "WATERMARK").write_bytes(b"\x00\xffgarbage"),
    ),
    "vector watermark a directory": ("lancedb", lambda d: _dir_for_watermark(d / "vectors" / "WATERMARK")),
    "vector watermark ahead": ("lancedb", lambda d: (d / "vectors" / "WATERMARK").write_text("100")),
    "text watermark ahead": ("tantivy", lambda d: (d / "text" / "WATERMARK").write_text("100")),
    "lance table deleted": ("lancedb", lambda d: shutil.rmtree(_lance_table(d))),
    "lance versions deleted": ("lancedb", lambda d: shutil.rmtree(_lance_table(d) / "_versions")),
    "lance data deleted": ("lancedb", lambda d: shutil.rmtree(_lance_table(d) / "data")),
    "lance pointer emptied": ("lancedb", lambda d: (d / "vectors" / "CURRENT").write_text("")),
    "text index deleted": ("tantivy", lambda d: shutil.rmtree(_text_index(d))),
    "text pointer scrambled": ("tantivy", lambda d: (d / "text" / "CURRENT").write_text("../../etc")),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_an_untrusted_projection_is_rebuilt_at_open(
    data_dir: Path, embedder: CachedEmbedder, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    top = _build(data_dir, embedder)
    projection, harm = DAMAGE[damage]
    harm(data_dir)
    with caplog.at_level(logging.WARNING), Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        report = eng.verify()
        assert report.ok, report.drift
        assert report.counts == {"kuzu": N, "lancedb": N, "tantivy": N}
        assert report.watermarks == {"lancedb": report.canonical_seq, "tantivy": report.canonical_seq}
        assert report.canonical_seq == N  # a watermark that was ahead does not number the next changes
        hits = eng.recall("crates of quinces shelf 15", ["user:inv"], k=3)
        assert hits[0].memory.id == top
        assert {"bm25", "vector"} <= set(hits[0].lanes), hits[0].lanes
        new = eng.write("The loading dock closes at six.", ["user:inv"])
        assert eng.recall("loading dock closes", ["user:inv"], k=1)[0].memory.id == new.id
        assert eng.verify().ok
    rebuilt = [r.getMessage() for r in caplog.records if "rebuild" in r.getMessage()]
    assert any(projection in m for m in rebuilt), rebuilt  # logged, naming the projection
    # And it stays repaired: the next open finds nothing to rebuild.
    caplog.clear()
    with caplog.at_level(logging.WARNING), Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        assert eng.verify().ok
    assert not [r for r in caplog.records if "rebuild" in r.getMessage()]


def test_projections_of_a_canonical_store_made_anew_are_rebuilt(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    """The data directory removed under a running owner whose index writes raced the removal: the next owner
    finds the old projections (rows, watermarks) beside a new, empty canonical store."""
    _build(data_dir, embedder)
    shutil.rmtree(data_dir / "graph")
    (data_dir / "CANONICAL").unlink()
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        report = eng.verify()
        assert report.ok, report.drift
        assert report.counts == {"kuzu": 0, "lancedb": 0, "tantivy": 0}
        assert eng.recall("crates of quinces", ["user:inv"], k=3) == []
        new = eng.write("The loading dock closes at six.", ["user:inv"])
        assert [h.memory.id for h in eng.recall("loading dock closes", ["user:inv"], k=3)] == [new.id]


def _duplicate(eng: Engine, projection: str, memory_id: str) -> None:
    """Write a second row of ``memory_id`` into the real index, as the ``fresh`` shortcut (an add without the
    delete before it) did on a retried batch."""
    with eng.graph.read() as conn:
        row = eng.graph.projection_rows(conn, [memory_id])[memory_id]
    target = eng.vectors if projection == "lancedb" else eng.text
    target.apply([row], [], fresh=[row.id])


@pytest.mark.parametrize("projection", ["lancedb", "tantivy"])
def test_verify_counts_rows_and_names_duplicates_and_reindex_removes_them(
    engine: Engine, projection: str
) -> None:
    ids = [engine.write(f"Bin {n} holds {n} spare fuses.", ["user:inv"]).id for n in range(3)]
    assert engine.reconciler.wait_projected()
    _duplicate(engine, projection, ids[1])
    report = engine.verify()
    assert not report.ok
    assert report.counts[projection] == 4  # rows, not distinct ids
    assert report.drift[f"{projection}_duplicate"] == [ids[1]]
    shown = report_json(report)
    assert shown["ok"] is False
    assert shown["repair"] == "mnemograph reindex"
    # Through the owner (``verify --json``): the store's own directory, shell-quoted, since a bare
    # ``mnemograph reindex`` would rebuild the default store's indexes, not this one's.
    answered = json.loads(json.dumps(perform(engine, "verify", {})))
    assert answered["ok"] is False
    assert shlex.split(answered["repair"]) == ["mnemograph", "reindex", "--data-dir", str(engine.data_dir)]
    text = _format_report(shown, "/srv/mem")
    assert f"drift {projection}_duplicate: 1 ({ids[1]})" in text
    assert text.splitlines()[-1].startswith("DRIFT: run `mnemograph reindex --data-dir /srv/mem`")
    repaired = engine.reindex()
    assert repaired.ok, repaired.drift
    assert repaired.counts == {"kuzu": 3, "lancedb": 3, "tantivy": 3}


def test_a_duplicate_row_found_at_open_is_removed(data_dir: Path, embedder: CachedEmbedder) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        first = eng.write("Bin 7 holds the spare fuses.", ["user:inv"])
        eng.write("Bin 8 holds the cable ties.", ["user:inv"])
        assert eng.reconciler.wait_projected()
        _duplicate(eng, "lancedb", first.id)
        _duplicate(eng, "tantivy", first.id)
        assert (eng.vectors.count(), eng.text.count()) == (3, 3)
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        assert (eng.vectors.count(), eng.text.count()) == (2, 2)
        report = eng.verify()
        assert report.ok, report.drift
        assert report.counts == {"kuzu": 2, "lancedb": 2, "tantivy": 2}


def test_a_watermark_is_written_durably(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Temporary file, fsync of it, rename, fsync of the directory: in that order."""
    mark = Watermark(tmp_path / "WATERMARK")
    synced: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        synced.append(f"rename {Path(src).name} -> {Path(dst).name}")
        real_replace(src, dst)

    monkeypatch.setattr(durable_module.os, "fsync", fsync)
    monkeypatch.setattr(durable_module.os, "replace", replace)
    mark.set(42)
    assert synced == [str(tmp_path / "WATERMARK.tmp"), "rename WATERMARK.tmp -> WATERMARK", str(tmp_path)]
    assert Watermark(tmp_path / "WATERMARK").value == 42


_KILL_BEFORE_RENAME = """
import os, signal, sys
from pathlib import Path
from storage import _durable
from storage.adapters import watermark
mark = watermark.Watermark(Path(sys.argv[1]))
mark.set(7)
def killed(src, dst):
    os.kill(os.getpid(), signal.SIGKILL)
_durable.os.replace = killed
mark.set(8)
"""


def test_a_process_killed_between_write_and_rename_leaves_the_old_watermark(tmp_path: Path) -> None:
    path = tmp_path / "WATERMARK"
    done = subprocess.run(
        [sys.executable, "-c", _KILL_BEFORE_RENAME, str(path)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert (tmp_path / "WATERMARK.tmp").read_text() == "8"  # written in full, never renamed
    assert Watermark(path).value == 7


def test_the_canonical_record_is_written_durably(
    data_dir: Path, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CANONICAL`` (which canonical store the projections mirror) is a state file too: fsynced, renamed, and
    its directory fsynced."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with Engine.open(data_dir, embedder=embedder, warm=False):
        pass
    assert (data_dir / "CANONICAL").read_text() == "kuzu\n"
    at = synced.index(str(data_dir / "CANONICAL.tmp"))
    assert str(data_dir) in synced[at + 1 :]


@pytest.mark.parametrize("how", ["reindex", "damaged at open"])
def test_a_rebuild_after_an_erasure_is_not_done_again_at_every_open(
    data_dir: Path, embedder: CachedEmbedder, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An erasure prunes the change log whole. A rebuild then (``mnemograph reindex``, or the open's repair of
    an index it cannot trust) set the watermarks to the empty log's head, 0: over a store with memories that
    reads as projections lost, and every later open rebuilt both in full until the next write came."""
    top = _build(data_dir, embedder)
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        gone = eng.write("The old key code was 4471.", ["user:inv"]).id
        eng.erase(gone, confirm=gone)
        if how == "reindex":
            assert eng.reindex().ok
    if how == "damaged at open":
        (data_dir / "vectors" / "WATERMARK").write_text("not a number")
        with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
            assert eng.verify().ok
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.WARNING), Engine.open(data_dir, embedder=embedder, warm=False) as eng:
            report = eng.verify()
            assert report.ok, report.drift
            assert report.counts == {"kuzu": N, "lancedb": N, "tantivy": N}
            assert min(report.watermarks.values()) > N  # the erasure's changes counted, not an empty log's 0
            assert eng.recall("crates of quinces shelf 15", ["user:inv"], k=3)[0].memory.id == top
        rebuilt = [r.getMessage() for r in caplog.records if "rebuild" in r.getMessage()]
        assert rebuilt == []
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        new = eng.write("The loading dock closes at six.", ["user:inv"])
        assert eng.recall("loading dock closes", ["user:inv"], k=1)[0].memory.id == new.id
        assert eng.verify().ok


def test_a_caller_waiting_on_an_open_that_rebuilds_an_index_is_told_so(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    """A repair at open reads every memory and rebuilds an index: minutes for a large store, past the time a
    call waits. The caller and ``mnemograph status`` heard only "still opening" (wait a few seconds), with
    nothing about what the store was doing or why."""
    _build(data_dir, embedder)
    shutil.rmtree(_text_index(data_dir))
    said: list[str] = []
    with Engine.open(data_dir, embedder=embedder, warm=False, progress=said.append) as eng:
        assert eng.verify().ok
    assert said == [
        "reading the canonical store to rebuild the search indexes (found damaged or out of step at open)",
        f"rebuilding the search index tantivy from the canonical store's {N} memories (found damaged or out of "
        "step at open); no memory is lost",
    ]


def test_an_open_whose_repair_fails_late_is_not_retried_sooner_than_it_took(
    data_dir: Path,
    embedder: CachedEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The owner retries an open that met a full disk; each attempt whose repair rebuilds an index re-reads
    every memory (minutes at 100,000). Retried every 2 s, the retries kept the machine busy while the disk was
    still full. Here the rebuild fails slowly once (0.6 s, the disk full), then the disk is freed."""
    import time as clock

    import anyio

    from server._engine import EngineHolder
    from storage.adapters.tantivy_text import TextIndex

    _build(data_dir, embedder)
    shutil.rmtree(_text_index(data_dir))
    real, failures = TextIndex.replace_all, []

    def full_once(self: TextIndex, rows: object) -> None:
        if not failures:
            failures.append(1)
            clock.sleep(0.6)
            raise OSError(28, "No space left on device")
        real(self, rows)  # type: ignore[arg-type]

    monkeypatch.setattr(TextIndex, "replace_all", full_once)
    holder = EngineHolder(data_dir, wait=30)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder.run)
            engine = await holder.get()
            assert engine.verify().ok
        await holder.close()

    with caplog.at_level(logging.WARNING, logger="mnemograph"):
        anyio.run(main)
    waits = [float(m.split("retrying in ")[1].rstrip("s")) for m in caplog.messages if "retrying in " in m]
    assert len(waits) == 1, caplog.messages
    assert waits[0] >= 0.6  # not the first retry's 0.1 s


def test_an_open_that_fails_slowly_before_any_long_step_is_retried_at_the_usual_pace(
    data_dir: Path,
    embedder: CachedEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Only a failure in a long one-off step (a rebuild) waits as long as the attempt took: one that was merely
    slow (a shared store's server not answering yet, the machine busy) is retried at once, as before."""
    import time as clock

    import anyio

    from server import _engine
    from server._engine import EngineHolder
    from storage import StorageUnavailable

    _build(data_dir, embedder)
    real, attempts = _engine._open_engine, []

    def slow_once(*args: object) -> Engine:
        attempts.append(1)
        if len(attempts) == 1:
            clock.sleep(0.6)
            raise StorageUnavailable("the shared store's server did not answer")
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_engine, "_open_engine", slow_once)
    holder = EngineHolder(data_dir, wait=30)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder.run)
            await holder.get()
        await holder.close()

    with caplog.at_level(logging.WARNING, logger="mnemograph"):
        anyio.run(main)
    waits = [float(m.split("retrying in ")[1].rstrip("s")) for m in caplog.messages if "retrying in " in m]
    assert waits == [0.1], caplog.messages
