"""Above the size threshold the vector lane answers from an IVF-PQ index, refined so top results stay exact."""

from pathlib import Path

import numpy as np

from storage import CachedEmbedder, Engine, WriteItem


def test_ann_index_keeps_exact_top_results(data_dir: Path, embedder: CachedEmbedder) -> None:
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((600, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    with Engine.open(data_dir, embedder=embedder, warm=False, ann_threshold=400) as eng:
        items = [WriteItem(f"synthetic memory {i}", ["user:a"], vector=vecs[i]) for i in range(600)]
        ids = [r.id for r in eng.write_many(items)]
        eng.reconciler.wait_projected()
        assert not eng.vectors.has_ann_index
        eng.reconciler.on_projector(eng.vectors.maintain)
        assert eng.vectors.has_ann_index
        for probe in (0, 123, 599):
            found = eng.vectors.search(vecs[probe], scopes=["user:a"], k=5, live_only=True, kinds=None)
            assert found[0][0] == ids[probe]
        # rows added after the index was built are still found (searched flat until the next refresh)
        late = rng.standard_normal(384).astype(np.float32)
        late /= np.linalg.norm(late)
        late_id = eng.write_many([WriteItem("a late memory", ["user:a"], vector=late)])[0].id
        eng.reconciler.wait_projected()
        assert eng.vectors.search(late, scopes=["user:a"], k=3, live_only=True, kinds=None)[0][0] == late_id
        assert eng.verify().ok
    with Engine.open(data_dir, embedder=embedder, warm=False, ann_threshold=400) as eng:
        assert eng.vectors.has_ann_index  # the index is found again after a restart
