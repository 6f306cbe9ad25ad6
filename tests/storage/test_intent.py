"""What a query says besides its words: time windows (resolved against the caller's now), the text left
for the search lanes, questions about change, and the shape of the time boost."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from storage.domain.errors import InvalidInput
from storage.recall.recipes import RECIPES, TimeRule
from storage.recall.understanding import Interval, analyse, factor

NOW = datetime(2023, 5, 30, 12, tzinfo=UTC)  # a Tuesday
RULE = TimeRule()


def test_time_expression_becomes_a_window_and_leaves_the_search_text() -> None:
    got = analyse("What did I buy last Tuesday?", NOW, RULE)
    assert got.intervals == (
        Interval(datetime(2023, 5, 23, tzinfo=UTC), datetime(2023, 5, 24, tzinfo=UTC), "last Tuesday"),
    )
    assert got.search_text == "What did I buy ?"
    assert got.change is None


def test_directions_open_one_end() -> None:
    before = analyse("where did I live before May 2023", NOW, RULE).intervals[0]
    assert (before.lo, before.hi) == (None, datetime(2023, 5, 1, tzinfo=UTC))
    since = analyse("books read since June", NOW, RULE).intervals[0]
    assert (since.lo, since.hi) == (datetime(2022, 6, 1, tzinfo=UTC), None)


def test_only_a_time_expression_keeps_the_whole_text() -> None:
    assert analyse("yesterday", NOW, RULE).search_text == "yesterday"


def test_disabled_rule_reports_no_window() -> None:
    got = analyse("What did I buy last Tuesday?", NOW, TimeRule(enabled=False))
    assert (got.intervals, got.search_text) == ((), "What did I buy last Tuesday?")


def test_windows_follow_the_callers_offset() -> None:
    ist = timezone(timedelta(hours=5, minutes=30))
    local = datetime(2023, 5, 31, 1, tzinfo=ist)  # still May 30 in UTC
    iv = analyse("yesterday", local, RULE).intervals[0]
    assert (iv.lo, iv.hi) == (datetime(2023, 5, 30, tzinfo=ist), datetime(2023, 5, 31, tzinfo=ist))
    utc = analyse("yesterday", local.astimezone(UTC), RULE).intervals[0]
    assert utc.lo == datetime(2023, 5, 29, tzinfo=UTC)


@pytest.mark.parametrize(
    "query",
    [
        "what did I use before?",
        "What phone did I have before that",
        "all my previous jobs",
        "where did I previously live",
        "I used to drive a Civic, right?",
        "history of my addresses",
        "my old car",
        "has my address changed",
        "what was my plan before I moved",
        "which gym do I no longer go to",
    ],
)
def test_change_questions(query: str) -> None:
    assert analyse(query, NOW, RULE).change is not None


@pytest.mark.parametrize(
    "query",
    [
        "what did I buy before May 2023",  # a time window, not a question about change
        "where do I work",
        "what is my favourite band",
        "before the year 2000",
    ],
)
def test_not_change_questions(query: str) -> None:
    assert analyse(query, NOW, RULE).change is None


def test_boost_is_full_inside_and_decays_outside() -> None:
    iv = (Interval(datetime(2023, 5, 23, tzinfo=UTC), datetime(2023, 5, 24, tzinfo=UTC), "last Tuesday"),)
    inside, where = factor(datetime(2023, 5, 23, 15, tzinfo=UTC), iv, RULE)
    assert (inside, where) == (1.5, iv[0])
    one_day_out, _ = factor(datetime(2023, 5, 25, tzinfo=UTC), iv, RULE)
    month_out, _ = factor(datetime(2023, 4, 23, tzinfo=UTC), iv, RULE)
    assert one_day_out == pytest.approx(1 + 0.5 / 2.718281828, rel=1e-6)  # one decay scale (1 day) away
    assert 1.0 < month_out < 1.0001
    assert factor(datetime(2023, 5, 23, tzinfo=UTC), (), RULE) == (1.0, None)
    wide = (Interval(datetime(2023, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC), "in 2023"),)
    assert factor(datetime(2024, 1, 11, tzinfo=UTC), wide, RULE)[0] > 1.45  # scale grows with the window


def test_a_narrow_window_boosts_by_its_own_amount() -> None:
    rule = TimeRule(boost=0.25, narrow_boost=1.0, narrow_days=8)
    day = Interval(datetime(2023, 5, 23, tzinfo=UTC), datetime(2023, 5, 24, tzinfo=UTC), "last Tuesday")
    week = Interval(datetime(2023, 5, 15, tzinfo=UTC), datetime(2023, 5, 22, tzinfo=UTC), "two weeks ago")
    month = Interval(datetime(2023, 5, 1, tzinfo=UTC), datetime(2023, 6, 1, tzinfo=UTC), "in May")
    since = Interval(datetime(2023, 5, 23, tzinfo=UTC), None, "since last Tuesday")
    t = datetime(2023, 5, 23, 15, tzinfo=UTC)
    assert factor(t, (day,), rule)[0] == 2.0
    assert factor(t - timedelta(days=4), (week,), rule)[0] == 2.0
    assert factor(t, (month,), rule)[0] == 1.25  # a loose window keeps the gentle boost
    assert factor(t, (since,), rule)[0] == 1.25  # an open one too
    assert factor(t, (day,), TimeRule(boost=0.25))[0] == 1.25  # narrow_boost None: one boost for all
    for bad in (
        {"narrow_boost": -1.0},
        {"narrow_boost": float("nan")},
        {"boost": -0.1},
        {"narrow_days": -1.0},
    ):
        with pytest.raises(InvalidInput, match="narrow_boost"):
            RECIPES["default"].with_(time=bad)
