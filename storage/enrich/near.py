"""Near-duplicates by content: is a new statement a paraphrase of a stored one?

The signal is the cosine between the two memories' embeddings (the write already computed the new one), at
least ``NEAR_COSINE``, and a lexical guard that turns away what embeddings cannot tell apart: a different
number or date, a different assertion status (negated, hypothetical, uncertain, reported, ended), another
tense ("lives" / "lived"), the opposite attitude ("like" / "hate"), one value swapped for another ("Paris" /
"Berlin") and a statement that adds detail to the stored one. The threshold and the guard were chosen on the
hand-written pairs of ``tests/storage/data/near_duplicate_pairs.jsonl``; ``docs/benchmarks/near-duplicates.md``
gives their precision and recall. A negated or hypothetical statement therefore never folds into an asserted
one, whatever its cosine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from storage.enrich import _words as w
from storage.enrich._text import tokens

NEAR_COSINE = 0.80  # at least this cosine between the two embeddings (all-MiniLM-L6-v2)
SWAP_COSINE = 0.90  # one common word swapped for another ("afraid" / "fear"): a synonym only this close
NEAR_K = 8  # candidates per write: the best matches by words in the target scopes

_NUMBER_WORDS = w.word_set(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
    seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million
    billion first second third fourth fifth sixth seventh eighth ninth tenth once twice half dozen"""
)
_CALENDAR = w.word_set(
    """january february march april may june july august september october november december jan feb mar apr
    jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday mondays tuesdays
    wednesdays thursdays fridays saturdays sundays today tomorrow yesterday tonight morning afternoon evening
    night weekend weekends weekly daily monthly yearly"""
)
_PAST = w.word_set("was were had did used ago formerly previously former ex earlier")
_LIKE = w.word_set(
    "like likes liked love loves loved enjoy enjoys enjoyed prefer prefers preferred adore fond"
)
_DISLIKE = w.word_set("dislike dislikes disliked hate hates hated detest detests loathe loathes despise")
# Words that say nothing of what is stated: left out when comparing two statements' words.
_FUNCTION = w.word_set(
    """a an the this that these those some any my our his her their your its i me we us you he she it they
    them him am is are be been being 's 'm 're 've do does have has of to in on at for with by from as and
    or but so really very just also actually always quite pretty too , . ; : ! ? - — ( ) " '"""
)
_ORDERED = w.word_set("over than rather instead before after vs versus from to more less better worse")
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class _Reading:
    """What the guard compares of one statement."""

    words: tuple[str, ...]  # lower-cased tokens, contractions split ("don't" -> "do", "not")
    content: frozenset[str]  # the words that carry meaning (function words left out)
    numbers: tuple[str, ...]  # digits, number words and calendar words, in order
    status: frozenset[str]  # assertion cues present: negated, ended, hypothetical, uncertain, reported
    past: bool
    attitude: frozenset[str]  # "+" for like/love/enjoy/prefer, "-" for dislike/hate
    names: frozenset[str]  # words written with a capital past the first one (names: "Paris", "Acme")


def _has(words: tuple[str, ...], present: frozenset[str], cue: tuple[str, ...]) -> bool:
    if cue[0] not in present:  # most cues are absent: a set lookup, not a scan
        return False
    n = len(cue)
    return n == 1 or any(words[i : i + n] == cue for i in range(len(words) - n + 1))


@lru_cache(maxsize=4096)
def _read(text: str) -> _Reading:
    toks = [t for t in tokens(text) if t.low]
    words = tuple(t.low for t in toks)
    present = frozenset(words)
    status = set()
    if any(x in w.NEGATION for x in words):
        status.add("negated")
    for name, cues in (
        ("ended", w.ENDED),
        ("hypothetical", w.HYPOTHETICAL),
        ("uncertain", w.UNCERTAIN),
        ("reported", w.REPORTED),
    ):
        if any(_has(words, present, cue) for cue in cues):
            status.add(name)
    numbers = tuple(x for x in words if _DIGITS.search(x) or x in _NUMBER_WORDS or x in _CALENDAR) + tuple(
        _DIGITS.findall(text)
    )
    attitude = {"+" for x in words if x in _LIKE} | {"-" for x in words if x in _DISLIKE}
    return _Reading(
        words=words,
        content=frozenset(x for x in words if x not in _FUNCTION),
        numbers=tuple(sorted(numbers)),
        status=frozenset(status),
        past=any(x in _PAST for x in words),
        attitude=frozenset(attitude),
        names=frozenset(t.low for t in toks[1:] if t.cap),
    )


def _stem(word: str) -> str:
    """A crude stem, only to tell an inflection ("lives", "lived", "peanuts") from another word."""
    for suffix in ("ing", "ed", "es", "s", "d"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def same_claim(stored: str, new: str, cosine: float) -> bool:
    """Whether ``new`` may state what ``stored`` states, as far as words tell, given their ``cosine``.

    False when they differ in a number or date, in assertion status, in tense or attitude, when one value
    takes another's place (a name, or a common word unless the cosine is at least ``SWAP_COSINE``), when the
    same words are said in another order around a comparison ("tea over coffee"), or when ``new`` adds detail
    to ``stored``."""
    a, b = _read(stored), _read(new)
    if a.numbers != b.numbers or a.status != b.status or a.past != b.past or a.attitude != b.attitude:
        return False
    only_a, only_b = a.content - b.content, b.content - a.content
    stems_a, stems_b = {_stem(x) for x in only_a}, {_stem(x) for x in only_b}
    if only_a and only_b and stems_a == stems_b:
        # The same words inflected otherwise ("lives" / "lived", "changes" / "changed"): a tense or a form
        # the word lists do not know, so not taken for a paraphrase; plurals ("peanut" / "peanuts") are the
        # same claim.
        return all(
            x in (y + "s", y + "es") or y in (x + "s", x + "es")
            for x in only_a
            for y in only_b
            if _stem(x) == _stem(y)
        )
    if len(only_a) == 1 and len(only_b) == 1:
        # One word swapped for another: another value ("Paris" / "Berlin", "dogs" / "cats", "sister" /
        # "cousin"), unless a synonym ("afraid" / "fear"), which only a high cosine tells.
        return not ((only_a | only_b) & (a.names | b.names)) and cosine >= SWAP_COSINE
    if not only_a and not only_b and a.words != b.words and _ORDERED & set(a.words):
        return False  # "tea over coffee" / "coffee over tea": the same words, the other way round
    # Everything stored, and more: the new statement adds detail.
    return not (only_b and not (stems_a - stems_b))


def is_near(stored: str, new: str, cosine: float) -> bool:
    """``same_claim`` at a cosine of at least ``NEAR_COSINE`` (identical text is not near: it is the same)."""
    return cosine >= NEAR_COSINE and stored != new and same_claim(stored, new, cosine)
