"""Relation patterns over tokens: who did what to whom, and whether it was asserted at all.

A trigger phrase ("lives in", "works at", "allergic to", ...) is found by dictionary lookup on its first
word; the subject is read leftwards and the object rightwards, each within a few tokens; the assertion
status is read from cues in the trigger's clause and sentence. Windows are bounded, so the cost is linear.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from storage.enrich import _words as w
from storage.enrich._phrases import _BY_FIRST, Kind
from storage.enrich._text import Tok, has_seq

Status = Literal["asserted", "negated", "hypothetical", "uncertain", "reported"]
WINDOW = 24  # tokens searched for cues around a trigger
_CLAUSE = frozenset((",", "but", "and", "although", "though", "while", "whereas", "because", ":", "-", "—"))
_AS_GAP = 3  # tokens between "as" and its saying verb: "as Ana Lima told me"
_OPENERS = frozenset((",", "(", "-", "—", ";"))
_PARTICIPLES = frozenset(("mentioned", "said", "told"))
_WHERE_SAID = frozenset(
    ("in", "at", "during", "on", "earlier", "before", "yesterday", "today", "last", "this", ".", ")", "!")
)
_CONNECT = frozenset(("of", "de", "da", "do", "van", "von", "der", "la", "le", "del", "&", "the", "y"))
_NOT_NAMES = w.word_set(
    """i me my we our you your he him his she her they them their it its this that these those there here
    what which who whom whose when where why how a an the and or but if then so yes no not hi hello hey
    thanks please ok okay also just maybe well oh everyone everybody someone somebody nobody people anyone
    today tomorrow yesterday tonight monday tuesday wednesday thursday friday saturday sunday january
    february march april may june july august september october november december"""
)


@dataclass(frozen=True, slots=True)
class Statement:
    """One (subject, predicate, object) read from the text, with how it was said."""

    subject: str
    predicate: str
    object: str
    status: Status
    subject_type: str = "person"
    object_type: str = "thing"
    ended: bool = False  # "no longer", "anymore": the statement closes what was true
    sentence: int = 0  # index of the sentence, for times named in it
    start: int = 0  # character span of the sentence
    end: int = 0


# Pets and fuzzy verbs whose object is often not what the predicate is about.
_PET_OBJECT = {"have a dog": "dog", "has a dog": "dog", "have a cat": "cat", "has a cat": "cat"}
_BE = frozenset(("am", "'m", "is", "'s", "are", "became", "become", "becomes", "as"))


@dataclass
class Context:
    """What one content's statements share: who "I" is and who "she" was last."""

    speaker: str | None
    known: Callable[[str], str | None]  # a lower-case word -> a known entity's name
    last_person: str | None = None
    sentence_subject: tuple[str, str] | None = None  # for "I live in Porto and work at Acme"


# Predicates whose subject is a place or a thing: a name typed as a person by default is typed a thing.
_CONTAINED = frozenset(("located_in", "part_of", "based_in"))
# Containment said in the past ("Acme was part of Globex", "was once headquartered in Boston") says what held
# then, not what holds now: read as a current relation, it was chained (Acme part of whatever holds Globex today)
# and superseded nothing. Not read (a person's "was based in" keeps its older reading, as lives_in).
_CONTAINMENT = frozenset(("located_in", "part_of", "based_in", "member_of"))
_PAST = frozenset(("was", "were"))
_BETWEEN_PAST = frozenset(("a", "an", "the", "once", "formerly", "previously", "still", "also", "originally"))


def _said_in_the_past(lows: list[str], i: int) -> bool:
    """Whether the words right before the phrase at ``i`` put it in the past: "was (once) (a) ...", "had been"."""
    k = i - 1
    while k >= 0 and lows[k] in _BETWEEN_PAST:
        k -= 1
    return k >= 0 and (lows[k] in _PAST or (lows[k] == "been" and k > 0 and lows[k - 1] == "had"))


