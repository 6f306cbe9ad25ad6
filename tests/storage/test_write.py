"""memory_write semantics: content-addressed ids, duplicate / linked / added, entities, time, provenance."""

from datetime import UTC, datetime, timedelta

import pytest

from scopes import Principal
from storage import Engine, EntityIn, InvalidInput, RelationIn, WriteItem, content_id


def test_identical_content_is_idempotent_in_a_scope_and_linked_across_scopes(engine: Engine) -> None:
    first = engine.write("Ana prefers oat milk in her coffee.", ["user:ana"], kind="preference")
    assert first.status == "added"
    assert first.id == content_id("Ana prefers oat milk in her coffee.")
    again = engine.write("Ana prefers oat milk in her coffee.", ["user:ana"])
    assert (again.status, again.id) == ("duplicate", first.id)
    shared = engine.write("Ana prefers oat milk in her coffee.", ["team:cafe"])
    assert (shared.status, shared.id) == ("linked", first.id)
    assert shared.scopes == ("team:cafe", "user:ana")
    record = engine.read(first.id)
    assert record.memory.scopes == ("team:cafe", "user:ana")
    assert [h.memory.id for h in engine.recall("oat milk", ["team:cafe"])] == [first.id]
    assert engine.verify().counts == {"kuzu": 1, "lancedb": 1, "tantivy": 1}


def test_caller_entities_and_relations_are_stored(engine: Engine) -> None:
    receipt = engine.write(
        "The website is hosted by Netlify and built by Acme Corp.",
        ["project:site"],
        kind="fact",
        entities=[EntityIn("Acme Corp", "org", aliases=("Acme",))],
        relations=[RelationIn("website", "hosted_by", "Netlify")],
    )
    assert {"Acme Corp", "Netlify", "website"} <= set(receipt.entities)
    # A later memory naming a known alias is linked to the same entity by the offline extractor.
    later = engine.write("acme is hiring two engineers.", ["project:site"])
    assert "Acme Corp" in later.entities


def test_offline_extractor_finds_capitalised_names_not_sentence_starts(engine: Engine) -> None:
    receipt = engine.write("Yesterday I met Maria Souza at the Bank of Portugal.", ["user:ana"])
    assert "Maria Souza" in receipt.entities
    assert "Bank of Portugal" in receipt.entities
    assert "Yesterday" not in receipt.entities


def test_event_time_from_caller_from_content_or_write_time(engine: Engine) -> None:
    given = datetime(2023, 5, 20, 14, 0, tzinfo=UTC)
    assert engine.write("Moved the server to Frankfurt.", ["user:ana"], event_time=given).event_time == given
    before = datetime.now(UTC)
    plain = engine.write("Likes jazz.", ["user:ana"])
    assert plain.event_time is None  # an undated note has no event time: the receipt does not invent one
    stored = engine.read(plain.id).memory
    assert before <= stored.event_time <= datetime.now(UTC)
    assert stored.event_time_source == "recorded"
    dated = engine.write("Ana started her new job on March 3, 2021.", ["user:ana"])
    assert dated.event_time is not None
    assert dated.event_time.date() == datetime(2021, 3, 3).date()
    relative = engine.write("Ana ran a half marathon yesterday.", ["user:ana"])
    assert relative.event_time is not None
    assert relative.event_time.date() == (datetime.now(UTC) - timedelta(days=1)).date()
    assert engine.read(relative.id).memory.event_time_source == "content"


def test_a_clock_time_in_the_content_is_kept_in_the_event_time(engine: Engine) -> None:
    """ "Dentist appointment on December 15, 2026 at 3pm" happened at 15:00, not at midnight."""
    dentist = engine.write("Dentist appointment on December 15, 2026 at 3pm.", ["user:ana"])
    assert dentist.event_time == datetime(2026, 12, 15, 15, 0, tzinfo=UTC)
    before = engine.write("At 9:30 a.m. on 2026-12-16 the plumber comes.", ["user:ana"])
    assert before.event_time == datetime(2026, 12, 16, 9, 30, tzinfo=UTC)
    vague = engine.write("On December 17, 2026 at 3 we meet.", ["user:ana"])  # "at 3": not a clock time
    assert vague.event_time == datetime(2026, 12, 17, tzinfo=UTC)
    assert engine.read(dentist.id).memory.event_time == dentist.event_time


def test_provenance_metadata_and_validity_are_recorded(engine: Engine) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    receipt = engine.write(
        "Office is at Rua Augusta 12.",
        ["org:acme"],
        kind="fact",
        valid_from=start,
        metadata={"source_url": "https://example.org", "tags": ["office"]},
        principal=Principal("agent-7", client="cursor"),
        source="onboarding",
    )
    m = engine.read(receipt.id).memory
    assert (m.provenance.principal, m.provenance.client, m.provenance.source) == (
        "agent-7",
        "cursor",
        "onboarding",
    )
    assert m.metadata == {"source_url": "https://example.org", "tags": ["office"]}
    assert m.valid_from == start
    assert m.valid_to is None


def test_rewriting_retired_content_is_a_new_assertion(engine: Engine) -> None:
    first = engine.write("The build uses Python 3.11.", ["project:site"])
    engine.retire(first.id, reason="upgraded")
    again = engine.write("The build uses Python 3.11.", ["project:site"])
    assert again.status == "added"
    assert again.id != first.id
    assert [h.memory.id for h in engine.recall("python build", ["project:site"])] == [again.id]


def test_write_many_rejects_everything_when_one_item_is_bad(engine: Engine) -> None:
    items = [WriteItem("fine memory one", ["user:ana"]), WriteItem("", ["user:ana"])]
    with pytest.raises(InvalidInput, match="item 1"):
        engine.write_many(items)
    assert engine.verify().canonical_memories == 0


def test_write_many_with_supplied_vectors(engine: Engine) -> None:
    vec = engine.embedder.embed(["the cat sat on the mat"])[0]
    receipts = engine.write_many(
        [WriteItem("the cat sat on the mat", ["user:ana"], vector=vec), WriteItem("dogs bark", ["user:ana"])]
    )
    assert [r.status for r in receipts] == ["added", "added"]
    hits = engine.recall("a cat sitting on a mat", ["user:ana"], recipe="vector")
    assert hits[0].memory.id == receipts[0].id
    with pytest.raises(InvalidInput, match="384 finite numbers"):
        engine.write_many([WriteItem("bad vector", ["user:ana"], vector=[1.0, 2.0])])
