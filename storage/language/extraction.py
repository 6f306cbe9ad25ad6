"""The offline extractor: entities and dates found in a memory's content, with no model and no network.

Entities: names the graph already knows (and their aliases), matched as whole words; otherwise runs of
capitalised words that are not sentence-initial function words, months or weekdays. Dates: absolute and
relative expressions resolved against the time the memory was written (``storage.language.timeparse``).
What the caller passes always wins; this only fills gaps.
"""

from __future__ import annotations

import heapq
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from storage.domain.models import MAX_ENTITIES, MAX_NAME_CHARS, EntityIn
from storage.domain.records import entity_key
from storage.language.nicknames import forms
from storage.language.resolve import sound_key
from storage.language.timeparse import TimeMention, find_times

_TOKEN = re.compile(r"[\w][\w'’&.-]*", re.UNICODE)
_CAP_RUN = re.compile(
    r"(?<![\w'’])(?:[A-Z][\w'’&-]*|[A-Z]{2,})(?:\s+(?:(?:of|de|da|van|von|der|la|le|del|the|and|&)\s+)?"
    r"(?:[A-Z][\w'’&-]*))*"
)
_SENTENCE_ENDS = frozenset('.!?:;\n"“(')
# Titles before a name ("Dr. Okafor"): never an entity alone, and their period does not end a sentence.
PERSON_TITLES = frozenset(("dr", "mr", "mrs", "ms", "prof"))
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


@dataclass(frozen=True, slots=True)
class EntityMatch:
    """A known entity named in a query: its recorded name, how it matched and the query words that did."""

    name: str
    how: Literal["exact", "alias", "token", "fuzzy"]
    text: str
    key: str = ""  # the lexicon key that matched: the name's own, or one of its aliases (normalised)


_HOW_ORDER = {"exact": 0, "alias": 1, "token": 2, "fuzzy": 3}
_MAX_POSTINGS = 64  # a query word shared by more known names than this cannot pick one out
# Entity resolution's blocking (``similar``): at most this many known names are compared with a new one, and a
# sound key shared by more words than _MAX_SOUNDS contributes none (it cannot pick a name out).
MAX_CANDIDATES = 64
_MAX_SOUNDS = 64
_MAX_SAME = 32  # names reachable through accepted SAME_AS links from one entity
FUZZY_MIN_CHARS = 5  # shorter words are too easily one edit from another word ("Rome", "home")
# Longer words get no one-edit variants: a word of n characters has n variants of n - 1 characters, so the index
# of one 31,000-character word took about 1 GB (and again at every start, when the lexicon is rebuilt). Real names
# are far shorter; a longer word still matches exactly.
FUZZY_MAX_CHARS = 24
# What the offline extractor may take from one memory: names as long as a caller may give (MAX_NAME_CHARS) and at
# most MAX_ENTITIES of them, like a caller's list. Together with FUZZY_MAX_CHARS this bounds what one write adds
# to the in-memory lexicon (docs/limits.md, "Memory budget").
# Words that never select an entity by themselves in a query (they may still be part of an exact name).
_QUERY_STOP = _NOT_ENTITIES | frozenset(
    (
        "in", "on", "at", "of", "to", "for", "from", "with", "by", "about", "is", "are", "was", "were", "be",
        "been", "did", "do", "does", "done", "have", "has", "had", "will", "would", "can", "could", "should",
        "my", "our", "your", "their", "his", "her", "its", "the", "a", "an", "and", "or", "not", "what",
        "which", "who", "where", "when", "why", "how", "much", "many", "any", "some", "all",
    )
)  # fmt: skip