def read(sents: list[list[Tok]], text: str, ctx: Context) -> list[Statement]:
    out: list[Statement] = []
    for n, sent in enumerate(sents):
        lows = [t.low for t in sent]
        ctx.sentence_subject = None
        found = _kin(sent, lows, text, ctx)
        found += _titles(sent, lows, text, ctx)
        i = 0
        while i < len(sent):
            hit = _trigger(lows, i)
            if hit is None:
                i += 1
                continue
            phrase, pred, kind = hit
            end = i + len(phrase)
            subj = _subject(sent, lows, i, text, ctx)
            objs = _objects(sent, lows, end, text, kind, ctx, pred)
            if phrase in (
                ("have", "a", "dog"),
                ("has", "a", "dog"),
                ("have", "a", "cat"),
                ("has", "a", "cat"),
            ):
                objs = [(phrase[-1], "thing")]
            if subj is not None:
                ctx.sentence_subject = subj
            if subj is not None and objs:
                status, ended = _status(sent, lows, i, end)
                stype = subj[1]
                if pred in _CONTAINED and stype == "person" and subj[0] != ctx.speaker:
                    stype = "thing"  # "The Grand Palm is located in Udaipur": a name, not a person's
                if pred == "lives_in" and stype == "org":
                    pred = "based_in"  # "Globex Inc is based in Berlin"
                if pred in _CONTAINMENT and _said_in_the_past(lows, i):
                    i = end
                    continue
                for obj, otype in objs:
                    if obj.casefold() != subj[0].casefold():
                        found.append(Statement(subj[0], pred, obj, status, stype, otype, ended))
                if subj[1] == "person" and subj[0] != ctx.speaker:
                    ctx.last_person = subj[0]
                if pred in ("married_to", "dating", "engaged_to"):
                    ctx.last_person = subj[0] if subj[0] != ctx.speaker else objs[0][0]
            i = end
        if not found:
            _remember_person(sent, lows, text, ctx)
        start, stop = (sent[0].start, sent[-1].end) if sent else (0, 0)
        out += [Statement(s.subject, s.predicate, s.object, s.status, s.subject_type, s.object_type, s.ended,
                          n, start, stop) for s in found]  # fmt: skip
    return out


def _remember_person(sent: list[Tok], lows: list[str], text: str, ctx: Context) -> None:
    """ "I met Priya at the conference. She ...": the last name in a sentence with no statement is "she"."""
    k = len(sent) - 1
    while k > 0:
        if sent[k].cap and lows[k] not in _NOT_NAMES:
            first = k
            while first > 1 and sent[first - 1].cap and k - first < 2:
                first -= 1
            name = text[sent[first].start : sent[k].end]
            if _type_of(name) == "person":
                ctx.last_person = ctx.known(" ".join(lows[first : k + 1])) or name
                return
            k = first
        k -= 1


def _trigger(lows: list[str], i: int) -> tuple[tuple[str, ...], str, Kind] | None:
    for phrase, pred, kind in _BY_FIRST.get(lows[i], ()):
        if tuple(lows[i : i + len(phrase)]) == phrase:
            return phrase, pred, kind
    return None


def _status(sent: list[Tok], lows: list[str], i: int, end: int) -> tuple[Status, bool]:
    lo = i
    while lo > 0 and i - lo < WINDOW and lows[lo - 1] not in _CLAUSE:
        lo -= 1
    hi = end
    while hi < len(lows) and hi - end < WINDOW and lows[hi] not in _CLAUSE:
        hi += 1
    s_lo, s_hi = max(0, i - WINDOW), min(len(lows), end + WINDOW)
    ended = any(has_seq(lows, cue, lo, hi) >= 0 for cue in w.ENDED)
    negated = ended or any(lows[k] in w.NEGATION for k in range(lo, i))
    if (lows and lows[0] in ("if", "unless", "suppose", "imagine")) or (lows and lows[-1] == "?"):
        return "hypothetical", False
    if (
        any(has_seq(lows, cue, lo, end) >= 0 for cue in w.HYPOTHETICAL)
        or has_seq(lows, ("if",), end, s_hi) >= 0
    ):
        return "hypothetical", False
    for cue in w.REPORTED:
        k = has_seq(lows, cue, s_lo, s_hi)
        while k >= 0 and _attribution(lows, k, end):
            k = has_seq(lows, cue, k + 1, s_hi)  # the same verb may still report elsewhere in the window
        if k >= 0 and not (cue[0] in w.SELF_REPORT_OK and k > 0 and lows[k - 1] == "i"):
            return "reported", False
    for cue in w.UNCERTAIN:
        k = has_seq(lows, cue, s_lo, s_hi)
        if k >= 0 and not (cue == ("may",) and sent[k].text != "may"):
            return "uncertain", False
    if negated:
        return "negated", ended
    return "asserted", False


