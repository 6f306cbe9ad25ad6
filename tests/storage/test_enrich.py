"""Write-time intelligence through Engine.write: statements read from the text (with their assertion status),
and reconciliation against what is stored (updates, contradictions, duplicates), as receipts and memory_read
show them. Real stores in tmp_path, real model."""

from __future__ import annotations

import threading
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scopes import Grant, Principal
from storage import CachedEmbedder, Engine, RelationIn, WriteItem
from storage.enrich import enrich
from storage.language.extraction import EntityLexicon


def principal(name: str, *grants: str) -> Principal:
    return Principal(name, client="tests", grants=tuple(Grant.parse(g) for g in grants))


def test_first_person_statements_are_the_speakers(engine: Engine) -> None:
    # In a single user scope, "I" is that user; metadata.speaker names someone else; with neither, no guess.
    mine = engine.write("I live in Porto and work at Feedzai.", ["user:ana"])
    assert mine.relations == ("ana —lives_in→ Porto", "ana —works_at→ Feedzai")
    told = engine.write("I'm allergic to peanuts.", ["project:trip"], metadata={"speaker": "Tom"})
    assert told.relations == ("Tom —allergic_to→ peanuts",)
    anonymous = engine.write("I'm allergic to shellfish.", ["project:trip"])
    assert anonymous.relations == ()
    assert "ana" in {e.casefold() for e in mine.entities}


def test_a_comparison_is_not_part_of_what_is_liked(engine: Engine) -> None:
    """ "I prefer tea over coffee" was read as liking a thing called "tea over coffee": an entity no one would name,
    and a relation a later "I hate tea" could not contradict."""
    tea = engine.write("I prefer tea over coffee.", ["user:ana"])
    assert tea.relations == ("ana —likes→ tea",)
    assert "tea over coffee" not in {e.casefold() for e in tea.entities}
    assert engine.write("Sam likes jazz rather than rock.", ["user:ana"]).relations == ("Sam —likes→ jazz",)
    assert engine.write("I hate tea.", ["user:ana"]).contradicts == (tea.id,)


def test_over_as_a_place_and_more_as_a_quantity_stay_in_what_is_liked(engine: Engine) -> None:
    """A comparison word ended every liked thing: "the bridge over the river" was liked as "bridge", so "I hate the
    bridge on the highway" contradicted it, and "sleeping over at friends'" against "sleeping in tents" too;
    "spending less time on email" was liked as "spending". "over" before a determiner or a preposition is a
    place, "more"/"less" before a noun a quantity; "prefer ... over the other" stays a comparison (attack21)."""
    bridge = engine.write("I love the bridge over the river.", ["user:ana"])
    assert bridge.relations == ("ana —likes→ bridge over the river",)
    assert engine.write("I hate the bridge on the highway.", ["user:ana"]).contradicts == ()
    engine.write("I like sleeping over at friends' places.", ["user:ana"])
    assert engine.write("I dislike sleeping in tents.", ["user:ana"]).contradicts == ()
    less = engine.write("I like spending less time on email.", ["user:ana"])
    assert less.relations == ("ana —likes→ spending less time",)
    assert engine.write("I like hikes over 20 km.", ["user:ana"]).relations == (
        "ana —likes→ hikes over 20 km",
    )
    assert engine.write("I like coffee more than tea.", ["user:sam"]).relations == ("sam —likes→ coffee",)
    assert engine.write("I like cake more.", ["user:sam"]).relations == ("sam —likes→ cake",)
    assert engine.write("I prefer juice over the other drinks.", ["user:sam"]).relations == (
        "sam —likes→ juice",
    )


def test_a_possessive_is_not_a_job_title(engine: Engine) -> None:
    """ "Ana's dentist is Dr. Okafor" read as "Ana is a dentist": the wrong relation then lent its two-hop path
    bonus to other facts about Ana, above the dentist memory itself for "who is Ana's dentist"."""
    assert engine.write("Ana's dentist is Dr. Okafor.", ["user:ana"]).relations == ()
    assert engine.write("Tom's manager is Priya.", ["user:tom"]).relations == ()
    assert engine.write("Ana's a dentist.", ["user:bo"]).relations == ("Ana —job_title→ dentist",)
    engine.amend(engine.write("Ana lives in Porto.", ["user:ana"]).id, "Ana lives in Lisbon since May.")
    top = engine.recall("who is Ana's dentist", ["user:ana"])[0]
    assert top.memory.content == "Ana's dentist is Dr. Okafor."