class EntityLexicon:
    """The names (and aliases) of known entities, for whole-word matching in new content and in queries.

    Everything is in memory, so asking whether a query names any entity costs no store access. Thread-safe.
    """

    def __init__(self) -> None:
        self._names: dict[str, str] = {}  # normalised name or alias -> recorded name
        # The same phrase given to other entities since (a name, or another team's alias): matching picks the
        # first, and a caller who may not learn that one's alias is matched to these instead (``claimants``).
        self._also: dict[str, list[str]] = {}
        self._by_token: dict[str, set[str]] = {}  # word -> normalised keys containing it
        self._variants: dict[str, set[str]] = {}  # a word and its one-deletion variants -> words (5+ chars)
        self._mentions: dict[str, int] = {}  # normalised name -> memories mentioning it (approximate, grows)
        # normalised name -> scope -> memories there mentioning it: what a reader's hub status is counted on
        self._mentions_in: dict[str, dict[str, int]] = {}
        self._relations: dict[str, int] = {}  # normalised name -> relations touching it (approximate, grows)
        self._sounds: dict[str, set[str]] = {}  # sound key (``storage.language.resolve``) -> known words
        # entity name -> (name an accepted SAME_AS proposal joined it to, the scopes where that join holds)
        self._same: dict[str, set[tuple[str, frozenset[str]]]] = {}
        self._paired: set[tuple[str, str, str]] = set()  # (key, key, scopes) of every SAME_AS proposal
        self._version = 0  # bumped whenever counts may have fallen (clear, replace_with): see ``version``
        self._lock = threading.Lock()

    def mentioned(self, name: str, times: int = 1, scopes: Iterable[str] = ()) -> None:
        """Count memories mentioning ``name``, over all and in each of ``scopes`` (at write time; reset with
        ``clear``). Only bounds query cost."""
        key = _norm(name)
        with self._lock:
            self._mentions[key] = self._mentions.get(key, 0) + times
            if scopes:
                per = self._mentions_in.setdefault(key, {})
                for s in set(scopes):
                    per[s] = per.get(s, 0) + times

    def mentioned_in(self, name: str, scope: str, times: int) -> None:
        """Count ``times`` memories in ``scope`` mentioning ``name`` (the store's counts, at a rebuild)."""
        key = _norm(name)
        with self._lock:
            per = self._mentions_in.setdefault(key, {})
            per[scope] = per.get(scope, 0) + times

    def mentions(self, name: str, scopes: Iterable[str] | None = None) -> int:
        """Memories mentioning ``name``: all of them, or those in ``scopes`` (a memory in two of them counts
        twice). A reader's hub status is counted in its own scopes, so another team's writes never change it."""
        key = _norm(name)
        with self._lock:
            if scopes is None:
                return self._mentions.get(key, 0)
            per = self._mentions_in.get(key)
            return 0 if per is None else sum(per.get(s, 0) for s in set(scopes))

    def related(self, name: str, times: int = 1) -> None:
        """Count relations touching ``name`` (at write time; reset with ``clear``)."""
        key = _norm(name)
        with self._lock:
            self._relations[key] = self._relations.get(key, 0) + times

    def relations(self, name: str) -> int:
        """Relations touching ``name`` as counted; zero means the graph need not be asked."""
        with self._lock:
            return self._relations.get(_norm(name), 0)

    @property
    def version(self) -> int:
        """Changes when the lexicon is cleared or replaced (an erasure, a restore): what was read of the graph
        beside it, such as an entity's relations, may have lost edges since."""
        with self._lock:
            return self._version

    def add(self, name: str, aliases: Iterable[str] = ()) -> None:
        with self._lock:
            for alias in (name, *aliases):
                key = _norm(alias)
                if not key or len(key.split()) > MAX_NGRAM:
                    continue
                held = self._names.get(key)
                if held is not None:
                    # Another entity the phrase was given to; the same entity in another capitalisation is
                    # not one ("KATHERINE JOHNSON" and "katherine johnson" are one node, one candidate).
                    also = self._also.setdefault(key, [])
                    ids = {entity_key(held), *map(entity_key, also)}
                    if entity_key(name) not in ids and len(also) < _MAX_POSTINGS:
                        also.append(name)
                    continue
                self._names[key] = name
                for word in key.split():
                    self._by_token.setdefault(word, set()).add(key)
                    if len(word) >= 2 and len(word) <= FUZZY_MAX_CHARS:
                        self._sounds.setdefault(sound_key(word), set()).add(word)
                    if _fuzzy_size(word):
                        for variant in (word, *_deletions(word)):
                            self._variants.setdefault(variant, set()).add(word)

    def clear(self) -> None:
        with self._lock:
            self._names.clear()
            self._also.clear()
            self._by_token.clear()
            self._variants.clear()
            self._mentions.clear()
            self._mentions_in.clear()
            self._relations.clear()
            self._sounds.clear()
            self._same.clear()
            self._paired.clear()
            self._version += 1

    def replace_with(self, other: EntityLexicon) -> None:
        """Take ``other``'s contents in one step (``other`` must not be used afterwards)."""
        with other._lock:
            state = (other._names, other._by_token, other._variants, other._mentions, other._relations)
            also, sounds, same, paired = other._also, other._sounds, other._same, other._paired
            mentions_in = other._mentions_in
        with self._lock:
            self._names, self._by_token, self._variants, self._mentions, self._relations = state
            self._also, self._sounds, self._same, self._paired = also, sounds, same, paired
            self._mentions_in = mentions_in
            self._version += 1

    def join(self, a: str, b: str, scopes: Iterable[str]) -> None:
        """Entities ``a`` and ``b`` are one for recall in ``scopes`` (an accepted SAME_AS proposal raised there)."""
        where = frozenset(scopes)
        with self._lock:
            self._same.setdefault(a, set()).add((b, where))
            self._same.setdefault(b, set()).add((a, where))
            self._version += 1

    def part(self, a: str, b: str, scopes: Iterable[str]) -> None:
        """Undo ``join``: ``a`` and ``b`` are two entities again in ``scopes``."""
        where = frozenset(scopes)
        with self._lock:
            for x, y in ((a, b), (b, a)):
                linked = self._same.get(x)
                if linked is not None:
                    linked.discard((y, where))
                    if not linked:
                        del self._same[x]
            self._version += 1

    def paired(self, a: str, b: str, scopes: Iterable[str], *, add: bool = False) -> bool:
        """Whether entities ``a`` and ``b`` have a SAME_AS proposal raised in ``scopes`` (any status; ``add``
        records one first): resolution then leaves the pair alone there, so a rejected pair is not proposed
        again at every mention, while a team that cannot see another's proposal still gets its own."""
        ka, kb = _norm(a), _norm(b)
        key = (min(ka, kb), max(ka, kb), ",".join(sorted(scopes)))
        with self._lock:
            if add:
                self._paired.add(key)
            return key in self._paired

    def same_as(self, name: str, scopes: Iterable[str] | None = None) -> list[str]:
        """Every entity joined to ``name`` by accepted proposals raised in any of ``scopes`` (all, when None),
        directly or through others; ``name`` itself left out."""
        wanted = None if scopes is None else set(scopes)
        with self._lock:
            seen = {name}
            todo = [name]
            while todo and len(seen) <= _MAX_SAME:
                for other, where in self._same.get(todo.pop(), ()):
                    if other not in seen and (wanted is None or not wanted.isdisjoint(where)):
                        seen.add(other)
                        todo.append(other)
        seen.discard(name)
        return sorted(seen)

    def similar(self, name: str) -> list[tuple[str, str]]:
        """Known entities that might be ``name`` spelt another way: ``(entity name, the key that matched)``
        pairs to judge with ``storage.language.resolve.judge``, at most ``MAX_CANDIDATES``, never ``name``.

        Blocking keeps it cheap at any size: each word of ``name`` expands to the known words equal to it, one
        edit from it (words of 5+ letters, through the deletion index ``match`` uses) or sounding like it. The
        names with as many words that contain an expansion of the word with the fewest names are the pool;
        a name is kept when each of its words is in the expansion of the word at its place (or both are long
        enough, 7+ letters, to be two edits apart). A word with no expansion at all rules out every name."""
        key = _norm(name)
        words = key.split()
        if not words or len(words) > MAX_NGRAM:
            return []
        with self._lock:
            near = [self._near_words(w) for w in words]
            if any(not n for n in near):
                return []
            sizes = [
                sum(len(self._by_token.get(k, ())) for k in n) if w not in _QUERY_STOP else None
                for w, n in zip(words, near, strict=True)
            ]
            counted = [(s, i) for i, s in enumerate(sizes) if s is not None]
            if not counted:
                return []
            pool = {k for n in near[min(counted)[1]] for k in self._by_token.get(n, ())}
            kept = []
            for k in pool:
                kw = k.split()
                if len(kw) != len(words) or k == key:
                    continue
                if all(
                    x in n or (len(x) >= 7 and len(w) >= 7) for x, n, w in zip(kw, near, words, strict=True)
                ):
                    kept.append(k)
            out: list[tuple[str, str]] = []
            for k in heapq.nsmallest(MAX_CANDIDATES, kept):
                for entity in (self._names[k], *self._also.get(k, ())):
                    out.append((entity, k))
        return out[:MAX_CANDIDATES]

    def sharing_a_word(self, name: str) -> list[tuple[str, str]]:
        """Known names of as many words as ``name`` (two or three) that share one of its words exactly ("Shawn
        Murphy" for "Sean Murphy"): ``(entity name, key)``, never ``name``; the block of the meaning tier. A word
        in more than ``MAX_CANDIDATES`` names picks no one out and is skipped; at most ``MAX_CANDIDATES`` in
        all."""
        key = _norm(name)
        words = key.split()
        if not 2 <= len(words) <= 3:
            return []  # a lone word shares nothing but itself; longer names share words for many reasons
        with self._lock:
            pool: set[str] = set()
            for w in words:
                keys = self._by_token.get(w, ())
                if w not in _QUERY_STOP and len(keys) <= MAX_CANDIDATES:
                    pool.update(k for k in keys if k != key and len(k.split()) == len(words))
            out = [(self._names[k], k) for k in heapq.nsmallest(MAX_CANDIDATES, pool)]
        return out

    def surnamed(self, word: str) -> list[tuple[str, str]]:
        """Known names of two or three words whose last word is ``word`` (one word, normalised) and whose
        other words differ from it: ``(entity name, key)``, none when more than ``MAX_CANDIDATES`` names
        contain the word (a common word picks no one out)."""
        w = _norm(word)
        if not w or " " in w:
            return []
        with self._lock:
            keys = self._by_token.get(w, ())
            if len(keys) > MAX_CANDIDATES:
                return []
            out = []
            for k in sorted(keys):
                kw = k.split()
                if 2 <= len(kw) <= 3 and kw[-1] == w and w not in kw[:-1]:
                    out.append((self._names[k], k))
        return out

    def _near_words(self, w: str) -> set[str]:
        """Known words equal to ``w``, one edit from it (5+ letters), sounding like it or another form of the same
        given name ("robert" for "bob"). Call under the lock."""
        out = {w} if w in self._by_token else set()
        if _fuzzy_size(w):
            for variant in (w, *_deletions(w)):
                out.update(k for k in self._variants.get(variant, ()) if _one_edit(w, k))
        sounds = self._sounds.get(sound_key(w), set())
        if len(sounds) <= _MAX_SOUNDS:  # a sound shared by more words picks none out (like a common word)
            out.update(sounds)
        out.update(k for k in forms(w) if k in self._by_token)  # "robert" for "bob" (the nickname tier)
        return out

    def claimants(self, key: str) -> list[str]:
        """Every entity the phrase ``key`` (normalised) was given to, as name or alias, the one matched first."""
        with self._lock:
            held = self._names.get(key)
            return [] if held is None else [held, *self._also.get(key, ())]

    def __len__(self) -> int:
        """Names and aliases known."""
        with self._lock:
            return len(self._names)

    def find(self, text: str) -> list[str]:
        return [m.name for m in self._exact(_words(text))]

    def _exact(self, words: list[str]) -> list[EntityMatch]:
        found: dict[str, EntityMatch] = {}
        with self._lock:
            if not self._names:
                return []
            for i in range(len(words)):
                for n in range(min(MAX_NGRAM, len(words) - i), 0, -1):
                    key = " ".join(words[i : i + n])
                    name = self._names.get(key)
                    if name is None and (base := _unpossessed(words[i + n - 1])) is not None:
                        key = " ".join([*words[i : i + n - 1], base])  # "Ana's dentist" names Ana
                        name = self._names.get(key)
                    if name is not None:
                        how: Literal["exact", "alias"] = "exact" if key == _norm(name) else "alias"
                        found.setdefault(name, EntityMatch(name, how, key, key))
                        break
        return list(found.values())

    def match(self, text: str, *, limit: int = 8, fuzzy: bool = True) -> list[EntityMatch]:
        """Known entities named in ``text``, best first, at most ``limit``.

        ``exact``: a run of words equal to an entity's name; ``alias``: equal to one of its aliases;
        ``token``: every word of a multi-word name present in any order ("Aria Hotel" for "Hotel Aria");
        ``fuzzy``: as token, with words of 5+ characters allowed one edit (insert, delete, substitute or swap
        two neighbours: "Lisbn", "Portgual"). Words shared by more than 64 known names, and function words,
        never select a name on their own. Cost: dictionary lookups proportional to the query's length.
        """
        words = _words(text)
        if limit < 1 or not words:
            return []
        found = {m.name: m for m in self._exact(words)}
        query = set(words) | {b for w in words if (b := _unpossessed(w)) is not None}
        with self._lock:
            if not self._names:
                return []
            near: dict[str, str] = {}  # known word -> the query word one edit away from it
            if fuzzy:
                for w in query - _QUERY_STOP:
                    if not _fuzzy_size(w) or w in self._by_token:
                        continue
                    for variant in (w, *_deletions(w)):
                        for known in self._variants.get(variant, ()):
                            if known not in near and _one_edit(w, known):
                                near[known] = w
            keys: set[str] = set()
            for w in (query - _QUERY_STOP) | set(near):
                postings = self._by_token.get(w, ())
                if len(postings) <= _MAX_POSTINGS:
                    keys.update(postings)
            for key in sorted(keys):
                name = self._names[key]
                if name in found:
                    continue
                key_words = key.split()
                if all(k in _QUERY_STOP for k in key_words):
                    continue  # "The Who" must be named exactly
                if not all(k in query or k in near for k in key_words):
                    continue
                typo = any(k not in query for k in key_words)
                said = " ".join(near.get(k, k) for k in key_words)
                found[name] = EntityMatch(name, "fuzzy" if typo else "token", said, key)
        ranked = sorted(found.values(), key=lambda m: (_HOW_ORDER[m.how], -len(m.text), m.name))
        return ranked[:limit]


