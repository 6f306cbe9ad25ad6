"""Write-time intelligence, offline: typed entities, relations with their assertion status, and the time
each statement took effect; then reconciliation against what is stored (``storage.enrich.reconcile``).

Layers: what the caller passes wins (entities by name and type, relations, event time); this fills the
gaps with no model and no network. Statements that are negated, hypothetical, uncertain or reported never
become relations; negated ones are still handed to reconciliation (they may end or contradict a stored
relation). Cost is linear in the content's length (see ``_text``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from storage.domain.models import MAX_ENTITIES, MAX_RELATIONS, EntityIn, RelationIn
from storage.enrich import _contacts, _statements
from storage.enrich._statements import Statement, Status
from storage.enrich._text import Tok, sentences, tokens
from storage.language.extraction import EntityLexicon, _norm
from storage.language.extraction import extract as extract_names
from storage.language.timeparse import TimeMention

__all__ = ["Enriched", "Fact", "Statement", "Status", "enrich", "speaker_of"]


@dataclass(frozen=True, slots=True)
class Fact:
    """A statement to reconcile: asserted ones are stored as relations; negated ones only end or
    contradict. ``at``: when it took effect (a time named in its sentence, else the memory's event time)."""

    subject: str
    predicate: str
    object: str
    status: Status
    at: datetime
    ended: bool = False
    dated: bool = False  # ``at`` was stated (by the caller or in the text), not just the time of writing


@dataclass(frozen=True, slots=True)
class Enriched:
    entities: tuple[EntityIn, ...]
    times: tuple[TimeMention, ...]
    relations: tuple[RelationIn, ...]  # what is stored: the caller's, else the asserted statements
    facts: tuple[Fact, ...]  # what is reconciled: asserted and negated
    statements: tuple[Statement, ...]  # everything read, for benchmarks and debugging


def speaker_of(metadata: Mapping[str, object], scopes: Sequence[str], principal: str) -> str | None:
    """Who "I" is: ``metadata.speaker`` if given, else the user of a single ``user:NAME`` target scope, else
    the writing principal (unless it is the anonymous local one). None: first-person statements are skipped."""
    given = metadata.get("speaker")
    if isinstance(given, str) and given.strip():
        return given.strip()[:200]
    users = [s.split(":", 1)[1] for s in scopes if s.startswith("user:")]
    if len(users) == 1 and users[0]:
        return users[0]
    return principal if principal and principal != "local" else None


def enrich(
    content: str,
    *,
    written_at: datetime,
    lexicon: EntityLexicon,
    given: Sequence[EntityIn] = (),
    relations: Sequence[RelationIn] = (),
    event_time: datetime | None = None,
    speaker: str | None = None,
    dated_throughout: bool = True,
) -> Enriched:
    """Entities, times, relations and facts of ``content``. ``event_time``: the caller's (then no time scan);
    ``relations``: the caller's (then none are read from the text, but the caller's are still reconciled).
    ``dated_throughout``: a time the text names dates every statement that names none of its own (what happened
    then: events, messages, digests); False for facts, preferences and notes, where a time in another sentence
    dates something else ("Sam lives in Porto. He was born on 4 July 1990"), as does one that says where a
    statement ends ("until 2020")."""
    found = extract_names(
        content, written_at=written_at, lexicon=lexicon, given=given, times=event_time is None
    )
    when = event_time or (found.times[0].when.astimezone(UTC) if found.times else written_at)

    mine = {_norm(e.name): e.name for e in given}

    def known(phrase: str) -> str | None:
        """The entity whose name or alias is exactly ``phrase`` (lower case), if exactly one; a name the writer
        gives is taken as it spells it (the lexicon's is the spelling whoever named it first stored)."""
        hits = [
            m.name
            for m in lexicon.match(phrase, fuzzy=False)
            if m.how in ("exact", "alias") and m.text == phrase
        ]
        if len(hits) != 1:
            return None
        return mine.get(_norm(hits[0]), hits[0])

    toks = tokens(content)
    sents = sentences(content, toks)
    ctx = _statements.Context(speaker=speaker, known=known)
    statements = _statements.read(sents, content, ctx) + _contacts.read(sents, content, ctx)
    facts: list[Fact] = []
    if relations:
        for r in relations:
            if event_time is not None or dated_throughout:
                at, dated = when, event_time is not None or bool(found.times)
            else:
                at, dated = _named_at(r, sents, content, found.times, when)
            facts.append(Fact(r.subject, r.predicate, r.object, "asserted", at, dated=dated))
        stored = tuple(relations)
    else:
        for s in statements:
            if s.status in ("asserted", "negated"):
                at, dated = _at(s, found.times, when, event_time is not None, dated_throughout)
                facts.append(Fact(s.subject, s.predicate, s.object, s.status, at, s.ended, dated))
        seen: dict[tuple[str, str, str], RelationIn] = {}
        for f in facts:
            if f.status == "asserted":
                seen.setdefault(
                    (_norm(f.subject), f.predicate, _norm(f.object)),
                    RelationIn(f.subject, f.predicate, f.object),
                )
        stored = tuple(seen.values())[:MAX_RELATIONS]  # the caller's limit holds for what is read too
        facts = facts[: 2 * MAX_RELATIONS]
    entities = {_norm(e.name): e for e in given}
    types = {_norm(s.subject): s.subject_type for s in statements} | {
        _norm(s.object): s.object_type for s in statements if s.object_type != "title"
    }
    for e in found.entities:
        key = _norm(e.name)
        if key not in entities:
            entities[key] = EntityIn(e.name, types.get(key, _guess_type(e.name)), e.aliases)
    named = [(s.subject, s.subject_type) for s in statements] + [
        (s.object, s.object_type) for s in statements if s.object_type in ("person", "place", "org")
    ]
    for name, kind in named[: 2 * MAX_ENTITIES]:
        key = _norm(name)
        if key and key not in entities:
            entities[key] = EntityIn(name, kind)
    for r in stored:
        for name in (r.subject, r.object):
            key = _norm(name)
            if key and key not in entities:
                entities[key] = EntityIn(name, types.get(key, "thing"))
    return Enriched(tuple(entities.values()), tuple(found.times), stored, tuple(facts), tuple(statements))


def _guess_type(name: str) -> str:
    t = _statements._type_of(name)
    return "thing" if t == "person" else t  # a bare capitalised span is not known to be a person


def _at(
    s: Statement, times: Sequence[TimeMention], default: datetime, given: bool, throughout: bool
) -> tuple[datetime, bool]:
    """When the statement took effect: a time named in its own sentence, else the memory's event time (stated
    when the caller gave it or, ``throughout``, the text named one). Not ``throughout`` (a fact, preference or
    note), a time that says where the statement ends ("until 2020", "by March") is not its start, and a time
    named in another sentence dates something else ("Sam lives in Porto. He was born on 4 July 1990"; "I met
    Bob on 3 May. He works at Acme"; "Ana works at Globex; her contract ends on 1 March"): taken as the
    statement's start, it closed the value it replaced then and made the memory valid from then."""
    for t in times:
        if s.start <= t.start < max(s.end, s.start + 1) and (throughout or t.direction != "before"):
            return t.when.astimezone(UTC), True
    return default, given or (throughout and bool(times))


def _named_at(
    r: RelationIn, sents: Sequence[Sequence[Tok]], text: str, times: Sequence[TimeMention], default: datetime
) -> tuple[datetime, bool]:
    """``_at`` for a relation the caller passed (no span of its own): a time named in a sentence that names
    its object (its subject may well be named in another: "I met Bob on 3 May. Bob works at Acme")."""
    name = r.object.casefold().strip()
    for sent in sents:
        if not sent or not name:
            continue
        start, end = sent[0].start, sent[-1].end
        if name in text[start:end].casefold():
            for t in times:
                if start <= t.start < end and t.direction != "before":
                    return t.when.astimezone(UTC), True
    return default, False
