"""Near-duplicates by content at write time (issue 15): a paraphrase of a current memory in the same scope is
named in the receipt and stored, or folded when the caller asks; hard negatives never are.

Real stores in tmp_path and the real model. The pairs are the hand-written ones of tests/storage/data.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from scopes import Grant, Principal
from storage import Engine, InvalidInput, WriteItem

DATA = Path(__file__).parent / "data"
PAIRS = [json.loads(line) for f in ("near_duplicate_pairs", "near_duplicate_heldout") for line in
         (DATA / f"{f}.jsonl").read_text().splitlines() if line.strip()]  # fmt: skip


def principal(name: str, *grants: str) -> Principal:
    return Principal(name, client="tests", grants=tuple(Grant.parse(g) for g in grants))


def _settled(engine: Engine) -> None:
    # The near-duplicate search reads the vector index, which applies commits just after them; a client
    # writing its next memory is that far behind already. (A fold waits for it by itself.)
    engine.reconciler.wait_fresh()


def _ids(engine: Engine, scope: str, *, history: bool = False) -> list[str]:
    return [m.id for m in engine.list(scope, include_retired=history).items]


def test_a_paraphrase_is_reported_with_its_id_and_similarity_and_stored(engine: Engine) -> None:
    first = engine.write("I'm allergic to peanuts", ["user:ana"], kind="fact")
    _settled(engine)
    second = engine.write("I have a peanut allergy", ["user:ana"], kind="fact", on_near_duplicate="report")
    assert second.status == "added"
    assert [i for i, _ in second.near_duplicates] == [first.id]
    assert 0.8 <= second.near_duplicates[0][1] < 1
    assert sorted(_ids(engine, "user:ana")) == sorted([first.id, second.id])


def test_fold_stores_nothing_new_and_links_the_existing_memory_into_a_new_scope(engine: Engine) -> None:
    first = engine.write("I'm allergic to peanuts", ["user:ana"], kind="fact")
    folded = engine.write(
        "I have a peanut allergy", ["user:ana", "project:menu"], kind="fact", on_near_duplicate="fold"
    )
    assert folded.status == "folded"
    assert folded.id == first.id
    assert folded.scopes == ("project:menu", "user:ana")
    assert folded.near_duplicates[0][0] == first.id
    assert _ids(engine, "user:ana") == [first.id]
    assert _ids(engine, "project:menu") == [first.id]
    _settled(engine)
    hits = engine.recall("peanut allergy", ["project:menu"])
    assert [h.memory.content for h in hits] == ["I'm allergic to peanuts"]


def test_a_memory_of_another_scope_is_no_near_duplicate(engine: Engine) -> None:
    engine.write("I'm allergic to peanuts", ["user:ana"], kind="fact")
    _settled(engine)
    other = engine.write("I have a peanut allergy", ["user:bo"], kind="fact", on_near_duplicate="fold")
    assert (other.status, other.near_duplicates) == ("added", ())


def test_a_retired_memory_is_no_near_duplicate(engine: Engine) -> None:
    old = engine.write("I'm allergic to peanuts", ["user:ana"], kind="fact")
    engine.retire(old.id, reason="outgrown")
    new = engine.write("I have a peanut allergy", ["user:ana"], kind="fact", on_near_duplicate="fold")
    assert (new.status, new.near_duplicates) == ("added", ())


@pytest.mark.parametrize("pair", [p for p in PAIRS if not p["near"]], ids=lambda p: f"{p['a']} / {p['b']}")
def test_hard_negatives_are_neither_reported_nor_folded(engine: Engine, pair: dict[str, str]) -> None:
    # Negated, hypothetical, uncertain, reported, other tense, other number or date, another value.
    stored = engine.write(pair["a"], ["user:ana"])
    new = engine.write(pair["b"], ["user:ana"], on_near_duplicate="fold")
    assert new.status == "added"
    assert new.near_duplicates == ()
    # Both stored (an update such as a new phone number may have superseded the first: history keeps it).
    assert sorted(_ids(engine, "user:ana", history=True)) == sorted([stored.id, new.id])


def test_a_negated_or_hypothetical_statement_never_folds_into_an_asserted_one(engine: Engine) -> None:
    asserted = engine.write("Ana is allergic to peanuts", ["user:ana"], kind="fact")
    for text in (
        "Ana is not allergic to peanuts",
        "Ana might be allergic to peanuts",
        "If Ana were allergic to peanuts she would carry an EpiPen",
        "Tom said Ana is allergic to peanuts",
    ):
        new = engine.write(text, ["user:ana"], kind="fact", on_near_duplicate="fold")
        assert new.status == "added", text
        assert asserted.id not in [i for i, _ in new.near_duplicates], text


def test_most_hand_written_paraphrases_are_found(engine: Engine) -> None:
    # The measured recall (docs/benchmarks/near-duplicates.md) is 0.70 and 0.60; this keeps it from falling.
    found = 0
    positives = [p for p in PAIRS if p["near"]]
    for n, pair in enumerate(positives):
        scope = f"user:p{n}"
        engine.write(pair["a"], [scope])
        found += engine.write(pair["b"], [scope], on_near_duplicate="fold").status == "folded"
    assert found >= 20, f"{found} of {len(positives)} paraphrases folded"


def test_a_paraphrase_written_right_after_the_original_is_reported(engine: Engine) -> None:
    """Found by a newcomer: with no pause between the two writes (an agent saving two paraphrases in one turn),
    1 of 20 paraphrases was reported, against 14 after a 1.5 s pause: the search read the word index before it
    held the write acknowledged just before. Now it waits for it, as a fold always did."""
    positives = [p for p in PAIRS if p["near"]]
    reported = 0
    for n, pair in enumerate(positives):
        scope = f"user:r{n}"
        first = engine.write(pair["a"], [scope])
        second = engine.write(pair["b"], [scope], on_near_duplicate="report")  # no pause
        reported += [i for i, _ in second.near_duplicates] == [first.id]
    assert reported >= 18, f"{reported} of {len(positives)} paraphrases reported"  # 20 measured; 0 before


def test_another_principal_sees_only_near_duplicates_in_scopes_it_writes(engine: Engine) -> None:
    a = principal("A", "agent:a=w", "team:t=w")
    b = principal("B", "agent:b=w", "team:t=w")
    private = engine.write("The staging server is called atlas", ["agent:a"], principal=a)
    shared = engine.write("Deploys happen on Tuesdays", ["team:t"], principal=a)
    _settled(engine)
    mine = engine.write(
        "The staging server's name is atlas", ["agent:b"], principal=b, on_near_duplicate="report"
    )
    assert mine.near_duplicates == ()
    team = engine.write("We deploy on Tuesdays", ["team:t", "agent:b"], principal=b, on_near_duplicate="fold")
    assert (team.status, team.id) == ("folded", shared.id)
    assert [i for i, _ in team.near_duplicates] == [shared.id]
    assert private.id not in str(team)


def test_an_unknown_mode_is_refused_and_writes_nothing(engine: Engine) -> None:
    engine.write("I'm allergic to peanuts", ["user:ana"])
    with pytest.raises(InvalidInput, match="on_near_duplicate 'merge' is not one of: store, report, fold"):
        engine.write("I have a peanut allergy", ["user:ana"], on_near_duplicate="merge")
    assert len(_ids(engine, "user:ana")) == 1


def test_the_default_write_does_not_look_for_near_duplicates(engine: Engine) -> None:
    """The check costs more than issue 15's 10% of write latency allows: it is asked for ('report', 'fold'),
    and a plain write stores a paraphrase as it did before the check existed, naming nothing."""
    first = engine.write("I'm allergic to peanuts", ["user:ana"], kind="fact")
    _settled(engine)
    second = engine.write("I have a peanut allergy", ["user:ana"], kind="fact")
    assert (second.status, second.near_duplicates) == ("added", ())
    assert sorted(_ids(engine, "user:ana")) == sorted([first.id, second.id])


def test_a_fold_never_links_a_memory_that_left_the_writers_scopes_before_the_commit(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A's memory is in its own scope and the team's; B (who writes the team's scope and its own) folds a
    paraphrase into it, and A unlinks it from the team after B's search found it and before B's write commits.
    The fold must not link A's memory into B's own scope: B would then read a memory that is now only in a scope
    B cannot read. B's paraphrase is stored as its own memory instead (failed before: the fold checked only that
    the memory was still current, so B got A's memory, id, content and all, in agent:b)."""
    a = principal("A", "agent:a=w", "team:t=w")
    b = principal("B", "agent:b=w", "team:t=w")
    secret = engine.write("Deploys happen on Tuesdays", ["agent:a", "team:t"], principal=a)
    _settled(engine)
    search = engine._near_duplicates

    def search_then_a_unlinks(p, who, fresh=None):  # type: ignore[no-untyped-def]
        found = search(p, who, fresh)
        if who is b:
            engine.unlink(secret.id, "team:t", principal=a)  # lands between B's search and B's commit
        return found

    monkeypatch.setattr(engine, "_near_duplicates", search_then_a_unlinks)
    mine = engine.write("We deploy on Tuesdays", ["team:t", "agent:b"], principal=b, on_near_duplicate="fold")
    assert (mine.status, mine.id != secret.id) == ("added", True)
    assert secret.id not in _ids(engine, "agent:b") + _ids(engine, "team:t")
    assert engine.read(secret.id).memory.scopes == ("agent:a",)


