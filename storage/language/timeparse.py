"""Find English time expressions in text and resolve them against a reference time. Standard library only.

Used at write time (a memory's event time from the dates in its content, relative to when it was written) and
at recall time (a query's "last Tuesday" / "in May 2023" / "two weeks ago" becomes a window relative to the
caller's "now").

Every mention resolves to a half-open interval ``[lo, hi)`` in the reference's time zone (a naive reference
is UTC) and ``when == lo``. Calendar arithmetic uses the reference's local wall clock; weeks start on Monday.

Forms handled (case-insensitive):

* Absolute: ``2023-05-20``, ``2023/05/20``, date-times ``2023-05-20T14:03Z`` / ``2023/05/30 (Tue) 23:40``
  (granularity "instant"; an explicit offset is converted to the reference's zone, none means its wall
  clock), ``May 20, 2023``, ``May 20th 2023``, ``20 May 2023``, ``Tue, May 30``, ``the 20th of May``,
  ``May 2023``, ``Q3 2023`` / ``2023 Q3``, ``summer 2022``, and a bare year only after in/during/since/
  before/after/until/till/from ("2023 users" is not a date). Slash dates like 05/06/2023 are ambiguous and
  ignored.
* Relative: today, tonight, yesterday, tomorrow, the day before yesterday / after tomorrow, this (or
  yesterday/tomorrow) morning/afternoon/evening, last night; ``N days|weeks|months|years ago``,
  ``in N ...``, ``N ... from now`` (N: digits, one..twenty, a/an, a couple (of) = 2, a few = 3);
  last/this/next week|weekend|month|year|<weekday>|<month>|<season> ("this past" = last, "this coming" =
  next); bare weekdays; earlier/later this week|month|year, earlier/later today; "the past N days";
  recently/lately. Vague phrases ("a while ago") are not matched.

Resolution rules where English is ambiguous:

* Yearless dates ("May 20", "20th of May"): the most recent occurrence on or before the reference date + 1
  day (memories are mostly about the past; the day of slack absorbs clock and zone skew). A stated weekday
  that contradicts that year ("Tue, May 30") selects the most recent year where it fits, up to 12 back.
  In a clause that speaks of the future (``will``, ``'ll``, ``going to``, ``due``, ``deadline``,
  ``upcoming``, ``scheduled``, ``plan(s/ning) to`` ..., and no past marker such as ``was``, ``had``, ``did``,
  ``ago``, ``yesterday``), the first occurrence on or after the reference date - 1 day instead: "the report
  is due on December 15", written on 22 November, is this December, not last. The same clause rule makes a
  bare month the one under way or the next ("the conference will be in May") and a bare weekday the next
  one ("the review will be on Tuesday"). A yearless date in a clause with neither a future marker nor a
  past-tense verb ("the flight leaves on December 2", "June 3: dentist") is the nearer of the last and the
  next occurrence, the next only if it is under six months away.
* A yearless date right after "since" ("since May 20 Ana works at Globex") is always the most recent one.
* Bare month ("in May", "since June"): the most recent one that has begun by the reference date.
  "last May": the most recent May strictly before the reference month; "next May": the first strictly
  after it; "this May": the reference year's.
* Weekdays: "last Tuesday" is the most recent Tuesday strictly before the reference date, "next Tuesday"
  the first strictly after it, "this Tuesday" the one in the reference week; bare "Tuesday" / "on Tuesday"
  is the most recent one on or before the reference date (past tense assumed).
* "N units ago" / "in N units" give the whole calendar unit (day, week, month, year) containing the
  reference date shifted by N units; month and year shifts clamp the day (2024-02-29 minus a year is
  2023-02-28). "the past N units" and "recently" (14 days, granularity "week") are rolling windows ending
  with the reference date.
* last/this/next week|month|year are calendar units; a weekend is Saturday-Sunday of that week
  (granularity "week").
* Seasons are meteorological, northern hemisphere: spring Mar-May, summer Jun-Aug, fall Sep-Nov, winter
  Dec-Feb ("winter 2022" is Dec 2022 - Feb 2023). "last summer" is the most recent one already over,
  "this winter" the one containing the reference date (else the one starting in its year). Quarters use
  granularity "season".
* Parts of a day (morning 05-12, afternoon 12-18, evening 18-24, night 18-06) have granularity "day".
* With ``clock=True`` (write time), a day or part of one next to a clock time ("December 15 at 3pm",
  "at 9:30 a.m. on Friday", "tonight at 1am") is that minute, granularity "instant".
* "May" is a month only when followed by a day or year or after in/last/next/since/before/after, so
  "May I" and "this may take" are not dates; "20 May" needs an ordinal, "of", or a year ("5 may help").
* Direction: before/until/till/by X -> "before"; after/since X and "from X on(wards)" -> "after"; the
  direction word is part of the reported span. Overlapping candidates: the longest wins, then the leftmost.

Known limit: "in N units" is read as future even in "finished it in 3 days".
"""

