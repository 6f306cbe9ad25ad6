"""purge erases a scope for real: no byte of its content is left anywhere under the data directory."""

import uuid
from pathlib import Path

import pytest

from storage import Engine, InvalidInput, NotFound
from tests.conftest import files_containing


def test_purge_leaves_no_trace_of_the_content(engine: Engine, data_dir: Path) -> None:
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    secret = engine.write(f"The vault code is {canary} and Zorblax Quintero knows it.", ["run:secret"])
    engine.amend(secret.id, f"The vault code is {canary}-2 and Zorblax Quintero knows it.")
    keep = engine.write("The lobby opens at 8am.", ["user:ana"])
    shared = engine.write("Parking is on level -2.", ["run:secret", "user:ana"])
    assert files_containing(data_dir, canary.encode())  # it really was written somewhere

    receipt = engine.purge("run:secret", confirm="run:secret")

    assert receipt.memories_deleted == 2
    assert receipt.memories_unlinked == 1
    assert receipt.per_store == {"kuzu": 2, "lancedb": 2, "tantivy": 2}
    assert receipt.entities_deleted >= 1  # "Zorblax Quintero" was only mentioned there
    assert files_containing(data_dir, canary.encode()) == []
    assert files_containing(data_dir, b"Zorblax") == []
    assert engine.read(keep.id).memory.scopes == ("user:ana",)
    assert engine.read(shared.id).memory.scopes == ("user:ana",)
    assert engine.recall("vault code", ["run:secret"]) == []
    assert "run:secret" not in {s.id for s in engine.list_scopes()}
    assert engine.verify().ok


def test_purge_survives_reopen_and_keeps_other_scopes(data_dir: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        eng.create_scope("run:r1", parent="project:p")
        eng.move_scope("project:p", parent="user:ana")
        eng.write("Run one produced 42 widgets.", ["run:r1"])
        eng.write("Project P is about widgets.", ["project:p"])
        eng.purge("project:p", confirm="project:p")
        # the child scope moves up to the purged scope's parent
        assert {s.id: s.parent for s in eng.list_scopes()}["run:r1"] == "user:ana"
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        assert eng.verify().ok
        assert [h.memory.content for h in eng.recall("widgets", ["run:r1"])] == [
            "Run one produced 42 widgets."
        ]


def test_purge_needs_the_exact_confirmation(engine: Engine) -> None:
    engine.write("Keep me.", ["team:t"])
    with pytest.raises(InvalidInput, match="confirm must equal"):
        engine.purge("team:t", confirm="team:T")
    with pytest.raises(NotFound):
        engine.purge("team:nope", confirm="team:nope")
    assert engine.verify().canonical_memories == 1
