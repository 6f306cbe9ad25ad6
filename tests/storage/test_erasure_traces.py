"""After ``erase`` or ``purge`` nothing derived from the erased memory is left anywhere under the data directory:
not its content, not its embedding (the float bytes, in the encodings a store might use), not its id (hex or
raw), not an alias or a type only it gave, and no pointer to it from a memory that stays. Checked with a
fragment shared with other memories (Lance compaction used to skip fragments with few deletions) and with the
vector index built (IVF partitions hold copies of the vectors)."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from storage import CachedEmbedder, Engine, EntityIn, WriteItem
from storage.adapters._half import stored_bytes
from tests.conftest import files_containing

FILLER = [f"Routine note {i}: the {w} plant on shelf {i % 7} needs water." for i, w in enumerate(
    ["fern", "cactus", "ivy", "palm", "orchid", "basil", "mint", "sage"] * 6
)]  # fmt: skip


def _needles(vector: np.ndarray, memory_id: str) -> dict[str, bytes]:
    """Byte patterns that would betray the memory: its vector as the stores keep it (float16 scaled by a power
    of two, from the start and the middle), in float32 (little and big endian, whole and a window from the
    middle), plain float16 and float64, and its id as hex (both cases) and as raw bytes."""
    v32 = np.asarray(vector, dtype="<f4")
    half = stored_bytes(v32)
    return {
        "vector half": half[:32],
        "vector half middle": half[360:392],
        "vector f32": v32[:16].tobytes(),
        "vector f32 middle": v32[180:196].tobytes(),
        "vector f32 big-endian": v32[:16].astype(">f4").tobytes(),
        "vector f16": v32[:32].astype("<f2").tobytes(),
        "vector f64": v32[:8].astype("<f8").tobytes(),
        "id hex": memory_id.encode(),
        "id HEX": memory_id.upper().encode(),
        "id raw": bytes.fromhex(memory_id),
    }


def _left(data_dir: Path, needles: dict[str, bytes]) -> dict[str, list[str]]:
    found = {what: files_containing(data_dir, needle) for what, needle in needles.items()}
    return {what: [str(p.relative_to(data_dir)) for p in paths] for what, paths in found.items() if paths}


def _store_with_a_secret(eng: Engine, embedder: CachedEmbedder, scope: str) -> tuple[str, dict[str, bytes]]:
    alias = f"Zq{uuid.uuid4().hex[:10]}alias"
    etype = f"agency{uuid.uuid4().hex[:8]}"
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    secret_text = f"Ana Lima's salary is 250k ({canary})."
    # One call, so the secret shares its Lance fragment (and its Tantivy segment) with 48 other memories.
    receipts = eng.write_many(
        [
            WriteItem(secret_text, [scope], entities=[EntityIn("Ana Lima", type=etype, aliases=(alias,))]),
            *(WriteItem(text, ["user:keep"]) for text in FILLER),
        ]
    )
    eng.write("Ana Lima sits by the window.", ["user:keep"], entities=[EntityIn("Ana Lima")])
    secret = receipts[0].id
    needles = {
        **_needles(embedder.embed([secret_text])[0], secret),
        "content": canary.encode(),
        "alias": alias.encode(),
        "alias casefolded": alias.casefold().encode(),
        "type": etype.encode(),
    }
    eng.reconciler.wait_projected()
    found = _left(eng.data_dir, needles)
    # The scan can see each of them before the erasure (else it would prove nothing).
    for what in ("vector half", "vector half middle", "id hex", "content", "alias", "type"):
        assert what in found, f"{what} was never on disk: the scan would prove nothing"
    # Both stores keep the vector in half precision: its float32 bytes were never written anywhere.
    assert not {"vector f32", "vector f32 middle", "vector f32 big-endian"} & set(found), found
    return secret, needles


@pytest.mark.parametrize("ann_threshold", [50_000, 16], ids=["flat", "ivf-index"])
@pytest.mark.parametrize("op", ["erase", "purge"])
def test_erasure_leaves_no_vector_id_alias_or_type(
    tmp_path: Path, embedder: CachedEmbedder, op: str, ann_threshold: int
) -> None:
    data = tmp_path / "data"
    with Engine.open(data, embedder=embedder, warm=False, ann_threshold=ann_threshold) as eng:
        secret, needles = _store_with_a_secret(eng, embedder, "run:secret")
        eng.vectors.maintain()  # the ANN index (when the table is large enough) now holds the secret's vector
        assert eng.vectors.has_ann_index == (ann_threshold == 16)
        if op == "erase":
            eng.erase(secret, confirm=secret)
        else:
            eng.purge("run:secret", confirm="run:secret")
        assert _left(data, needles) == {}
        # The alias and the type went with the memory that gave them; the entity stays for the kept memory.
        hits = eng.recall(needles["alias"].decode(), ["user:keep"])
        assert all("graph" not in h.lanes for h in hits)
        assert [h.memory.content for h in eng.recall("Ana Lima", ["user:keep"], k=1)] == [
            "Ana Lima sits by the window."
        ]
        assert eng.verify().ok
    with Engine.open(data, embedder=embedder, warm=False, ann_threshold=ann_threshold) as eng:
        assert eng.verify().ok
        assert all("graph" not in h.lanes for h in eng.recall(needles["alias"].decode(), ["user:keep"]))
    assert _left(data, needles) == {}


def test_a_kept_memory_superseded_by_a_purged_one_keeps_no_pointer_to_it(
    engine: Engine, data_dir: Path, embedder: CachedEmbedder
) -> None:
    old = engine.write("The office wifi password is tulip-42.", ["user:keep"])
    engine.link(old.id, "run:secret")
    new = engine.amend(old.id, "The office wifi password is orchid-77.")
    engine.unlink(new.id, "user:keep")  # the newer version lives only in the scope that is purged
    engine.purge("run:secret", confirm="run:secret")
    kept = engine.read(old.id).memory
    assert kept.superseded_by is None
    assert kept.status.value == "retired"  # out of current recall, as it was while superseded
    assert engine.recall("wifi password", ["user:keep"]) == []
    assert files_containing(data_dir, new.id.encode()) == []
    assert engine.verify().ok
