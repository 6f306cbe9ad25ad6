"""Writes: validate, extract, reconcile and commit new memories; the optional LLM pass after the commit."""

from __future__ import annotations

import builtins
import dataclasses
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from scopes import (
    LOCAL_PRINCIPAL,
    Level,
    Principal,
    ScopeId,
    readable,
)
from storage.domain import validation as v
from storage.domain.errors import Conflict, InvalidInput, MnemographError, ScopeDenied
from storage.domain.models import (
    EntityIn,
    Memory,
    MemoryKind,
    Provenance,
    RelationIn,
    Status,
    WriteItem,
    WriteReceipt,
    dated,
)
from storage.domain.records import NewMemory, NewRow, entity_key
from storage.engine.resolution import _Resolution
from storage.engine.state import (
    _SEPARATE,
    _now,
    _Prepared,
    content_id,
    log,
    scopes_tag,
)
from storage.enrich import Enriched, Fact, enrich, llm, speaker_of
from storage.enrich.near import NEAR_K, is_near, same_claim
from storage.enrich.reconcile import Access, Outcome, reconcile
from storage.language.extraction import EntityLexicon, _norm, capitalised_spans, extract, name_key
from storage.ports.canonical import Session
from storage.sync.reconciler import Tx

BULK_CHUNK = 2_000  # writes per transaction when many come in one call (the others wait that long at most)
NEAR_MODES = ("store", "report", "fold")  # Engine.write(on_near_duplicate=...)
SAMPLING_QUEUE = 100  # memories waiting for their writers' own models, at most (Engine.use_sampling)


def _when(kind: MemoryKind, source: str, event_time: datetime) -> datetime | date | None:
    """When a memory says it happened, as near-duplicates compare it: the event time stated by the caller or
    the text; the day it was told for an event that states none (told again that day, it is the same event
    told twice; another day, another event); None for a memory with no event time."""
    if not dated(kind, source):
        return None
    return event_time if source != "recorded" else event_time.astimezone(UTC).date()


class _Checked(NamedTuple):
    """A write's fields, validated (``_Writes._checked``)."""

    content: str
    scopes: builtins.list[str]
    kind: MemoryKind
    event_time: datetime | None
    valid_from: datetime | None
    valid_to: datetime | None
    entities: builtins.list[EntityIn]
    relations: builtins.list[RelationIn]
    metadata: dict[str, Any]
    source: str
    vector: builtins.list[float] | None


@dataclasses.dataclass(frozen=True)
class _Moved:
    """A plan a write of its words with another start replaces (``_Writes._moves``)."""

    plan: str
    memory: Memory
    # The validity ends its cancellation left the memories it had ended with (``_cancel_plan``).
    ends: dict[str, datetime | None] = dataclasses.field(default_factory=dict)


