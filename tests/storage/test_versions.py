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


def test_amend_reconciles_the_new_version_against_other_memories_as_a_write_does(engine: Engine) -> None:
    """Amending some other memory to "Ana now works at Globex" left "Ana works at Acme" current: a write of the
    same words supersedes it, and so must the amend."""
    acme = engine.write("Ana works at Acme.", ["user:sam"])
    tea = engine.write("Ana likes tea.", ["user:sam"])
    new = engine.amend(tea.id, "Ana now works at Globex.")
    old = engine.read(acme.id)
    assert old.memory.status is Status.SUPERSEDED
    assert old.memory.superseded_by == new.id
    assert old.relations == (f"Ana —works_at→ Acme [? → {new.valid_from:%Y-%m-%d}, ended by {new.id}]",)
    hits = engine.recall("where does Ana work", ["user:sam"])
    assert acme.id not in [h.memory.id for h in hits]
    assert new.id in [h.memory.id for h in hits]
    assert new.also_supersedes == (acme.id,)
    # Contradictions too: a fixed fact told differently links both, as a write does.
    born = engine.write("Ana was born in Faro.", ["user:sam"])
    note = engine.write("Ana has a cat.", ["user:sam"])
    told = engine.amend(note.id, "Ana was born in Evora.")
    assert engine.read(born.id).contradicts == (told.id,)
    assert told.contradicts == (born.id,)


def test_amend_saying_no_longer_ends_the_relation_when_the_change_took_effect(engine: Engine) -> None:
    # The amended memory's own relation: ended at effective_at, not carried over to the new version.
    since = datetime(2020, 1, 1, tzinfo=UTC)
    bo = engine.write("Bo works at Initech.", ["user:sam"], valid_from=since)
    left = datetime(2024, 5, 1, tzinfo=UTC)
    new = engine.amend(bo.id, "Bo no longer works at Initech.", effective_at=left)
    assert engine.read(new.id).relations == ()
    assert engine.read(bo.id).relations == (f"Bo —works_at→ Initech [? → 2024-05-01, ended by {new.id}]",)
    # Another memory's relation: ended and superseded, as "Cy no longer works at Umbrella" written would.
    cy = engine.write("Cy works at Umbrella.", ["user:sam"])
    note = engine.write("Cy likes tea.", ["user:sam"])
    ended = engine.amend(note.id, "Cy no longer works at Umbrella.")
    assert engine.read(cy.id).memory.status is Status.SUPERSEDED
    assert engine.read(cy.id).relations == (
        f"Cy —works_at→ Umbrella [? → {ended.valid_from:%Y-%m-%d}, ended by {ended.id}]",
    )
    assert ended.also_supersedes == (cy.id,)


def test_amend_with_effective_at_closes_other_memories_then_too(engine: Engine) -> None:
    since = datetime(2020, 1, 1, tzinfo=UTC)
    acme = engine.write("Ana works at Acme.", ["user:sam"], valid_from=since)
    note = engine.write("Ana has a dog.", ["user:sam"], valid_from=since)
    moved = datetime(2024, 3, 1, tzinfo=UTC)
    new = engine.amend(note.id, "Ana now works at Globex.", effective_at=moved)
    assert engine.read(acme.id).relations == (f"Ana —works_at→ Acme [? → 2024-03-01, ended by {new.id}]",)
    assert engine.read(acme.id).memory.valid_to == moved
    # Asked as of before the change, Acme is still the answer.
    before = engine.recall("where does Ana work", ["user:sam"], as_of=moved - timedelta(days=30))
    assert acme.id in [h.memory.id for h in before]


def test_amend_effective_before_another_memory_began_never_ends_it_before_it_began(engine: Engine) -> None:
    """attack12: an amend effective in 2021 saying "Ana now works at Globex" closed "Ana works at Acme" (valid
    from 2024) at 2021, before it began: Acme's validity collapsed to nothing and as_of 2025 answered Globex.
    The stored value that took effect later is the newer one, as for a dated statement told out of order."""
    acme = engine.write("Ana works at Acme.", ["user:sam"], valid_from=datetime(2024, 1, 1, tzinfo=UTC))
    note = engine.write("Ana has a dog.", ["user:sam"], valid_from=datetime(2020, 1, 1, tzinfo=UTC))
    new = engine.amend(note.id, "Ana now works at Globex.", effective_at=datetime(2021, 1, 1, tzinfo=UTC))
    stored = engine.read(acme.id).memory
    assert stored.status is Status.CURRENT
    assert stored.valid_to is None or stored.valid_to > stored.valid_from
    assert new.also_supersedes == ()
    assert new.superseded_by == acme.id  # the receipt says the new version is already the older one
    globex = engine.read(new.id).memory
    assert globex.valid_to == datetime(2024, 1, 1, tzinfo=UTC)

    def asked(year: int) -> list[str]:
        hits = engine.recall("where does Ana work", ["user:sam"], as_of=datetime(year, 6, 1, tzinfo=UTC))
        return [h.memory.id for h in hits]

    assert new.id in asked(2022)
    assert acme.id not in asked(2022)
    assert acme.id in asked(2025)
    assert new.id not in asked(2025)
    # "no longer" as of 2021 does not end a job that began in 2024 either.
    bo = engine.write("Bo works at Initech.", ["user:sam"], valid_from=datetime(2024, 1, 1, tzinfo=UTC))
    cat = engine.write("Bo has a cat.", ["user:sam"], valid_from=datetime(2020, 1, 1, tzinfo=UTC))
    ended = engine.amend(
        cat.id, "Bo no longer works at Initech.", effective_at=datetime(2021, 1, 1, tzinfo=UTC)
    )
    assert engine.read(bo.id).memory.status is Status.CURRENT
    assert ended.also_supersedes == ()
