"""What the consolidator derives from relations: transitive relations, and a sweep for missed contradictions.

**Transitive relations** (``storage.enrich.transitive``). A memory written with ``A —located_in→ B`` (a
transitive predicate, ``EngineCore.transitive``) is looked up, in its write's transaction, against the open
relations ``B —located_in→ C`` and ``X —located_in→ A`` of current memories sharing a scope with it; each chain
found becomes a group of its two source memories, kept like a conversation (the store is the queue). The
background consolidator then stores the derivation as a memory of kind ``summary`` ("A located in C (derived:
A located in B; B located in C)") in the scopes common to both sources, and names them in its metadata.

It is a memory, not a RELATES edge: reconciliation and the graph lane never take it as a statement (no update,
contradiction or further chain is ever built on it), and recall never shows it in place of its sources: its
match lifts its two sources into its place, explained as derived from them (``storage.recall.pipeline``), and
the memory itself is shown only to a query asking for summaries. Like a digest it is left out of exports
(rebuilt after an import), withdrawn in the transaction that amends, retires or unlinks a source, erased with
its sources, and rebuilt by ``rebuild_digests``. Not built on a shared canonical store (as digests are not).

**The contradiction sweep** (``sweep_contradictions``): current memories whose open relations give one subject
two different values of a functional or fixed predicate, in a scope both are in, with no ``CONTRADICTS``
between them (written before the rules, imported, or linked together later), are linked by the write-time
rules' ``CONTRADICTS`` mark. It never supersedes (which of two undated statements is newer is not certain from
the store), so both stay current and both are surfaced; bounded per call, idempotent, audited.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scopes import Principal
from storage.domain.models import LinkReceipt, MemoryKind, Provenance, RelationIn, WriteReceipt
from storage.domain.records import NewMemory, entity_key
from storage.engine.conversations import _Conversations
from storage.engine.state import _Prepared, content_id
from storage.enrich import transitive as tr
from storage.enrich.consolidate import DEFAULT_QUIET_S
from storage.enrich.reconcile import FIXED
from storage.ports.canonical import Session
from storage.sync.reconciler import Tx

DERIVED_PRINCIPAL = Provenance("mnemograph", "consolidator", "transitive")
SWEEP_LIMIT = 100  # contradictions linked by one sweep call at most (call again for more)
SWEEP_SUBJECTS = 5000  # subjects with relations one read of a sweep call looks at (then the next window)
SWEEP_ROUNDS = 100  # ``sweep_all``: rounds of at most SWEEP_LIMIT pairs each
DISCOVER_SUBJECTS = 20_000  # subjects a full look for chains reads at most (``rebuild_digests``)


class _Derived(_Conversations):
    transitive: frozenset[str] = frozenset(tr.DEFAULT_TRANSITIVE)
    _derived: dict[str, tr.Derivation]  # derived memory id -> what it derives (for recall's explanation)

    # -- lifecycle -----------------------------------------------------------------------------------

    def _start_consolidator(self, quiet: float = DEFAULT_QUIET_S) -> None:
        super()._start_consolidator(quiet)
        self._derived = {}
        ids = [d for d, key in self._digest_ids.items() if tr.is_derived_key(key)]
        if ids:
            with self.graph.read() as conn:
                for mid, m in self.graph.fetch(conn, ids).items():
                    got = _derivation(m.metadata)
                    if got is not None:
                        self._derived[mid] = got

    def is_derived(self, memory_id: str) -> bool:
        return memory_id in getattr(self, "_derived", {})

    def derived_relation(self, memory_id: str) -> tr.Derivation | None:
        """What the derived memory ``memory_id`` derives and from which two memories (None: not one)."""
        return getattr(self, "_derived", {}).get(memory_id)

    # -- chains found at write time ------------------------------------------------------------------

    def _added(
        self, tx: Tx, p: _Prepared, principal: Principal, cur: str, made: Any = None, moved: Any = None
    ) -> WriteReceipt:
        receipt = super()._added(tx, p, principal, cur, made, moved)
        if self.graph.shared:
            return receipt
        if receipt.supersedes:  # an update closed a source's relation: what it justified goes now
            self._withdraw_derived(tx, receipt.supersedes)
        rels = [r for r in p.relations if r.predicate in self.transitive]
        if rels:
            self._find_chains(tx, cur, p.scopes, rels)
        return receipt

    def _relations_recorded(self, tx: Tx, memory_id: str, scopes: Sequence[str]) -> None:
        # Relations recorded after the write (Claude's or the client's model): chained now, as a write's own are
        # in ``_added``, not only by the next ``mnemograph digests``.
        if self.graph.shared or not self.graph.live_state(tx.conn, memory_id):
            return
        rels = [
            r
            for r in self.graph.relation_history(tx.conn, [memory_id])
            if r.valid_to is None and r.predicate in self.transitive
        ]
        if rels:
            self._find_chains(tx, memory_id, scopes, rels)

    def _withdraw_derived(self, tx: Tx, sources: Sequence[str]) -> None:
        """Delete the derivations built from ``sources`` in this transaction and mark them to be derived again
        from what is current (as ``_sources_changed`` does when a source is amended, retired or unlinked)."""
        found = {
            k: d
            for k, d in self.graph.conversations_of(tx.conn, list(sources)).items()
            if tr.is_derived_key(k)
        }
        for key, digest in found.items():
            if digest is not None:
                if self.graph.live_state(tx.conn, digest) is not None:
                    self._drop_digest(tx, digest)
                self._derived.pop(digest, None)
                state = self.graph.conversation_state(tx.conn, key)
                self.graph.set_digest(tx.conn, key, None, (state[0] if state else None) or tx.now)
        if found:
            self.graph.touch_conversations(tx.conn, list(found), tx.now)

    def _find_chains(self, tx: Tx, cur: str, scopes: Sequence[str], rels: Sequence[Any]) -> None:
        """Join each chain through the new memory's relations to a derivation group (pending for the
        consolidator)."""
        self._join(tx, self._chains(tx.conn, cur, scopes, rels))

    def _chains(
        self, conn: Session, cur: str, scopes: Sequence[str], rels: Sequence[Any]
    ) -> dict[str, list[str]]:
        """The chains through ``rels`` (relations memory ``cur`` in ``scopes`` states, with ``subject``,
        ``predicate`` and ``object``), both ways. Bounded: ``FANOUT`` relations read per side, ``MAX_PER_WRITE``
        chains in all."""
        groups: dict[str, list[str]] = {}
        mine = set(scopes)
        for r in rels:
            if len(groups) >= tr.MAX_PER_WRITE:
                break
            start, end = entity_key(r.subject), entity_key(r.object)
            # r.object —p→ C: the new memory's statement comes first
            # scoped before the cut: another scope's statements about r.object never crowd these out
            for o in self.graph.open_relations(
                conn, r.object, [r.predicate], newest=tr.FANOUT, scopes=list(mine)
            ):
                if o.memory_id != cur and o.object_id != start and self._source(o.memory_id, o.scopes, mine):
                    groups.setdefault(tr.derived_key(cur, o.memory_id), [cur, o.memory_id])
            # X —p→ r.subject: the new memory's statement comes second
            for e in self.graph.relations(conn, start, limit=4 * tr.FANOUT, scopes=list(mine)):
                if e.outgoing or e.predicate != r.predicate or e.memory_id == cur or e.other_id == end:
                    continue
                if self._source(e.memory_id, e.scopes, mine):
                    groups.setdefault(tr.derived_key(e.memory_id, cur), [e.memory_id, cur])
        return dict(list(groups.items())[: tr.MAX_PER_WRITE])

    def _join(self, tx: Tx, groups: dict[str, list[str]]) -> None:
        for key, ids in groups.items():
            if self.graph.conversation_state(tx.conn, key) is None:
                self.graph.join_conversation(tx.conn, key, ids, tx.now)

    def _discover(self, sources: Sequence[str] | None) -> int:
        """Chains the write path did not see (an import, memories written before derivations, relations an
        amend or the LLM pass added): through the open relations of ``sources``, or of every subject with
        relations when None (at most ``DISCOVER_SUBJECTS``). Returns how many new groups were queued."""
        if self.graph.shared or not self.transitive:
            return 0
        predicates = sorted(self.transitive)
        groups: dict[str, list[str]] = {}
        with self.graph.read() as conn:
            if sources is None:
                subjects = [e.name for e in self.graph.known_entities(conn) if e.relations > 0]
                for subject in subjects[:DISCOVER_SUBJECTS]:
                    for o in self.graph.open_relations(conn, subject, predicates):
                        if o.memory_id not in self._digest_ids:
                            rel = RelationIn(subject, o.predicate, o.object_name)
                            groups.update(self._chains(conn, o.memory_id, o.scopes, [rel]))
            else:
                records = self.graph.fetch(conn, sources)
                states = self.graph.relation_history(conn, list(records))
                for r in states:
                    m = records.get(r.memory_id)
                    if (
                        r.valid_to is None
                        and r.predicate in self.transitive
                        and m is not None
                        and m.status.value == "current"
                        and m.id not in self._digest_ids
                    ):
                        groups.update(self._chains(conn, m.id, m.scopes, [r]))
            for key in list(groups):
                if self.graph.conversation_state(conn, key) is not None:
                    del groups[key]
        if groups:
            self.reconciler.submit(lambda tx: self._join(tx, groups))
        return len(groups)

    def rebuild_digests(self) -> int:
        """As ``_Conversations.rebuild_digests``, after looking for every chain a derivation could be built from
        (``mnemograph digests``: after an import, or on a store written before derivations)."""
        self._discover(None)
        return super().rebuild_digests()

    def _rejoin_conversations(self, imported: Sequence[Any], known: Any = None) -> None:
        super()._rejoin_conversations(imported, known)
        self._discover([m.id for m in imported])  # derivations are left out of exports: found again here
        self._sweep_around([m.id for m in imported])  # two imported values the file did not link: linked now
        self._wake_consolidator()  # the derivations found above are pending (this line had slid into sweep_all)

    def link(self, id: str, scope: str, **kwargs: Any) -> LinkReceipt:
        receipt = super().link(id, scope, **kwargs)
        if receipt.changed:  # side by side with what the scope holds now: the rules never compared them
            self._sweep_around([receipt.id])
        return receipt

    def _sweep_around(self, ids: Sequence[str]) -> None:
        """The contradiction sweep over the subjects of ``ids``' statements, after their commit: what a link
        or an import puts side by side in one scope is compared as a write's statements are (linked, never
        superseded; ``sweep_contradictions``)."""
        with self.graph.read() as conn:
            subjects = sorted({r.subject for r in self.graph.relation_history(conn, list(ids))})
        if subjects:
            self.sweep_all(subjects)

    def sweep_all(self, subjects: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """``sweep_contradictions`` round after round until one links nothing (``SWEEP_ROUNDS`` at most):
        every pair linked (``mnemograph sweep``)."""
        linked: list[tuple[str, str]] = []
        for _ in range(SWEEP_ROUNDS):
            got = self.sweep_contradictions(subjects=subjects)
            linked += got
            if not got:
                break
        return linked

    def _source(self, memory_id: str, scopes: Sequence[str], mine: set[str]) -> bool:
        """A memory a derivation may start from: not derived itself, sharing a scope with the new memory."""
        return memory_id not in self._digest_ids and bool(mine & set(scopes))

    # -- erasure -------------------------------------------------------------------------------------

    def _derived_from(self, tx: Tx, ids: Sequence[str]) -> tuple[list[str], list[str]]:
        derived, keys = super()._derived_from(tx, ids)
        known = getattr(self, "_derived", {})  # as is_derived: none before the consolidator starts
        for d in [*derived, *ids]:
            known.pop(d, None)  # its words came from the erased sources
        return derived, keys

    def _sources_erased(self, tx: Tx, keys: Sequence[str]) -> None:
        # A derivation's group is named by a hash of its two sources' ids (hashes of their content): kept with
        # the source that stays, the name would confirm the erased words were stored and chained. It goes in
        # the erasure's transaction, before the rewrite; the source left may start a new chain later.
        self.graph.drop_conversations(tx.conn, [k for k in keys if tr.is_derived_key(k)])
        super()._sources_erased(tx, [k for k in keys if not tr.is_derived_key(k)])

    # -- the consolidator's build --------------------------------------------------------------------

    def _build_digest(self, key: str) -> bool:
        if not tr.is_derived_key(key):
            return super()._build_digest(key)
        with self.graph.read() as conn:
            state = self.graph.conversation_state(conn, key)
            if state is None:
                return True
            changed, _ = state
            records = self.graph.fetch(conn, self.graph.conversation_members(conn, key))
            live = {i: m for i, m in records.items() if m.status.value == "current"}
            found = (
                tr.chain(self.graph.relation_history(conn, list(live)), sorted(self.transitive))
                if len(live) >= 2
                else None
            )
        scopes = tr.common_scopes(live[found.first].scopes, live[found.second].scopes) if found else []
        text = found.text() if found is not None and scopes else None
        vector = [float(x) for x in self.embedder.embed([text])[0]] if text is not None else None

        def swap(tx: Tx) -> bool:
            now_state = self.graph.conversation_state(tx.conn, key)
            if now_state is None or now_state[0] != changed:
                return False  # changed since we read it: still pending, built again
            if len(self.graph.present(tx.conn, list(records))) < len(records):  # one statement (day digests)
                return False  # a source was erased meanwhile
            old = now_state[1]
            if old is not None and self.graph.live_state(tx.conn, old) is None:
                old = None
            new_id = content_id(text, salt=f"digest:{key}") if text is not None else None
            if old is not None and old != new_id:
                self._drop_digest(tx, old)
                self._derived.pop(old, None)
            if new_id is not None and new_id == old:
                self._rescope(tx, old, scopes)  # a source linked to or unlinked from a scope
            if new_id is not None and new_id != old and found is not None and vector is not None:
                meta = {
                    "derived_from": [found.first, found.second],
                    "sources": [found.first, found.second],
                    "memories": 2,
                    "relation": {
                        "subject": found.subject,
                        "predicate": found.predicate,
                        "via": found.via,
                        "object": found.object,
                    },
                    "digest_by": "transitive",
                }
                new = NewMemory(
                    new_id, text or "", MemoryKind.SUMMARY, DERIVED_PRINCIPAL, meta, tx.now, "recorded",
                    tx.now, None, tx.now, vector,
                )  # fmt: skip
                self._insert(tx, new, scopes, [], [])
                self._digest_ids[new_id] = key
                self._derived[new_id] = found
            self.graph.set_digest(tx.conn, key, new_id, changed or tx.now)
            return new_id is not None or old is not None

        return bool(self.reconciler.submit(swap))

    # -- the contradiction sweep ---------------------------------------------------------------------

    def sweep_contradictions(
        self, *, limit: int = SWEEP_LIMIT, subjects: Sequence[str] | None = None
    ) -> list[tuple[str, str]]:
        """Link, with ``CONTRADICTS``, pairs of current memories that give one subject two values of a
        functional or fixed predicate in a scope both are in, and that no rule linked yet. At most ``limit``
        pairs per call (call again until it returns none); returns the pairs linked (new, old). ``subjects``:
        only these (a link's or an import's memories' subjects), else every subject with relations."""
        predicates = sorted(self.functional | FIXED)
        if subjects is None:
            with self.graph.read() as conn:
                subjects = [e.name for e in self.graph.known_entities(conn) if e.relations > 0]
        subjects = list(subjects)
        pairs: list[tuple[str, str, str]] = []
        # A window of subjects per read, on to the next until ``limit`` pairs are found: every subject is reached
        # (a single window read by every call left the rest of a large store unswept).
        for start in range(0, len(subjects), SWEEP_SUBJECTS):
            with self.graph.read() as conn:
                window = subjects[start : start + SWEEP_SUBJECTS]
                pairs += self._conflicts(conn, window, predicates, limit - len(pairs))
            if len(pairs) >= limit:
                break
        pairs = list({(new, old): (new, old, p) for new, old, p in pairs}.values())
        if not pairs:
            return []

        def link(tx: Tx) -> list[tuple[str, str]]:
            done = []
            for new, old, predicate in pairs:
                # Read again in the writer: a pair linked, retired or erased since is left alone.
                if (
                    self.graph.live_state(tx.conn, new)
                    and self.graph.live_state(tx.conn, old)
                    and old not in self.graph.contradictions(tx.conn, new)
                ):
                    self.graph.contradict(tx.conn, new, old, predicate, tx.now)
                    done.append((new, old))
            return done

        done: list[tuple[str, str]] = self.reconciler.submit(link)
        if done:
            self.audit.record(
                "sweep",
                principal=DERIVED_PRINCIPAL.principal,
                client=DERIVED_PRINCIPAL.client,
                ids=sorted({i for pair in done for i in pair}),
                contradicted=len(done),
            )
        return done

    def _conflicts(
        self, conn: Session, subjects: Sequence[str], predicates: Sequence[str], limit: int
    ) -> list[tuple[str, str, str]]:
        out: list[tuple[str, str, str]] = []
        seen: set[tuple[str, str]] = set()
        for subject in subjects:
            rels = [
                r
                for r in self.graph.open_relations(conn, subject, predicates)
                if r.memory_id not in self._digest_ids
            ]
            if len(rels) < 2:
                continue
            linked = self.graph.contradictions_of(conn, list({r.memory_id for r in rels}))
            for i, a in enumerate(rels):
                for b in rels[i + 1 :]:
                    if (
                        a.predicate != b.predicate
                        or a.object_id == b.object_id
                        or a.memory_id == b.memory_id
                        or not set(a.scopes) & set(b.scopes)
                    ):
                        continue
                    old, new = (a, b) if a.recorded_at <= b.recorded_at else (b, a)
                    pair = (new.memory_id, old.memory_id)
                    if (
                        pair in seen
                        or old.memory_id in linked.get(new.memory_id, ())
                        or new.memory_id in linked.get(old.memory_id, ())
                    ):
                        continue
                    seen.add(pair)
                    out.append((new.memory_id, old.memory_id, a.predicate))
                    if len(out) >= limit:
                        return out
        return out


def _derivation(meta: dict[str, Any]) -> tr.Derivation | None:
    rel, src = meta.get("relation"), meta.get("derived_from")
    if not isinstance(rel, dict) or not isinstance(src, list) or len(src) != 2:
        return None
    try:
        return tr.Derivation(
            str(rel["subject"]),
            str(rel["predicate"]),
            str(rel["via"]),
            str(rel["object"]),
            str(src[0]),
            str(src[1]),
        )
    except KeyError:
        return None
