"""The canonical store's free pages go back to the file system after a maintenance, and nothing else changes."""

from pathlib import Path

from storage import CachedEmbedder, Engine, WriteItem


def _bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


def test_maintenance_rewrites_a_canonical_file_that_is_mostly_free(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        ids: list[str] = []
        for batch in range(6):  # each commit and checkpoint grows the columns: their old pages become free
            items = [WriteItem(f"memory {batch}-{i} about Lisbon and Porto", ["user:a"]) for i in range(60)]
            ids += [r.id for r in eng.write_many(items)]
            eng.reconciler.wait_projected()  # the projector's reads would hold the checkpoint off
            eng.graph.checkpoint()
        eng.reconciler.wait_projected()
        free = eng.graph.file_space().free
        assert free > 0
        eng.compactor.min_free, eng.compactor.min_share = 1, 0.0  # this small store is worth a rewrite too
        before = _bytes(data_dir / "graph")

        # What the projector runs after a burst of writes.
        eng.reconciler.on_projector(eng.reconciler._maintain)
        assert eng.compactor.wait_idle(60)

        assert eng.compactor.rewrites == 1
        assert _bytes(data_dir / "graph") <= before - free  # the free pages are gone from the disk
        assert eng.graph.file_space().free < free
        assert eng.verify().ok
        assert all(eng.read(i).memory.id == i for i in ids)
        late = eng.write("a memory written after the rewrite", ["user:a"])
        assert eng.read(late.id).memory.content == "a memory written after the rewrite"
    # The switched file is the one reopened.
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        assert eng.verify().ok
        assert eng.read(ids[0]).memory.content.startswith("memory 0-0")
        found = eng.recall("memory 5-7 about Lisbon", ["user:a"], k=3)
        assert found
        assert found[0].memory.id == ids[5 * 60 + 7]


def test_a_store_with_little_free_space_is_not_rewritten(data_dir: Path, embedder: CachedEmbedder) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        eng.write_many([WriteItem(f"memory {i}", ["user:a"]) for i in range(20)])
        eng.reconciler.wait_projected()
        eng.reconciler.on_projector(eng.reconciler._maintain)
        assert eng.compactor.wait_idle(60)
        assert eng.compactor.rewrites == 0  # far below MIN_FREE_BYTES


def test_the_free_pages_a_pending_checkpoint_would_make_count(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    """A store just filled holds its last commits in the WAL: the pages their checkpoint frees (grown columns
    written anew) count too, so the compactor checkpoints before it looks."""
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        for batch in range(3):
            eng.write_many([WriteItem(f"memory {batch}-{i} in Braga", ["user:a"]) for i in range(60)])
            eng.reconciler.wait_projected()
            eng.graph.checkpoint()
        free = eng.graph.file_space().free
        # The last, larger commit stays in the WAL (far below Kùzu's automatic checkpoint).
        eng.write_many([WriteItem(f"memory 3-{i} in Faro", ["user:a"]) for i in range(400)])
        eng.reconciler.wait_projected()
        eng.compactor.min_free, eng.compactor.min_share = free + 1, 0.0  # more than was free before it
        eng.compactor.checkpoint_log = 1  # this small log counts as a large one

        eng.reconciler.on_projector(eng.reconciler._maintain)
        assert eng.compactor.wait_idle(60)

        assert eng.compactor.rewrites == 1
        assert eng.verify().ok
