"""What a recall query says besides its words: the times it names and whether it asks about change.

Pure functions of the query text and the caller's reference time; no store access. ``storage.recall.pipeline``
turns the result into a soft event-time boost and into "include superseded versions".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from storage.language.timeparse import TimeMention, find_times
from storage.recall.recipes import TimeRule

# Questions about change: what was true before, what used to be, the whole history of something.
_CHANGE = re.compile(
    r"\b(?:used\s+to|previous(?:ly)?|former(?:ly)?|prior\s+to\s+(?:that|this|now)|originally|at\s+first"
    r"|no\s+longer|any\s*more|history\s+of|(?:my|our|his|her|their|the)\s+(?:old|past|earlier)\s+\w+"
    r"|(?:has|have|had|did)\s+\w+(?:\s+\w+)?\s+change[ds]?|changed|over\s+time|over\s+the\s+years"
    r"|before\s*(?:[?.!]|$|that\b|then\b|now\b|this\b)|before\s+(?:I|we|you|he|she|they)\s+\w+)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Interval:
    """A query's time window, half-open; ``None`` ends are open ("before May" has no start)."""

    lo: datetime | None
    hi: datetime | None
    expression: str

    def distance(self, t: datetime) -> timedelta:
        """How far ``t`` lies outside the interval (zero inside)."""
        if self.lo is not None and t < self.lo:
            return self.lo - t
        if self.hi is not None and t >= self.hi:
            return t - self.hi
        return timedelta(0)

    @property
    def closed(self) -> bool:
        return self.lo is not None and self.hi is not None

    def width(self) -> timedelta:
        if self.lo is None or self.hi is None:
            return timedelta(days=30)  # nominal width of an open window, for the decay scale
        return self.hi - self.lo


@dataclass(frozen=True, slots=True)
class Intent:
    intervals: tuple[Interval, ...]
    search_text: str  # the query with its time expressions removed (or the query, if nothing would be left)
    change: str | None  # the words that make it a question about change, if any


def interval_of(t: TimeMention) -> Interval:
    if t.direction == "before":
        return Interval(None, t.lo, t.text)
    if t.direction == "after":
        return Interval(t.lo, None, t.text)
    return Interval(t.lo, t.hi, t.text)


def analyse(text: str, ref: datetime, rule: TimeRule) -> Intent:
    """Time windows named in ``text`` (resolved against ``ref``, in its time zone) and change words.

    With ``rule.enabled`` false no window is reported and the text is left whole.
    """
    mentions = find_times(text, ref) if rule.enabled else []
    search = text
    if mentions and rule.strip:
        parts, last = [], 0
        for t in mentions:
            parts.append(text[last : t.start])
            last = t.end
        parts.append(text[last:])
        stripped = " ".join(" ".join(parts).split())
        if re.search(r"\w", stripped):
            search = stripped
    change = _CHANGE.search(text)
    if change is not None and any(t.start <= change.start() < t.end for t in mentions):
        change = None  # "before May 2023" is a time window, not a question about change
    return Intent(tuple(interval_of(t) for t in mentions), search, change.group(0) if change else None)


def factor(t: datetime, intervals: tuple[Interval, ...], rule: TimeRule) -> tuple[float, Interval | None]:
    """The score multiplier for an event at ``t`` and the window that gave it (the best one; None when
    there is no window). Far outside every window the multiplier is 1 (to float precision)."""
    best, where = 1.0, None
    narrow_boost = rule.narrow_boost
    narrow = timedelta(days=rule.narrow_days)
    for iv in intervals:
        boost = rule.boost
        if narrow_boost is not None and iv.closed and iv.width() <= narrow:
            boost = narrow_boost
        scale = max(iv.width().total_seconds() * rule.decay_width, rule.min_decay_days * 86_400)
        f = 1.0 + boost * math.exp(-iv.distance(t).total_seconds() / scale)
        if where is None or f > best:
            best, where = f, iv
    return best, where