from __future__ import annotations

import bisect
import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from typing import Literal

__all__ = ["Granularity", "TimeMention", "find_times", "parse_datetime"]

Granularity = Literal["instant", "day", "week", "month", "year", "season"]


@dataclass(frozen=True, slots=True)
class TimeMention:
    text: str
    start: int
    end: int
    when: datetime
    lo: datetime
    hi: datetime
    granularity: Granularity
    relative: bool
    direction: Literal["at", "before", "after"] = "at"


_Unit = Literal["day", "week", "month", "year"]
_Res = tuple[datetime, datetime, Granularity, bool]
_Mode = Literal["last", "this", "next", "begun", "ahead"]

# ASCII: only ASCII digits/letters form a date, and case folding cannot surprise us (Kelvin sign, long s).
_F = re.IGNORECASE | re.ASCII
# Bounded gaps keep every pattern linear on long whitespace runs and stop matches straddling paragraphs.
_S = r"\s{1,4}"
_B = r"(?<![a-z0-9])"  # left word boundary that also rejects digits glued on ("v2", "12May")
_MON = (
    r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b"
)
_WD = (
    r"(?P<wd>mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:r(?:s(?:day)?)?)?|fri(?:day)?"
    r"|sat(?:urday)?|sun(?:day)?)\b"
)
# Relative and bare weekdays need the full name: abbreviations alone are too ambiguous ("sat", "sun").
_WDFULL = r"(?P<wd>(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b"
_DAY = r"(?P<day>3[01]|[12][0-9]|0?[1-9])(?P<sfx>st|nd|rd|th)?(?![0-9a-z])"
_YEAR = r"(?P<y>[12][0-9]{3})(?![0-9])"
_SEASON = r"(?P<season>spring|summer|fall|autumn|winter)\b"
_UNIT = r"(?P<u>day|week|month|year)s?\b"
_NUM_WORDS = [
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
]  # fmt: skip
_COUNTS = {w: i for i, w in enumerate(_NUM_WORDS, 1)} | {
    "a": 1, "an": 1, "couple": 2, "couple of": 2, "a couple": 2, "a couple of": 2, "few": 3, "a few": 3,
}  # fmt: skip
_N = (
    rf"(?P<n>[0-9]{{1,4}}|(?:a{_S})?couple(?:{_S}of)?|(?:a{_S})?few|an?"
    + "".join(f"|{w}" for w in sorted(_NUM_WORDS, key=len, reverse=True))
    + ")"
)

_MONTH_ABBRS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTHS = {m: i for i, m in enumerate(_MONTH_ABBRS, 1)}
_WEEKDAYS = {d: i for i, d in enumerate(["mon", "tue", "wed", "thu", "fri", "sat", "sun"])}
_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_UNITS: dict[str, _Unit] = {"day": "day", "week": "week", "month": "month", "year": "year"}
_REL = {"last": -1, "this past": -1, "this": 0, "next": 1, "this coming": 1}
_REL_MODES: dict[int, _Mode] = {-1: "last", 0: "this", 1: "next"}
# Words after which the modal verb "may" is still read as the month (see module docstring).
_MAY_PREPS = {"in", "last", "next", "since", "before", "after"}
_DIRS: dict[str, Literal["before", "after"]] = {
    "before": "before", "until": "before", "till": "before", "by": "before",
    "after": "after", "since": "after",
}  # fmt: skip
_PARTS = {"morning": (5, 12), "afternoon": (12, 18), "evening": (18, 24), "night": (18, 30)}
# phrase -> (days from the reference date, start hour, end hour); hours past 24 run into the next day
_DAY_WORDS: dict[str, tuple[int, int, int]] = {
    "the day before yesterday": (-2, 0, 24), "the day after tomorrow": (2, 0, 24), "yesterday": (-1, 0, 24),
    "today": (0, 0, 24), "tomorrow": (1, 0, 24), "tonight": (0, 18, 30), "last night": (-1, 18, 30),
} | {
    f"{word} {part}": (off, *hours)
    for word, off in (("yesterday", -1), ("this", 0), ("tomorrow", 1))
    for part, hours in _PARTS.items()
    if (word, part) != ("this", "night")
}  # fmt: skip


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, _F)