def _attribution(lows: list[str], k: int, end: int) -> bool:
    """Whether the saying verb at ``k`` only says where the writer's own statement came up, rather than whose
    word it is: an as-clause ("as mentioned in standup", "as Tom said", "as she told me"), which presupposes
    what it attaches to, or an agentless participle after the statement ("(mentioned in standup)",
    ", mentioned earlier"). "Tom said ...", "..., Tom said", "..., said Tom" and "according to" stay reported."""
    for j in range(k - 1, max(-1, k - _AS_GAP - 1), -1):
        if lows[j] == "as":
            return True
        if lows[j] in _CLAUSE:
            break
    return (
        k >= end
        and k > 0
        and lows[k - 1] in _OPENERS
        and lows[k] in _PARTICIPLES
        and (k + 1 == len(lows) or lows[k + 1] in _WHERE_SAID)
    )


def _subject(sent: list[Tok], lows: list[str], i: int, text: str, ctx: Context) -> tuple[str, str] | None:
    j = i - 1
    while j >= 0 and i - j <= 6 and lows[j] in w.BETWEEN and lows[j] not in ("i", "she", "he"):
        j -= 1
    if j < 0:
        return None
    low = lows[j]
    if low in ("and", ","):
        if ctx.sentence_subject is not None:
            return ctx.sentence_subject
        if j > 0 and (
            lows[0] == "i" or sent[0].cap
        ):  # "Tom was promoted and is now ...": the sentence's subject
            first = _first_verb(lows)
            # Only a verb before this one can lead to the sentence's subject: the same or a later one would
            # come back here for ever (a RecursionError on ordinary chat text).
            return _subject(sent, lows, first, text, ctx) if 0 < first < i else None
        return None
    if low == "i":
        return (ctx.speaker, "person") if ctx.speaker else None
    if low in ("she", "he"):
        return (ctx.last_person, "person") if ctx.last_person else None
    if sent[j].cap:
        k = j
        while (
            k > 0
            and j - k < 4
            and (sent[k - 1].cap or (lows[k - 1] in _CONNECT and k > 1 and sent[k - 2].cap))
        ):
            k -= 1
        while k <= j and lows[k] in _NOT_NAMES:
            k += 1
        if k > j:
            return None
        name = text[sent[k].start : sent[j].end]
        if k == 0 and k == j and ctx.known(low) is None and not _looks_like_name(sent[j]):
            return None
        name = ctx.known(" ".join(lows[k : j + 1])) or name  # an alias names its entity
        return name, _type_of(name)
    if j >= 1 and lows[j] in w.KIN and lows[j - 1] == "my":
        return None  # "my wife lives in Porto": a person we cannot name yet
    for n in (3, 2, 1):  # a known name written in lower case ("ana lima moved to Porto")
        if j - n + 1 >= 0 and (found := ctx.known(" ".join(lows[j - n + 1 : j + 1]))):
            return found, _type_of(found)
    return None


def _first_verb(lows: list[str]) -> int:
    """Index of the first word after the sentence's opening subject (a name or "I"), or -1."""
    for k in range(1, min(len(lows), 6)):
        if lows[k] in w.BETWEEN or lows[k] in ("was", "were", "got"):
            return k
    return -1


def _looks_like_name(t: Tok) -> bool:
    """A sentence-initial capitalised word is a name only if it is not a common word we know."""
    return t.low not in _NOT_NAMES and t.low not in w.BETWEEN and t.low not in w.DETERMINERS


def _type_of(name: str) -> str:
    words = name.casefold().split()
    if not words:
        return "thing"
    if words[-1] in w.ORG_SUFFIXES or words[0] in w.ORG_PREFIXES:
        return "org"
    if all(x in w.PLACES for x in words) or (words[0] in w.PLACES and len(words) <= 2):
        return "place"
    return "person"


