"""A conversation's digest, offline: who took part and when, the people and things named, the dates mentioned,
and the main statements with who said them. Extractive (sentences as they were said, never rewritten), and
bounded (``MAX_DIGEST_CHARS``), so a digest never states anything its messages did not.

Sentences are ranked by what a personal memory needs later: a statement the offline extractor reads as an
asserted relation ("I moved to Lisbon"), the user's own words, named entities, dates and numbers; questions
and small talk rank last. At most ``PER_MESSAGE`` points come from one message, so a long reply does not crowd
out the rest, and the points are listed in the order they were said.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from storage.domain.models import EntityIn
from storage.enrich import enrich
from storage.language.extraction import EntityLexicon, _norm

MAX_DIGEST_CHARS = 2_000
MAX_POINTS = 12
PER_MESSAGE = 2
MAX_ENTITIES_SHOWN = 12
MAX_DATES_SHOWN = 6
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)", re.M)
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|my|me|we|our)\b", re.I)
_DIGIT = re.compile(r"\d")
_POINT_CHARS = 240


@dataclass(frozen=True, slots=True)
class Said:
    """One message of the conversation, as stored."""

    id: str
    role: str
    speaker: str | None
    time: datetime
    content: str
    entities: tuple[str, ...] = ()  # the entities stored with the message (already checked for its writer)


@dataclass(frozen=True, slots=True)
class Digest:
    text: str
    entities: tuple[EntityIn, ...]
    first: datetime
    last: datetime
    points: int


@dataclass(frozen=True, slots=True)
class _Point:
    score: float
    order: tuple[datetime, str, int]
    who: str
    text: str


def _who(m: Said) -> str:
    return m.speaker or m.role


def named_in(low: str, by_prefix: Mapping[str, Sequence[str]]) -> int:
    """How many of the names (indexed by their first three characters) occur in ``low``, counted up to 2. A name
    can only start where its first three characters do, so a sentence costs its length, not the number of names
    seen so far (a week of thousands of memories, each naming someone new, took time quadratic in them)."""
    seen: set[str] = set()
    for i in range(len(low) - 2):
        for k in by_prefix.get(low[i : i + 3], ()):
            if k not in seen and low.startswith(k, i):
                seen.add(k)
                if len(seen) == 2:
                    return 2
    return len(seen)


def build(
    conversation: str,
    messages: Sequence[Said],
    *,
    lexicon: EntityLexicon,
    day: str | None = None,
    week: str | None = None,
) -> Digest:
    """The digest of ``messages`` (at least one). Pure apart from reading ``lexicon`` (known names).
    ``day``: the memories are a scope's plain memories of that day (``storage.enrich.days``), not messages;
    ``week`` likewise, of that week ("2026-W48, 2026-11-23 to 2026-11-29")."""
    ordered = sorted(messages, key=lambda m: (m.time, m.id))
    counts: Counter[str] = Counter()
    names: dict[str, EntityIn] = {}
    by_prefix: dict[str, list[str]] = {}  # the names longer than 2, by their first three characters
    dates: dict[str, str] = {}
    points: list[_Point] = []
    for m in ordered:
        speaker = m.speaker if m.role == "user" or m.speaker else None
        found = enrich(m.content, written_at=m.time, lexicon=lexicon, speaker=speaker)
        for e in found.entities:
            # A name the lexicon matched in another spelling or by an alias is someone else's spelling, maybe
            # learnt in a scope the digest's readers cannot read: only names the message spells, or that it
            # was stored with (checked for its writer at write time), go into the digest.
            if e.name not in m.content and e.name not in m.entities:
                continue
            key = _norm(e.name)
            if key and len(key) > 1:
                counts[key] += 1
                if key not in names:
                    names[key] = e
                    if len(key) > 2:
                        by_prefix.setdefault(key[:3], []).append(key)
        for t in found.times:
            dates.setdefault(t.when.date().isoformat(), t.text)
        asserted = [(s.start, s.end) for s in found.statements if s.status == "asserted"]
        mine: list[_Point] = []
        for n, match in enumerate(_SENTENCE.finditer(m.content)):
            text = " ".join(match.group(0).split())
            if len(text) < 15:
                continue
            lo, hi = match.start(), match.end()
            low = text.casefold()
            score = 0.0
            if any(s < hi and lo < max(e, s + 1) for s, e in asserted):
                score += 3
            if m.role == "user":
                score += 1.5
                if _FIRST_PERSON.search(text):
                    score += 1
            score += named_in(low, by_prefix)
            if any(lo <= t.start < hi for t in found.times):
                score += 1
            if _DIGIT.search(text):
                score += 0.5
            if text.endswith("?"):
                score -= 2
            if len(text) > _POINT_CHARS:
                text = text[: _POINT_CHARS - 1].rstrip() + "…"
            if score > 0:  # small talk and questions with nothing named in them are left out
                mine.append(_Point(score, (m.time, m.id, n), _who(m), text))
        mine.sort(key=lambda p: (-p.score, p.order))
        points.extend(mine[:PER_MESSAGE])
    points.sort(key=lambda p: (-p.score, p.order))
    chosen = points[:MAX_POINTS]
    top = [names[k] for k, _ in counts.most_common(MAX_ENTITIES_SHOWN)]
    first, last = ordered[0].time, ordered[-1].time
    who = sorted({_who(m) for m in ordered})
    span = first.date().isoformat() if first.date() == last.date() else f"{first.date()} to {last.date()}"
    if week is not None:
        what = (
            f"Digest of the memories recorded in {conversation} in the week {week}: {len(ordered)} memories"
        )
    elif day is None:
        what = f"Digest of conversation {conversation!r}: {len(ordered)} messages"
    else:
        what = f"Digest of the memories recorded in {conversation} on {day}: {len(ordered)} memories"
    head = [f"{what}, {span}, between {', '.join(who)}."]
    if top:
        head.append("Named: " + ", ".join(e.name for e in top) + ".")
    if dates:
        shown = sorted(dates.items())[:MAX_DATES_SHOWN]
        head.append("Dates mentioned: " + ", ".join(f"{d} ('{t}')" for d, t in shown) + ".")

    def render(ps: Sequence[_Point]) -> str:
        lines = [f"- {p.who}: {p.text}" for p in sorted(ps, key=lambda p: p.order)]
        return "\n".join(head + (["Main points:", *lines] if lines else []))

    text = render(chosen)
    while len(text) > MAX_DIGEST_CHARS and chosen:
        chosen = chosen[:-1]  # the weakest point goes first
        text = render(chosen)
    return Digest(text[:MAX_DIGEST_CHARS], tuple(top), first, last, len(chosen))