_ISO_RX = _rx(
    r"(?<![0-9])(?P<y>[0-9]{4})(?P<sep>[-/])(?P<mo>[0-9]{2})(?P=sep)(?P<d>[0-9]{2})(?![0-9])"
    r"(?:(?:\s?\((?:mon|tue|wed|thu|fri|sat|sun)\))?(?:T|\s{1,2})(?P<H>[0-9]{2}):(?P<M>[0-9]{2})"
    r"(?::(?P<sec>[0-9]{2})(?:\.[0-9]{1,6})?)?(?P<tz>Z|[+-][0-9]{2}(?::?[0-9]{2})?)?(?![0-9]))?"
)
_MDY_RX = _rx(rf"{_B}(?:{_WD}\.?,?{_S})?{_MON}\.?{_S}{_DAY}(?:,?{_S}{_YEAR})?")
_DMY_RX = _rx(rf"{_B}(?:{_WD}\.?,?{_S})?(?:the{_S})?{_DAY}(?P<of>{_S}of)?{_S}{_MON}(?:\.?,?{_S}{_YEAR})?")
_MY_RX = _rx(rf"{_B}{_MON}\.?(?:{_S}of)?,?{_S}{_YEAR}")
_QUARTER_RX = _rx(
    rf"{_B}(?:q(?P<q>[1-4])(?:{_S}of)?,?{_S}{_YEAR}|(?P<y2>[12][0-9]{{3}})[\s-]?q(?P<q2>[1-4])\b)"
)
_SEASON_Y_RX = _rx(rf"{_B}(?:the{_S})?{_SEASON}(?:{_S}of)?,?{_S}{_YEAR}")
_BARE_YEAR_RX = _rx(
    rf"{_B}(?P<prep>in|during|since|before|after|until|till|from){_S}(?:the{_S}year{_S})?"
    r"(?P<y>(?:19|20)[0-9]{2})(?![0-9]|[.,:][0-9])"  # "after 2000.5", "from 2,000" are quantities
)
_BARE_MON_RX = _rx(rf"{_B}(?P<prep>in|during|since|before|after|until|till|by|from){_S}{_MON}")
_REL_RX = _rx(
    rf"{_B}(?P<rel>this{_S}past|this{_S}coming|last|this|next){_S}"
    rf"(?:(?P<unit>weekend|week|month|year)\b|{_WDFULL}|{_MON}|{_SEASON})"
)
_OFFSET_RX = _rx(rf"{_B}(?:(?P<in>in){_S})?{_N}{_S}{_UNIT}(?:{_S}(?P<suf>ago|from{_S}now)\b)?")
_PAST_N_RX = _rx(rf"{_B}the{_S}(?:(?:past|last){_S}{_N}|past){_S}{_UNIT}")
_DAY_WORD_RX = _rx(
    rf"{_B}(?P<w>" + "|".join(k.replace(" ", _S) for k in sorted(_DAY_WORDS, key=len, reverse=True)) + r")\b"
)
_NEAR_RX = _rx(rf"{_B}(?P<w>earlier|later){_S}(?:this{_S}(?P<u>week|month|year)|today)\b")
_RECENT_RX = _rx(rf"{_B}(?:recently|lately)\b")
_BARE_WD_RX = _rx(rf"{_B}{_WDFULL}")
_DIR_LEFT_RX = _rx(rf"{_B}(?P<w>before|until|till|by|after|since|from){_S}\Z")
_ON_RX = _rx(rf"{_S}on(?:wards?)?\b")


