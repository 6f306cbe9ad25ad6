"""Tests for storage.language.timeparse: every supported form resolved to real values, ambiguity rules, robustness."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.language.timeparse import TimeMention, find_times, parse_datetime

# Tuesday 2023-05-30, late evening: the reference for most cases below.
REF = datetime(2023, 5, 30, 23, 40, tzinfo=UTC)


def at(y: int, m: int, d: int, h: int = 0, mi: int = 0, s: int = 0, *, tz: tzinfo = UTC) -> datetime:
    return datetime(y, m, d, h, mi, s, tzinfo=tz)


def one(text: str, ref: datetime = REF) -> TimeMention:
    found = find_times(text, ref)
    assert len(found) == 1, found
    return found[0]


def day(y: int, m: int, d: int) -> tuple[datetime, datetime]:
    lo = at(y, m, d)
    return lo, lo + timedelta(days=1)


@pytest.mark.parametrize(
    ("text", "span", "lo", "hi", "gran"),
    [
        ("on 2023-05-20 we met", "2023-05-20", *day(2023, 5, 20), "day"),
        ("2023/05/20", "2023/05/20", *day(2023, 5, 20), "day"),
        (
            "at 2023-05-20T14:03:00Z.",
            "2023-05-20T14:03:00Z",
            at(2023, 5, 20, 14, 3),
            at(2023, 5, 20, 14, 3, 1),
            "instant",
        ),
        (
            "2023-05-20T14:03+02:00",
            "2023-05-20T14:03+02:00",
            at(2023, 5, 20, 12, 3),
            at(2023, 5, 20, 12, 4),
            "instant",
        ),
        (
            "2023/05/30 (Tue) 23:40",
            "2023/05/30 (Tue) 23:40",
            at(2023, 5, 30, 23, 40),
            at(2023, 5, 30, 23, 41),
            "instant",
        ),
        ("on May 20, 2023.", "May 20, 2023", *day(2023, 5, 20), "day"),
        ("May 20th 2023", "May 20th 2023", *day(2023, 5, 20), "day"),
        ("20 May 2023", "20 May 2023", *day(2023, 5, 20), "day"),
        ("Tuesday, 30 May 2023", "Tuesday, 30 May 2023", *day(2023, 5, 30), "day"),
        ("the 3rd of June, 2021", "the 3rd of June, 2021", *day(2021, 6, 3), "day"),
        ("Jan. 5 2023", "Jan. 5 2023", *day(2023, 1, 5), "day"),
        ("due Sept 5, 2023", "Sept 5, 2023", *day(2023, 9, 5), "day"),
        ("May 2023", "May 2023", at(2023, 5, 1), at(2023, 6, 1), "month"),
        ("December of 2019", "December of 2019", at(2019, 12, 1), at(2020, 1, 1), "month"),
        ("in 2023", "in 2023", at(2023, 1, 1), at(2024, 1, 1), "year"),
        ("during 1999", "during 1999", at(1999, 1, 1), at(2000, 1, 1), "year"),
        ("Q3 2023", "Q3 2023", at(2023, 7, 1), at(2023, 10, 1), "season"),
        ("2022 Q4", "2022 Q4", at(2022, 10, 1), at(2023, 1, 1), "season"),
        ("summer 2022", "summer 2022", at(2022, 6, 1), at(2022, 9, 1), "season"),
        ("winter 2022", "winter 2022", at(2022, 12, 1), at(2023, 3, 1), "season"),
        ("the fall of 2021", "the fall of 2021", at(2021, 9, 1), at(2021, 12, 1), "season"),
    ],
)
def test_absolute_forms(text: str, span: str, lo: datetime, hi: datetime, gran: str) -> None:
    t = one(text)
    assert (t.text, t.lo, t.hi, t.when, t.granularity) == (span, lo, hi, lo, gran)
    assert t.relative is False
    assert t.direction == "at"
    assert text[t.start : t.end] == span


@pytest.mark.parametrize(
    ("text", "ref", "expected"),
    [
        ("May 20", REF, at(2023, 5, 20)),
        ("the 20th of May", REF, at(2023, 5, 20)),
        ("20th May", REF, at(2023, 5, 20)),
        ("I flew home on June 3", REF, at(2022, 6, 3)),  # after ref, past tense: the previous year's
        ("June 3", REF, at(2023, 6, 3)),  # no verb: the nearer one, four days ahead
        ("May 31", REF, at(2023, 5, 31)),  # ref + 1 day is still "this year"
        ("Jan 1", at(2023, 12, 31, 22), at(2024, 1, 1)),
        ("Feb 29", REF, at(2020, 2, 29)),
        ("May 30", at(2024, 6, 10), at(2024, 5, 30)),
        ("Tue, May 30", at(2024, 6, 10), at(2023, 5, 30)),  # 2024-05-30 is a Thursday: the weekday picks 2023
    ],
)
def test_yearless_dates_take_most_recent_occurrence(text: str, ref: datetime, expected: datetime) -> None:
    t = one(text, ref)
    assert (t.lo, t.hi, t.granularity, t.relative) == (expected, expected + timedelta(days=1), "day", True)


NOV22 = at(2026, 11, 22, 12)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The newcomer's case: a deadline three weeks ahead was stored as a date eleven months past.
        ("The quarterly report is due on December 15.", at(2026, 12, 15)),
        ("We will meet on March 3", at(2027, 3, 3)),
        ("I'll fly to Lisbon on Jan 4", at(2027, 1, 4)),
        ("the deadline for the grant is November 21", at(2026, 11, 21)),  # ref - 1 day is still ahead
        # A past marker in the clause, or no future marker, keeps the most recent occurrence.
        ("I went to Paris on March 3.", at(2026, 3, 3)),
        ("The flight was due on December 2", at(2025, 12, 2)),
        ("I'll remember it. We met on December 2", at(2025, 12, 2)),  # the marker is in another sentence
        # Present tense, no marker: the nearer occurrence (the re-check's cases).
        ("The board meeting is on December 3.", at(2026, 12, 3)),
        ("The flight to Lisbon leaves on December 2.", at(2026, 12, 2)),
        ("The conference starts on January 8.", at(2027, 1, 8)),
        ("I visited Rome on March 3", at(2026, 3, 3)),  # a past-tense verb
        ("My birthday is on July 3", at(2026, 7, 3)),  # the next one is more than six months away
    ],
)
def test_yearless_dates_in_a_clause_about_the_future_look_ahead(text: str, expected: datetime) -> None:
    assert one(text, NOV22).lo == expected


@pytest.mark.parametrize(
    ("text", "lo", "hi"),
    [
        ("The conference will be in May", at(2027, 5, 1), at(2027, 6, 1)),
        (
            "The launch is planned to happen in November, we're going to ship",
            at(2026, 11, 1),
            at(2026, 12, 1),
        ),
        ("I moved in May", at(2026, 5, 1), at(2026, 6, 1)),
        ("The review will be on Tuesday", at(2026, 11, 24), at(2026, 11, 25)),
        ("I saw Sam on Tuesday", at(2026, 11, 17), at(2026, 11, 18)),
    ],
)
def test_bare_months_and_weekdays_follow_the_clause_tense(text: str, lo: datetime, hi: datetime) -> None:
    t = one(text, NOV22)
    assert (t.lo, t.hi) == (lo, hi)


@pytest.mark.parametrize(
    ("text", "lo", "hi", "gran"),
    [
        ("today", *day(2023, 5, 30), "day"),
        ("tonight", at(2023, 5, 30, 18), at(2023, 5, 31, 6), "day"),
        ("yesterday", *day(2023, 5, 29), "day"),
        ("the day before yesterday", *day(2023, 5, 28), "day"),
        ("tomorrow", *day(2023, 5, 31), "day"),
        ("the day after tomorrow", *day(2023, 6, 1), "day"),
        ("this morning", at(2023, 5, 30, 5), at(2023, 5, 30, 12), "day"),
        ("yesterday evening", at(2023, 5, 29, 18), at(2023, 5, 30), "day"),
        ("last night", at(2023, 5, 29, 18), at(2023, 5, 30, 6), "day"),
        ("tomorrow night", at(2023, 5, 31, 18), at(2023, 6, 1, 6), "day"),
        ("3 days ago", *day(2023, 5, 27), "day"),
        ("three days ago", *day(2023, 5, 27), "day"),
        ("a day ago", *day(2023, 5, 29), "day"),
        ("a couple of days ago", *day(2023, 5, 28), "day"),
        ("a couple days ago", *day(2023, 5, 28), "day"),
        ("a few days ago", *day(2023, 5, 27), "day"),
        ("twenty days ago", *day(2023, 5, 10), "day"),
        ("two weeks ago", at(2023, 5, 15), at(2023, 5, 22), "week"),
        ("2 months ago", at(2023, 3, 1), at(2023, 4, 1), "month"),
        ("a year ago", at(2022, 1, 1), at(2023, 1, 1), "year"),
        ("in 3 days", *day(2023, 6, 2), "day"),
        ("in a week", at(2023, 6, 5), at(2023, 6, 12), "week"),
        ("two weeks from now", at(2023, 6, 12), at(2023, 6, 19), "week"),
        ("last week", at(2023, 5, 22), at(2023, 5, 29), "week"),
        ("this week", at(2023, 5, 29), at(2023, 6, 5), "week"),
        ("next week", at(2023, 6, 5), at(2023, 6, 12), "week"),
        ("last month", at(2023, 4, 1), at(2023, 5, 1), "month"),
        ("this month", at(2023, 5, 1), at(2023, 6, 1), "month"),
        ("next month", at(2023, 6, 1), at(2023, 7, 1), "month"),
        ("last year", at(2022, 1, 1), at(2023, 1, 1), "year"),
        ("next year", at(2024, 1, 1), at(2025, 1, 1), "year"),
        ("last weekend", at(2023, 5, 27), at(2023, 5, 29), "week"),
        ("this weekend", at(2023, 6, 3), at(2023, 6, 5), "week"),
        ("next weekend", at(2023, 6, 10), at(2023, 6, 12), "week"),
        ("last Tuesday", *day(2023, 5, 23), "day"),
        ("this Tuesday", *day(2023, 5, 30), "day"),
        ("next Tuesday", *day(2023, 6, 6), "day"),
        ("last Friday", *day(2023, 5, 26), "day"),
        ("this Friday", *day(2023, 6, 2), "day"),
        ("next Friday", *day(2023, 6, 2), "day"),
        ("this Monday", *day(2023, 5, 29), "day"),
        ("this past Sunday", *day(2023, 5, 28), "day"),
        ("this coming Monday", *day(2023, 6, 5), "day"),
        ("Friday", *day(2023, 5, 26), "day"),
        ("earlier this month", at(2023, 5, 1), at(2023, 5, 31), "month"),
        ("earlier this year", at(2023, 1, 1), at(2023, 5, 31), "year"),
        ("later this week", at(2023, 5, 30), at(2023, 6, 5), "week"),
        ("recently", at(2023, 5, 16), at(2023, 5, 31), "week"),
        ("the past two weeks", at(2023, 5, 16), at(2023, 5, 31), "week"),
        ("the last 3 days", at(2023, 5, 27), at(2023, 5, 31), "day"),
        ("the past month", at(2023, 4, 30), at(2023, 5, 31), "month"),
        ("in May", at(2023, 5, 1), at(2023, 6, 1), "month"),
        ("last May", at(2022, 5, 1), at(2022, 6, 1), "month"),
        ("next May", at(2024, 5, 1), at(2024, 6, 1), "month"),
        ("next June", at(2023, 6, 1), at(2023, 7, 1), "month"),
        ("this June", at(2023, 6, 1), at(2023, 7, 1), "month"),
        ("in July", at(2022, 7, 1), at(2022, 8, 1), "month"),
        ("last summer", at(2022, 6, 1), at(2022, 9, 1), "season"),
        ("next spring", at(2024, 3, 1), at(2024, 6, 1), "season"),
    ],
)
def test_relative_forms(text: str, lo: datetime, hi: datetime, gran: str) -> None:
    t = one(text)
    assert (t.text, t.lo, t.hi, t.when, t.granularity) == (text, lo, hi, lo, gran)
    assert t.relative is True


def test_on_weekday_is_most_recent_on_or_before_ref() -> None:
    t = one("we spoke on Tuesday")
    assert (t.text, t.lo) == ("Tuesday", at(2023, 5, 30))
    t = one("on Tuesday evening we met")  # one evening is a day, plural evenings a habit
    assert (t.text, t.lo) == ("Tuesday", at(2023, 5, 30))


@pytest.mark.parametrize(
    ("text", "ref", "lo", "hi"),
    [
        ("last month", at(2023, 3, 31, 12), at(2023, 2, 1), at(2023, 3, 1)),
        ("a month ago", at(2023, 3, 31, 12), at(2023, 2, 1), at(2023, 3, 1)),
        ("a year ago", at(2024, 2, 29, 12), at(2023, 1, 1), at(2024, 1, 1)),
        ("12 months ago", at(2024, 2, 29, 12), at(2023, 2, 1), at(2023, 3, 1)),
        ("365 days ago", at(2024, 2, 29, 12), *day(2023, 3, 1)),
        ("the past year", at(2024, 2, 29, 12), at(2023, 2, 28), at(2024, 3, 1)),
        ("Feb 29", at(2024, 2, 29, 12), *day(2024, 2, 29)),
        ("last week", at(2024, 1, 2, 9), at(2023, 12, 25), at(2024, 1, 1)),
        ("last year", at(2024, 1, 2, 9), at(2023, 1, 1), at(2024, 1, 1)),
        ("next Friday", at(2023, 6, 2, 9), *day(2023, 6, 9)),  # said on a Friday: a week out
        ("last Friday", at(2023, 6, 2, 9), *day(2023, 5, 26)),
        ("Friday", at(2023, 6, 2, 9), *day(2023, 6, 2)),
        ("last May", at(2023, 6, 2), at(2023, 5, 1), at(2023, 6, 1)),
        ("last summer", at(2023, 7, 15), at(2022, 6, 1), at(2022, 9, 1)),  # this one is not over yet
        ("last summer", at(2023, 10, 15), at(2023, 6, 1), at(2023, 9, 1)),
        ("this winter", at(2024, 1, 15), at(2023, 12, 1), at(2024, 3, 1)),
        ("this winter", at(2023, 10, 15), at(2023, 12, 1), at(2024, 3, 1)),
    ],
)
def test_calendar_edges(text: str, ref: datetime, lo: datetime, hi: datetime) -> None:
    t = one(text, ref)
    assert (t.lo, t.hi) == (lo, hi)


def test_time_zone_of_ref_decides_the_calendar_day() -> None:
    minus7 = timezone(timedelta(hours=-7))
    local = datetime(2023, 5, 30, 23, 40, tzinfo=minus7)
    in_utc = local.astimezone(UTC)  # 2023-05-31 06:40 UTC: same instant, next calendar day
    t_local, t_utc = one("yesterday", local), one("yesterday", in_utc)
    assert (t_local.lo, t_local.hi) == (at(2023, 5, 29, tz=minus7), at(2023, 5, 30, tz=minus7))
    assert t_local.lo.tzinfo is minus7
    assert (t_utc.lo, t_utc.hi) == (at(2023, 5, 30), at(2023, 5, 31))
    assert t_local.lo != t_utc.lo
    # an explicit offset in the text is converted into the reference's zone
    assert one("2023-05-31T06:40Z", local).lo == datetime(2023, 5, 30, 23, 40, tzinfo=minus7)


def test_naive_ref_is_utc() -> None:
    t = one("yesterday", datetime(2023, 5, 30, 23, 40))
    assert t.lo == at(2023, 5, 29)
    assert t.lo.tzinfo is UTC


def test_dst_transitions_do_not_crash() -> None:
    ny = ZoneInfo("America/New_York")
    for ref in (datetime(2023, 3, 12, 12, tzinfo=ny), datetime(2023, 11, 5, 1, 30, tzinfo=ny)):
        text = "yesterday, last night, tonight, this weekend, 2023-03-12T02:30, two weeks ago, last week"
        found = find_times(text, ref)
        assert len(found) == 7
        assert all(t.lo < t.hi and t.lo.tzinfo is ny for t in found)
    assert one("yesterday", datetime(2023, 3, 12, 12, tzinfo=ny)).lo == datetime(2023, 3, 11, tzinfo=ny)
    assert one("2023-03-12T16:00Z", datetime(2023, 3, 12, 12, tzinfo=ny)).lo.hour == 12  # EDT, UTC-4


@pytest.mark.parametrize(
    ("text", "span", "direction", "lo"),
    [
        ("before May 2023", "before May 2023", "before", at(2023, 5, 1)),
        ("until June 3, 2023", "until June 3, 2023", "before", at(2023, 6, 3)),
        ("by Friday", "by Friday", "before", at(2023, 5, 26)),
        ("after 2020", "after 2020", "after", at(2020, 1, 1)),
        ("since last Tuesday", "since last Tuesday", "after", at(2023, 5, 23)),
        ("since June", "since June", "after", at(2022, 6, 1)),
        ("since May 20, 2023", "since May 20, 2023", "after", at(2023, 5, 20)),
        ("from June on", "from June on", "after", at(2022, 6, 1)),
        ("from 2021 onwards", "from 2021 onwards", "after", at(2021, 1, 1)),
        ("before the year 2000", "before the year 2000", "before", at(2000, 1, 1)),
        ("in May", "in May", "at", at(2023, 5, 1)),
        ("standby May 20", "May 20", "at", at(2023, 5, 20)),
    ],
)
def test_direction_words(text: str, span: str, direction: str, lo: datetime) -> None:
    t = one(text)
    assert (t.text, t.direction, t.lo) == (span, direction, lo)


def test_from_without_on_is_at() -> None:
    t = find_times("from 2020 to 2023 I lived abroad", REF)[0]
    assert (t.text, t.direction, t.lo) == ("from 2020", "at", at(2020, 1, 1))


@pytest.mark.parametrize(
    ("text", "lo"),
    [("YESTERDAY", at(2023, 5, 29)), ("Last TUESDAY", at(2023, 5, 23)), ("MAY 20, 2023", at(2023, 5, 20))],
)
def test_case_insensitive(text: str, lo: datetime) -> None:
    assert one(text).lo == lo


@pytest.mark.parametrize(
    "text",
    [
        "May I help you?",
        "March forward!",
        "2023 users signed up",
        "a while ago",
        "This may take a while",
        "whatever you settle on by may be fine",  # "may" as a month needs in/last/next/since/before/after
        "those 5 may help",
        "The batteries last a week",
        "We meet on Tuesdays",
        "What time do I wake up on Saturday mornings?",  # a habit, not a day
        "my Sunday group rides keep getting faster",  # a weekday that modifies a noun
        "every Sunday I jog",
        "see you on Monday evenings",
        "Junior staff",
        "two weeks",
        "in 1500 pieces",
        "after 2000.5 seconds",
        "05/06/2023",
        "Feb 30",
        "April 31, 2023",
        "the sun sat low",
        "",
    ],
)
def test_non_matches(text: str) -> None:
    assert find_times(text, REF) == []


def test_multiple_mentions_in_order_and_longest_wins() -> None:
    text = "The day before yesterday I booked June 3, 2023; last week I paid, since May 2023 in total."
    found = find_times(text, REF)
    assert [t.text for t in found] == [
        "The day before yesterday",
        "June 3, 2023",
        "last week",
        "since May 2023",
    ]
    assert [t.lo for t in found] == [at(2023, 5, 28), at(2023, 6, 3), at(2023, 5, 22), at(2023, 5, 1)]
    assert all(text[t.start : t.end] == t.text for t in found)


def test_time_mention_is_frozen() -> None:
    t = one("today")
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.start = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "text",
    ["\x00yesterday\x00", "\ud800 yesterday \udfff", "שלום yesterday مرحبا", "\u202eyesterday\u202c"],
)
def test_hostile_characters(text: str) -> None:
    t = one(text)
    assert (t.text, t.lo) == ("yesterday", at(2023, 5, 29))


@pytest.mark.parametrize("ref", [datetime.min, datetime.max, datetime.max.replace(tzinfo=UTC)])
def test_extreme_references_do_not_raise(ref: datetime) -> None:
    text = "yesterday tomorrow next year last year in 20 years 20 years ago next May last summer Jan 1 Feb 29"
    for t in find_times(text, ref):
        assert t.lo < t.hi


@pytest.mark.parametrize(
    "text",
    [
        ("I met her last Tuesday, around May 20th 2023, two weeks ago, in 2023. " * 1500)[:100_000],
        " " * 100_000,
        "may " * 25_000,
        "2023-" * 20_000,
        "the past " * 11_000,
        "a few " * 16_000,
        "9" * 100_000,
    ],
)
def test_large_inputs_are_fast(text: str) -> None:
    # A guard against super-linear blow-ups (minutes on 100 KB), not a benchmark: the bound leaves room for a
    # loaded 2-core CI machine (1.7 s seen there for what takes 0.1 s on a quiet one).
    started = time.perf_counter()
    find_times(text, REF)
    assert time.perf_counter() - started < 10.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2023-05-20", at(2023, 5, 20)),
        ("2023-05-20T14:03:00Z", at(2023, 5, 20, 14, 3)),
        ("2023-05-20t14:03:00z", at(2023, 5, 20, 14, 3)),
        ("2023-05-20 14:03", at(2023, 5, 20, 14, 3)),
        ("  2023-05-20 14:03  ", at(2023, 5, 20, 14, 3)),
        ("2023-05-20T14:03:00+02:00", at(2023, 5, 20, 12, 3)),
        ("2023-05-20T14:03:00.250-07:00", datetime(2023, 5, 20, 21, 3, 0, 250_000, tzinfo=UTC)),
        ("2023/05/30 (Tue) 23:40", at(2023, 5, 30, 23, 40)),
        ("2023/05/30", at(2023, 5, 30)),
    ],
)
def test_parse_datetime_accepts(value: str, expected: datetime) -> None:
    parsed = parse_datetime(value)
    assert parsed == expected
    assert parsed.tzinfo is not None


def test_parse_datetime_keeps_given_offset() -> None:
    assert parse_datetime("2023-05-20T14:03:00+02:00").utcoffset() == timedelta(hours=2)
    assert parse_datetime("2023-05-20").tzinfo is UTC


@pytest.mark.parametrize(
    "value",
    [
        "2023-02-30",
        "2023-13-01",
        "0000-01-01",
        "10000-01-01",
        "2023-05-20T25:00",
        "2023-05-20T14:03+24:00",
        "2023-05-20\x00",
        "\x00",
        "\ud800",
        "",
        "yesterday",
        "20/05/2023",
        "２０２３-05-20",
        "2023-W21-2",
        "20230520",
        "-2023-05-20",
    ],
)
def test_parse_datetime_rejects_with_example(value: str) -> None:
    with pytest.raises(ValueError, match=r"2023-05-20T14:03:00Z"):
        parse_datetime(value)


_VOCAB = [
    "May", "20", "20th", "2023", "2024-02-29", "T14:03Z", "(Tue)", "23:40", "last", "next", "this", "past",
    "coming", "Tuesday", "Tue", "Sept.", "Feb", "29", "of", "the", "in", "since", "before", "by", "from", "on",
    "until", "ago", "days", "weeks", "months", "years", "a", "few", "couple", "yesterday", "today", "night",
    "morning", "summer", "winter", "Q3", "earlier", "later", "recently", "weekend", "month", "year", ",", ".",
    " ", "\n", "\x00", "\ud800", "ש", "K", "ſ",
]  # fmt: skip
_ZONES = [UTC, timezone(timedelta(hours=-7)), timezone(timedelta(hours=14)), ZoneInfo("America/New_York")]


@settings(max_examples=400, deadline=None)
@given(
    text=st.one_of(
        st.text(max_size=300),
        st.lists(st.sampled_from(_VOCAB), max_size=40).map(" ".join),
        st.lists(st.sampled_from(_VOCAB), max_size=40).map("".join),
    ),
    ref=st.datetimes(timezones=st.one_of(st.none(), st.sampled_from(_ZONES))),
)
def test_find_times_invariants(text: str, ref: datetime) -> None:
    found = find_times(text, ref)
    tz = ref.tzinfo or UTC
    prev_end = 0
    for t in found:
        assert prev_end <= t.start < t.end <= len(text)
        assert t.text == text[t.start : t.end]
        assert t.lo <= t.when < t.hi
        assert t.lo.tzinfo is tz
        assert t.hi.tzinfo is tz
        prev_end = t.end


# -- edges a recall query meets (issue 6) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ref", "lo", "hi"),
    [
        # said on a Tuesday, "last Tuesday" is a week back, never today; across a year boundary too
        ("last Tuesday", at(2023, 5, 30, 0, 5), *day(2023, 5, 23)),
        ("last Tuesday", at(2024, 1, 2, 9), *day(2023, 12, 26)),
        ("Tuesday", at(2024, 1, 2, 9), *day(2024, 1, 2)),
        # month and year boundaries
        ("yesterday", at(2024, 3, 1, 8), *day(2024, 2, 29)),
        ("yesterday", at(2023, 3, 1, 8), *day(2023, 2, 28)),
        ("tomorrow", at(2023, 12, 31, 8), *day(2024, 1, 1)),
        ("two weeks ago", at(2023, 3, 2, 8), at(2023, 2, 13), at(2023, 2, 20)),
        ("last month", at(2023, 1, 15), at(2022, 12, 1), at(2023, 1, 1)),
        ("3 days ago", at(2023, 3, 1, 8), *day(2023, 2, 26)),
        # a month without a year is the most recent one that has begun
        ("in May", at(2024, 1, 10), at(2023, 5, 1), at(2023, 6, 1)),
        ("in May", at(2024, 5, 2), at(2024, 5, 1), at(2024, 6, 1)),
        ("in December", at(2024, 1, 10), at(2023, 12, 1), at(2024, 1, 1)),
        ("in January", at(2024, 1, 10), at(2024, 1, 1), at(2024, 2, 1)),
    ],
)
def test_recall_edges(text: str, ref: datetime, lo: datetime, hi: datetime) -> None:
    t = one(text, ref)
    assert (t.lo, t.hi) == (lo, hi)


def test_offsets_in_text_are_converted_to_the_reference_zone() -> None:
    ist = timezone(timedelta(hours=5, minutes=30))
    assert one("2023-05-20T23:30+05:30", REF).lo == at(2023, 5, 20, 18, 0)
    assert one("2023-05-20T23:30Z", datetime(2023, 5, 30, tzinfo=ist)).lo == at(2023, 5, 21, 5, 0, tz=ist)
    assert one("2023-05-20T23:30-0330", REF).lo == at(2023, 5, 21, 3, 0)


def test_utc_normalisation_ignores_dst() -> None:
    # 01:30 EST and 03:30 EDT on the night New York springs forward are one hour apart, not two.
    before = parse_datetime("2023-03-12T01:30:00-05:00").astimezone(UTC)
    after = parse_datetime("2023-03-12T03:30:00-04:00").astimezone(UTC)
    assert (before, after) == (at(2023, 3, 12, 6, 30), at(2023, 3, 12, 7, 30))
    assert parse_datetime("2023-07-01T12:00:00Z") == parse_datetime("2023-07-01T08:00:00-04:00")


@pytest.mark.parametrize("value", ["2023-02-29", "2024-02-30", "2023-04-31T10:00Z", "2023-06-31 08:00"])
def test_impossible_dates_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="invalid timestamp"):
        parse_datetime(value)


@pytest.mark.parametrize("text", ["Feb 29, 2023", "2023-02-29", "June 31", "the 30th of February"])
def test_impossible_dates_are_not_times(text: str) -> None:
    assert find_times(text, REF) == []


@pytest.mark.parametrize(
    ("text", "span", "when"),
    [
        ("Dentist on May 31 at 3pm.", "May 31 at 3pm", datetime(2023, 5, 31, 15, 0, tzinfo=UTC)),
        (
            "at 3:30 p.m. on May 20 we met",
            "at 3:30 p.m. on May 20",
            datetime(2023, 5, 20, 15, 30, tzinfo=UTC),
        ),
        ("lunch tomorrow at 12:30", "tomorrow at 12:30", datetime(2023, 5, 31, 12, 30, tzinfo=UTC)),
        ("tomorrow morning at 9am", "tomorrow morning at 9am", datetime(2023, 5, 31, 9, 0, tzinfo=UTC)),
        ("tonight at 1am", "tonight at 1am", datetime(2023, 5, 31, 1, 0, tzinfo=UTC)),
        ("on Friday at noon", "Friday at noon", datetime(2023, 5, 26, 12, 0, tzinfo=UTC)),
    ],
)
def test_a_clock_time_next_to_a_day_makes_an_instant(text: str, span: str, when: datetime) -> None:
    (t,) = find_times(text, REF, clock=True)
    assert (t.text, t.when, t.granularity, t.hi - t.lo) == (span, when, "instant", timedelta(minutes=1))
    (plain,) = find_times(text, REF)  # recall's reading: the whole day (or part of it)
    assert plain.granularity == "day"


@pytest.mark.parametrize("text", ["yesterday at 3 we ran", "this morning at 9pm", "since May 20 at 10am"])
def test_no_clock_time_or_one_outside_the_day_part_leaves_the_day(text: str) -> None:
    (t,) = find_times(text, REF, clock=True)
    assert t.granularity == "day"


def test_a_yearless_date_after_since_has_begun() -> None:
    # Present tense and the next October nearer than the last: still the last, as "since" says.
    (t,) = find_times("since October 20 Ana works at Globex", REF)
    assert (t.lo, t.direction) == (datetime(2022, 10, 20, tzinfo=UTC), "after")
    (flight,) = find_times("the flight leaves on October 20", REF)  # no "since": the nearer one
    assert flight.lo == datetime(2023, 10, 20, tzinfo=UTC)