class _Writes(_Resolution):
    # Writes per transaction when one call brings many (``_bulk_intent``); 1 gives each write its own intent, as
    # before the bulk path (kept for comparisons: the rows are the same either way).
    bulk_chunk = BULK_CHUNK

    # -- writes ------------------------------------------------------------------------------------

    def write(
        self,
        content: str,
        scopes: Sequence[str],
        *,
        kind: str = "note",
        event_time: datetime | None = None,
        valid_from: datetime | None = None,
        valid_to: datetime | None = None,
        entities: Sequence[EntityIn] | None = None,
        relations: Sequence[RelationIn] | None = None,
        metadata: Mapping[str, Any] | None = None,
        principal: Principal = LOCAL_PRINCIPAL,
        source: str = "",
        extractor: llm.Extractor | None = None,
        on_near_duplicate: str = "store",
    ) -> WriteReceipt:
        """Store a memory. Identical content already current in every target scope -> ``duplicate``; in some
        of them -> ``linked`` (the same memory gains the other scopes); otherwise ``added``.

        ``on_near_duplicate``: ``"store"`` (default) looks for no near-duplicate (a write costs what it did
        before the check existed); ``"report"`` and ``"fold"`` look for current memories of a target scope
        that the principal may read and that say the same thing in other words (``storage.enrich.near``) and
        name them in ``near_duplicates``: ``"report"`` stores the new memory anyway, ``"fold"`` stores nothing
        new when there is one: the receipt is ``folded``, its
        id the nearest one's, which is linked into the target scopes it is not in yet (as identical content
        is). A fold first waits for the search index to hold every write acknowledged before it.

        Returns once the canonical store has committed it (acknowledged = durable). ``extractor``: the
        writer's own model (MCP sampling), asked after the commit instead of the configured one.
        """
        item = WriteItem(
            content, scopes, kind, event_time, valid_from, valid_to, entities, relations, metadata, source
        )
        mode = v.choice(on_near_duplicate, "on_near_duplicate", NEAR_MODES)
        near = None if mode == "store" else mode
        return self.write_many([item], principal=principal, extractor=extractor, near=near)[0]

    def write_many(
        self,
        items: Sequence[WriteItem],
        *,
        principal: Principal = LOCAL_PRINCIPAL,
        extractor: llm.Extractor | None = None,
        near: str | None = None,
    ) -> list[WriteReceipt]:
        """Write several memories: validated together (one bad item rejects the call and writes nothing),
        embedded in batches, committed in group transactions. Receipts come back in order. ``extractor``:
        the writer's own model for the pass after the commit (``enrich_later``). ``near``: ``"report"`` or
        ``"fold"`` to look for near-duplicates of each new memory as ``write`` does; None (bulk writes,
        imports, conversations) does not look."""
        now = _now()
        prepared = self._prepare_all(items, now, principal)
        with self.graph.read() as conn:
            known = self.graph.fetch(conn, [p.id for p in prepared if p.vector is None])
        todo = [p for p in prepared if p.vector is None and p.id not in known]
        if todo:
            vectors = self.embedder.embed([p.content for p in todo])
            for p, vec in zip(todo, vectors, strict=True):
                p.vector = [float(x) for x in vec]
        looking = []
        if near == "fold":
            # The caller acts on the answer: it sees every write acknowledged before this one, before the commit.
            self.reconciler.wait_fresh()
            for p in todo:
                p.near, p.fold = self._near_duplicates(p, principal), True
        elif near == "report":
            # Only reported: searched beside the commit, so the write waits for the longer of the two, not both.
            # The search still sees every write acknowledged before this one (a paraphrase written right after
            # the original was missed while the word index caught up), not this one's own commit.
            mark = self.reconciler.fresh_mark()
            looking = [(p, self._lane_pool.submit(self._near_duplicates, p, principal, mark)) for p in todo]
        try:
            receipts = self._commit_writes(prepared, principal)
        except BaseException:
            if len(prepared) > 1:  # the names ``_prepare_all`` taught the lexicon may not be stored
                self._reload_lexicon()
            raise
        # The same words written again after an erase have the erased memory's id: its recalls count again.
        self.accesses.revive(r.id for r in receipts)
        if looking:
            found = {id(p): f.result() for p, f in looking}
            if any(found.values()):
                # The search read the store before or while the write committed: a memory unlinked from the
                # write's scopes meanwhile (maybe now only where the writer cannot read) is not named.
                with self.graph.read() as conn:
                    found = {
                        id(p): self._in_scopes(conn, found[id(p)], p.scopes)
                        for p, _f in looking
                        if found[id(p)]
                    }
            receipts = [
                dataclasses.replace(r, near_duplicates=found[id(p)])
                if r.status == "added" and found.get(id(p))
                else r
                for p, r in zip(prepared, receipts, strict=True)
            ]
        for p, r in zip(prepared, receipts, strict=True):
            if r.status == "added":
                self.enrich_later(r, p, now, principal, extractor)
        self._after_write(
            [s for p in prepared for s in p.scopes],
            [e for p in prepared for e in p.entities],
            [(p.scopes, p.entities) for p in prepared],
        )
        changed = [r for r in receipts if r.status != "duplicate"]
        if changed:
            self.audit.record(
                "write",
                principal=principal.name,
                client=principal.client,
                ids=[r.id for r in changed],
                scopes=sorted({s for p in prepared for s in p.scopes}),
                added=sum(r.status == "added" for r in changed),
                linked=sum(r.status == "linked" for r in changed),
                folded=sum(r.status == "folded" for r in changed),
            )
        return [self._shown_write(r, p.scopes, principal) for r, p in zip(receipts, prepared, strict=True)]

    def _near_duplicates(
        self, p: _Prepared, principal: Principal, fresh: int | None = None
    ) -> tuple[tuple[str, float], ...]:
        """Current memories in ``p``'s target scopes that ``storage.enrich.near`` takes for a paraphrase of it,
        nearest first. Candidates are the ``NEAR_K`` best by words (BM25 restricted to those scopes: under a
        millisecond, where a vector search costs 5-15 ms, half a write); those the words alone turn away are
        dropped, and the rest are compared by the cosine of their stored vectors with the one the write
        computed. Summaries (conversation digests among them) are not compared. Every candidate is in a
        scope the principal may write, hence read. Runs on a lane worker beside the commit when only
        reported (``write_many``), after the projections show commit ``fresh`` (a ``fresh_mark``) when given."""
        assert p.vector is not None
        if fresh is not None:
            self.reconciler.wait_fresh(upto=fresh)
        found = self.text.search(p.content, scopes=p.scopes, k=NEAR_K, live_only=True, kinds=None)
        ids = [i for i, _ in found if i != p.id]
        if not ids:
            return ()
        with self.graph.read() as conn:
            stored = self.graph.current_texts(conn, ids, _now())
        new = _unit(p.vector)
        out = []
        for i, (content, kind, vec) in stored.items():
            # The words first: most candidates are turned away without a cosine. A memory of another kind is
            # not the same memory told again (an event is not a preference), whatever its words.
            if kind == MemoryKind.SUMMARY.value or kind != p.kind.value:
                continue
            if not same_claim(content, p.content, 1.0):
                continue
            cos = float(new @ _unit(vec))
            if is_near(content, p.content, cos):
                out.append((i, round(cos, 3)))
        if out:
            # The word index lags the canonical store: a memory unlinked from the target scopes since (now maybe
            # only where the writer cannot read) is not named. Read only for the few that are near.
            with self.graph.read() as conn:
                held = self.graph.fetch(conn, [i for i, _ in out])
            targets = set(p.scopes)
            # The same words of another time are another memory: a run on another day, a fact that ends
            # where the stored one does not or held before it began (the text's own dates are the guard's;
            # these are the caller's).
            when = _when(p.kind, p.event_time_source, p.event_time)
            out = [
                (i, c)
                for i, c in out
                if i in held
                and targets.intersection(held[i].scopes)
                and _when(held[i].kind, held[i].event_time_source, held[i].event_time) == when
                and held[i].valid_to == p.valid_to
                and held[i].valid_from <= p.valid_from  # else the new one says it held earlier
            ]
        return tuple(sorted(out, key=lambda x: -x[1]))

    def _in_scopes(
        self, conn: Session, near: tuple[tuple[str, float], ...], scopes: Sequence[str]
    ) -> tuple[tuple[str, float], ...]:
        """The near-duplicates still current and in one of ``scopes``, as ``conn`` reads them."""
        held = self.graph.fetch(conn, [i for i, _ in near])
        targets = set(scopes)
        return tuple(
            (i, c)
            for i, c in near
            if i in held and targets.intersection(held[i].scopes) and self.graph.live_state(conn, i)
        )

    def _still_near(self, tx: Tx, p: _Prepared) -> tuple[tuple[str, float], ...]:
        """``p.near`` as ``tx`` sees it: the candidates still current and still in one of the write's target
        scopes. One unlinked from them since the search found it may now be only where the writer cannot read:
        it is neither folded into nor named in the receipt."""
        return self._in_scopes(tx.conn, p.near, p.scopes) if p.near else ()

    def _fold(self, tx: Tx, p: _Prepared, near: tuple[tuple[str, float], ...]) -> WriteReceipt | None:
        """The receipt of a write folded into its nearest near-duplicate still current and still in one of the
        write's target scopes in ``tx`` (``near``: ``_still_near``), linked into the target scopes it is not in
        yet, or None when there is none any more (then it is stored)."""
        if not near:
            return None
        target = near[0][0]
        existing = self.graph.fetch(tx.conn, [target])[target]
        missing = [s for s in p.scopes if s not in existing.scopes]
        if missing:
            self.graph.ensure_scopes(tx.conn, missing, tx.now)
            self.graph.link(tx.conn, target, missing, tx.now)
            tx.record("link", target)
        scopes = tuple(sorted({*existing.scopes, *missing}))
        return WriteReceipt(
            target, "folded", scopes, existing.entities, existing.dated_at, near_duplicates=near
        )

    def _commit_writes(self, prepared: Sequence[_Prepared], principal: Principal) -> list[WriteReceipt]:
        """Through the one writer: one intent per write (they group-commit), or, for several writes into an
        embedded store, one intent per ``bulk_chunk`` of them (``_bulk_intent``: the same rows in far fewer
        statements). Raises the first item's error once every chunk has committed, as ``submit_many`` does."""
        chunk = self.bulk_chunk
        if len(prepared) == 1 or chunk <= 1 or self.graph.shared:
            # A shared store's transaction does not read its own writes: one write per transaction there.
            return self.reconciler.submit_many([self._write_intent(p, principal) for p in prepared])
        results: list[WriteReceipt | MnemographError] = []
        for lo in range(0, len(prepared), chunk):
            results += self.reconciler.submit(self._bulk_intent(prepared[lo : lo + chunk], principal))
        for r in results:
            if isinstance(r, MnemographError):
                raise r
        return [r for r in results if isinstance(r, WriteReceipt)]

    def _shown_write(
        self, receipt: WriteReceipt, targets: Sequence[str], principal: Principal
    ) -> WriteReceipt:
        """The receipt as ``principal`` may see it: scopes it cannot read are left out, and content that was
        only stored where it cannot read is reported as ``added`` (not confirming someone else wrote it)."""
        if principal.unrestricted:
            return receipt
        tree = self._tree()
        shown = tuple(s for s in receipt.scopes if principal.may(Level.READ, ScopeId.parse(s), tree))
        status = receipt.status
        if status == "linked" and set(shown) <= set(targets):
            status = "added"
        return dataclasses.replace(receipt, scopes=shown, status=status)

    def check_writes(self, items: Iterable[WriteItem], *, principal: Principal = LOCAL_PRINCIPAL) -> int:
        """Validate and authorize ``items`` as ``write_many`` would, writing nothing; returns how many there
        were. Raises the error ``write_many`` would raise for the first bad one, naming it (``item n``), so that
        an import can refuse a whole file before its first batch is written."""
        now = _now()
        n = 0
        for n, item in enumerate(items, start=1):
            try:
                self._checked(item, now, principal)
            except InvalidInput as exc:
                raise InvalidInput(
                    f"item {n - 1}: {exc.message}", hint=exc.hint or "nothing was written"
                ) from None
        return n

    def _checked(self, item: WriteItem, now: datetime, principal: Principal) -> _Checked:
        text = v.content(item.content)
        target_ids = v.scope_list(item.scopes)
        self._authorize(principal, target_ids, Level.WRITE, "write")
        vf, vt = v.when(item.valid_from, "valid_from"), v.when(item.valid_to, "valid_to")
        checked = _Checked(
            text,
            [str(s) for s in target_ids],
            v.kind(item.kind),
            v.when(item.event_time, "event_time"),
            vf,
            vt,
            v.entities(item.entities),
            v.relations(item.relations),
            v.metadata(item.metadata),
            v.text(item.source, "source", limit=200, allow_empty=True),
            v.vector(item.vector, self.embedder.dim) if item.vector is not None else None,
        )
        if vt is not None and vt <= (vf or now):
            raise InvalidInput(
                "valid_to must be after valid_from (or after now when valid_from is not given)"
            )
        return checked

    def _prepare_all(
        self, items: Sequence[WriteItem], now: datetime, principal: Principal
    ) -> builtins.list[_Prepared]:
        """``_prepare`` each item, every one knowing the entities the items before it name, as it would written
        after them: a later item naming one by an alias, in lower case or in a close spelling mentioned it only
        when written alone (an import lost every such mention of an entity its file introduced). The names go
        into the lexicon before the commit; a call that fails takes them out again (``_reload_lexicon``)."""
        if len(items) == 1:
            return [self._prepare(items[0], now, principal)]
        checked = []
        for n, item in enumerate(items):  # a bad item anywhere refuses the call before the lexicon learns
            try:
                checked.append(self._checked(item, now, principal))
            except InvalidInput as exc:
                raise InvalidInput(
                    f"item {n}: {exc.message}", hint=exc.hint or "nothing was written"
                ) from None
        ids = [content_id(c.content) for c in checked]
        with self.graph.read() as conn:  # current already: a duplicate or a link, which proposes nothing
            held = list(self.graph.present(conn, ids))  # primary-key lookups; the few held are read whole
            seen = {mid for mid, m in self.graph.fetch(conn, held).items() if m.status is Status.CURRENT}
        prepared = []
        try:
            for mid, item, c in zip(ids, items, checked, strict=True):
                p = self._prepare(item, now, principal, c)
                for e in p.entities:
                    self.lexicon.add(e.name, e.aliases)
                if mid not in seen:  # a new memory records its proposals: a later item proposes the next ones
                    seen.add(mid)
                    for a, b, _j in p.proposed:
                        self.lexicon.paired(a, b, sorted(p.scopes), add=True)
                prepared.append(p)
        except BaseException:
            self._reload_lexicon()
            raise
        return prepared

    def _prepare(
        self, item: WriteItem, now: datetime, principal: Principal, checked: _Checked | None = None
    ) -> _Prepared:
        text, targets, mkind, ev, vf, vt, given, rels, meta, src, vector = checked or self._checked(
            item, now, principal
        )
        if not rels and vf is not None:
            rels = self._plan_relations(text, vf, now, principal)
        for r in rels:
            for end in (r.subject, r.object):
                if all(e.name.casefold() != end.casefold() for e in given):
                    given.append(EntityIn(name=end))
        speaker = speaker_of(meta, targets, principal.name)
        try:
            found = enrich(
                text,
                written_at=now,
                lexicon=self.lexicon,
                given=given,
                relations=rels,
                event_time=ev,
                speaker=speaker,
                dated_throughout=mkind not in STATED_KINDS,
            )
        except Exception:
            # Extraction is a best effort on top of the write: a fault in it must cost the memory its derived
            # statements, never the write itself. The caller's own entities and relations still count.
            log.exception("offline extraction failed; storing the memory with the caller's entities only")
            basic = extract(text, written_at=now, lexicon=self.lexicon, given=given, times=ev is None)
            found = Enriched(basic.entities, basic.times, tuple(rels), (), ())

        def unaided() -> set[str]:
            """The names extraction makes of the text knowing no entity at all: they tell the writer nothing."""
            try:
                alone = enrich(
                    text,
                    written_at=now,
                    lexicon=EntityLexicon(),
                    given=given,
                    relations=rels,
                    event_time=ev,
                    speaker=speaker,
                )
            except Exception:
                return set()
            return {e.name for e in alone.entities}

        entities, respelt = self._known_to(principal, text, found.entities, given, unaided)
        # A relation whose end the principal may not learn (an alias matched from another team's memories)
        # goes with that entity: the receipt would name it.
        hidden = {e.name.casefold() for e in found.entities} - {e.name.casefold() for e in entities}
        relations = [
            _respell(r, respelt)
            for r in found.relations
            if r.subject.casefold() not in hidden and r.object.casefold() not in hidden
        ]
        facts = tuple(_respell(f, respelt) for f in found.facts)
        resolved = self._resolve(principal, entities, given, targets)
        entities = resolved.entities
        if resolved.linked:  # a name linked to a known entity: its relations and facts are that entity's
            known = {said.casefold(): name for said, name, _ in resolved.linked}

            def to(name: str) -> str:
                return known.get(name.casefold(), name)

            relations = [
                dataclasses.replace(r, subject=to(r.subject), object=to(r.object)) for r in relations
            ]
            facts = tuple(dataclasses.replace(f, subject=to(f.subject), object=to(f.object)) for f in facts)
        if ev is not None:
            event, source_of_time = ev, "caller"
        elif found.times:
            event, source_of_time = found.times[0].when.astimezone(UTC), "content"
        else:
            event, source_of_time = now, "recorded"
        return _Prepared(
            id=content_id(text),
            content=text,
            scopes=targets,
            kind=mkind,
            event_time=event,
            event_time_source=source_of_time,
            valid_from=vf or _stated_start(mkind, found.facts, now),
            valid_to=vt,
            entities=entities,
            relations=relations,
            metadata=meta,
            provenance=Provenance(principal.name, principal.client, src),
            vector=vector,
            facts=facts,
            linked=tuple(resolved.linked),
            proposed=tuple(resolved.proposed),
            effective=vf,
        )

    def _known_to(
        self,
        principal: Principal,
        text: str,
        found: Sequence[EntityIn],
        given: Sequence[EntityIn],
        unaided: Callable[[], set[str]],
    ) -> tuple[builtins.list[EntityIn], dict[str, str]]:
        """The extracted entities a principal with grants may see: an entity the known-entity lexicon matched
        by an alias (its name is not in the text), or a known name the text alone would not make an entity
        (lower case, one capitalised word opening a sentence), is kept only when a memory in a scope the
        principal may read mentions it, or extraction knowing no entity finds it too (``unaided``). Otherwise
        the write receipt, and the memory's entities, would reveal a name learnt from another team's memories,
        or that another team knows a name. A known name kept in another capitalisation than the text's, in a
        spelling no memory the principal may read gave it (another team's), is spelt as the text spells it: the second value maps each such
        name (case-folded) to that spelling, for the relations and facts that name it (``_respell``)."""
        if principal.unrestricted:
            return list(found), {}
        named = {e.name.casefold() for e in given}
        # Spelled exactly as in the text (case included) and a name the text alone makes (a capitalised span),
        # a name tells the writer nothing it did not write; matched any other way (an alias, another
        # capitalisation), it is the spelling someone else stored; a known name the text alone would not make
        # an entity is there because someone stored it.
        spans = set(capitalised_spans(text))
        suspects = [
            e
            for e in found
            if e.name.casefold() not in named
            and (e.name not in text or (e.name not in spans and self.lexicon.claimants(name_key(e.name))))
        ]
        if not suspects:
            return list(found), {}
        tree = self._tree()
        scopes = [str(s) for s in readable(principal.grants or (), tree)]
        hidden = set()
        respelt: dict[str, str] = {}
        said = f" {_norm(text)} "
        with self.graph.read() as conn:
            for e in suspects:
                if not scopes:
                    hidden.add(e.name)
                elif f" {_norm(e.name)} " in said:  # another capitalisation: a readable memory must name it
                    spellings = self.graph.names_given(conn, entity_key(e.name), scopes=scopes)
                    if not spellings:
                        hidden.add(e.name)
                    elif e.name not in spellings:  # stored so elsewhere: spelt as the writer's text spells it
                        own = _as_written(text, e.name)
                        if own is None:
                            hidden.add(e.name)
                        else:
                            respelt[e.name.casefold()] = own
                else:  # matched by an alias: one that a memory in a readable scope gave, and the text holds
                    aliases = self.graph.aliases_given(conn, entity_key(e.name), scopes=scopes)
                    if not any(f" {_norm(a)} " in said for a in aliases):
                        hidden.add(e.name)
            extra = self._other_claimants(conn, text, hidden, scopes) if hidden and scopes else []
        if hidden:  # a name the text makes an entity with no help from the lexicon is the writer's own
            hidden -= unaided()
        kept = [
            dataclasses.replace(e, name=respelt.get(e.name.casefold(), e.name))
            for e in found
            if e.name not in hidden
        ]
        return kept + extra, respelt

    def _other_claimants(
        self, conn: Session, text: str, hidden: set[str], scopes: builtins.list[str]
    ) -> builtins.list[EntityIn]:
        """For a phrase matched to a hidden entity, the entity the principal may know it by instead: one named
        so in a readable memory, or given it as an alias there. The lexicon matches a phrase to the first entity
        given it; without this, another team's alias would take the principal's own entity out of its write."""
        out: builtins.list[EntityIn] = []
        for m in self.lexicon.match(text, limit=v.MAX_ENTITIES, fuzzy=False):
            if m.name not in hidden or not m.key:
                continue
            for name in self.lexicon.claimants(m.key)[1:]:
                key = entity_key(name)
                if (
                    _norm(name) == m.key
                    and self.graph.mentioning(conn, key, scopes=scopes, live_only=False, limit=1)
                ) or any(_norm(a) == m.key for a in self.graph.aliases_given(conn, key, scopes=scopes)):
                    out.append(EntityIn(name))
                    break
        return out

    def _write_intent(self, p: _Prepared, principal: Principal) -> Callable[[Tx], WriteReceipt]:
        def intent(tx: Tx) -> WriteReceipt:
            w = p  # the write, with the scopes of the plan it moves, if it moves one
            cur, existing = self._resolve_content(tx, w.content, w.id)
            if (
                existing is not None
                and not principal.unrestricted
                and not self._can_read(principal, existing, self._tree())
            ):
                # The same words are someone else's memory, in scopes this principal may not read. Joining it
                # would show the writer that memory's metadata, relations, writer and history (a guessed
                # sentence would open them), so the principal gets a memory of its own: its id is salted by
                # the target scopes, so writing it again there is still a duplicate.
                cur, existing = self._resolve_separate(tx, w.content, w.scopes)
            moved = None
            if existing is not None and self._moves(tx, w, existing, principal):
                self._may_move(tx, existing, principal)  # before anything changes: an error commits the rest
                # The same words as a plan not begun, with another start ("the start moved up"): a new memory of
                # them replaces the plan, so the date is not dropped as a duplicate's metadata is.
                moved = _Moved(existing.id, existing)
                cur = content_id(w.content, salt=existing.id)
                # Only the date moves: the kind stays the plan's (memory_write's kind defaults to note, and a
                # fact turned note drops out of recall asking for facts; found by attack22a).
                w = dataclasses.replace(
                    w,
                    kind=existing.kind,
                    scopes=sorted({*existing.scopes, *w.scopes}),
                    valid_to=w.valid_to or self._stated_end(tx, existing, w.effective),
                )
                existing = None
            if existing is not None:
                missing = [s for s in w.scopes if s not in existing.scopes]
                if not missing:
                    return WriteReceipt(
                        cur, "duplicate", existing.scopes, existing.entities, existing.dated_at
                    )
                self.graph.ensure_scopes(tx.conn, missing, tx.now)
                self.graph.link(tx.conn, cur, missing, tx.now)
                tx.record("link", cur)
                all_scopes = tuple(sorted({*existing.scopes, *missing}))
                return WriteReceipt(cur, "linked", all_scopes, existing.entities, existing.dated_at)
            # A moved plan's only near-duplicate is the plan it replaces: never folded into it.
            near = () if moved is not None else self._still_near(tx, w) if w.fold else w.near
            if w.fold and moved is None and (folded := self._fold(tx, w, near)) is not None:
                return folded
            vec = w.vector if w.vector is not None else self.graph.vector_of(tx.conn, w.id)
            if vec is None:  # the content vanished (purged) between our check and now: embed after all
                vec = [float(x) for x in self.embedder.embed([w.content])[0]]
            new = self._new_memory(w, cur, vec, tx.now)
            self._insert(tx, new, w.scopes, w.entities, w.relations, self._since(w))
            if moved is not None:
                self._move_plan(tx, moved, cur)
            added = self._added(tx, w, principal, cur, moved=moved)
            return dataclasses.replace(added, near_duplicates=near) if near else added

        return intent

    def _moves(self, tx: Tx, p: _Prepared, existing: Memory, principal: Principal) -> bool:
        """Whether writing ``p``, the same words as ``existing``, moves a plan: ``existing`` is valid only from
        a later date, the caller gave another ``valid_from``, and may write every scope of the plan. Anything
        else already stored is a duplicate whatever the write's metadata, as before."""
        return (
            p.effective is not None
            and existing.valid_from > tx.now
            and p.effective != existing.valid_from
            and existing.retired_at is None
            and existing.superseded_by is None
            and self._access(principal, self._tree()).can_write(existing.scopes)
            and self.graph.live_state(tx.conn, content_id(p.content, salt=existing.id)) is None
        )

    def _plan_relations(
        self, text: str, start: datetime, now: datetime, principal: Principal
    ) -> builtins.list[RelationIn]:
        """The relations a plan of these words recorded, for a write that may move it (the same words with
        another start and no relations of its own): the caller may have given them once because the words
        alone do not say them, and without them the moved plan ends nothing (what the plan ended held again
        for good; found by attack22a). Only a plan this principal may read and move; the intent decides
        whether the write moves it (``_moves``), and a duplicate ignores them."""
        with self.graph.read() as conn:
            try:
                _, plan = self._live_version(conn, text, content_id(text))
            except Conflict:
                return []
            if plan is None or plan.valid_from <= now or plan.valid_from == start:
                return []
            tree = self._tree()
            if not principal.unrestricted and not (
                self._can_read(principal, plan, tree) and self._access(principal, tree).can_write(plan.scopes)
            ):
                return []
            return [
                RelationIn(r.subject, r.predicate, r.object)
                for r in self.graph.relation_history(conn, [plan.id])
                if r.memory_id == plan.id
            ]

    def _stated_end(self, tx: Tx, plan: Memory, start: datetime | None) -> datetime | None:
        """The end stated with a plan that moves to ``start`` with no end of its own: the date moves, the end
        stays (a secondment from June to September moved up to May still ends in September). An end a later
        plan gave it (``planned_ends``) is not the plan's own: reconciliation gives it again, and it goes when
        that plan is cancelled. Raises InvalidInput before anything changes when the start is not before that
        end (found by attack22a: the moved plan held for good)."""
        if plan.valid_to is None or start is None:
            return None
        if any(
            end == plan.valid_to for _, end in self.graph.planned_ends(tx.conn, [plan.id]).get(plan.id, [])
        ):
            return None
        if start >= plan.valid_to:
            raise InvalidInput(
                f"the plan ends at {plan.valid_to.isoformat()}, not after its new start {start.isoformat()}",
                hint="nothing was changed; pass valid_to too, with the plan's new end",
            )
        return plan.valid_to

    def _may_move(self, tx: Tx, plan: Memory, principal: Principal) -> None:
        """Raise ScopeDenied when the plan ends a memory in a scope ``principal`` may not write. The move cancels
        the plan (what it ended holds again) and reconciles the new date as this principal's plan, which never
        ends a memory there: the move would leave another scope's value holding for good, changed by a principal
        with no grant on it, and two values after the date where both are read (found by attack22a)."""
        if principal.unrestricted:
            return
        ended: set[str] = set()
        for r in self.graph.relation_history(tx.conn, [plan.id]):
            for o in self.graph.open_relations(tx.conn, r.subject, [r.predicate], at=tx.now):
                if o.memory_id != plan.id:
                    ended.add(o.memory_id)
        ended = {
            s.memory_id
            for s in self.graph.relation_history(tx.conn, sorted(ended))
            if s.ended_by == plan.id and s.valid_to == plan.valid_from
        }
        access = self._access(principal, self._tree())
        if all(access.can_write(m.scopes) for m in self.graph.fetch(tx.conn, sorted(ended)).values()):
            return
        # Neither the memory nor its scopes are named: the principal may not read all of them.
        raise ScopeDenied(
            f"{principal.name} may not move this plan: it ends a value also kept in scopes you may not write, "
            "which the move would leave holding there for good",
            hint="nothing was changed; ask a principal who may write every scope of the value the plan ends to "
            "move it",
        )

    def _move_plan(self, tx: Tx, moved: _Moved, cur: str) -> None:
        """``cur`` (just inserted) replaces the plan ``moved.plan``, which never held; what the plan ended at its
        start holds again (``_cancel_plan``), until ``cur``'s reconciliation ends it at the new date.
        """
        self.graph.supersede(
            tx.conn,
            moved.plan,
            cur,
            reason="its start moved",
            at=tx.now,
            close_valid_to=moved.memory.valid_from,
        )
        tx.record("supersede", moved.plan)
        self._cancel_plan(tx, moved.memory, ends=moved.ends)
        self._sources_changed(tx, [moved.plan], withdraw=True)

    def _cancel_plan(
        self,
        tx: Tx,
        plan: Memory,
        gone: Collection[str] = (),
        ends: dict[str, datetime | None] | None = None,
    ) -> list[str]:
        """Undo what a planned change ``plan`` (retired before its start, moved, or erased) did to the values it
        was to replace: they hold again past its start (``reopen_ended_by``), until a later plan for the same
        value that had ended ``plan`` itself (Acme, then Globex from March, then Initech from June: Globex
        cancelled, Acme ends in June, not never). ``gone`` are memories going with it (an erasure), never
        reopened or passed on. Returns the reopened memories, each recorded as a change; ``ends`` receives each
        one's validity end as this transaction leaves it (a store may read only committed state until then)."""
        later = {
            (entity_key(r.subject), r.predicate): (r.valid_to, r.ended_by)
            for r in self.graph.relation_history(tx.conn, [plan.id])
            if r.ended_by is not None and r.valid_to is not None and r.ended_by not in gone
        }
        reopened = [
            x for x in self.graph.reopen_ended_by(tx.conn, plan.id, at=plan.valid_from) if x not in gone
        ]
        held = self.graph.fetch(tx.conn, [*reopened, *{by for _, by in later.values()}])
        for x in reopened:
            tx.record("reopen", x)
            if ends is not None:
                ends[x] = None
            for r in self.graph.relation_history(tx.conn, [x]):
                passed = later.get((entity_key(r.subject), r.predicate))
                # Reopened: open again, or still as the plan left it where the store applies its writes at
                # the commit (FalkorDB's reads in a transaction do not see them).
                if passed is None or not (
                    r.valid_to is None or (r.ended_by == plan.id and r.valid_to == plan.valid_from)
                ):
                    continue
                end, by = passed
                # Only a later plan still standing, written into every scope of what it would end (so its
                # writer could have ended it, and the reconciler would have): a plan in one scope never ends
                # another scope's memory this way.
                successor, value = held.get(by), held.get(x)
                if successor is None or value is None or successor.retired_at or successor.superseded_by:
                    continue
                if not set(value.scopes) <= set(successor.scopes):
                    continue
                self.graph.close_relation(
                    tx.conn, x, r.subject, r.predicate, r.object, valid_to=end, ended_by=by
                )
                self.graph.end_validity(tx.conn, x, valid_to=end, by=by)
                if ends is not None:
                    ends[x] = end
        return reopened

    def _bulk_intent(
        self, chunk: Sequence[_Prepared], principal: Principal
    ) -> Callable[[Tx], list[WriteReceipt | MnemographError]]:
        """One intent for many writes, with the same outcome as ``_write_intent`` for each in order.

        New content (its id not in the store, not repeated earlier in the chunk) is inserted a run at a time in
        a few set-based statements (``insert_many``); then, in order, each memory's relations, change record,
        proposals and reconciliation, exactly as one write does them after its insert. Whatever reads the store
        in those steps reads relations, proposals and the state of memories that recorded relations, which the
        run's inserts leave as they were. Content the store already has (a duplicate, a link, a re-assertion)
        ends the run and takes the one-write path. A domain error fails its item alone, as it does its intent.
        """

        def intent(tx: Tx) -> list[WriteReceipt | MnemographError]:
            seen = self.graph.present(tx.conn, [p.id for p in chunk])
            out: list[WriteReceipt | MnemographError] = []
            run: list[_Prepared] = []
            for p in chunk:
                if p.vector is not None and p.id not in seen:
                    run.append(p)
                    seen.add(p.id)
                    continue
                out += self._insert_run(tx, run, principal)
                run = []
                try:
                    out.append(self._write_intent(p, principal)(tx))
                except MnemographError as exc:
                    out.append(exc)
            out += self._insert_run(tx, run, principal)
            return out

        return intent

    def _insert_run(self, tx: Tx, run: Sequence[_Prepared], principal: Principal) -> list[WriteReceipt]:
        if not run:
            return []
        rows = [NewRow(self._new_memory(p, p.id, p.vector or [], tx.now), p.scopes, p.entities) for p in run]
        self.graph.insert_many(tx.conn, rows, tx.now)
        # Proposals read and write only SAME_AS edges, which neither relations nor reconciliation touch: the
        # run's go first, together, with what each write would have recorded on its own.
        proposals = self._record_proposals_run(tx, [(p.id, p.proposed, p.scopes) for p in run])
        out: list[WriteReceipt] = []
        for p, made in zip(run, proposals, strict=True):
            self._relate(tx, p.id, p.relations, self._since(p))
            try:
                out.append(self._added(tx, p, principal, p.id, made))
            except MnemographError as exc:
                # Past its insert a write cannot fail alone any more: undo the whole transaction instead.
                raise RuntimeError(f"bulk write rolled back: {exc.message}") from exc
        return out

    @staticmethod
    def _new_memory(p: _Prepared, mid: str, vec: Sequence[float], now: datetime) -> NewMemory:
        return NewMemory(
            mid,
            p.content,
            p.kind,
            p.provenance,
            p.metadata,
            p.event_time,
            p.event_time_source,
            p.valid_from,
            p.valid_to,
            now,
            vec,
        )

    @staticmethod
    def _since(p: _Prepared) -> dict[tuple[str, str, str], datetime]:
        return {(f.subject, f.predicate, f.object): f.at for f in p.facts if f.dated}

    def _added(
        self,
        tx: Tx,
        p: _Prepared,
        principal: Principal,
        cur: str,
        made: tuple[builtins.list[str], builtins.list[str]] | None = None,
        moved: _Moved | None = None,
    ) -> WriteReceipt:
        """The receipt of a memory just inserted in ``tx``, once its proposals (``made`` when already recorded:
        ids, pairs held back) and reconciliation are done."""
        names = tuple(sorted(e.name for e in p.entities))
        event_time = p.event_time if dated(p.kind, p.event_time_source) else None
        proposals, held = made if made is not None else self._record_proposals(tx, cur, p.proposed, p.scopes)
        resolved = tuple(f"{said} -> {name} ({tier})" for said, name, tier in p.linked)
        receipt = WriteReceipt(
            cur,
            "added",
            tuple(sorted(p.scopes)),
            names,
            event_time,
            resolved=resolved,
            proposals=tuple(proposals),
            not_proposed=tuple(held),
        )
        if p.facts:
            return self._reconcile(tx, receipt, p, principal, moved)
        return dataclasses.replace(receipt, supersedes=(moved.plan,)) if moved is not None else receipt

    def use_llm(self, extractor: llm.Extractor) -> None:
        """Enrich every newly added memory with ``extractor`` (Claude) after its commit, in the background."""
        if self.enricher is None:
            self.enricher = llm.Enricher(extractor, self._apply_llm)

    def use_sampling(self, *, limit: int = SAMPLING_QUEUE) -> None:
        """Accept writes that bring their writer's own model (``write(extractor=...)``: MCP sampling). They
        are asked one at a time per session (its extractor's ``owner``), on a worker of that session's own;
        past ``limit`` memories of one session waiting, its memory is recorded as skipped (the offline
        extraction stands) rather than queued."""
        if self.sampler is None:
            self.sampler = llm.Enricher(None, self._apply_llm, limit=limit)

    def enrich_later(
        self,
        r: WriteReceipt,
        p: _Prepared,
        now: datetime,
        principal: Principal,
        extractor: llm.Extractor | None,
    ) -> None:
        """Queue a newly added memory for the model pass after its commit: the writer's own model when it
        brought one and sampling is on, else the configured LLM, else nothing (the offline extraction)."""
        job = self._llm_job(r, p, now, principal)
        if extractor is not None and self.sampler is not None:
            # Bound to the session that wrote this memory: its text goes to that client and no other.
            self.sampler.submit(dataclasses.replace(job, extractor=extractor))
        elif self.enricher is not None:
            self.enricher.submit(job)

    def wait_enriched(self, timeout: float = 30.0) -> bool:
        """Block until the LLM pass has handled every memory written so far (True; False on timeout)."""
        return all(e is None or e.wait_idle(timeout) for e in (self.enricher, self.sampler))

    def _llm_job(self, r: WriteReceipt, p: _Prepared, now: datetime, principal: Principal) -> llm.Job:
        speaker = speaker_of(p.metadata, p.scopes, principal.name)
        return llm.Job(
            r.id,
            p.content,
            now,
            p.event_time,
            tuple(p.scopes),
            speaker,
            self._access(principal),
            principal=principal.name,
            client=principal.client,
        )

    def _apply_llm(
        self, job: llm.Job, result: llm.LlmResult | None, error: llm.ExtractionFailed | None
    ) -> None:
        model = self.enricher.extractor.model if self.enricher is not None and self.enricher.extractor else ""

        def intent(tx: Tx) -> Outcome | None:
            out = llm.apply(
                self.graph,
                tx,
                job,
                result,
                error,
                functional=self.functional,
                model=model,
                lexicon=self.lexicon,
            )
            if out is not None and out.supersedes:  # as at write time (``_reconcile``)
                self._sources_changed(tx, out.supersedes, withdraw=True)
            if result is not None:  # relations the model read: chains through them, as a write's
                self._relations_recorded(tx, job.memory_id, job.scopes)
            return out

        out = self.reconciler.submit(intent)
        if out is not None and (out.supersedes or out.contradicts):
            # Other memories changed on the writer's behalf, after the call that wrote: in the audit log as the
            # write's own changes are, under the writer's name, with the model that decided (never content).
            self.audit.record(
                "enrich",
                principal=job.principal,
                client=job.client,
                ids=[job.memory_id, *out.supersedes, *out.contradicts],
                by=(job.extractor.model if job.extractor is not None else model) or "llm",
                superseded=len(out.supersedes),
                contradicted=len(out.contradicts),
            )

    def _access(self, principal: Principal, tree: Mapping[ScopeId, ScopeId] | None = None) -> Access:
        """What reconciliation may see and change on ``principal``'s behalf: in ``tree``, else in the scope
        tree as it is at each check (a background job runs later, after scopes may have moved, or after the
        principal's token was revoked: then it may see and change nothing)."""

        def may(level: Level) -> Callable[[Sequence[str]], bool]:
            def check(scopes: Sequence[str]) -> bool:
                if principal.unrestricted:
                    return True
                if tree is None and not self.principal_live(principal):
                    return False  # a background job's writer whose token was revoked since: nothing
                parents = self._tree() if tree is None else tree
                test = any if level is Level.READ else all
                return test(principal.may(level, ScopeId.parse(s), parents) for s in scopes)

            return check

        return Access(may(Level.READ), may(Level.WRITE))

    def _reconcile(
        self, tx: Tx, receipt: WriteReceipt, p: _Prepared, principal: Principal, moved: _Moved | None = None
    ) -> WriteReceipt:
        """Updates, contradictions and duplicates of the new memory's facts (``storage.enrich.reconcile``)."""
        own: dict[str, int] = {}  # relations this memory itself just counted, per name
        for r in p.relations:
            for end in (r.subject, r.object):
                own[_norm(end)] = own.get(_norm(end), 0) + 1
        out, changed = reconcile(
            self.graph,
            tx.conn,
            new_id=receipt.id,
            scopes=p.scopes,
            facts=p.facts,
            functional=self.functional,
            access=self._access(principal, self._tree()),
            now=tx.now,
            related=lambda name: self.lexicon.relations(name) > own.get(_norm(name), 0),
            effective=p.effective,
            exclude={moved.plan} if moved is not None else frozenset(),
            ends=moved.ends if moved is not None else None,
        )
        for mid in changed:
            tx.record("supersede", mid)
        if changed:  # no longer current: a digest saying their words goes now, and is rebuilt
            self._sources_changed(tx, changed, withdraw=True)
        return dataclasses.replace(
            receipt,
            relations=tuple(out.recorded),
            supersedes=(*((moved.plan,) if moved is not None else ()), *out.supersedes),
            superseded_by=out.superseded_by,
            contradicts=tuple(out.contradicts),
            duplicates=tuple(out.duplicates),
            supersedes_later=tuple(out.supersedes_later),
        )

    def _resolve_separate(self, tx: Tx, text: str, scopes: Sequence[str]) -> tuple[str, Memory | None]:
        """``_resolve_content`` for words another principal stored where this one may not read: the id is
        salted by the target scopes, keyed by the store's secret (``scopes_tag``). A memory a store made before
        secrets holds under the unsalted id keeps it, so writing its words again there is still a duplicate."""
        secret = self.graph.id_secret(tx.conn)
        own = content_id(text, salt=_SEPARATE + scopes_tag(scopes, secret))
        if secret and self.graph.live_state(tx.conn, own) is None:
            old = content_id(text, salt=_SEPARATE + scopes_tag(scopes))
            if self.graph.live_state(tx.conn, old) is not None:
                own = old
        return self._resolve_content(tx, text, own)

    def _resolve_content(self, tx: Tx, text: str, mid: str) -> tuple[str, Memory | None]:
        """The id this content gets now, and the current memory that already has it (if any)."""
        return self._live_version(tx.conn, text, mid)

    def _live_version(self, conn: Session, text: str, mid: str) -> tuple[str, Memory | None]:
        """The id this content gets now, and the current memory that already has it (if any), as ``conn`` sees.

        Content that was retired or superseded and is written again is a new assertion: it gets a new id
        derived from the previous one, so history keeps both.
        """
        cur = mid
        for _ in range(1000):
            live = self.graph.live_state(conn, cur)
            if live is None:
                return cur, None
            if live:
                return cur, self.graph.fetch(conn, [cur])[cur]
            cur = content_id(text, salt=cur)
        raise Conflict("this content has been re-asserted too many times")

    def _insert(
        self,
        tx: Tx,
        new: NewMemory,
        scopes: Sequence[str],
        entities: Sequence[EntityIn],
        rels: Sequence[RelationIn],
        since: Mapping[tuple[str, str, str], datetime] | None = None,
    ) -> None:
        self.graph.ensure_scopes(tx.conn, scopes, tx.now)
        self.graph.insert_memory(tx.conn, new, scopes, entities)
        self.graph.link(tx.conn, new.id, scopes, tx.now)
        if entities:
            self.graph.mention(tx.conn, new.id, entities)
        self._relate(tx, new.id, rels, since)

    def _relate(
        self,
        tx: Tx,
        mid: str,
        rels: Sequence[RelationIn],
        since: Mapping[tuple[str, str, str], datetime] | None,
    ) -> None:
        """A new memory's relations and its change record: the rest of ``_insert``."""
        for r in rels:
            vf = (since or {}).get((r.subject, r.predicate, r.object))
            self.graph.relate(tx.conn, mid, r.subject, r.predicate, r.object, tx.now, valid_from=vf)
            # Counted now, not after the commit, so the next write of the same batch sees it (over-counting
            # when the transaction fails is harmless: the count only lets reconciliation skip queries).
            self.lexicon.related(r.subject)
            self.lexicon.related(r.object)
        tx.record("add", mid)


