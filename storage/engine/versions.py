"""Versions: amend (a new version supersedes the old) and retire."""

from __future__ import annotations

from datetime import UTC, datetime

from scopes import (
    LOCAL_PRINCIPAL,
    Principal,
)
from storage.domain import validation as v
from storage.domain.errors import Conflict, InvalidInput
from storage.domain.models import (
    AmendReceipt,
    EntityIn,
    Provenance,
    RelationIn,
    RetireReceipt,
)
from storage.domain.records import NewMemory, RelationState, entity_key
from storage.engine.decisions import _Decisions
from storage.engine.state import (
    _now,
    content_id,
    log,
)
from storage.engine.writes import STATED_KINDS, _respell, _stated_start
from storage.enrich import Enriched, Fact, enrich, speaker_of
from storage.enrich.reconcile import reconcile
from storage.language.extraction import EntityLexicon, _norm, extract
from storage.sync.reconciler import Tx


class _Versions(_Decisions):
    def amend(
        self,
        id: str,
        content: str,
        *,
        reason: str = "",
        effective_at: datetime | None = None,
        principal: Principal = LOCAL_PRINCIPAL,
    ) -> AmendReceipt:
        """Write a new version of a current memory; the old one is superseded and its validity closed.

        ``effective_at`` is when the change took effect in the world (default: now): the old version's
        validity ends and the new one's begins there, so ``recall(as_of=...)`` answers on valid time. The
        transaction time (``recorded_at``) is always now.
        """
        old_id = self._resolve_id(v.memory_id(id), principal)
        text = v.content(content)
        why = v.reason(reason)
        effective = v.when(effective_at, "effective_at")
        now = _now()
        mid = content_id(text)
        with self.graph.read() as conn:
            exists = self.graph.fetch(conn, [mid])
            before = self.graph.fetch(conn, [old_id]).get(old_id)
            held = self.graph.relation_history(conn, [old_id]) if before is not None else []
        # The relations the old version recorded whose two ends the new text still names carry over (the
        # caller's own included: amend takes no relations), unless the new text ends them; the new text's own
        # statements are read as a write reads them. Whether the caller may amend it at all is checked in the
        # intent, before anything is kept.
        folded = text.casefold()
        named = [
            r
            for r in held
            if r.valid_to is None and r.subject.casefold() in folded and r.object.casefold() in folded
        ]
        given = [EntityIn(name=n) for n in dict.fromkeys(e for r in named for e in (r.subject, r.object))]
        # Dates in the new text read from when the change took effect ("since 1 October", amended with
        # effective_at 2024-10-01, is 2024's October, not the one before the day of the call: try14 F10).
        said = min(effective, now) if effective is not None else now
        meta = before.metadata if before is not None else {}
        scopes = before.scopes if before is not None else ()
        try:
            found = enrich(
                text,
                written_at=said,
                lexicon=self.lexicon,
                given=given,
                speaker=speaker_of(meta, scopes, principal.name),
                dated_throughout=before is None or before.kind not in STATED_KINDS,
            )
        except Exception:
            log.exception("offline extraction failed; amending with the carried relations only")
            basic = extract(text, written_at=said, lexicon=self.lexicon, given=given)
            found = Enriched(basic.entities, basic.times, (), (), ())
        facts = found.facts
        # "Ana no longer works at Acme", or a new value of a functional predicate, ends the old version's
        # relation (closed when the change took effect) instead of carrying it over, as a write would end it.
        ending = [(r, f) for r in held if r.valid_to is None and (f := self._ends(r, facts)) is not None]
        carried = [
            RelationIn(r.subject, r.predicate, r.object) for r in named if all(r is not e for e, _ in ending)
        ]
        speaker = speaker_of(meta, scopes, principal.name)

        def unaided() -> set[str]:
            """The names extraction makes of the new text knowing no entity at all (``_known_to``)."""
            try:
                alone = enrich(text, written_at=said, lexicon=EntityLexicon(), given=given, speaker=speaker)
            except Exception:
                return set()
            return {e.name for e in alone.entities}

        entities, respelt = self._known_to(principal, text, found.entities, given, unaided)
        hidden = {e.name.casefold() for e in found.entities} - {e.name.casefold() for e in entities}
        relations = list(
            dict.fromkeys(
                _respell(r, respelt)
                for r in (*carried, *found.relations)
                if r.subject.casefold() not in hidden and r.object.casefold() not in hidden
            )
        )
        facts = tuple(_respell(f, respelt) for f in facts)
        since = {(f.subject, f.predicate, f.object): f.at for f in facts if f.dated}
        vector = None if exists else [float(x) for x in self.embedder.embed([text])[0]]

        def intent(tx: Tx) -> AmendReceipt:
            old = self._require_writable(
                principal,
                self.graph.fetch(tx.conn, [old_id]).get(old_id),
                old_id,
                "amend",
                "call recall to find the memory to amend",
            )
            self._require_current(old, "amend", principal, tx.conn)
            start = effective or tx.now
            if effective is None:
                # As a write's: a fact, preference or note whose new words name a past start ("Sam works at
                # Globex since 1 October 2025") changed then, if not before the version it amends began.
                # Before, it changed now, and `as_of` between the two found the old employer.
                stated = _stated_start(old.kind, facts, tx.now)
                if old.valid_from <= stated < tx.now:
                    start = stated
            if old.valid_from > tx.now and start < old.valid_from:
                # A planned change, not yet begun: an amend now would start the new version today (or, with a
                # future effective_at, be refused), and "pass a later effective_at" below led nowhere.
                raise InvalidInput(
                    f"memory {old_id} is a planned change, valid only from {old.valid_from.isoformat()}: it cannot "
                    "be amended before it begins",
                    hint="to move its date, write the same words again with memory_write and the new valid_from "
                    "(the plan moves); to correct its words, retire it (a cancelled plan: what it was to replace "
                    "holds again) and write the corrected value with memory_write and the same valid_from",
                )
            if start > tx.now:
                raise InvalidInput(
                    f"effective_at ({start.isoformat()}) is in the future",
                    hint="amend when the change happens; a planned new value of a single-valued fact (where "
                    "someone works or lives, ...) can be written now with memory_write and valid_from at that "
                    "time: the current one stays current until then",
                )
            if start < old.valid_from:
                raise InvalidInput(
                    f"effective_at ({start.isoformat()}) is before the memory it amends became valid "
                    f"({old.valid_from.isoformat()})",
                    hint="pass a later effective_at, or write a separate memory for the earlier period",
                )
            if old.content == text:
                raise Conflict("the new content is identical to the current version", hint="nothing to amend")
            cur, existing = self._resolve_content(tx, text, mid)
            if (
                existing is not None
                and not principal.unrestricted
                and not self._can_read(principal, existing, self._tree())
            ):
                # The same words are someone else's memory where this principal may not read: as for a write,
                # joining it would show its id, metadata, writer and history, so the new version is a memory of
                # the principal's own, salted by its scopes (the id a write of these words there gets).
                cur, existing = self._resolve_separate(tx, text, old.scopes)
            if existing is not None:
                missing = [s for s in old.scopes if s not in existing.scopes]
                if missing:
                    self.graph.link(tx.conn, cur, missing, tx.now)
                tx.record("link", cur)
            else:
                if found.times:
                    event, src = found.times[0].when.astimezone(UTC), "content"
                else:
                    event, src = tx.now, "recorded"
                vec = vector if vector is not None else self.graph.vector_of(tx.conn, mid)
                if vec is None:
                    vec = [float(x) for x in self.embedder.embed([text])[0]]
                prov = Provenance(principal.name, principal.client, old.provenance.source)
                new = NewMemory(
                    cur,
                    text,
                    old.kind,
                    prov,
                    old.metadata,
                    event,
                    src,
                    start,
                    None,
                    tx.now,
                    vec,
                    supersedes=old.id,
                )
                self._insert(tx, new, old.scopes, entities, relations, since)
            self.graph.supersede(tx.conn, old.id, cur, reason=why, at=tx.now, close_valid_to=start)
            tx.record("supersede", old.id)
            # A message's new version takes its place in its conversation; the digest that quoted it goes.
            self._sources_changed(tx, [old.id], withdraw=True, successor=cur if existing is None else None)
            for ended, f in ending:
                self.graph.close_relation(
                    tx.conn,
                    old.id,
                    ended.subject,
                    ended.predicate,
                    ended.object,
                    valid_to=f.at if f.dated else start,
                    ended_by=cur,
                )
            if existing is not None:  # the content was already stored, and reconciled when it was
                return AmendReceipt(cur, old.id, old.scopes, existing.valid_from)
            # The new version against every other memory, exactly as a write of the same text is reconciled.
            own: dict[str, int] = {}  # relations the new version itself just counted, per name
            for r in relations:
                for end in (r.subject, r.object):
                    own[_norm(end)] = own.get(_norm(end), 0) + 1
            out, changed = reconcile(
                self.graph,
                tx.conn,
                new_id=cur,
                scopes=old.scopes,
                facts=facts,
                functional=self.functional,
                access=self._access(principal, self._tree()),
                now=tx.now,
                related=lambda name: self.lexicon.relations(name) > own.get(_norm(name), 0),
                effective=start,
                exclude={old.id},
            )
            for changed_id in changed:
                tx.record("supersede", changed_id)
            if changed:  # the other memories this version ended: their digests go too (as at write time)
                self._sources_changed(tx, changed, withdraw=True)
            return AmendReceipt(
                cur,
                old.id,
                old.scopes,
                start,
                also_supersedes=tuple(out.supersedes),
                contradicts=tuple(out.contradicts),
                superseded_by=out.superseded_by,
            )

        receipt = self.reconciler.submit(intent)
        self._after_write((), entities)
        self.audit.record(
            "amend",
            principal=principal.name,
            client=principal.client,
            ids=[receipt.id, receipt.supersedes],
            scopes=receipt.scopes,
        )
        return receipt

    def _ends(self, r: RelationState, facts: tuple[Fact, ...]) -> Fact | None:
        """The new text's statement that ends relation ``r`` of the version it replaces: "no longer" (the same
        relation, negated and ended), or another value of a functional predicate."""
        for f in facts:
            if entity_key(f.subject) != entity_key(r.subject) or f.predicate != r.predicate:
                continue
            same = entity_key(f.object) == entity_key(r.object)
            if f.status == "negated" and f.ended and same:
                return f
            if f.status == "asserted" and f.predicate in self.functional and not same:
                return f
        return None

    def retire(
        self, id: str, *, reason: str = "", at: datetime | None = None, principal: Principal = LOCAL_PRINCIPAL
    ) -> RetireReceipt:
        """Close a memory's validity at ``at`` (default now). It leaves default recall; history keeps it."""
        mid = self._resolve_id(v.memory_id(id), principal)
        why = v.reason(reason)
        when = v.when(at, "at")

        def intent(tx: Tx) -> RetireReceipt:
            m = self._require_writable(
                principal,
                self.graph.fetch(tx.conn, [mid]).get(mid),
                mid,
                "retire",
                "call recall to find the memory to retire",
            )
            if m.retired_at is not None:
                raise Conflict(f"memory {mid} was already retired at {m.retired_at.isoformat()}")
            end = when or tx.now
            # The same rules as amend's effective_at: retiring says when it stopped being true, which has
            # happened (a planned end is an event memory, and a future valid_to would be retired now anyway).
            if end > tx.now:
                raise InvalidInput(
                    f"effective_at ({end.isoformat()}) is in the future",
                    hint="retire when it stops being true, or write the plan as an event memory",
                )
            if when is None and end < m.valid_from:
                # A plan valid only from a later date, cancelled: it never held (an empty validity), and as_of
                # never finds it. An effective_at before the start is the caller's mistake, refused below.
                end = m.valid_from
            if end < m.valid_from:
                raise InvalidInput(
                    f"effective_at ({end.isoformat()}) is before the memory became valid "
                    f"({m.valid_from.isoformat()})",
                    hint="pass a later effective_at, or amend the memory if it was never true",
                )
            self.graph.retire(tx.conn, mid, at=tx.now, valid_to=end, reason=why)
            tx.record("retire", mid)
            if m.valid_from > tx.now:
                # A cancelled plan: what it was to replace from its start holds on (docs/recall.md, "Time").
                self._cancel_plan(tx, m)
            self._sources_changed(tx, [mid], withdraw=True)
            return RetireReceipt(mid, tx.now, min(end, m.valid_to) if m.valid_to else end)

        receipt = self.reconciler.submit(intent)
        self.audit.record("retire", principal=principal.name, client=principal.client, ids=[mid])
        return receipt
