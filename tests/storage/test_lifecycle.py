"""Opening, owning, repairing and checking a data directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from storage import CachedEmbedder, Engine, StorageUnavailable, StoreMismatch
from storage.adapters.embedder import Vectors


class RenamedMiniLM:
    """The real model under another name: a data directory must refuse vectors from a different embedder."""

    name = "other/model"
    dim = 384

    def __init__(self, inner: CachedEmbedder) -> None:
        self._inner = inner

    def embed(self, texts: list[str]) -> Vectors:
        return self._inner.embed(texts)

    def warm(self) -> None:
        self._inner.warm()


def test_one_owner_per_directory(engine: Engine, data_dir: Path, embedder: CachedEmbedder) -> None:
    with pytest.raises(StorageUnavailable, match="owned by another"):
        Engine.open(data_dir, embedder=embedder, warm=False)


def test_directory_refuses_a_different_embedder(data_dir: Path, embedder: CachedEmbedder) -> None:
    Engine.open(data_dir, embedder=embedder, warm=False).close()
    with pytest.raises(StoreMismatch, match="all-MiniLM-L6-v2"):
        Engine.open(data_dir, embedder=RenamedMiniLM(embedder), warm=False)


def test_opening_does_not_import_torch(tmp_path: Path) -> None:
    code = (
        "import sys; from storage import Engine; "
        f"e = Engine.open({str(tmp_path / 'd')!r}, warm=False); "
        "e.write('x y z', ['user:a']) if False else None; "
        "print('torch' in sys.modules, 'sentence_transformers' in sys.modules); e.close()"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_torch_loads_with_sleeping_openmp_workers_unless_openmp_was_tuned() -> None:
    """libgomp prints the spin count it settled on (OMP_DISPLAY_ENV): 0 means idle workers sleep at once."""
    code = (
        "from storage.adapters.embedder import MiniLMEmbedder; MiniLMEmbedder(runtime='torch').embed(['x'])"
    )
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    for extra, expected in (
        ({}, "GOMP_SPINCOUNT = '0'"),
        ({"GOMP_SPINCOUNT": "1234"}, "GOMP_SPINCOUNT = '1234'"),
        ({"OMP_WAIT_POLICY": "ACTIVE"}, "OMP_WAIT_POLICY = 'ACTIVE'"),  # a policy you set is kept
    ):
        env = {**base, "OMP_DISPLAY_ENV": "VERBOSE", **extra}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert expected in done.stderr


def test_lost_projections_are_rebuilt_at_open(data_dir: Path, embedder: CachedEmbedder) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        for i in range(5):
            eng.write(f"Fact {i}: the heron nests by the river.", ["user:a"])
        m = eng.write("The kingfisher is blue.", ["user:a"])
        eng.retire(m.id)
    shutil.rmtree(data_dir / "vectors")
    shutil.rmtree(data_dir / "text")
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        report = eng.verify()
        assert report.ok
        assert report.counts == {"kuzu": 6, "lancedb": 6, "tantivy": 6}
        assert len(eng.recall("heron", ["user:a"], k=10)) == 5


def test_projections_behind_a_pruned_log_are_rebuilt(data_dir: Path, embedder: CachedEmbedder) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        eng.write("Alpha fact about otters.", ["user:a"])
        eng.write("Beta fact about otters.", ["user:a"])
        lagging = eng.vectors.watermark.value
        eng.write("Gamma fact about otters.", ["user:a"])
        eng.reconciler.wait_projected()
        eng.reconciler.submit(lambda tx: eng.graph.prune_changes(tx.conn, eng.reconciler.committed_seq))
    # Simulate a projection that crashed long ago: its watermark predates what the log still keeps.
    (data_dir / "vectors" / "WATERMARK").write_text(str(lagging - 1))
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        assert eng.verify().ok
        assert len(eng.recall("otters", ["user:a"], recipe="vector")) == 3


def test_verify_reports_drift_and_reindex_repairs_it(engine: Engine) -> None:
    for i in range(3):
        engine.write(f"Drift check {i} with badgers.", ["user:a"])
    assert engine.verify().ok
    victim = engine.list("user:a").items[0].id
    # Damage a projection behind the engine's back.
    engine.reconciler.on_projector(lambda: engine.vectors.apply([], [victim]))
    report = engine.verify()
    assert not report.ok
    assert report.drift["lancedb_missing"] == [victim]
    repaired = engine.reindex()
    assert repaired.ok
    assert repaired.counts == {"kuzu": 3, "lancedb": 3, "tantivy": 3}


def test_concurrent_writers_are_serialised_and_all_land(engine: Engine) -> None:
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"Concurrent memory {i} about {np.random.default_rng(i).integers(1e9)}" for i in range(60)]
    with ThreadPoolExecutor(8) as pool:
        receipts = list(pool.map(lambda t: engine.write(t, ["team:t"]), texts))
    assert {r.status for r in receipts} == {"added"}
    report = engine.verify()
    assert report.ok
    assert report.canonical_memories == 60
