"""Tokens and sentences for the offline extractor: one linear regex pass, contractions split.

Every later step walks token lists with fixed-size windows, so the cost of extraction is linear in the
content's length whatever the content is (a 31 KB single "word" is one junk token).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_TOKEN_CHARS = 48  # longer "words" are noise (hashes, base64, hostile input): never names, never cues
_TOKEN = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]", re.UNICODE)
_SUFFIXES = ("'m", "'re", "'s", "'ve", "'d", "'ll")
_NEG_STEMS = {"ca": "can", "wo": "will", "sha": "shall"}
_ABBREVIATIONS = frozenset(("dr", "mr", "mrs", "ms", "st", "prof", "jr", "sr", "vs", "etc", "inc", "ltd", "co",
                            "corp", "mt", "ft", "no", "e.g", "i.e"))  # fmt: skip
_BOUNDARY = frozenset((".", "!", "?", ";"))


@dataclass(frozen=True, slots=True)
class Tok:
    text: str  # as written (a split contraction keeps its own piece: "does", "n't" -> "not")
    low: str  # casefolded, curly apostrophe straightened; "" for junk
    start: int
    end: int

    @property
    def cap(self) -> bool:
        """Starts with a capital letter (names, acronyms); junk and one-letter "I" are not capitalised."""
        return bool(self.low) and self.text[:1].isupper() and self.low != "i"


def tokens(text: str) -> list[Tok]:
    out: list[Tok] = []
    for m in _TOKEN.finditer(text):
        raw, start, end = m.group(0), m.start(), m.end()
        if len(raw) > MAX_TOKEN_CHARS:
            out.append(Tok(raw[:1], "", start, end))
            continue
        low = raw.casefold().replace("’", "'")
        if low.endswith("n't") and len(low) > 3:
            stem = low[:-3]
            cut = end - 3
            out.append(Tok(raw[: len(stem)], _NEG_STEMS.get(stem, stem), start, cut))
            out.append(Tok(raw[len(stem) :], "not", cut, end))
            continue
        for suffix in _SUFFIXES:
            if low.endswith(suffix) and len(low) > len(suffix):
                cut = end - len(suffix)
                out.append(Tok(raw[: -len(suffix)], low[: -len(suffix)], start, cut))
                out.append(Tok(raw[-len(suffix) :], suffix, cut, end))
                break
        else:
            out.append(Tok(raw, low, start, end))
    return out


def sentences(text: str, toks: list[Tok]) -> list[list[Tok]]:
    """Split at . ! ? ; and line breaks. A period followed directly by a character ("3.5", "acme.com") or
    after a common abbreviation ("Dr.") ends nothing."""
    out: list[list[Tok]] = []
    cur: list[Tok] = []
    for i, t in enumerate(toks):
        if cur and "\n" in text[cur[-1].end : t.start]:
            out.append(cur)
            cur = []
        if t.low in _BOUNDARY:
            glued = t.end < len(text) and not text[t.end].isspace()
            abbrev = t.low == "." and cur and cur[-1].low in _ABBREVIATIONS
            if t.low == "." and (glued or abbrev):
                cur.append(t)
                continue
            if t.low == "?" and cur:
                cur.append(t)  # kept: a question is not an assertion
            if cur:
                out.append(cur)
            cur = []
            continue
        cur.append(t)
        del i
    if cur:
        out.append(cur)
    return out


def has_seq(lows: list[str], seq: tuple[str, ...], lo: int, hi: int) -> int:
    """Index of the first occurrence of ``seq`` in ``lows[lo:hi]``, or -1."""
    n = len(seq)
    for i in range(max(lo, 0), min(hi, len(lows)) - n + 1):
        if lows[i] == seq[0] and tuple(lows[i : i + n]) == seq:
            return i
    return -1
