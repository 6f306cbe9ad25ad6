"""amend, retire, read, list: versions are new memories; validity closes; history stays readable."""

from datetime import UTC, datetime, timedelta

import pytest

from storage import Conflict, Engine, InvalidInput, NotFound, Status


def test_amend_supersedes_and_history_keeps_both_in_order(engine: Engine) -> None:
    old = engine.write("Ana lives in Lisbon.", ["user:ana"], kind="fact")
    new = engine.amend(old.id[:10], "Ana lives in Berlin.", reason="moved")
    assert new.supersedes == old.id
    assert new.scopes == ("user:ana",)
    current = engine.recall("where does Ana live", ["user:ana"])
    assert [h.memory.id for h in current] == [new.id]
    history = engine.recall("where does Ana live", ["user:ana"], include_history=True)
    assert {h.memory.id for h in history} == {old.id, new.id}
    record = engine.read(new.id)
    assert [m.id for m in record.versions] == [old.id, new.id]
    old_m = engine.read(old.id).memory
    assert old_m.status is Status.SUPERSEDED
    assert old_m.superseded_by == new.id
    assert old_m.valid_to is not None
    assert engine.read(new.id).memory.supersedes == old.id


def test_amending_a_superseded_memory_points_to_its_successor(engine: Engine) -> None:
    old = engine.write("The API key rotates monthly.", ["team:ops"])
    new = engine.amend(old.id, "The API key rotates weekly.")
    with pytest.raises(Conflict, match=new.id):
        engine.amend(old.id, "The API key rotates daily.")
    with pytest.raises(Conflict, match="identical"):
        engine.amend(new.id, "The API key rotates weekly.")


def test_retire_closes_validity_and_hides_from_default_recall(engine: Engine) -> None:
    m = engine.write("Standup is at 9:30 every day.", ["team:ops"])
    receipt = engine.retire(m.id, reason="moved to async updates")
    assert engine.recall("standup time", ["team:ops"]) == []
    history = engine.recall("standup time", ["team:ops"], include_history=True)
    assert [h.memory.status for h in history] == [Status.RETIRED]
    assert history[0].memory.retire_reason == "moved to async updates"
    assert receipt.retired_at <= datetime.now(UTC)
    with pytest.raises(Conflict, match="already retired"):
        engine.retire(m.id)
    with pytest.raises(Conflict, match="retired"):
        engine.amend(m.id, "Standup is at 10:00.")


def test_as_of_reads_valid_time(engine: Engine) -> None:
    start = datetime(2020, 1, 1, tzinfo=UTC)
    m = engine.write("The office is in Porto.", ["org:acme"], valid_from=start)
    end = datetime(2022, 6, 1, tzinfo=UTC)
    engine.retire(m.id, at=end)
    assert [
        h.memory.id for h in engine.recall("office", ["org:acme"], as_of=datetime(2021, 1, 1, tzinfo=UTC))
    ] == [m.id]
    assert engine.recall("office", ["org:acme"], as_of=datetime(2023, 1, 1, tzinfo=UTC)) == []
    assert engine.recall("office", ["org:acme"], as_of=datetime(2019, 1, 1, tzinfo=UTC)) == []
    other = engine.write("The office has a rooftop.", ["org:acme"], valid_from=start)
    with pytest.raises(InvalidInput, match="before the memory became valid"):
        engine.retire(other.id, at=start - timedelta(days=1))


def test_read_accepts_unique_prefix_and_refuses_unknown(engine: Engine) -> None:
    m = engine.write("Ana's cat is called Miso.", ["user:ana"])
    assert engine.read(m.id[:8]).memory.content == "Ana's cat is called Miso."
    with pytest.raises(NotFound, match="recall"):
        engine.read("0" * 32 if not m.id.startswith("0") else "f" * 32)
    with pytest.raises(InvalidInput, match="hex"):
        engine.read("abc")


def test_list_pages_through_a_scope(engine: Engine) -> None:
    ids = [engine.write(f"Note number {i} about gardening.", ["user:ana"]).id for i in range(7)]
    engine.retire(ids[0])
    page = engine.list("user:ana", limit=4)
    assert len(page.items) == 4
    assert page.next_cursor is not None
    rest = engine.list("user:ana", limit=4, cursor=page.next_cursor)
    assert rest.next_cursor is None
    assert [m.id for m in (*page.items, *rest.items)] == ids[1:]
    assert len(engine.list("user:ana", include_retired=True, limit=50).items) == 7
    with pytest.raises(InvalidInput, match="cursor"):
        engine.list("user:ana", cursor="bm90LWEtY3Vyc29y")
    with pytest.raises(NotFound):
        engine.list("user:nobody")