def _words(text: str) -> list[str]:
    return [m.group(0).strip(".'’-&").casefold() for m in _TOKEN.finditer(text)]


def _unpossessed(word: str) -> str | None:
    """``ana`` for ``ana's`` (a name's possessive); None for a word without one. Names that end in 's
    ("McDonald's") still match as written: this is only tried when the word as written matched nothing."""
    if len(word) > 2 and word.endswith(("'s", "\u2019s")):
        return word[:-2]
    return None


def _fuzzy_size(word: str) -> bool:
    return FUZZY_MIN_CHARS <= len(word) <= FUZZY_MAX_CHARS


def _deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


def _one_edit(a: str, b: str) -> bool:
    """True when a and b differ by exactly one insertion, deletion, substitution or adjacent swap."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        return (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    i = next((i for i in range(len(short)) if short[i] != long_[i]), len(short))
    return short[i:] == long_[i + 1 :]


def name_key(name: str) -> str:
    """The lexicon's key for a name or alias (case-folded words, edge punctuation stripped)."""
    return _norm(name)


def _norm(name: str) -> str:
    return " ".join(w.strip(".'’-&").casefold() for w in _TOKEN.findall(name))


def _after_sentence_end(text: str, start: int) -> bool:
    """Whether ``text[:start]`` is empty or ends in a sentence end, a newline or an opening quote or bracket,
    then optional white space. Looks back only over that white space (a regex over the whole prefix made
    extraction quadratic in the content's length)."""
    if start == 0:
        return True
    i = start
    while i > 0 and text[i - 1].isspace():
        if text[i - 1] == "\n":
            return True
        i -= 1
    if i > 0 and text[i - 1] == ".":
        j = i - 1
        while j > 0 and text[j - 1].isalpha():
            j -= 1
        if text[j : i - 1].casefold() in PERSON_TITLES:
            return False
    return i > 0 and text[i - 1] in _SENTENCE_ENDS


