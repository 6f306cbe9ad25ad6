"""Recall flags contradictions (issue 15): a result tied by a CONTRADICTS link to a current memory the reader
may read names it in ``Hit.conflicts``; retired ones and ones in scopes the reader cannot read are never named.

Real stores in tmp_path and the real model; the links are made by writes, as a user makes them.
"""

from __future__ import annotations

from scopes import Grant, Principal
from storage import Engine


def principal(name: str, *grants: str) -> Principal:
    return Principal(name, client="tests", grants=tuple(Grant.parse(g) for g in grants))


def _conflicts(
    engine: Engine, query: str, scopes: list[str], who: Principal | None = None
) -> dict[str, tuple[str, ...]]:
    hits = engine.recall(query, scopes, principal=who) if who else engine.recall(query, scopes)
    return {h.memory.content: h.conflicts for h in hits}


def test_both_sides_of_a_contradiction_name_each_other(engine: Engine) -> None:
    yes = engine.write("Ana is allergic to peanuts", ["user:ana"], kind="fact")
    no = engine.write("Ana is not allergic to peanuts", ["user:ana"], kind="fact")
    engine.write("Ana lives in Porto", ["user:ana"], kind="fact")
    assert no.contradicts == (yes.id,)
    got = _conflicts(engine, "Ana peanuts Porto", ["user:ana"])
    assert got["Ana is allergic to peanuts"] == (no.id,)
    assert got["Ana is not allergic to peanuts"] == (yes.id,)
    assert got["Ana lives in Porto"] == ()


def test_a_retired_side_is_no_longer_named(engine: Engine) -> None:
    yes = engine.write("Ana is allergic to peanuts", ["user:ana"], kind="fact")
    engine.write("Ana is not allergic to peanuts", ["user:ana"], kind="fact")
    engine.retire(yes.id, reason="the test came back negative")
    assert _conflicts(engine, "Ana peanuts", ["user:ana"]) == {"Ana is not allergic to peanuts": ()}


def test_a_reader_never_sees_the_id_of_a_memory_it_cannot_read(engine: Engine) -> None:
    lead = principal("lead", "agent:lead=w", "team:t=w")
    member = principal("member", "team:t=r")
    private = engine.write("Ana is allergic to peanuts", ["agent:lead"], kind="fact", principal=lead)
    shared = engine.write(
        "Ana is not allergic to peanuts", ["team:t", "agent:lead"], kind="fact", principal=lead
    )
    assert shared.contradicts == (private.id,)
    assert _conflicts(engine, "Ana peanuts", ["team:t"], member) == {"Ana is not allergic to peanuts": ()}
    assert _conflicts(engine, "Ana peanuts", ["agent:lead"], lead) == {
        "Ana is allergic to peanuts": (shared.id,),
        "Ana is not allergic to peanuts": (private.id,),
    }


def test_a_statement_and_its_negation_are_both_shown_not_folded_together(engine: Engine) -> None:
    # Their embeddings are 0.97+ apart: recall's near-duplicate folding used to hide the negation.
    engine.write("Ana is allergic to peanuts", ["user:ana"], kind="fact")
    engine.write("Ana is not allergic to peanuts", ["user:ana"], kind="fact")
    shown = [h.memory.content for h in engine.recall("Is Ana allergic to peanuts?", ["user:ana"])]
    assert sorted(shown) == ["Ana is allergic to peanuts", "Ana is not allergic to peanuts"]


def test_links_made_or_erased_after_a_recall_are_seen_by_the_next(engine: Engine) -> None:
    """Recall holds the store's links between commits: every change to them is seen by the next recall."""
    yes = engine.write("Ana is allergic to peanuts", ["user:ana"], kind="fact")
    assert _conflicts(engine, "Ana peanuts", ["user:ana"]) == {"Ana is allergic to peanuts": ()}
    no = engine.write("Ana is not allergic to peanuts", ["user:ana"], kind="fact")
    got = _conflicts(engine, "Ana peanuts", ["user:ana"])
    assert got == {"Ana is allergic to peanuts": (no.id,), "Ana is not allergic to peanuts": (yes.id,)}
    engine.erase(no.id, confirm=no.id)
    assert _conflicts(engine, "Ana peanuts", ["user:ana"]) == {"Ana is allergic to peanuts": ()}