def _objects(
    sent: list[Tok], lows: list[str], k: int, text: str, kind: Kind, ctx: Context, pred: str
) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    while k < len(sent) and len(out) < 4:
        got, k = _object(sent, lows, k, text, kind, ctx, pred)
        if got is None:
            break
        out.append(got)
        if k < len(sent) and lows[k] in (",", "and", "or") and (kind == "thing" or pred == "visited"):
            k += 1
            if k < len(sent) and lows[k] in ("and", "or"):
                k += 1
            continue
        break
    return out


def _object(
    sent: list[Tok], lows: list[str], k: int, text: str, kind: Kind, ctx: Context, pred: str
) -> tuple[tuple[str, str] | None, int]:
    article = False
    while k < len(sent) and lows[k] in w.DETERMINERS and len(lows[k]) < 6:
        article = article or lows[k] in ("a", "an")
        k += 1
    if k >= len(sent) or not lows[k]:
        return None, k
    if kind == "thing" and lows[k] == "to" and k + 1 < len(sent):
        k += 1  # "love to cook"
    start = k
    if sent[k].cap or kind != "thing":
        # A name: a run of capitalised words, joined by "of", "de", "&", ...
        while (
            k < len(sent)
            and k - start < 6
            and (sent[k].cap or (k > start and lows[k] in _CONNECT and k + 1 < len(sent) and sent[k + 1].cap))
        ):
            k += 1
        if k > start:
            name = text[sent[start].start : sent[k - 1].end].strip(".,")
            if lows[start] in _NOT_NAMES and k - start == 1:
                return None, k
            name = ctx.known(" ".join(lows[start:k])) or name
            otype = "place" if kind == "place" else "org" if kind == "org" else _type_of(name)
            if kind == "thing":
                otype = "thing" if pred not in ("visited",) else "place"
            return (name, otype), k
        for n in (3, 2, 1):
            if k + n <= len(sent) and (found := ctx.known(" ".join(lows[k : k + n]))):
                return (found, kind), k + n
        if kind == "place" and lows[k] in w.PLACES:
            return (sent[k].text.title(), "place"), k + 1
        if (
            kind == "person"
            and lows[k] not in _NOT_NAMES
            and lows[k] not in w.OBJECT_STOPS
            and sent[k].text.isalpha()
        ):
            return None, k  # lower-case words after "married" are rarely names
        if not (kind == "org" and article):
            return None, k
    # A common noun phrase: up to four words before a stop word or punctuation.
    while k < len(sent) and k - start < 4 and lows[k] and lows[k] not in w.OBJECT_STOPS:
        if not (sent[k].text[:1].isalnum()) or (k > start and _compares(lows, k, start)):
            break
        k += 1
    if k == start or lows[start] in w.PRONOUN_OBJECTS or lows[start] in w.NEGATION:
        return None, k
    phrase = text[sent[start].start : sent[k - 1].end]
    return (phrase.casefold() if not any(t.cap for t in sent[start:k]) else phrase, "thing"), k


def _compares(lows: list[str], k: int, start: int) -> bool:
    """Whether the word at ``k`` (inside a liked thing that began at ``start``) begins a comparison, which ends
    the thing ("tea over coffee", "jazz rather than rock", "coffee more than tea", "cake more."), rather than
    being part of it: "over" before a determiner, a preposition or a number is a place or an amount ("the bridge
    over the river", "sleeping over at Ana's", "hikes over 20 km") unless a preference was said ("prefer juice
    over the other drinks"), and "more" or "less" before a noun a quantity ("spending less time on email"). Cut
    there, the thing became "bridge" or "sleeping", and a later dislike of another bridge contradicted it."""
    low = lows[k]
    if low not in w.COMPARISONS:
        return False
    after = lows[k + 1] if k + 1 < len(lows) else ""
    if low == "over":
        place = after in w.DETERMINERS or after in w.OBJECT_STOPS or after[:1].isdigit()
        return not place or any(x.startswith("prefer") for x in lows[:start])
    if low in ("more", "less"):
        return after == "than" or not after[:1].isalnum()
    return True


