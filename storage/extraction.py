"""The offline extractor: entities and dates found in a memory's content, with no model and no network.

Entities: names the graph already knows (and their aliases), matched as whole words; otherwise runs of
capitalised words that are not sentence-initial function words, months or weekdays. Dates: absolute and
relative expressions resolved against the time the memory was written (``storage.timeparse``).
What the caller passes always wins; this only fills gaps.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from storage.models import EntityIn
from storage.timeparse import TimeMention, find_times

_TOKEN = re.compile(r"[\w][\w'’&.-]*", re.UNICODE)
_CAP_RUN = re.compile(
    r"(?<![\w'’])(?:[A-Z][\w'’&-]*|[A-Z]{2,})(?:\s+(?:(?:of|de|da|van|von|der|la|le|del|the|and|&)\s+)?"
    r"(?:[A-Z][\w'’&-]*))*"
)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\s*|[\"“(]\s*)$")
MAX_NGRAM = 5

# Capitalised words that are almost never entities on their own.
_NOT_ENTITIES = frozenset(
    (
        "i",
        "i'm",
        "i've",
        "i'd",
        "i'll",
        "me",
        "my",
        "mine",
        "we",
        "our",
        "us",
        "you",
        "your",
        "he",
        "him",
        "his",
        "she",
        "her",
        "they",
        "them",
        "their",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "so",
        "yes",
        "no",
        "not",
        "hi",
        "hello",
        "hey",
        "thanks",
        "thank",
        "please",
        "ok",
        "okay",
        "sure",
        "also",
        "just",
        "maybe",
        "well",
        "oh",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "today",
        "tomorrow",
        "yesterday",
        "tonight",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "mon",
        "tue",
        "tues",
        "wed",
        "thu",
        "thur",
        "thurs",
        "fri",
        "sat",
        "sun",
        "spring",
        "summer",
        "autumn",
        "fall",
        "winter",
    )
)


@dataclass(frozen=True, slots=True)
class Extraction:
    entities: tuple[EntityIn, ...]
    times: tuple[TimeMention, ...]


class EntityLexicon:
    """The names (and aliases) of known entities, for whole-word matching in new content. Thread-safe."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        self._lock = threading.Lock()

    def add(self, name: str, aliases: Iterable[str] = ()) -> None:
        with self._lock:
            for alias in (name, *aliases):
                key = _norm(alias)
                if key and len(key.split()) <= MAX_NGRAM:
                    self._names.setdefault(key, name)

    def clear(self) -> None:
        with self._lock:
            self._names.clear()

    def find(self, text: str) -> list[str]:
        words = [m.group(0).strip(".'’-&").casefold() for m in _TOKEN.finditer(text)]
        found: dict[str, None] = {}
        with self._lock:
            if not self._names:
                return []
            for i in range(len(words)):
                for n in range(min(MAX_NGRAM, len(words) - i), 0, -1):
                    name = self._names.get(" ".join(words[i : i + n]))
                    if name is not None:
                        found.setdefault(name, None)
                        break
        return list(found)


def _norm(name: str) -> str:
    return " ".join(w.strip(".'’-&").casefold() for w in _TOKEN.findall(name))


def capitalised_spans(text: str) -> list[str]:
    """Runs of capitalised words that look like names ("Ana Lima", "Bank of America", "NASA")."""
    out: dict[str, None] = {}
    for m in _CAP_RUN.finditer(text):
        words = m.group(0).split()
        # A sentence-initial capital says nothing: drop leading function words there, and a lone
        # sentence-initial word unless it is an all-caps acronym.
        sentence_start = bool(_SENTENCE_START.search(text[: m.start()]))
        while words and words[0].strip(".'’").casefold() in _NOT_ENTITIES:
            words.pop(0)
            sentence_start = False
        while words and words[-1].casefold() in {"of", "de", "the", "and", "&", "van", "von"}:
            words.pop()
        if not words:
            continue
        if len(words) == 1:
            word = words[0].strip(".'’-")
            if sentence_start and not (word.isupper() and len(word) >= 2):
                continue
            if word.casefold() in _NOT_ENTITIES or len(word) < 2:
                continue
        name = " ".join(w.strip(".,'’") for w in words)
        if name:
            out.setdefault(name, None)
    return list(out)


def extract(
    content: str, *, written_at: datetime, lexicon: EntityLexicon, given: Sequence[EntityIn] = ()
) -> Extraction:
    """Entities and time expressions in ``content``. Caller-given entities come first and win on type."""
    entities: dict[str, EntityIn] = {}
    for e in given:
        entities.setdefault(_norm(e.name), e)
    for name in (*lexicon.find(content), *capitalised_spans(content)):
        key = _norm(name)
        if key and key not in entities:
            entities[key] = EntityIn(name=name)
    return Extraction(entities=tuple(entities.values()), times=tuple(find_times(content, written_at)))