@pytest.mark.parametrize(
    "text",
    [
        "Ana doesn't live in Lisbon.",
        "Ana has never worked at Google.",
        "If Ana gets the job, she'll move to Berlin.",
        "Ana is thinking about moving to Amsterdam.",
        "Maybe Ana is allergic to peanuts.",
        "I think Ana works at Deloitte.",
        "Tom said Ana works at Google.",
        "Apparently Ana moved to Denver.",
        "Does Ana live in Paris?",
    ],
)
def test_negated_hypothetical_uncertain_reported_and_asked_never_become_relations(
    engine: Engine, text: str
) -> None:
    receipt = engine.write(text, ["user:sam"])
    assert receipt.relations == ()
    assert engine.read(receipt.id).relations == ()


def test_a_new_value_supersedes_the_old_and_closes_it_when_the_change_took_effect(engine: Engine) -> None:
    old = engine.write("Ana lives in Lisbon.", ["user:sam"])
    new = engine.write("Ana moved to Porto in March 2023.", ["user:sam"])
    assert new.supersedes == (old.id,)
    before = engine.read(old.id)
    assert before.memory.status == "superseded"
    assert before.memory.superseded_by == new.id
    # Learned today, so valid from today: its validity ends where it began (it held for no time as far as we
    # know), never on 1 March 2023, before its own start. The relation, with no start of its own, ends then.
    assert before.memory.valid_to == before.memory.valid_from
    assert before.relations == (f"Ana —lives_in→ Lisbon [? → 2023-03-01, ended by {new.id}]",)
    assert engine.read(new.id).relations == ("Ana —lives_in→ Porto [2023-03-01 → open]",)
    # History shows the chain; default recall shows only the current value.
    assert [m.id for m in engine.read(new.id).versions] == [old.id, new.id]
    found = [h.memory.id for h in engine.recall("where does Ana live", ["user:sam"], k=5)]
    assert new.id in found
    assert old.id not in found


def test_an_update_told_out_of_order_goes_straight_to_history(engine: Engine) -> None:
    later = engine.write("Ana moved to Porto in March 2023.", ["user:sam"])
    earlier = engine.write("Ana moved to Braga in 2020.", ["user:sam"])
    assert (earlier.superseded_by, earlier.supersedes) == (later.id, ())
    assert engine.read(earlier.id).memory.status == "superseded"
    assert engine.read(later.id).memory.status == "current"
    assert engine.read(earlier.id).relations == (
        f"Ana —lives_in→ Braga [2020-01-01 → 2023-03-01, ended by {later.id}]",
    )


def test_a_memory_stays_current_while_one_of_its_statements_still_holds(engine: Engine) -> None:
    both = engine.write("Maria lives in Rome and works at Eni.", ["user:sam"])
    moved = engine.write("Maria moved to Milan.", ["user:sam"])
    assert moved.supersedes == (both.id,)
    assert engine.read(both.id).memory.status == "current"  # works_at Eni still holds
    left = engine.write("Maria no longer works at Eni.", ["user:sam"])
    assert left.supersedes == (both.id,)
    assert left.relations == ()
    assert engine.read(both.id).memory.status == "superseded"


def test_contradictions_are_linked_both_ways_and_both_kept(engine: Engine) -> None:
    likes = engine.write("I love coffee.", ["user:sam"])
    hates = engine.write("I hate coffee.", ["user:sam"])
    born = engine.write("Ana was born in Faro.", ["user:sam"])
    born_again = engine.write("Ana was born in Evora.", ["user:sam"])
    allergic = engine.write("Tom is allergic to cats.", ["user:sam"])
    denied = engine.write("Tom is not allergic to cats.", ["user:sam"])
    assert hates.contradicts == (likes.id,)
    assert born_again.contradicts == (born.id,)
    assert denied.contradicts == (allergic.id,)
    assert denied.relations == ()
    for a, b in ((likes, hates), (born, born_again), (allergic, denied)):
        assert engine.read(a.id).contradicts == (b.id,)
        assert engine.read(b.id).contradicts == (a.id,)
        assert engine.read(a.id).memory.status == engine.read(b.id).memory.status == "current"


def test_restated_relations_are_reported_as_duplicates(engine: Engine) -> None:
    first = engine.write("Tom works at Acme Corp.", ["user:sam"])
    again = engine.write("tom works at acme corp, as ever", ["user:sam"])
    assert again.duplicates == (first.id,)
    assert again.supersedes == ()
    elsewhere = engine.write("Tom works at Acme Corp!", ["user:other"])
    assert elsewhere.duplicates == ()  # only the same scope is compared


def test_the_callers_relations_win_and_are_reconciled(engine: Engine) -> None:
    first = engine.write(
        "Ana's employer: Acme.", ["user:sam"], relations=[RelationIn("Ana", "works_at", "Acme")]
    )
    second = engine.write(
        "Ana lives in Lisbon; her employer is now Globex.",
        ["user:sam"],
        relations=[RelationIn("Ana", "works_at", "Globex")],
    )
    assert second.relations == ("Ana —works_at→ Globex",)  # nothing read from the text besides
    assert second.supersedes == (first.id,)