def capitalised_spans(text: str) -> list[str]:
    """Runs of capitalised words that look like names ("Ana Lima", "Bank of America", "NASA")."""
    out: dict[str, None] = {}
    for m in _CAP_RUN.finditer(text):
        words = m.group(0).split()
        # A sentence-initial capital says nothing: drop leading function words there, and a lone
        # sentence-initial word unless it is an all-caps acronym.
        sentence_start = _after_sentence_end(text, m.start())
        while words and words[0].strip(".'’").casefold() in _NOT_ENTITIES | PERSON_TITLES:
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
            if word.casefold() in _NOT_ENTITIES | PERSON_TITLES or len(word) < 2:
                continue
        name = " ".join(w.strip(".,'’") for w in words)
        if name:
            out.setdefault(name, None)
    return list(out)


def extract(
    content: str,
    *,
    written_at: datetime,
    lexicon: EntityLexicon,
    given: Sequence[EntityIn] = (),
    times: bool = True,
) -> Extraction:
    """Entities and time expressions in ``content``. Caller-given entities come first and win on type.

    ``times=False`` skips the time scan (the caller already knows the event time: it is a third of the cost of
    extracting from a long message)."""
    entities: dict[str, EntityIn] = {}
    for e in given:
        entities.setdefault(_norm(e.name), e)
    found_names = 0
    for name in (*lexicon.find(content), *capitalised_spans(content)):
        if found_names >= MAX_ENTITIES:
            break
        key = _norm(name)
        if key and key not in entities and len(name) <= MAX_NAME_CHARS:
            entities[key] = EntityIn(name=name)
            found_names += 1
    found = tuple(find_times(content, written_at, clock=True)) if times else ()
    return Extraction(entities=tuple(entities.values()), times=found)