@dataclass(frozen=True, slots=True)
class _Ctx:
    tz: tzinfo
    today: date

    def at(self, d: date, hour: int = 0) -> datetime:
        return datetime.combine(d + timedelta(days=hour // 24), time(hour % 24), tzinfo=self.tz)

    def days(self, lo: date, hi: date, gran: Granularity, relative: bool = True) -> _Res:
        return self.at(lo), self.at(hi), gran, relative


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def _add_months(d: date, n: int) -> date:
    """Shift by n calendar months, clamping the day (Mar 31 minus a month is Feb 28/29)."""
    y, m0 = divmod(d.year * 12 + d.month - 1 + n, 12)
    return date(y, m0 + 1, min(d.day, calendar.monthrange(y, m0 + 1)[1]))


def _shift(d: date, unit: _Unit, n: int) -> date:
    if unit == "day":
        return d + timedelta(days=n)
    if unit == "week":
        return d + timedelta(weeks=n)
    return _add_months(d, n * 12 if unit == "year" else n)


def _unit_span(d: date, unit: _Unit) -> tuple[date, date]:
    if unit == "day":
        return d, d + timedelta(days=1)
    if unit == "week":
        monday = d - timedelta(days=d.weekday())
        return monday, monday + timedelta(days=7)
    if unit == "month":
        first = d.replace(day=1)
        return first, _add_months(first, 1)
    return date(d.year, 1, 1), date(d.year + 1, 1, 1)


def _months_from(month: int, length: int) -> Callable[[int], tuple[date, date]]:
    def span(year: int) -> tuple[date, date]:
        first = date(year, month, 1)
        return first, _add_months(first, length)

    return span


def _occurrence(
    today: date, span: Callable[[int], tuple[date, date]], mode: _Mode
) -> tuple[date, date] | None:
    """Pick one yearly occurrence (a month, a season) of ``span`` relative to today, per ``mode``."""
    spans = [span(y) for y in range(today.year - 2, today.year + 2)]  # oldest first
    if mode == "next":  # first one starting strictly after today
        return next((s for s in spans if s[0] > today), None)
    if mode == "last":  # most recent one already over
        return next((s for s in reversed(spans) if s[1] <= today), None)
    if mode == "begun":  # most recent one that has started
        return next((s for s in reversed(spans) if s[0] <= today), None)
    if mode == "ahead":  # the one under way, else the first still to come
        return next((s for s in spans if today < s[1]), None)
    # "this": the one containing today, else the one starting in today's year
    return next((s for s in spans if s[0] <= today < s[1]), span(today.year))


def _yearless(today: date, month: int, day: int, weekday: int | None, ahead: bool = False) -> date | None:
    if ahead:
        first = today - timedelta(days=1)
        years = range(today.year - 1, min(today.year + 13, 10_000))
    else:
        limit = today + timedelta(days=1)
        years = range(today.year + 1, max(today.year - 12, 0), -1)
    fallback = None
    for year in years:
        try:
            d = date(year, month, day)
        except ValueError:  # Feb 29 in a common year, Feb 30, year 10000
            continue
        if (d < first) if ahead else (d > limit):
            continue
        if weekday is None or d.weekday() == weekday:
            return d
        fallback = fallback or d
    return fallback


# Whether the clause around a time expression speaks of the future: a future marker and no past marker.
_CLAUSE_END_RX = re.compile(r"[.!?;\n]")
_FUTURE_RX = _rx(
    rf"{_B}(?:will|shall|going{_S}to|gonna|due|deadline|upcoming|scheduled|plans?{_S}to|planning{_S}to|"
    r"intends?\s{1,4}to|expires?|remind(?:er)?)\b|'ll\b"
)
_PAST_RX = _rx(rf"{_B}(?:was|were|had|did|went|ago|yesterday|already|last)\b")
# Any past-tense verb: regular (-ed) or a common irregular one. Checked only when no future marker is there
# ("is scheduled" is future), to tell "I visited Rome on March 3" (back) from "the flight leaves on
# December 2" (present tense, no marker: the nearer occurrence).
_PAST_VERB_RX = _rx(
    rf"{_B}(?:[a-z]+ed|was|were|had|did|went|saw|met|got|made|took|came|left|flew|ate|drank|told|gave|found|"
    r"thought|said|ran|wrote|began|drove|paid|sent|spent|won|lost|sold|kept|held|brought|felt|heard|bought|"
    r"taught|caught|slept|stood|sat|became|chose|forgot|knew|read|built|broke|wore|swam|sang|spoke|threw)\b|"
    r"\b(?:ago|yesterday|already|last)\b"
)


_SINCE_RX = _rx(rf"{_B}since{_S}(?:the{_S})?\Z")


def _clause(m: re.Match[str]) -> str:
    text = m.string
    start = max(
        (x.end() for x in _CLAUSE_END_RX.finditer(text, max(0, m.start() - 200), m.start())), default=0
    )
    end_match = _CLAUSE_END_RX.search(text, m.end(), m.end() + 200)
    return text[max(start, m.start() - 200) : end_match.start() if end_match else m.end() + 200]


def _tense(m: re.Match[str]) -> Literal["ahead", "back", "near"]:
    """The direction a yearless date points in: ahead with a future marker (and no past marker), back with a
    past-tense verb, else (present tense: "the flight leaves on December 2") the nearer occurrence."""
    if _SINCE_RX.search(m.string, max(0, m.start() - 16), m.start()):
        return "back"  # "since May 20": a start that has come, whatever the clause's tense
    clause = _clause(m)
    if _FUTURE_RX.search(clause) and not _PAST_RX.search(clause):
        return "ahead"
    return "back" if _PAST_VERB_RX.search(clause) else "near"


def _ahead(m: re.Match[str]) -> bool:
    text = m.string
    start = max(
        (x.end() for x in _CLAUSE_END_RX.finditer(text, max(0, m.start() - 200), m.start())), default=0
    )
    end_match = _CLAUSE_END_RX.search(text, m.end(), m.end() + 200)
    clause = text[max(start, m.start() - 200) : end_match.start() if end_match else m.end() + 200]
    return bool(_FUTURE_RX.search(clause)) and not _PAST_RX.search(clause)


def _offset(tz: str) -> tzinfo:
    if tz.upper() == "Z":
        return UTC
    digits = tz[1:].replace(":", "")
    delta = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
    return timezone(-delta if tz[0] == "-" else delta)


def _r_iso(m: re.Match[str], c: _Ctx) -> _Res | None:
    y, mo, d = int(m["y"]), int(m["mo"]), int(m["d"])
    if m["H"] is None:
        day = date(y, mo, d)
        return c.days(day, day + timedelta(days=1), "day", False)
    zone = c.tz if m["tz"] is None else _offset(m["tz"])
    lo = datetime(y, mo, d, int(m["H"]), int(m["M"]), int(m["sec"] or 0), tzinfo=zone).astimezone(c.tz)
    return lo, lo + timedelta(seconds=1 if m["sec"] else 60), "instant", False


def _r_date(m: re.Match[str], c: _Ctx) -> _Res | None:
    month, day = _MONTHS[m["mon"][:3].lower()], int(m["day"])
    if m["y"]:
        d = date(int(m["y"]), month, day)
    else:
        if month == 5 and "of" in m.re.groupindex and not (m["sfx"] or m["of"]):
            return None  # "those 5 may help": day-first May needs an ordinal, "of" or a year
        weekday = _WEEKDAYS[m["wd"][:3].lower()] if m["wd"] else None
        tense = _tense(m)
        found = _yearless(c.today, month, day, weekday, ahead=tense == "ahead")
        if tense == "near" and weekday is None and found is not None:
            later = _yearless(c.today, month, day, None, ahead=True)
            if later is not None and (later - c.today) < min(c.today - found, timedelta(days=183)):
                found = later
        if found is None:
            return None
        d = found
    return c.days(d, d + timedelta(days=1), "day", not m["y"])


def _r_month_year(m: re.Match[str], c: _Ctx) -> _Res | None:
    return c.days(*_months_from(_MONTHS[m["mon"][:3].lower()], 1)(int(m["y"])), "month", False)


def _r_quarter(m: re.Match[str], c: _Ctx) -> _Res | None:
    q, y = int(m["q"] or m["q2"]), int(m["y"] or m["y2"])
    return c.days(*_months_from(3 * q - 2, 3)(y), "season", False)


def _r_season_year(m: re.Match[str], c: _Ctx) -> _Res | None:
    return c.days(*_months_from(_SEASONS[m["season"].lower()], 3)(int(m["y"])), "season", False)


def _r_bare_year(m: re.Match[str], c: _Ctx) -> _Res | None:
    y = int(m["y"])
    return c.days(date(y, 1, 1), date(y + 1, 1, 1), "year", False)


def _r_bare_month(m: re.Match[str], c: _Ctx) -> _Res | None:
    month = _MONTHS[m["mon"][:3].lower()]
    if month == 5 and m["prep"].lower() not in _MAY_PREPS:
        return None
    found = _occurrence(c.today, _months_from(month, 1), "ahead" if _ahead(m) else "begun")
    return None if found is None else c.days(*found, "month")


def _r_relative(m: re.Match[str], c: _Ctx) -> _Res | None:
    k = _REL[_norm(m["rel"])]
    t = c.today
    if m["unit"]:
        word = m["unit"].lower()
        if word == "weekend":
            saturday = _unit_span(_shift(t, "week", k), "week")[0] + timedelta(days=5)
            return c.days(saturday, saturday + timedelta(days=2), "week")
        unit = _UNITS[word]
        return c.days(*_unit_span(_shift(t, unit, k), unit), unit)
    if m["wd"]:
        wd = _WEEKDAYS[m["wd"][:3].lower()]
        if k < 0:
            d = t - timedelta(days=(t.weekday() - wd) % 7 or 7)
        elif k > 0:
            d = t + timedelta(days=(wd - t.weekday()) % 7 or 7)
        else:
            d = t + timedelta(days=wd - t.weekday())
        return c.days(d, d + timedelta(days=1), "day")
    mode = _REL_MODES[k]
    if m["mon"]:
        month = _MONTHS[m["mon"][:3].lower()]
        if month == 5 and k == 0:
            return None  # "this may take a while"
        found = _occurrence(t, _months_from(month, 1), mode)
        return None if found is None else c.days(*found, "month")
    found = _occurrence(t, _months_from(_SEASONS[m["season"].lower()], 3), mode)
    return None if found is None else c.days(*found, "season")


def _r_offset(m: re.Match[str], c: _Ctx) -> _Res | None:
    suffix = _norm(m["suf"] or "")
    if suffix == "ago":
        sign = -1
    elif m["in"] or suffix:
        sign = 1
    else:
        return None  # a bare duration ("two weeks") is not a time
    unit = _UNITS[m["u"].lower()]
    return c.days(*_unit_span(_shift(c.today, unit, sign * _count(m["n"])), unit), unit)


def _count(n: str) -> int:
    return int(n) if n.isdigit() else _COUNTS[_norm(n)]


def _r_past_n(m: re.Match[str], c: _Ctx) -> _Res | None:
    unit = _UNITS[m["u"].lower()]
    lo = _shift(c.today, unit, -_count(m["n"] or "1"))
    return c.days(lo, c.today + timedelta(days=1), unit)


def _r_day_word(m: re.Match[str], c: _Ctx) -> _Res | None:
    off, h0, h1 = _DAY_WORDS[_norm(m["w"])]
    d = c.today + timedelta(days=off)
    return c.at(d, h0), c.at(d, h1), "day", True


def _r_near(m: re.Match[str], c: _Ctx) -> _Res | None:
    unit = _UNITS[m["u"].lower()] if m["u"] else "day"
    first, after = _unit_span(c.today, unit)
    if m["w"].lower() == "earlier":
        return c.days(first, c.today + timedelta(days=1), unit)
    return c.days(c.today, after, unit)


def _r_recent(m: re.Match[str], c: _Ctx) -> _Res | None:
    return c.days(c.today - timedelta(days=14), c.today + timedelta(days=1), "week")


# A bare weekday that names a habit or modifies a noun is no date: "every Sunday", "my Sunday group rides",
# "on Saturday mornings" (a plural time of day after it).
_HABIT_LEFT_RX = _rx(
    rf"{_B}(?:every|each|most|many|some|all|usual|typical|weekly|my|our|your|his|her|their|a|the){_S}\Z"
)
_HABIT_RIGHT_RX = _rx(r"\s+(?:mornings|afternoons|evenings|nights|lunches|dinners)\b")


def _r_bare_weekday(m: re.Match[str], c: _Ctx) -> _Res | None:
    text = m.string
    if _HABIT_LEFT_RX.search(text, max(0, m.start() - 20), m.start()) or _HABIT_RIGHT_RX.match(
        text, m.end(), m.end() + 20
    ):
        return None
    wd = _WEEKDAYS[m["wd"][:3].lower()]
    if _ahead(m):
        d = c.today + timedelta(days=(wd - c.today.weekday()) % 7)
    else:
        d = c.today - timedelta(days=(c.today.weekday() - wd) % 7)
    return c.days(d, d + timedelta(days=1), "day")


_RULES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str], _Ctx], _Res | None]], ...] = (
    (_ISO_RX, _r_iso),
    (_MDY_RX, _r_date),
    (_DMY_RX, _r_date),
    (_MY_RX, _r_month_year),
    (_QUARTER_RX, _r_quarter),
    (_SEASON_Y_RX, _r_season_year),
    (_BARE_YEAR_RX, _r_bare_year),
    (_BARE_MON_RX, _r_bare_month),
    (_REL_RX, _r_relative),
    (_OFFSET_RX, _r_offset),
    (_PAST_N_RX, _r_past_n),
    (_DAY_WORD_RX, _r_day_word),
    (_NEAR_RX, _r_near),
    (_RECENT_RX, _r_recent),
    (_BARE_WD_RX, _r_bare_weekday),
)