def test_a_reported_near_duplicate_is_one_still_in_the_writers_scopes(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, with 'report': A unlinks its memory from the team after the word search found it and before
    its text is compared. B's receipt must not name it: it is now only where B cannot read (failed before: the
    comparison read the memory's text by id without its scopes, so B got the id of a memory it may not read)."""
    a = principal("A", "agent:a=w", "team:t=w")
    b = principal("B", "agent:b=w", "team:t=w")
    secret = engine.write("Deploys happen on Tuesdays", ["agent:a", "team:t"], principal=a)
    _settled(engine)
    search = engine.text.search
    unlinked = []

    def search_then_a_unlinks(*args, **kwargs):  # type: ignore[no-untyped-def]
        found = search(*args, **kwargs)
        if kwargs.get("scopes") == ["team:t", "agent:b"] and not unlinked:
            unlinked.append(engine.unlink(secret.id, "team:t", principal=a))
        return found

    monkeypatch.setattr(engine.text, "search", search_then_a_unlinks)
    mine = engine.write(
        "We deploy on Tuesdays", ["team:t", "agent:b"], principal=b, on_near_duplicate="report"
    )
    assert unlinked
    assert mine.status == "added"
    assert secret.id not in str(mine)


def test_the_same_words_at_another_time_or_of_another_kind_are_no_near_duplicate(engine: Engine) -> None:
    """A fold took an event told for another day for the stored one (attack16): "Ana went running in the park"
    on 1 June 2025 folded into the run of 1 January 2024, so the second run was never stored and the receipt
    answered with the old date. Likewise a fact that ends at a given time folded into one that does not, and a
    preference into an event, and a fact true since 2020 into the same fact recorded today. A near-duplicate says
    the same thing of the same time: same kind, same event time (when dated), same end of validity, and a start
    of validity no earlier than the stored one's."""
    run = engine.write(
        "Ana went for a run in the park.",
        ["user:ana"],
        kind="event",
        event_time=datetime(2024, 1, 1, tzinfo=UTC),
    )
    again = engine.write(
        "Ana went running in the park.",
        ["user:ana"],
        kind="event",
        event_time=datetime(2025, 6, 1, tzinfo=UTC),
        on_near_duplicate="fold",
    )
    assert (again.status, again.near_duplicates) == ("added", ())
    assert again.event_time == datetime(2025, 6, 1, tzinfo=UTC)
    same_day = engine.write(
        "Ana went on a run in the park.",
        ["user:ana"],
        kind="event",
        event_time=datetime(2024, 1, 1, tzinfo=UTC),
        on_near_duplicate="report",
    )
    assert run.id in [i for i, _ in same_day.near_duplicates]  # the same day is still found

    gate = engine.write("Bruno's train leaves from platform nine.", ["user:bo"], kind="fact")
    ends = engine.write(
        "Bruno's train departs from platform nine.",
        ["user:bo"],
        kind="fact",
        valid_to=datetime(2099, 1, 1, tzinfo=UTC),
        on_near_duplicate="fold",
    )
    assert (ends.status, ends.near_duplicates) == ("added", ())
    assert engine.read(ends.id).memory.valid_to == datetime(2099, 1, 1, tzinfo=UTC)
    assert engine.read(gate.id).memory.valid_to is None

    engine.write("Tom works at Acme Corp as an engineer", ["user:tom"], kind="fact")
    since = engine.write(
        "Tom is an engineer at Acme Corp",
        ["user:tom"],
        kind="fact",
        valid_from=datetime(2020, 1, 1, tzinfo=UTC),
        on_near_duplicate="fold",
    )
    assert (since.status, since.near_duplicates) == ("added", ())  # it says Tom was one since 2020

    engine.write("Carla prefers window seats.", ["user:carla"], kind="preference")
    told = engine.write(
        "Carla prefers the window seats.", ["user:carla"], kind="event", on_near_duplicate="fold"
    )
    assert (told.status, told.near_duplicates) == ("added", ())
    assert engine.read(told.id).memory.kind.value == "event"


def test_an_event_told_twice_the_same_day_without_a_time_is_still_folded(engine: Engine) -> None:
    # Without a stated time an event's time is when it was told: told again that day, it is the same event.
    first = engine.write("Tom started at Acme Corp as an engineer", ["user:ana"], kind="event")
    again = engine.write(
        "Tom started as an engineer at Acme Corp", ["user:ana"], kind="event", on_near_duplicate="fold"
    )
    assert (again.status, again.id) == ("folded", first.id)


def test_a_fold_receipt_never_names_a_memory_that_left_the_writers_scopes_before_the_commit(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, A unlinks its memory from the team between B's search and B's commit: the fold stores B's
    paraphrase, but its receipt still named A's memory in ``near_duplicates`` (attack16), the id of a memory now
    only in a scope B cannot read; and a fold into another candidate listed it too. The receipt names only
    near-duplicates still in the writer's scopes when the write commits."""
    a = principal("A", "agent:a=w", "team:t=w")
    b = principal("B", "agent:b=w", "team:t=w")
    secret = engine.write("Deploys happen on Tuesdays", ["agent:a", "team:t"], principal=a)
    _settled(engine)
    search = engine._near_duplicates

    def search_then_a_unlinks(p, who, fresh=None):  # type: ignore[no-untyped-def]
        found = search(p, who, fresh)
        if who is b:
            engine.unlink(secret.id, "team:t", principal=a)  # lands between B's search and B's commit
        return found

    monkeypatch.setattr(engine, "_near_duplicates", search_then_a_unlinks)
    mine = engine.write("We deploy on Tuesdays", ["team:t", "agent:b"], principal=b, on_near_duplicate="fold")
    assert mine.status == "added"
    assert secret.id not in [i for i, _ in mine.near_duplicates]

    # With a second candidate still in the team's scope, the fold goes there and names only it.
    engine.link(secret.id, "team:t", principal=a)
    shared = engine.write("Ines speaks fluent Japanese", ["team:t"], principal=b)
    other = engine.write("Ines is fluent in Japanese", ["agent:a", "team:t"], principal=a)
    _settled(engine)

    def both_found_then_a_unlinks(p, who):  # type: ignore[no-untyped-def]
        found = search(p, who)
        if who is b:
            assert {i for i, _ in found} >= {other.id}
            engine.unlink(other.id, "team:t", principal=a)
        return found

    monkeypatch.setattr(engine, "_near_duplicates", both_found_then_a_unlinks)
    folded = engine.write("Ines speaks Japanese fluently", ["team:t"], principal=b, on_near_duplicate="fold")
    assert (folded.status, folded.id) == ("folded", shared.id)
    assert other.id not in [i for i, _ in folded.near_duplicates]


def test_a_report_never_names_a_memory_that_left_the_writers_scopes_while_it_was_searched(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'report' searches beside the commit; A unlinks its memory from the team once B's search has read it
    (attack16): B's receipt named it, the id of a memory now only where B cannot read. The receipt is checked
    against the store once the write has committed."""
    a = principal("A", "agent:a=w", "team:t=w")
    b = principal("B", "agent:b=w", "team:t=w")
    secret = engine.write("Deploys happen on Tuesdays", ["agent:a", "team:t"], principal=a)
    _settled(engine)
    search = engine._near_duplicates

    def search_then_a_unlinks(p, who, fresh=None):  # type: ignore[no-untyped-def]
        found = search(p, who, fresh)
        if who is b:
            assert [i for i, _ in found] == [secret.id]
            engine.unlink(secret.id, "team:t", principal=a)
        return found

    monkeypatch.setattr(engine, "_near_duplicates", search_then_a_unlinks)
    mine = engine.write("We deploy on Tuesdays", ["team:t"], principal=b, on_near_duplicate="report")
    assert mine.status == "added"
    assert mine.near_duplicates == ()


@pytest.mark.parametrize("scale", [1e20, 1e40, 3e-37])
def test_a_stored_vector_of_huge_or_tiny_numbers_is_still_compared(engine: Engine, scale: float) -> None:
    """A memory imported with its own vector (``WriteItem.vector``), whose largest number may be anywhere from
    2**-125 to 2**127: the paraphrase written next is compared with it by cosine, which does not depend on the
    scale. In float32 the squares overflowed above about 1e19 (norm inf, cosine nan: no near-duplicate, and a
    RuntimeWarning) and vanished below about 1e-19 (norm 0)."""
    stored = "I'm allergic to peanuts"
    unit = engine.embedder.embed([stored])[0]
    scale = min(scale, 1.6e38 / float(np.max(np.abs(unit))))  # the largest number just inside the range
    first = engine.write_many(
        [WriteItem(stored, ["user:ana"], "fact", vector=[float(x) * scale for x in unit])]
    )[0]
    _settled(engine)
    second = engine.write("I have a peanut allergy", ["user:ana"], kind="fact", on_near_duplicate="report")
    assert [i for i, _ in second.near_duplicates] == [first.id]
    assert 0.8 <= second.near_duplicates[0][1] < 1