def _kin(sent: list[Tok], lows: list[str], text: str, ctx: Context) -> list[Statement]:
    """ "my sister Ana", "Ana, my sister," and "Ana is my sister": the speaker's relation to a named person."""
    out: list[Statement] = []
    if ctx.speaker is None:
        return out
    for k, low in enumerate(lows):
        if low != "my":
            continue
        r = k + 1
        if r < len(lows) and lows[r] in w.KIN_MODIFIERS:
            r += 1
        if r >= len(lows) or lows[r] not in w.KIN:
            continue
        pred = w.KIN[lows[r]]
        name = None
        n = r + 1
        if n < len(sent) and lows[n] == ",":
            n += 1
        if (
            n < len(sent)
            and lows[n]
            and sent[n].text.isalpha()
            and lows[n] not in _NOT_NAMES | w.OBJECT_STOPS | w.BETWEEN
        ) and (
            sent[n].cap
            or ctx.known(lows[n])
            or (n + 1 < len(sent) and lows[n + 1] in ("is", "'s", "lives", "works", ","))
        ):
            e = n
            while e + 1 < len(sent) and sent[e + 1].cap and e - n < 2:
                e += 1
            name = text[sent[n].start : sent[e].end]
            if not sent[n].cap:
                name = ctx.known(lows[n]) or name.title()
        if name is None and k >= 2 and lows[k - 1] in ("is", "'s") and sent[k - 2].cap:
            first = k - 2
            while first > 0 and sent[first - 1].cap and k - 2 - first < 2:
                first -= 1
            name = text[sent[first].start : sent[k - 2].end]  # "Tom Baker is my neighbour"
        if name is None and k >= 2 and lows[k - 1] == "," and sent[k - 2].cap:
            name = sent[k - 2].text  # "Ana, my sister, ..."
        if name is None or name.casefold() in _NOT_NAMES:
            continue
        status, ended = _status(sent, lows, k, r + 1)
        if status == "negated" and not ended and any(lows[x] in w.NEGATION for x in range(k, r + 1)):
            status = "asserted"
        out.append(Statement(ctx.speaker, pred, name, status, "person", "person", ended))
        ctx.last_person = name
    return out


def _titles(sent: list[Tok], lows: list[str], text: str, ctx: Context) -> list[Statement]:
    """ "Ana is a senior software engineer at Acme", "I work as a nurse", "I became the CTO of Initech"."""
    out: list[Statement] = []
    for h, low in enumerate(lows):
        if low not in w.ROLE_HEADS:
            continue
        k = h
        while (
            k > 0
            and h - k < 3
            and lows[k - 1] not in _BE
            and lows[k - 1] not in w.DETERMINERS
            and lows[k - 1].isalpha()
        ):
            k -= 1
        title_start = k
        while k > 0 and lows[k - 1] in ("a", "an", "the", "now", "currently", "also", "still", "officially"):
            k -= 1
        if k == 0 or lows[k - 1] not in _BE:
            continue
        be = k - 1
        if lows[be] in ("'s", "’s") and k == title_start:
            continue  # "Ana's dentist is Dr. Okafor": a possessive; "Ana's a dentist" has its article
        if lows[be] == "as" and not (
            be > 0 and lows[be - 1] in ("work", "works", "working", "job", "hired", "employed")
        ):
            continue
        verb = be if lows[be] != "as" else be - 1
        subj = _subject(sent, lows, verb, text, ctx)
        if subj is None or subj[1] != "person":
            continue
        title = " ".join(t.low for t in sent[title_start : h + 1])
        status, ended = _status(sent, lows, be, h + 1)
        out.append(Statement(subj[0], "job_title", title, status, "person", "title", ended))
        if h + 2 < len(sent) and lows[h + 1] in ("at", "for", "of", "with"):
            org, _ = _object(sent, lows, h + 2, text, "org", ctx, "works_at")
            if org is not None:
                out.append(Statement(subj[0], "works_at", org[0], status, "person", "org", ended))
        if subj[0] != ctx.speaker:
            ctx.last_person = subj[0]
    return out
