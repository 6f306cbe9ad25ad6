"""Entity resolution's meaning tier (``MNEMOGRAPH_RESOLVE_BY_MEANING=on``): a known name that shares a word with
a new one and is close in meaning under the bundled model ("Shawn Murphy" for "Sean Murphy", which no spelling
tier pairs) is proposed, never linked; off by default; only names the writer may know are compared; the names'
vectors do not stay in the embedder's cache."""

from __future__ import annotations

from pathlib import Path

from scopes import Grant, Principal
from server.settings import load_settings
from storage import Engine, EntityIn
from storage.language.resolve import MEANING_THRESHOLD


def shawn_then_sean(
    engine: Engine, *, first: list[str], then: list[str], writer: Principal | None = None
) -> str:
    engine.write(
        "Shawn Murphy fixed the boiler on Monday.", first, entities=[EntityIn("Shawn Murphy", "person")]
    )
    kw = {"principal": writer} if writer is not None else {}
    return engine.write(
        "Sean Murphy sent the invoice for the boiler.",
        then,
        entities=[EntityIn("Sean Murphy", "person")],
        **kw,
    ).id


def pairs(engine: Engine, principal: Principal | None = None) -> list[tuple[str, str, str]]:
    kw = {"principal": principal} if principal is not None else {}
    return [(p.a, p.b, p.tier) for p in engine.entity_proposals("all", **kw)]


def test_off_by_default_no_spelling_tier_pairs_them(engine: Engine) -> None:
    assert load_settings({"MNEMOGRAPH_DATA_DIR": "/tmp/x"}).resolve_by_meaning is False
    assert engine.meaning_threshold is None
    shawn_then_sean(engine, first=["user:ana"], then=["user:ana"])
    assert pairs(engine) == []


def test_on_a_close_name_sharing_a_word_is_proposed_never_linked(engine: Engine) -> None:
    engine.meaning_threshold = (
        MEANING_THRESHOLD  # as MNEMOGRAPH_RESOLVE_BY_MEANING=on sets it (server._engine)
    )
    sean = shawn_then_sean(engine, first=["user:ana"], then=["user:ana"])
    assert pairs(engine) == [("Sean Murphy", "Shawn Murphy", "meaning")]
    (proposal,) = engine.entity_proposals("pending")
    assert MEANING_THRESHOLD <= proposal.score <= 1.0
    assert engine.read(sean).memory.entities == ("Sean Murphy",)  # kept as written until someone decides


def test_on_a_name_the_writer_cannot_know_is_never_compared(engine: Engine) -> None:
    engine.meaning_threshold = MEANING_THRESHOLD
    b = Principal("b", client="t", grants=(Grant.parse("team:b=w"),))
    shawn_then_sean(engine, first=["team:a"], then=["team:b"], writer=b)
    assert pairs(engine) == []  # team:a's Shawn Murphy is no candidate for team:b's writer
    assert pairs(engine, b) == []


def test_on_different_people_sharing_a_first_name_are_not_proposed(engine: Engine) -> None:
    engine.meaning_threshold = MEANING_THRESHOLD
    engine.write(
        "Maria Santos leads the design team.", ["user:ana"], entities=[EntityIn("Maria Santos", "person")]
    )
    engine.write(
        "Maria Oliveira runs the bakery.", ["user:ana"], entities=[EntityIn("Maria Oliveira", "person")]
    )
    assert pairs(engine) == []


def test_the_names_vectors_do_not_stay_in_the_embedders_cache(engine: Engine, data_dir: Path) -> None:
    engine.meaning_threshold = MEANING_THRESHOLD
    shawn_then_sean(engine, first=["user:ana"], then=["user:ana"])
    cache = engine.embedder
    for name in ("Shawn Murphy", "Sean Murphy"):
        assert cache.forget([name]) == 0  # nothing left to drop: the tier dropped it after use