def _direction(text: str, m: re.Match[str]) -> tuple[int, int, Literal["at", "before", "after"]]:
    """Span and direction of a match, widened to take in a direction word ("since", "from ... on")."""
    start, end = m.span()
    prep = m.groupdict().get("prep")
    word, word_start = (prep.lower(), start) if prep else (None, start)
    if word is None:
        left = _DIR_LEFT_RX.search(text, max(0, start - 12), start)
        if left:
            word, word_start = left["w"].lower(), left.start()
    if word == "from":
        on = _ON_RX.match(text, end)
        return (word_start, on.end(), "after") if on else (start, end, "at")
    if word in _DIRS:
        return word_start, end, _DIRS[word]
    return start, end, "at"


# A clock time right after a day ("December 15 at 3pm", "tomorrow at 09:30", "on Friday, 3:15 p.m.") or right
# before one ("at 3pm on December 15"). Needs am/pm or hh:mm (or noon/midnight): "at 3" alone is not a time.
_CLOCK = (
    r"(?:(?P<h>1[0-2]|0?[1-9])(?::(?P<m>[0-5][0-9]))?\s?(?:(?P<ap>[ap])m\b|(?P<ap2>[ap])\.m\.)"
    r"|(?P<h24>[01]?[0-9]|2[0-3]):(?P<m24>[0-5][0-9])(?![0-9])"
    r"|(?P<noon>noon|midday|midnight)\b)"
)
_CLOCK_AFTER_RX = _rx(rf"\A,?{_S}(?:at{_S}|@{_S}?|around{_S}|from{_S})?{_CLOCK}")
_CLOCK_BEFORE_RX = _rx(rf"{_B}(?:at{_S}|@{_S}?|around{_S})?{_CLOCK}{_S}(?:on{_S})?\Z")


