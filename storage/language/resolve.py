"""Entity resolution, the pure part: is a new name another spelling of a known one?

Tiers after the exact name or alias (the lexicon's own lookup): **fuzzy** (a word one or two edits away) and
**phonetic** (a word that sounds the same: "Steven" and "Stephen", "Smith" and "Smyth"). Names are compared word
by word, in order, and must have as many words: a word that is neither equal, near nor alike rules the pair out,
so "Sam Park" is never "Sam Lee", and a lone "Sam" is never guessed to be either of them.

A pair is **confident** (the mention is linked to the known entity) only when one word differs, by a keyboard
slip (two neighbours swapped, a letter doubled or undoubled) in a word of at least 6 letters beside an equal word
("Katherine Jonhson", "Alessandro Moreti") or of at least 7 letters alone ("Portgual"), or sounds alike and is at
most two edits away in a word of at least 6 letters beside an equal word, ending in the same letter ("Steven
Hawking"; "Alexandra" beside "Alexander" is another person's name). Anything weaker that
still passes ("Jon Smith" for "John Smith", "Katherine Johnston" for "Katherine Johnson") is **ambiguous**: the
caller gets a pending ``SAME_AS`` proposal, never a merge. Short names that differ only in their vowels
("Tom"/"Tim", "Paul"/"Paula", "Maria"/"Mario", "Luna"/"Lena") and words with digits ("OPS-3386"/"OPS-8066") are
different names and not even proposed. A lone word that is the last word
of a known name of two or three words ("Okafor", or "Dr. Okafor", beside "Ngozi Okafor") is the **partial** tier:
proposed, never linked (``judge_partial``). A given name's familiar form beside equal other words ("Bob Fischer"
beside "Robert Fischer", ``storage.language.nicknames``) is the **nickname** tier: proposed, never linked. Blocking (which names
are compared at all) is the lexicon's job (``EntityLexicon.similar``); this module only judges pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from storage.language.nicknames import familiar

Tier = Literal["fuzzy", "phonetic", "partial", "nickname", "meaning"]

# The meaning tier's cosine threshold (all-MiniLM-L6-v2), chosen on the development pairs of
# docs/benchmarks/resolution-embedding.md: there it proposed no pair of different entities.
MEANING_THRESHOLD = 0.80

_VOWELS = frozenset("aeiouy")
_FRONT = frozenset("eiy")


@dataclass(frozen=True, slots=True)
class Judgement:
    """How a new name relates to a known one: its tier, a similarity in [0, 1] and whether it may link."""

    tier: Tier
    score: float
    confident: bool


def sound_key(word: str) -> str:
    """A small Metaphone-like key: words that sound alike in English get the same key ("stephen", "steven" ->
    "STFN"; "smith", "smyth" -> "SM0"; "jon", "john" -> "JN"). Letters only; empty for a word without any."""
    w = "".join(ch for ch in word.casefold() if "a" <= ch <= "z")
    if not w:
        return ""
    for head, repl in (
        ("kn", "n"),
        ("gn", "n"),
        ("pn", "n"),
        ("wr", "r"),
        ("ps", "s"),
        ("wh", "w"),
        ("x", "s"),
    ):
        if w.startswith(head):
            w = repl + w[len(head) :]
            break
    if w.startswith("sch"):  # German "Sch" is English "Sh" ("Schmidt", "Shmidt")
        w = "sh" + w[3:]
    out: list[str] = []
    i = 0
    while i < len(w):
        ch, nxt = w[i], w[i + 1 : i + 2]
        step = 1
        code = ""
        if ch in _VOWELS:
            code = "A" if i == 0 else ""
            if ch == "y" and nxt and nxt in _VOWELS and i > 0:
                code = "Y"
        elif ch == "p" and nxt == "h":
            code, step = "F", 2
        elif ch == "t" and nxt == "h":
            code, step = "0", 2
        elif ch in "cs" and nxt == "h":
            code, step = "X", 2
        elif ch == "c" and nxt == "k":
            code, step = "K", 2
        elif ch == "c":
            code = "S" if nxt and nxt in _FRONT else "K"
        elif ch == "g":
            if nxt == "h":
                code, step = ("G" if i == 0 else ""), 2
            else:
                code = "J" if nxt and nxt in _FRONT else "K"
        elif ch in "hw":
            # Sounded only before a vowel ("Mohammed"), silent after one ("John", "Shawn").
            prev_vowel = i > 0 and w[i - 1] in _VOWELS
            code = ch.upper() if nxt and nxt in _VOWELS and not prev_vowel else ""
        else:
            code = {"q": "K", "x": "KS", "z": "S", "v": "F", "d": "T", "b": "B"}.get(ch, ch.upper())
        if code and not (out and out[-1] == code):
            out.append(code)
        i += step
    return "".join(out)


def edits(a: str, b: str, cap: int = 3) -> int:
    """Optimal-string-alignment distance (insert, delete, substitute, swap neighbours), capped at ``cap``."""
    if abs(len(a) - len(b)) >= cap:
        return cap
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) >= cap:
            return cap
        prev2, prev = prev, cur
    return min(prev[-1], cap)


def judge(new: str, known: str) -> Judgement | None:
    """Whether ``known`` may be the entity ``new`` names (both normalised: case-folded words, see
    ``storage.language.extraction.name_key``). None when they are equal or plainly different."""
    a, b = new.split(), known.split()
    if len(a) != len(b) or a == b:
        return None
    differing = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
    # A name of two or three words may differ in one of them; longer ones in at most a third of theirs.
    if len(differing) > max(1, len(a) // 3):
        return None
    tiers: list[Tier] = []
    total = 0.0
    # Where a familiar form may stand: a given name's place, any but the last.
    last = len(a) - 1
    for place, x, y in ((i, x, y) for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y):
        d = edits(x, y)
        shortest = min(len(x), len(y))
        if any(ch.isdigit() for ch in x + y):
            return None  # codes and numbers ("OPS-3386", "Q3") differ by any character
        # A given name's familiar form beside equal other words ("Bob Fischer", "Robert Fischer"), when no
        # spelling tier holds: Bob may be Robert, or his son. Never the last word (a surname), never a lone word.
        nickname = place < last and familiar(x, y)
        if shortest < 6 and _skeleton(x) == _skeleton(y) and not nickname:
            # Short names that differ only in vowels are other names: Tom and Tim, Paul and Paula, Maria and
            # Mario, Luna and Lena, Kiran and Korean.
            return None
        alike = sound_key(x) == sound_key(y) != ""
        if d == 1 and shortest >= (5 if len(a) > 1 else 6):
            # A lone word of five letters is one edit from too many others ("Felix", "Helix").
            tiers.append("fuzzy")
        elif alike and d <= max(2, shortest // 2):
            # Short words one edit apart are different names unless they sound the same ("Jon", "John"; never
            # "Sam", "Pam").
            tiers.append("phonetic")
        elif d == 2 and shortest >= 7:
            tiers.append("fuzzy")
        elif nickname:
            tiers.append("nickname")
            total += 0.5
            continue
        else:
            return None
        total += 1 - min(d, 3) / max(len(x), len(y))
    equal = len(a) - len(differing)
    score = round((equal + total) / len(a), 3)
    tier: Tier = "nickname" if "nickname" in tiers else "phonetic" if "phonetic" in tiers else "fuzzy"
    confident = False
    if len(differing) == 1 and tier != "nickname":
        (x, y), d = differing[0], edits(*differing[0])
        shortest = min(len(x), len(y))
        if tier == "fuzzy" and d == 1:
            # Only the slips of a keyboard link on their own: two neighbours swapped ("Jonhson") or a doubled
            # letter doubled or not ("Moreti", "Barcelonna"). Any other edit may be another real name
            # ("Johnston" beside "Johnson"), so it is proposed.
            confident = shortest >= (6 if equal else 7) and _slip(x, y)
        elif tier == "phonetic":
            # A sound-alike whose last letter differs is often the other sex's form of the name, another person
            # (Alexander and Alexandra, Daniel and Danielle, Stefan and Stefanie): proposed, never linked.
            confident = bool(equal) and shortest >= 6 and d <= 2 and x[-1] == y[-1]
    return Judgement(tier, score, confident)


def judge_partial(new: str, known: str) -> Judgement | None:
    """Whether a lone word (``new``, normalised) may be the person ``known`` names by their last word: "okafor"
    (from "Dr. Okafor") beside "ngozi okafor". Never confident (several people share a surname), so at most
    proposed; never for a first name ("sam" beside "sam park" is anyone called Sam)."""
    a, b = new.split(), known.split()
    if len(a) != 1 or not 2 <= len(b) <= 3 or b[-1] != a[0] or a[0] in b[:-1]:
        return None
    if len(a[0]) < 3 or any(ch.isdigit() for ch in a[0]):
        return None
    return Judgement("partial", round(1 / len(b), 3), False)


def _skeleton(word: str) -> str:
    return "".join(ch for ch in word if ch not in "aeiou")


def _slip(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by a swap of two neighbours or by one letter doubled."""
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    if len(long_) != len(short) + 1:
        return False
    i = next((i for i in range(len(short)) if short[i] != long_[i]), len(short))
    doubled = (i > 0 and long_[i] == long_[i - 1]) or (i + 1 < len(long_) and long_[i] == long_[i + 1])
    return doubled and short[i:] == long_[i + 1 :]