_Said = TypeVar("_Said", RelationIn, Fact)
# Kinds that state how things are (not what happened at a time): a time named in one of their sentences dates
# that sentence's statements only (``storage.enrich.enrich``'s ``dated_throughout``), and a past start their
# statements name is when they became valid (``_stated_start``).
STATED_KINDS = frozenset((MemoryKind.FACT, MemoryKind.PREFERENCE, MemoryKind.NOTE))


def _stated_start(kind: MemoryKind, facts: Sequence[Fact], now: datetime) -> datetime:
    """When a fact, preference or note (the default kind) written with no ``valid_from`` became valid: the
    earliest time its own asserted statements say they took effect ("Sam works at Globex since 1 October
    2025"), if past; else now. Without it the memory held only from its writing while what it replaced was
    closed on 1 October, and ``as_of`` in between found neither. Events and messages keep their validity from
    the writing (they carry an event time instead)."""
    if kind not in STATED_KINDS:
        return now
    said = [f.at for f in facts if f.dated and f.status == "asserted" and f.at < now]
    return min(said) if said else now


def _respell(statement: _Said, respelt: Mapping[str, str]) -> _Said:
    """``statement`` with each end ``_known_to`` respelt (by case-folded name) in the writer's own spelling."""
    if not respelt:
        return statement
    return dataclasses.replace(
        statement,
        subject=respelt.get(statement.subject.casefold(), statement.subject),
        object=respelt.get(statement.object.casefold(), statement.object),
    )


def _as_written(text: str, name: str) -> str | None:
    """``name`` as ``text`` writes it (another capitalisation or spacing of its words), or None if it does not."""
    words = r"\s+".join(re.escape(w) for w in name.split())
    found = re.search(rf"(?<!\w){words}(?!\w)", text, re.IGNORECASE)
    return " ".join(found.group(0).split()) if found else None


def _unit(vector: Sequence[float]) -> npt.NDArray[np.float64]:
    """``vector`` scaled to length 1, for a cosine. A supplied vector's largest number may be anywhere from
    2**-125 to 2**127 (``storage.domain.validation``): its squares overflow float32 above about 1.8e19 (the
    norm was inf, the cosine nan) and vanish below about 1e-19 (the norm was 0). So it is divided by its
    largest magnitude first, in float64; an all-zero vector stays zero (cosine 0 with anything)."""
    v = np.asarray(vector, dtype=np.float64)
    top = float(np.max(np.abs(v))) if v.size else 0.0
    if top == 0.0 or not np.isfinite(top):
        return np.zeros_like(v)
    v = v / top
    return v / float(np.linalg.norm(v))