def _clock(m: re.Match[str]) -> tuple[int, int]:
    if m["noon"]:
        return (0, 0) if m["noon"].casefold() == "midnight" else (12, 0)
    if m["h24"] is not None:
        return int(m["h24"]), int(m["m24"])
    hour = int(m["h"]) % 12 + (12 if (m["ap"] or m["ap2"]).casefold() == "p" else 0)
    return hour, int(m["m"] or 0)


def _with_clock(text: str, t: TimeMention) -> TimeMention:
    """A mention of one day (or part of one: "tomorrow morning") next to a clock time within it becomes that
    instant (the minute), its span covering both."""
    if t.granularity != "day" or t.hi - t.lo > timedelta(days=1) or t.direction != "at":
        return t
    after = _CLOCK_AFTER_RX.match(text[t.end : t.end + 24])
    before = None if after else _CLOCK_BEFORE_RX.search(text[max(0, t.start - 24) : t.start])
    if after is None and before is None:
        return t
    hour, minute = _clock(after or before)  # type: ignore[arg-type]
    lo = t.lo.replace(hour=hour, minute=minute)
    if lo < t.lo:  # "tonight at 1am": past midnight
        lo += timedelta(days=1)
    if not t.lo <= lo < t.hi:  # "this morning at 9pm": not a time of that span
        return t
    start = t.start - (len(before[0]) if before else 0)
    end = t.end + (after.end() if after else 0)
    return TimeMention(text[start:end], start, end, lo, lo, lo + timedelta(minutes=1), "instant", t.relative)


