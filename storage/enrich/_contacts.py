"""Phone numbers and e-mail addresses stated for someone ("my email is ana@example.com")."""

from __future__ import annotations

import re

from storage.enrich._statements import Context, Statement, _status
from storage.enrich._text import Tok

MAX_SENTENCE_CHARS = 600  # a contact detail sits in a short sentence; longer ones are not scanned
_EMAIL = re.compile(r"[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,6}")
_PHONE = re.compile(r"\+?\d[\d ().-]{5,18}\d")
_PHONE_WORDS = frozenset(("phone", "number", "mobile", "cell", "telephone", "tel", "whatsapp"))
_EMAIL_WORDS = frozenset(("email", "e-mail", "mail", "address"))


def read(sents: list[list[Tok]], text: str, ctx: Context) -> list[Statement]:
    out: list[Statement] = []
    for n, sent in enumerate(sents):
        if not sent or sent[-1].end - sent[0].start > MAX_SENTENCE_CHARS:
            continue
        lows = [t.low for t in sent]
        span = text[sent[0].start : sent[-1].end]
        for pred, words, rx in (("email", _EMAIL_WORDS, _EMAIL), ("phone", _PHONE_WORDS, _PHONE)):
            cue = next((k for k, low in enumerate(lows) if low in words), -1)
            if cue < 0 or (pred == "email" and "@" not in span):
                continue
            m = rx.search(span)
            if m is None:
                continue
            subj = _owner(sent, lows, cue, ctx)
            if subj is None:
                continue
            status, ended = _status(sent, lows, cue, cue + 1)
            value = m.group(0).strip().rstrip(".")
            out.append(
                Statement(subj, pred, value, status, "person", "thing", ended, n, sent[0].start, sent[-1].end)
            )
    return out


def _owner(sent: list[Tok], lows: list[str], cue: int, ctx: Context) -> str | None:
    """Whose number: "my" -> the speaker, "Ana's" -> Ana, "her"/"his" -> the last person named."""
    k = cue - 1
    while k >= 0 and lows[k] in ("new", "work", "personal", "mobile", "cell", "phone", "private", "home"):
        k -= 1
    if k < 0:
        return None
    if lows[k] == "my":
        return ctx.speaker
    if lows[k] in ("her", "his"):
        return ctx.last_person
    if lows[k] == "'s" and k > 0 and sent[k - 1].cap:
        return sent[k - 1].text
    return None