def test_functional_predicates_are_configurable(engine: Engine) -> None:
    engine.functional = frozenset({"likes"})
    jazz = engine.write("Ana likes jazz.", ["user:sam"])
    assert engine.write("Ana likes techno.", ["user:sam"]).supersedes == (jazz.id,)
    home = engine.write("Ana lives in Lisbon.", ["user:sam"])
    assert engine.write("Ana lives in Porto.", ["user:sam"]).supersedes == ()
    assert engine.read(home.id).memory.status == "current"


def test_reconciliation_never_changes_or_names_what_the_writer_cannot_read_or_write(engine: Engine) -> None:
    private = engine.write("Ana lives in Lisbon.", ["agent:a"])
    shared = engine.write("Ana works at Acme.", ["team:t", "agent:a"])
    b = principal("B", "agent:b=w", "team:t=w")
    moved = engine.write("Ana moved to Porto.", ["team:t"], principal=b)
    assert (moved.supersedes, moved.contradicts, moved.duplicates) == ((), (), ())
    assert engine.read(private.id).memory.status == "current"
    switched = engine.write("Ana works at Globex.", ["team:t"], principal=b)
    # B can read the shared memory but not write all its scopes: linked as a conflict, not superseded.
    assert (switched.supersedes, switched.contradicts) == ((), (shared.id,))
    assert engine.read(shared.id).memory.status == "current"
    assert engine.read(shared.id).relations == ("Ana —works_at→ Acme [? → open]",)


def test_validity_and_links_survive_a_restart(data_dir: Path, embedder: CachedEmbedder) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        old = engine.write("Kenji lives in Kyoto.", ["user:sam"])
        new = engine.write("Kenji moved to Tokyo in 2021.", ["user:sam"])
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        assert engine.read(old.id).relations == (
            f"Kenji —lives_in→ Kyoto [? → 2021-01-01, ended by {new.id}]",
        )
        third = engine.write("Kenji relocated to Seoul in 2024.", ["user:sam"])
        assert third.supersedes == (new.id,)


def test_hostile_input_costs_little() -> None:
    # A 31 KB single word and 32 KB of repeated triggers: linear work, bounded memory, nothing absurd found.
    lexicon = EntityLexicon()
    now = datetime.now(UTC)
    for text in ("x" * 31_000, "I live in " * 3_500, "Ana " * 8_000, ("If not maybe " * 2_000)[:32_000]):
        tracemalloc.start()
        found = enrich(text, written_at=now, lexicon=lexicon, speaker="sam")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < 48 * 2**20
        assert len(found.relations) <= 64


def test_erasing_the_update_reopens_what_it_closed(engine: Engine) -> None:
    both = engine.write("Maria lives in Rome and works at Eni.", ["user:sam"])
    moved = engine.write("Maria moved to Milan.", ["user:sam"])
    assert any(f"ended by {moved.id}" in r for r in engine.read(both.id).relations)
    engine.erase(moved.id, confirm=moved.id)
    assert sorted(engine.read(both.id).relations) == [
        "Maria —lives_in→ Rome [? → open]",
        "Maria —works_at→ Eni [? → open]",
    ]


def test_no_longer_ends_a_subjects_only_relation(engine: Engine) -> None:
    married = engine.write("Noor is married to Bilal.", ["user:sam"])
    ended = engine.write("Noor is no longer married to Bilal.", ["user:sam"])
    assert ended.supersedes == (married.id,)
    assert engine.read(married.id).memory.status == "superseded"


@pytest.mark.parametrize(
    "text",
    [
        "Others, like raptors, may use body posture and vocalizations to communicate aggression or submission to "
        "other members of their species.",
        "By the way, do you have any tips on how to save money on everyday expenses, like groceries and "
        "household items?",
        "Now, get cooking and enjoy that stir-fry!",
    ],
)
def test_ordinary_chat_sentences_are_written(engine: Engine, text: str) -> None:
    """Sentences from real conversations (LongMemEval) that sent the subject search into endless recursion:
    a write must store them, whatever extraction makes of them."""
    receipt = engine.write(text, ["user:ana"], kind="message")
    assert receipt.status == "added"
    assert engine.read(receipt.id).memory.content == text


