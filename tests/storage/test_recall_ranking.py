"""What recall does after fusion: the time rule, history answers, near-duplicate folding, the token budget,
and recipes that change the order as declared. Real stores, real model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from storage import RECIPES, CachedEmbedder, Engine, InvalidInput, Recipe
from storage.recall.pipeline import estimate_tokens

NOW = datetime(2023, 5, 30, 12, tzinfo=UTC)  # a Tuesday
STUDY = "I bought a new desk lamp for the study."
BEDROOM = "I bought a new desk lamp for the bedroom."
DENTIST = "The dentist appointment went fine."


@pytest.fixture
def lamps(engine: Engine) -> Engine:
    engine.write(STUDY, ["user:ana"], event_time=datetime(2023, 5, 23, 15, tzinfo=UTC))  # last Tuesday
    engine.write(
        BEDROOM, ["user:ana"], event_time=datetime(2023, 4, 11, 15, tzinfo=UTC)
    )  # seven weeks before
    engine.write(DENTIST, ["user:ana"], event_time=datetime(2023, 5, 23, 9, tzinfo=UTC))
    return engine


def contents(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.memory.content for h in hits]


def test_memory_in_the_queried_window_outranks_an_equal_text_match(lamps: Engine) -> None:
    query = "Which desk lamp did I buy last Tuesday?"
    may = lamps.recall(query, ["user:ana"], now=NOW)
    assert contents(may)[:2] == [STUDY, BEDROOM]
    assert may[0].time is not None
    assert (may[0].time.rule, may[0].time.expression, may[0].time.factor) == (
        "in_interval",
        "last Tuesday",
        1 + (RECIPES["default"].time.narrow_boost or 0),  # 2.0: a one-day window is a narrow one
    )
    assert may[0].time.interval == (datetime(2023, 5, 23, tzinfo=UTC), datetime(2023, 5, 24, tzinfo=UTC))
    assert may[1].time is not None
    assert (may[1].time.rule, may[1].time.factor) == ("outside_interval", 1.0)
    # The same question asked on another Tuesday points at the other lamp: time decides, not the text.
    april = lamps.recall(query, ["user:ana"], now=datetime(2023, 4, 18, 12, tzinfo=UTC))
    assert contents(april)[:2] == [BEDROOM, STUDY]


def test_time_boost_is_soft(lamps: Engine) -> None:
    # Without the absolute similarity rule, which would drop the unrelated dentist visit whatever its time.
    recipe = RECIPES["default"].with_(min_similarity=None)
    hits = lamps.recall("Which desk lamp did I buy last Tuesday?", ["user:ana"], now=NOW, recipe=recipe)
    order = contents(hits)
    assert order.index(BEDROOM) < order.index(DENTIST)  # a strong match outside beats a weak one inside
    assert DENTIST in order  # and the time window filters nothing away
    assert DENTIST not in contents(
        lamps.recall("Which desk lamp did I buy last Tuesday?", ["user:ana"], now=NOW)
    )


def test_no_time_recipe_ignores_time_expressions(lamps: Engine) -> None:
    hits = lamps.recall("Which desk lamp did I buy last Tuesday?", ["user:ana"], now=NOW, recipe="no_time")
    assert all(h.time is None for h in hits)


def test_now_keeps_the_callers_offset(lamps: Engine) -> None:
    lamps.write(
        "Watered the ferns on the balcony.", ["user:ana"], event_time=datetime(2023, 5, 30, 10, tzinfo=UTC)
    )
    ist = timezone(timedelta(hours=5, minutes=30))
    local_morning = datetime(
        2023, 5, 31, 9, tzinfo=ist
    )  # 03:30 UTC on May 31: "yesterday" is May 30 both ways
    late = datetime(2023, 5, 31, 2, tzinfo=ist)  # May 30 20:30 UTC: in UTC "yesterday" would be May 29
    for now, rule in (
        (local_morning, "in_interval"),
        (late, "in_interval"),
        (late.astimezone(UTC), "near_interval"),
    ):
        top = lamps.recall("when did I water the ferns yesterday", ["user:ana"], now=now, k=1)[0]
        assert top.time is not None
        assert top.time.rule == rule, now


def test_now_must_be_a_datetime(lamps: Engine) -> None:
    with pytest.raises(InvalidInput, match="now must be a datetime"):
        lamps.recall("lamp", ["user:ana"], now="yesterday")  # type: ignore[arg-type]


def test_change_questions_bring_history_oldest_first(engine: Engine) -> None:
    first = engine.write("I work at Acme as a welder.", ["user:ana"])
    second = engine.amend(first.id, "I work at Globex as a welder.")
    third = engine.amend(second.id, "I work at Initech as a welder.")
    engine.write("I like green tea in the morning.", ["user:ana"])
    now_only = [h.memory.id for h in engine.recall("Where do I work as a welder?", ["user:ana"])]
    assert third.id in now_only
    assert first.id not in now_only
    assert second.id not in now_only
    history = [h.memory.id for h in engine.recall("Where did I work previously as a welder?", ["user:ana"])]
    start = history.index(first.id)
    assert history[start : start + 3] == [first.id, second.id, third.id]
    # A chain is completed with versions no lane found: BM25 finds only the Acme version here.
    completed = engine.recall("Acme", ["user:ana"], recipe="bm25", include_history=True)
    assert [h.memory.id for h in completed] == [first.id, second.id, third.id]
    assert [bool(h.lanes) for h in completed] == [True, False, False]


def test_near_duplicates_fold_into_the_better_result(engine: Engine) -> None:
    a = engine.write("Ana's cat is named Miso.", ["user:ana"])
    b = engine.write("The cat of Ana is named Miso.", ["user:ana"])  # cosine 0.98
    c = engine.write("ana's cat is named miso!!", ["user:ana"])  # the same words
    # (Not a phone number: that is a functional relation, so the second would supersede the first at write time.)
    engine.write("The gym locker code is 555-0100.", ["user:ana"])
    engine.write("The gym locker code is 555-0199.", ["user:ana"])  # near-identical, but other numbers
    cats = engine.recall("What is Ana's cat called?", ["user:ana"], k=5)
    cat_hits = [h for h in cats if "cat" in h.memory.content.casefold()]
    assert len(cat_hits) == 1
    assert {cat_hits[0].memory.id, *cat_hits[0].collapsed} == {a.id, b.id, c.id}
    # Whichever twin ranks first, the three fold together: here c does, and b is near a, not c.
    echo = [
        h
        for h in engine.recall("ana's cat is named miso!!", ["user:ana"], k=5)
        if "cat" in h.memory.content.casefold()
    ]
    assert [(h.memory.id, set(h.collapsed)) for h in echo] == [(c.id, {a.id, b.id})]
    codes = engine.recall("gym locker code", ["user:ana"], k=5)
    assert len([h for h in codes if "locker" in h.memory.content]) == 2
    plain = engine.recall(
        "What is Ana's cat called?", ["user:ana"], k=5, recipe=RECIPES["default"].with_(dedup_cosine=None)
    )
    assert len([h for h in plain if "cat" in h.memory.content.casefold()]) == 2  # text twins still fold


def test_token_budget_keeps_the_best_results_that_fit(engine: Engine) -> None:
    for text in (
        "Budget note one: short.",
        "Budget note two is a much longer memory about the budget, with many more words in it than the rest.",
        "Budget note three: short too.",
    ):
        engine.write(text, ["user:ana"])
    full = engine.recall("budget note", ["user:ana"], k=3)
    assert len(full) == 3
    costs = [estimate_tokens(h.memory.content) for h in full]
    budget = sum(costs) - 1
    cut = engine.recall("budget note", ["user:ana"], k=3, token_budget=budget)
    expected, spent = [], 0
    for h, cost in zip(full, costs, strict=True):
        if spent + cost <= budget:
            expected.append(h.memory.id)
            spent += cost
    assert [h.memory.id for h in cut] == expected
    assert sum(estimate_tokens(h.memory.content) for h in cut) <= budget
    assert len(cut) == 2
    assert engine.recall("budget note", ["user:ana"], token_budget=1) == []
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    for bad in (0, -5, 100_001, 1.5, True):
        with pytest.raises(InvalidInput, match="token_budget"):
            engine.recall("budget note", ["user:ana"], token_budget=bad)  # type: ignore[arg-type]


def test_recipe_weights_change_the_order_as_declared(engine: Engine) -> None:
    passport = "Ana's passport number ends in 4471."
    allergy = "Ana is allergic to peanuts and carries an EpiPen."
    engine.write(passport, ["user:ana"])
    engine.write(allergy, ["user:ana"])
    query = "4471 food allergy"
    base = RECIPES["hybrid"]
    # BM25 finds only the passport ("allergy" is not "allergic"); the vector lane ranks the allergy first.
    words = base.with_(weights={"bm25": 5.0, "vector": 0.1}, rrf_k=1)
    meaning = base.with_(weights={"bm25": 0.1, "vector": 5.0}, rrf_k=1)
    by_words = engine.recall(query, ["user:ana"], recipe=words)
    by_meaning = engine.recall(query, ["user:ana"], recipe=meaning)
    assert [h.memory.content for h in by_words] == [passport, allergy]
    assert [h.memory.content for h in by_meaning] == [allergy, passport]
    assert by_words[0].score == pytest.approx(5.0 / 2 + 0.1 / 3)
    assert by_meaning[0].score == pytest.approx(5.0 / 2)


def test_recipes_are_validated_and_named() -> None:
    assert set(RECIPES) >= {"default", "hybrid", "bm25", "vector", "graph", "no_time"}
    assert dict(RECIPES["hybrid"].weights) == {"bm25": 1.0, "vector": 1.0}
    assert RECIPES["default"].with_(time={"boost": 2.0}).time.boost == 2.0
    assert RECIPES["default"].time.boost == 0.25  # with_ copies, never mutates
    with pytest.raises(InvalidInput, match="unknown lane"):
        Recipe("x", {"bm25": 1.0, "keyword": 1.0})
    with pytest.raises(InvalidInput, match="weights"):
        Recipe("x", {"bm25": -1.0})
    with pytest.raises(InvalidInput, match="weights"):
        Recipe("x", {"bm25": 0.0})
    with pytest.raises(TypeError):
        RECIPES["default"].weights["bm25"] = 3.0  # type: ignore[index]


GROUPED = RECIPES["hybrid"].with_(group={"key": "session", "keep_top": 0})
LAMP_CHAT = ("I bought a brass desk lamp.", "The brass desk lamp has a dimmer.", "Where should the lamp go?")
OTHER_CHAT = ("My desk lamp broke yesterday.", "Shall we talk about gardening instead?")
LONE = "A desk lamp note outside any conversation."


@pytest.fixture
def chats(engine: Engine) -> Engine:
    for i, text in enumerate(LAMP_CHAT):
        engine.write(text, ["user:ana"], metadata={"session": "lamp", "turn": i})
    for i, text in enumerate(OTHER_CHAT):
        engine.write(text, ["user:ana"], metadata={"session": "other", "turn": i})
    engine.write(LONE, ["user:ana"])
    return engine


def test_group_rule_returns_each_conversation_once_best_member_first(chats: Engine) -> None:
    flat = chats.recall("brass desk lamp dimmer", ["user:ana"], recipe="hybrid")
    hits = chats.recall("brass desk lamp dimmer", ["user:ana"], recipe=GROUPED)
    assert len(flat) == 6
    groups = [h.memory.metadata.get("session") for h in hits]
    assert sorted(map(str, groups)) == ["None", "lamp", "other"]  # one each; an ungrouped memory is its own
    assert hits[0].memory.metadata["session"] == "lamp"
    # the group's representative is its best member in memory-level fusion
    best_lamp = next(h for h in flat if h.memory.metadata.get("session") == "lamp")
    assert hits[0].memory.id == best_lamp.memory.id


def test_group_rule_lists_per_group_members_together(chats: Engine) -> None:
    two = GROUPED.with_(group={"per_group": 2})
    hits = chats.recall("brass desk lamp dimmer", ["user:ana"], recipe=two)
    groups = [h.memory.metadata.get("session") for h in hits]
    assert groups[:2] == ["lamp", "lamp"]
    assert groups.count("other") == 2
    assert groups.count(None) == 1
    assert groups[groups.index("other") + 1] == "other"  # a group's members are listed together


def test_group_rule_keeps_what_ungrouped_recall_ranks_first(chats: Engine) -> None:
    """``keep_top``: every memory plain fusion ranks in its first ``keep_top`` is still listed, gathered under
    its group (a conversation's best member first), so grouping reorders but never hides a top result."""
    query = "brass desk lamp dimmer"
    flat = [h.memory.id for h in chats.recall(query, ["user:ana"], k=10, recipe="hybrid")]
    one = chats.recall(query, ["user:ana"], k=10, recipe=GROUPED)
    assert len(one) == 3  # keep_top 0: one member per conversation
    for n in (2, 3, 4, 6):
        hits = chats.recall(query, ["user:ana"], k=10, recipe=GROUPED.with_(group={"keep_top": n}))
        ids = [h.memory.id for h in hits]
        assert set(flat[:n]) <= set(ids)
        assert len(ids) == len(set(flat[:n]) | {h.memory.id for h in one})
        groups = [h.memory.metadata.get("session") for h in hits]
        assert groups == sorted(groups, key=groups.index)  # a group's members stay together


def test_group_rule_is_validated() -> None:
    with pytest.raises(InvalidInput, match="group"):
        RECIPES["default"].with_(group={"head": -1})
    with pytest.raises(InvalidInput, match="group"):
        RECIPES["default"].with_(group={"per_group": 0})
    with pytest.raises(InvalidInput, match="group"):
        RECIPES["default"].with_(group={"keep_top": -1})


def test_grouping_is_asked_for_per_call_never_switched_on_by_stored_metadata(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    """A ``session`` key in metadata is the client's own label: recall ranks memories one by one until a call
    asks for ``group_by``; then each conversation comes back once (with ``keep_top`` 0), also after a restart."""
    once_each = RECIPES["default"].with_(group={"keep_top": 0})
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        engine.write(LONE, ["user:ana"])
        for i, text in enumerate(LAMP_CHAT):
            engine.write(text, ["user:ana"], metadata={"session": "lamp", "turn": i})
        engine.write("The printer is out of toner.", ["user:bob"], metadata={"session": "x"})
        flat = [
            h.memory.metadata.get("session") for h in engine.recall("brass desk lamp", ["user:ana"], k=10)
        ]
        assert flat.count("lamp") == 3  # without group_by every turn is its own result
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        once = [
            h.memory.metadata.get("session")
            for h in engine.recall(
                "brass desk lamp", ["user:ana"], k=10, recipe=once_each, group_by="session"
            )
        ]
        assert once.count("lamp") == 1
        with pytest.raises(InvalidInput):
            engine.recall("brass desk lamp", ["user:ana"], group_by=" ")


UNRELATED = (
    "The quarterly report is due on December 15.",
    "Ana prefers aisle seats on long flights.",
    "The staging database runs Postgres 16.",
    "Our team standup is at 9:30 in the small meeting room.",
    "The hotel in Austin is the Driskill, booked for three nights.",
)


def test_a_question_about_nothing_stored_gets_nothing(engine: Engine) -> None:
    # The newcomer's first check: five memories, none about pizza. Every one came back "found by vector".
    for text in UNRELATED:
        engine.write(text, ["user:ana"], kind="note")
    assert engine.recall("favorite pizza topping", ["user:ana"]) == []
    assert contents(engine.recall("where is the hotel in Austin", ["user:ana"])) == [UNRELATED[4]]


def test_function_words_alone_do_not_make_a_word_match(engine: Engine) -> None:
    for text in UNRELATED:
        engine.write(text, ["user:ana"], kind="note")
    hits = engine.recall("what is in the report", ["user:ana"], recipe="bm25")
    assert contents(hits) == [UNRELATED[0]]
    # A query of nothing but function words still searches with them.
    assert engine.recall("is the", ["user:ana"], recipe="bm25")


def test_min_similarity_is_validated() -> None:
    with pytest.raises(InvalidInput, match="min_similarity"):
        RECIPES["default"].with_(min_similarity=2.0)