def find_times(text: str, ref: datetime, *, clock: bool = False) -> list[TimeMention]:
    """All time expressions in text, in order of appearance, non-overlapping (longest match wins). With
    ``clock``, a one-day mention next to a clock time ("December 15 at 3pm") is that minute (granularity
    "instant"): a memory's event time keeps it. Recall leaves it off: a question's "at 3pm on the 15th" still
    looks at the whole day."""
    if not isinstance(text, str) or not text:
        return []
    c = _Ctx(ref.tzinfo or UTC, ref.date())
    found: list[TimeMention] = []
    for rx, resolve in _RULES:
        for m in rx.finditer(text):
            try:
                res = resolve(m, c)
            except (ValueError, OverflowError):  # calendar results out of range: Feb 30, year 0 or 10000
                continue
            if res is None or not res[0] < res[1]:
                continue
            lo, hi, gran, rel = res
            start, end, direction = _direction(text, m)
            found.append(TimeMention(text[start:end], start, end, lo, lo, hi, gran, rel, direction))
    # Greedy by length (then leftmost): a candidate survives only if it overlaps nothing already kept.
    found.sort(key=lambda t: (t.start - t.end, t.start))
    kept: list[TimeMention] = []
    starts: list[int] = []
    for t in found:
        i = bisect.bisect_right(starts, t.start)
        if (i and kept[i - 1].end > t.start) or (i < len(kept) and kept[i].start < t.end):
            continue
        starts.insert(i, t.start)
        kept.insert(i, t)
    return [_with_clock(text, t) for t in kept] if clock else kept