def test_the_setting_switches_it_on_and_refuses_a_bad_value(engine: Engine, tmp_path: Path) -> None:
    import pytest

    from server._engine import WriteTimeOptions, write_time
    from server.settings import SettingsError

    on = load_settings({"MNEMOGRAPH_DATA_DIR": str(tmp_path), "MNEMOGRAPH_RESOLVE_BY_MEANING": "on"})
    assert on.resolve_by_meaning is True
    with pytest.raises(SettingsError, match="RESOLVE_BY_MEANING"):
        load_settings({"MNEMOGRAPH_DATA_DIR": str(tmp_path), "MNEMOGRAPH_RESOLVE_BY_MEANING": "maybe"})
    write_time(WriteTimeOptions(resolve_by_meaning=on.resolve_by_meaning, digests=False))(engine)
    shawn_then_sean(engine, first=["user:ana"], then=["user:ana"])
    assert pairs(engine) == [("Sean Murphy", "Shawn Murphy", "meaning")]


def test_a_write_of_many_names_sharing_a_word_embeds_a_bounded_number_of_names(engine: Engine) -> None:
    """A hostile writer's one write of many new names, each sharing a word with many known ones ("Harbor
    B1"... beside "Harbor A1"...), costs the meaning tier at most ``MAX_MEANING_TEXTS`` embeddings, not
    names x candidates."""
    from storage.engine.resolution import MAX_MEANING_TEXTS

    engine.meaning_threshold = MEANING_THRESHOLD
    known = [EntityIn(f"Harbor A{i}", "organization") for i in range(30)]
    engine.write("The harbor offices.", ["user:ana"], entities=known)
    before = engine.embedder.misses
    new = [EntityIn(f"Harbor B{i}", "organization") for i in range(30)]
    engine.write("More harbor offices.", ["user:ana"], entities=new)
    spent = engine.embedder.misses - before
    assert spent <= MAX_MEANING_TEXTS + 4  # the tier's budget, plus the memory's own text (and its chunks)
    assert spent < 30 * 31  # names x candidates, as before


def test_a_name_of_four_words_is_left_to_the_spelling_tiers(engine: Engine) -> None:
    """The tier is for names of two or three words (docs/entities.md, as measured): longer names share a word
    for many reasons ("Blue Harbour Freight Company" is no spelling of "Blue Harbor Shipping Company")."""
    engine.meaning_threshold = MEANING_THRESHOLD
    engine.write(
        "The Blue Harbor Shipping Company moved.",
        ["user:ana"],
        entities=[EntityIn("Blue Harbor Shipping Company", "organization")],
    )
    engine.write(
        "The Blue Harbour Freight Company moved.",
        ["user:ana"],
        entities=[EntityIn("Blue Harbour Freight Company", "organization")],
    )
    assert pairs(engine) == []


def test_a_known_alias_sharing_a_word_is_compared_by_itself(engine: Engine) -> None:
    """The known phrase sharing the word is an alias ("Shawn Murphy" of "Boiler Man"): it is that alias, not the
    entity's name, that is compared with the new name, so the entity is proposed as it would be by its name."""
    engine.meaning_threshold = MEANING_THRESHOLD
    engine.write(
        "The boiler man came on Monday.",
        ["user:ana"],
        entities=[EntityIn("Boiler Man", "person", ("Shawn Murphy",))],
    )
    engine.write(
        "Sean Murphy sent the invoice for the boiler.",
        ["user:ana"],
        entities=[EntityIn("Sean Murphy", "person")],
    )
    assert pairs(engine) == [("Sean Murphy", "Boiler Man", "meaning")]


def test_a_known_alias_given_only_where_the_writer_cannot_read_is_never_compared(engine: Engine) -> None:
    engine.meaning_threshold = MEANING_THRESHOLD
    b = Principal("b", client="t", grants=(Grant.parse("team:b=w"),))
    engine.write("The boiler man came.", ["team:b"], entities=[EntityIn("Boiler Man", "person")])
    engine.write(
        "The boiler man came again.",
        ["team:a"],
        entities=[EntityIn("Boiler Man", "person", ("Shawn Murphy",))],
    )
    receipt = engine.write(
        "Sean Murphy sent the invoice.", ["team:b"], entities=[EntityIn("Sean Murphy", "person")], principal=b
    )
    assert receipt.proposals == ()
    assert receipt.not_proposed == ()
    assert pairs(engine) == []
    assert pairs(engine, b) == []