def test_a_fault_in_extraction_never_fails_the_write(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Extraction is a best effort: if it raises, the memory is stored with the caller's entities and
    relations, and it is recallable."""
    import storage.engine.writes as engine_module

    def broken(*args: object, **kwargs: object) -> None:
        raise RecursionError("an extractor bug")

    monkeypatch.setattr(engine_module, "enrich", broken)
    rel = RelationIn(subject="Ana", predicate="works_at", object="Globex")
    receipt = engine.write_many(
        [WriteItem(content="Ana started at Globex in May.", scopes=["user:ana"], relations=[rel])]
    )[0]
    assert receipt.status == "added"
    assert {"Ana", "Globex"} <= set(receipt.entities)
    assert engine.recall("Where does Ana work?", ["user:ana"], k=3)[0].memory.id == receipt.id


def test_a_name_in_the_possessive_is_a_query_entity(engine: Engine) -> None:
    """ "who is Ana's dentist" named no entity Ana (the word was "ana's"), so a path from "dentist" through
    Ana counted as two hops and its bonus lifted "Ana lives in Lisbon" above both dentist memories."""
    engine.write("Ana's a dentist.", ["user:ana"])
    engine.write("Ana's dentist is Dr. Okafor.", ["user:ana"])
    engine.amend(engine.write("Ana lives in Porto.", ["user:ana"]).id, "Ana lives in Lisbon since May.")
    assert {m.name for m in engine.lexicon.match("who is Ana's dentist")} >= {"Ana", "dentist"}
    top = engine.recall("who is Ana's dentist", ["user:ana"])[0]
    assert "dentist" in top.memory.content


def test_memory_read_never_shows_a_finished_model_pass_without_its_relations(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass commits while memory_read is between its queries (CI caught it showing 'done' and no
    relations): whatever the interleaving, a pass shown as done comes with the relations it added."""
    from storage.enrich.results import LlmResult, LlmStatement, Usage

    answered = threading.Event()

    class SlowModel:
        model = "sampling"

        def extract(self, content: str, *, written_at: datetime, speaker: str | None) -> LlmResult:
            answered.wait(10)
            return LlmResult((LlmStatement("Ana", "works_at", "Acme", "asserted"),), Usage(), "m1", 1)

    engine.use_sampling()
    receipt = engine.write(
        "Big news from Ana today: she signed with the Acme people.", ["user:sam"], extractor=SlowModel()
    )
    relation_history = engine.graph.relation_history

    reader = threading.current_thread()

    def pass_commits_meanwhile(conn: object, ids: list[str]) -> object:
        rows = relation_history(conn, ids)  # type: ignore[arg-type]
        if threading.current_thread() is not reader:  # the pass reads relations too
            return rows
        answered.set()
        assert engine.sampler is not None
        assert engine.sampler.wait_idle(30)
        return rows

    monkeypatch.setattr(engine.graph, "relation_history", pass_commits_meanwhile)
    during = engine.read(receipt.id)
    monkeypatch.undo()
    after = engine.read(receipt.id)
    assert ": done (1 relation(s) added" in (after.enrichment or ""), after.enrichment
    assert [r.split(" [")[0] for r in after.relations] == ["Ana —works_at→ Acme"], after.relations
    assert during.relations or ": done" not in (during.enrichment or ""), (
        during.enrichment,
        during.relations,
    )


@pytest.mark.parametrize(
    "trailer",
    [
        ", as mentioned in standup",
        ", as discussed in the meeting",
        ", as I mentioned",
        ", as Tom said",
        " (mentioned in standup)",
        ", as she told me yesterday",
    ],
)
def test_a_clause_saying_where_it_was_said_does_not_stop_the_statement(engine: Engine, trailer: str) -> None:
    # The writer states it and says where it came up: not hearsay. Without the clause the relation is ended;
    # with it, it must be ended too (it was left current).
    engine.write("Ana works at Acme.", ["user:sam"])
    news = engine.write(f"Ana no longer works at Acme{trailer}.", ["user:sam"])
    assert news.supersedes != (), news
    found = engine.recall("Where does Ana work?", ["user:sam"], k=5)
    assert all(h.memory.content != "Ana works at Acme." for h in found)
    moved = engine.write(f"Ana moved to Lisbon{trailer}.", ["user:sam"])
    assert [r.split(" [")[0] for r in engine.read(moved.id).relations] == ["Ana —lives_in→ Lisbon"]


@pytest.mark.parametrize(
    "text",
    [
        "Bob said Ana moved to Lisbon.",
        "Ana moved to Lisbon, Bob said.",
        "Ana moved to Lisbon, said Bob.",
        "Ana moved to Lisbon, according to Bob.",
        "Bob mentioned in standup that Ana moved to Lisbon.",
        "Ana moved to Lisbon, Bob mentioned in standup.",
        "Apparently Ana moved to Lisbon, as mentioned in standup.",
    ],
)
def test_reported_statements_stay_reported_beside_attribution_clauses(engine: Engine, text: str) -> None:
    receipt = engine.write(text, ["user:sam"])
    assert engine.read(receipt.id).relations == ()