_ACCEPTED = (
    "expected e.g. '2023-05-20', '2023-05-20T14:03:00Z', '2023-05-20 14:03+02:00' or '2023/05/30 (Tue) 23:40'"
)
_ISO_TS_RX = _rx(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?(?:Z|[+-][0-9]{2}(?::?[0-9]{2})?)?)?"
)
_LME_TS_RX = _rx(
    r"(?P<y>[0-9]{4})/(?P<mo>[0-9]{2})/(?P<d>[0-9]{2})"
    r"(?:\s?\((?:mon|tue|wed|thu|fri|sat|sun)\))?(?:\s(?P<H>[0-9]{2}):(?P<M>[0-9]{2}))?"
)


def parse_datetime(value: str) -> datetime:
    """Parse an absolute timestamp given by a caller: ISO 8601 ('2023-05-20', '2023-05-20T14:03:00Z',
    '2023-05-20 14:03', with offsets), and LongMemEval's '2023/05/30 (Tue) 23:40'. Naive -> UTC.
    Returns a tz-aware datetime. Raises ValueError with a message that shows an accepted example on
    anything else (including out-of-range dates like 2023-02-30, years < 1 or > 9999, NUL bytes).

    The weekday in the LongMemEval form is not checked against the date: it is redundant there.
    """
    if not isinstance(value, str):
        raise TypeError(f"timestamp must be a string, not {type(value).__name__}")
    s = value.strip()
    try:
        if _ISO_TS_RX.fullmatch(s):
            # Pre-checked with an ASCII pattern: fromisoformat alone also takes week dates and other oddities.
            dt = datetime.fromisoformat(s.upper())
        elif m := _LME_TS_RX.fullmatch(s):
            dt = datetime(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["H"] or 0), int(m["M"] or 0))
        else:
            raise ValueError("unrecognized format")
    except ValueError as exc:
        raise ValueError(f"invalid timestamp {value[:64]!r} ({exc}); {_ACCEPTED}") from None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)
