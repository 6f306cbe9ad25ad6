"""Entity resolution: new names matched to known entities at write time, and ``SAME_AS`` proposals decided later.

At write time (``_resolve``, called by ``storage.engine.writes``) each entity a memory names that the lexicon does
not know exactly (name or alias) is compared with the few known names the lexicon's blocking returns
(``EntityLexicon.similar``), judged by ``storage.language.resolve.judge``. Only entities the writer may read are
candidates, and they are filtered *before* deciding, so whether a write links, proposes or does nothing never
depends on another team's entities. One confident candidate named in a scope the writer may write: the mention
is linked to it (the new spelling becomes one of its aliases); one it only reads is proposed, so a name planted
in a shared scope cannot take over the writer's own memories. Anything else that passes: a pending ``SAME_AS`` proposal for each of the best
three, recorded in the write's own transaction. Never a merge. A lone word that no name of as many words matched
may be a known person's surname ("Okafor" beside "Ngozi Okafor": the partial tier, proposed only). A scope holds
at most ``PENDING_CAP`` pending proposals; past it the write is stored as usual and its receipt lists the pairs
it did not propose.

A proposal is visible to a principal who may read the memory that raised it and a memory mentioning each
entity, and it is shown only the scopes it may read; deciding one also needs a write grant on every scope the
proposal applies to (a decision changes recall there, like an amend of a memory shared with them). Accepting
joins the two in the lexicon (the graph lane walks from both), rejecting keeps them apart for good (the pair is
never proposed again), and ``undo`` returns a decided proposal to pending. Nothing is rewritten, so undo is
exact.
"""

from __future__ import annotations

import base64
import builtins
import dataclasses
import hashlib
import re
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from scopes import LOCAL_PRINCIPAL, Level, Principal, ScopeId, readable
from storage.domain.errors import Conflict, InvalidInput, NotFound, ScopeDenied
from storage.domain.models import MAX_PROPOSAL_PAGE, EntityIn
from storage.domain.records import SameAs, entity_key
from storage.engine.scopes import _Scopes
from storage.engine.state import scopes_tag
from storage.language.extraction import name_key
from storage.language.resolve import Judgement, judge, judge_partial
from storage.ports.canonical import Session
from storage.sync.reconciler import Tx

MAX_PROPOSALS = 3  # per new name: the best candidates only
MAX_MEANING_TEXTS = 64  # names the meaning tier embeds per write, at most (a write names up to 64 entities)
# Pending proposals per scope: past it, a write still stores its memory and its names (each its own entity, as
# for a name with no candidate) but raises no more proposals there, and its receipt lists the pairs it did not
# propose. A proposal asks a person; hundreds undecided are not read, and any writer of a shared scope could
# otherwise grow every reader's list without bound (attack9 F4).
PENDING_CAP = 200
PAGE_MAX = MAX_PROPOSAL_PAGE
STATUSES = ("pending", "accepted", "rejected")
ACTIONS = ("accept", "reject", "undo")
_ID = re.compile(r"^[0-9a-f]{8,32}$")
_NEXT = {"accept": ("pending", "accepted"), "reject": ("pending", "rejected")}


@dataclass(frozen=True, slots=True)
class ProposalPage:
    """One page of a proposal listing, oldest first; pass ``next_cursor`` back for the next (None: the last)."""

    items: tuple[SameAs, ...]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Resolution:
    """What resolution did to one write's entities: the entities to store, names linked to known entities
    (``(said, known, tier)``) and proposals to record with the memory."""

    entities: list[EntityIn]
    linked: list[tuple[str, str, str]]
    proposed: list[tuple[str, str, Judgement]]


def proposal_id(a: str, b: str, scopes: Sequence[str], secret: str = "") -> str:
    """One proposal per pair (either order) and target scopes: each team decides its own. The scopes go in
    keyed by the store's secret (``scopes_tag``): a reader is shown a proposal's id and only the scopes it may
    read, and must not be able to test a guess of the others. ``secret`` "": the id of a store made before."""
    ka, kb = sorted((entity_key(a), entity_key(b)))
    return hashlib.sha256(f"same_as\0{ka}\0{kb}\0{scopes_tag(scopes, secret)}".encode()).hexdigest()[:32]


class _Resolution(_Scopes):
    pending_cap: int = PENDING_CAP

    # -- at write time -----------------------------------------------------------------------------

    def _resolve(
        self,
        principal: Principal,
        entities: Sequence[EntityIn],
        given: Sequence[EntityIn],
        targets: Sequence[str],
    ) -> Resolution:
        """Link or propose each name of ``entities`` the lexicon does not know (see the module docstring).
        Caller-given names are never replaced (what the caller says wins), only proposed."""
        named = {e.name.casefold() for e in given}
        out: list[EntityIn] = []
        linked: list[tuple[str, str, str]] = []
        proposed: list[tuple[str, str, Judgement]] = []
        opened: list[tuple[Session, list[str]]] = []  # the read session and readable scopes, once needed
        budget = [MAX_MEANING_TEXTS]  # the meaning tier's embeddings left for this write

        with ExitStack() as stack:

            def reader() -> tuple[Session, list[str]]:
                if not opened:
                    scopes = [str(s) for s in readable(principal.grants or (), self._tree())]
                    opened.append((stack.enter_context(self.graph.read()), scopes))
                return opened[0]

            def may_know(name: str, key: str) -> bool:
                if principal.unrestricted:
                    return True
                conn, scopes = reader()
                return bool(scopes) and self._may_know(conn, name, key, scopes)

            def named_where_it_writes(name: str, key: str) -> bool:
                # A link rewrites the writer's own mention onto the known entity with no undo, and the slip
                # rules are symmetric ("Johnson" is a slip of a planted "Jonhson"): a name it only reads (a
                # scope others write) may be proposed to it, never take over its memory.
                if principal.unrestricted:
                    return True
                writes = [g for g in principal.grants or () if g.level >= Level.WRITE]
                scopes = [str(s) for s in readable(writes, self._tree())]
                return bool(scopes) and self._may_know(reader()[0], name, key, scopes)

            present = {entity_key(x.name): x.name for x in entities}
            for e in entities:
                new = name_key(e.name)
                # The same words matched as another entity's alias of this write ("Bob" for Robert Smith):
                # one mention, that entity's. Without this the alias became an entity of its own, with the
                # statements about it ("Bob moved to Chicago").
                # Only an alias the writer may know (given in a scope it reads): another team's alias would
                # fold the mention into the entity and so confirm, in the receipt, which name it stands for.
                owner = next(
                    (
                        present[entity_key(c)]
                        for c in self.lexicon.claimants(new)
                        if entity_key(c) in present
                        and entity_key(c) != entity_key(e.name)
                        and may_know(c, new)
                    ),
                    None,
                )
                if owner is not None and e.name.casefold() not in named:
                    linked.append((e.name, owner, "alias"))
                    continue
                # One candidate per entity (its spellings are one node), under the first spelling met.
                judged: dict[str, tuple[Judgement, str]] = {}
                spelt: dict[str, str] = {}
                for known, key in self.lexicon.similar(e.name):
                    if entity_key(known) == entity_key(e.name) or self.lexicon.paired(e.name, known, targets):
                        continue
                    j = judge(new, key)
                    known = spelt.setdefault(entity_key(known), known)
                    if j is not None and (known not in judged or j.score > judged[known][0].score):
                        judged[known] = (j, key)
                judged = {k: v for k, v in judged.items() if may_know(k, v[1])}
                if not judged and len(new.split()) == 1:
                    judged = self._partial(e.name, new, targets, may_know)
                if not judged and self.meaning_threshold is not None:
                    judged = self._by_meaning(e.name, targets, may_know, budget)
                if len(judged) == 1 and e.name.casefold() not in named:
                    known, (j, _) = next(iter(judged.items()))
                    # A name the writer knows already (exactly, or as an alias) keeps its entity: proposed at
                    # most. One known only from scopes it cannot read counts as unknown, or the answer would
                    # tell it that name exists.
                    known_already = any(may_know(c, new) for c in self.lexicon.claimants(new))
                    if j.confident and not known_already and named_where_it_writes(known, key):
                        out.append(EntityIn(known, e.type, tuple(dict.fromkeys((*e.aliases, e.name)))))
                        linked.append((e.name, known, j.tier))
                        continue
                best = sorted(judged.items(), key=lambda kv: (-kv[1][0].score, kv[0]))[:MAX_PROPOSALS]
                proposed.extend((e.name, known, j) for known, (j, _) in best)
                out.append(e)
        return Resolution(out, linked, proposed)

    def _partial(
        self, name: str, new: str, targets: Sequence[str], may_know: Callable[[str, str], bool]
    ) -> dict[str, tuple[Judgement, str]]:
        """The partial tier: known people whose last name is the lone word ``new`` ("Okafor" beside "Ngozi
        Okafor"), those the writer may know; none when more than ``MAX_PROPOSALS`` share it (no one is picked
        out). Tried only when no name of as many words passed."""
        found: dict[str, tuple[Judgement, str]] = {}
        for known, key in self.lexicon.surnamed(new):
            if entity_key(known) == entity_key(name) or self.lexicon.paired(name, known, targets):
                continue
            j = judge_partial(new, key)
            if j is not None and known not in found and may_know(known, key):
                found[known] = (j, key)
        return found if len(found) <= MAX_PROPOSALS else {}

    meaning_threshold: float | None = None  # the meaning tier, off unless set (MNEMOGRAPH_RESOLVE_BY_MEANING)

    def _by_meaning(
        self, name: str, targets: Sequence[str], may_know: Callable[[str, str], bool], budget: list[int]
    ) -> dict[str, tuple[Judgement, str]]:
        """The meaning tier, tried only when no spelling tier found anyone: known names of as many words that
        share a word with ``name`` (``EntityLexicon.sharing_a_word``) and that the writer may know, whose
        embedding's cosine with ``name``'s reaches ``meaning_threshold`` ("Shawn Murphy" for "Sean Murphy").
        Never confident: proposed, never linked. The names' vectors are dropped from the embedder's cache
        after use, so nothing of an entity erased later stays in memory through this tier. ``budget`` (one
        counter per write) caps the names embedded in all: a write of many names sharing words with many known
        ones costs at most ``MAX_MEANING_TEXTS`` embeddings, not names x candidates."""
        threshold = self.meaning_threshold
        assert threshold is not None
        cands: dict[str, str] = {}
        for known, key in self.lexicon.sharing_a_word(name):
            if len(cands) + 1 >= budget[0]:
                break
            if (
                entity_key(known) != entity_key(name)
                and known not in cands
                and not self.lexicon.paired(name, known, targets)
                and may_know(known, key)
            ):
                cands[known] = key
        if not cands:
            return {}
        # The phrases that share the word are compared: a known alias ("Shawn Murphy" of "Boiler Man") by itself,
        # not by its entity's name, which shares nothing with ``name``.
        texts = [name_key(name), *cands.values()]
        budget[0] -= len(texts)
        try:
            vectors = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        finally:
            forget = getattr(self.embedder, "forget", None)
            if forget is not None:
                forget(texts)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        out: dict[str, tuple[Judgement, str]] = {}
        for (known, key), vec in zip(cands.items(), vectors[1:], strict=True):
            cos = float(vectors[0] @ vec)
            if cos >= threshold:
                out[known] = (Judgement("meaning", round(cos, 3), False), key)
        return out

    def _may_know(self, conn: Session, name: str, key: str, scopes: builtins.list[str]) -> bool:
        """Whether a principal reading ``scopes`` may learn entity ``name`` by the phrase ``key``: a memory
        there mentions it by that name, or gave it that alias."""
        eid = entity_key(name)
        if key == name_key(name):
            return bool(self.graph.mentioning(conn, eid, scopes=scopes, live_only=False, limit=1))
        return key in {name_key(a) for a in self.graph.aliases_given(conn, eid, scopes=scopes)}

    def _record_proposals(
        self,
        tx: Tx,
        memory_id: str,
        proposed: Sequence[tuple[str, str, Judgement]],
        scopes: Sequence[str],
    ) -> tuple[list[str], list[str]]:
        """Pending ``SAME_AS`` edges for a memory just inserted in ``tx`` into ``scopes``: the ids recorded, and
        the pairs (``"new ~ known"``) not proposed because a scope of the memory has ``pending_cap`` pending."""
        out: list[str] = []
        held: list[str] = []
        home = tuple(sorted(scopes))
        room: int | None = None  # counted once, and only for a write that proposes something
        for a, b, j in proposed:
            if room is None:
                room = self.pending_cap - max(self.graph.pending_same_count(tx.conn, s) for s in home)
            if room <= 0:
                # Not marked as paired: once some are decided, the next mention of the pair proposes it.
                held.append(f"{a} ~ {b}")
                continue
            pid = self._proposal_id(tx.conn, a, b, home)
            p = SameAs(pid, a, b, j.tier, j.score, memory_id, "pending", tx.now, scopes=home)
            if self.graph.propose_same(tx.conn, p):
                out.append(pid)
                room -= 1
            # Marked at once (before the commit): at worst a failed transaction leaves the pair unproposed until
            # the lexicon is next rebuilt, while unmarked, every mention would ask the store again.
            self.lexicon.paired(a, b, home, add=True)
        return out, held

    def _proposal_id(self, conn: Session, a: str, b: str, home: Sequence[str]) -> str:
        """``proposal_id`` with the store's secret, or the unsalted id of a proposal a store made before secrets
        holds (so a pair it rejected stays rejected, and a pending one is not proposed twice)."""
        return self._proposal_ids(conn, [(a, b, home)])[0]

    def _proposal_ids(self, conn: Session, pairs: Sequence[tuple[str, str, Sequence[str]]]) -> list[str]:
        """``_proposal_id`` of each ``(a, b, home)``, the store asked once for the lot: a ``SAME_AS`` read by id
        passes over every proposal, and one per proposal held a bulk import's writer longer as they grew."""
        if not pairs:
            return []
        secret = self.graph.id_secret(conn)
        if not secret:
            return [proposal_id(a, b, home) for a, b, home in pairs]
        olds = [proposal_id(a, b, home) for a, b, home in pairs]
        kept = {p.id for p in self.graph.same_as(conn, list(dict.fromkeys(olds)))}
        return [
            old if old in kept else proposal_id(a, b, home, secret)
            for old, (a, b, home) in zip(olds, pairs, strict=True)
        ]

    def _record_proposals_run(
        self, tx: Tx, run: Sequence[tuple[str, Sequence[tuple[str, str, Judgement]], Sequence[str]]]
    ) -> list[tuple[list[str], list[str]]]:
        """``_record_proposals`` for each ``(memory id, proposed, scopes)`` in turn, in three statements plus
        one count per scope: the store is asked once which proposals it would take, and the rest (the room each
        scope has left, ids proposed earlier in the run) is followed here as the one-at-a-time calls see it."""
        out: list[tuple[list[str], list[str]]] = [([], []) for _ in run]
        homes = [tuple(sorted(scopes)) for _mid, _proposed, scopes in run]
        asked = [(k, mid, a, b, j) for k, (mid, proposed, _scopes) in enumerate(run) for a, b, j in proposed]
        ids = self._proposal_ids(tx.conn, [(a, b, homes[k]) for k, _mid, a, b, _j in asked])
        wanted = [
            (k, a, b, SameAs(pid, a, b, j.tier, j.score, mid, "pending", tx.now, scopes=homes[k]))
            for (k, mid, a, b, j), pid in zip(asked, ids, strict=True)
        ]
        if not wanted:
            return out
        pending = {
            s: self.graph.pending_same_count(tx.conn, s) for s in {s for k, *_ in wanted for s in homes[k]}
        }
        free = self.graph.proposable(tx.conn, [p for *_, p in wanted])
        room: dict[int, int] = {}
        made: set[str] = set()
        chosen: list[SameAs] = []
        for (k, a, b, p), ok in zip(wanted, free, strict=True):
            if k not in room:
                room[k] = self.pending_cap - max(pending[s] for s in homes[k])
            if room[k] <= 0:
                out[k][1].append(f"{a} ~ {b}")
                continue
            if ok and p.id not in made:
                made.add(p.id)
                chosen.append(p)
                out[k][0].append(p.id)
                room[k] -= 1
                for s in homes[k]:
                    pending[s] += 1
            self.lexicon.paired(a, b, homes[k], add=True)
        self.graph.propose_many(tx.conn, chosen)
        return out

    # -- listing and deciding ----------------------------------------------------------------------

    def entity_proposals(
        self, status: str = "pending", *, principal: Principal = LOCAL_PRINCIPAL
    ) -> builtins.list[SameAs]:
        """Every ``SAME_AS`` proposal with ``status`` (or ``"all"``) that ``principal`` may see, oldest first
        (``entity_proposal_page`` a page at a time)."""
        out: builtins.list[SameAs] = []
        cursor: str | None = None
        while True:
            page = self.entity_proposal_page(status, limit=PAGE_MAX, cursor=cursor, principal=principal)
            out.extend(page.items)
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

    def entity_proposal_page(
        self,
        status: str = "pending",
        *,
        limit: int = 50,
        cursor: str | None = None,
        principal: Principal = LOCAL_PRINCIPAL,
    ) -> ProposalPage:
        """At most ``limit`` (1 to ``PAGE_MAX``) ``SAME_AS`` proposals with ``status`` (or ``"all"``) that
        ``principal`` may see, oldest first, after ``cursor`` (a ``next_cursor`` of an earlier page)."""
        if status not in (*STATUSES, "all"):
            raise InvalidInput(
                f"unknown status {status[:40]!r}",
                hint="use one of: pending, accepted, rejected, all",
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= PAGE_MAX:
            raise InvalidInput(
                f"limit must be a whole number from 1 to {PAGE_MAX}",
                hint="pass a smaller limit and follow next_cursor for the rest",
            )
        after = _decode_cursor(cursor) if cursor is not None else None
        shown: builtins.list[SameAs] = []
        with self.graph.read() as conn:
            # Read in batches from the cursor on and keep what the principal may see, until one more than a
            # page is found (so the answer knows whether there is a next page) or the store has no more.
            while len(shown) <= limit:
                batch = self.graph.same_as(
                    conn, status=None if status == "all" else status, after=after, limit=limit + 1
                )
                for p in batch:
                    after = (p.created_at, p.id)
                    if self._sees(conn, p, principal, Level.READ):
                        shown.append(p)
                        if len(shown) > limit:
                            break
                if len(batch) <= limit:
                    break
        items = shown[:limit]
        nxt = _encode_cursor(items[-1]) if len(shown) > limit else None
        return ProposalPage(tuple(self._shown(p, principal) for p in items), nxt)

    def decide_proposal(
        self, proposal: str, action: str, *, principal: Principal = LOCAL_PRINCIPAL
    ) -> SameAs:
        """``accept`` (recall treats both entities as one), ``reject`` (they stay apart and are not proposed
        again) or ``undo`` (a decided proposal is pending again). Returns the proposal as it now is."""
        if action not in ACTIONS:
            raise InvalidInput(f"unknown action {action[:40]!r}", hint="use one of: accept, reject, undo")
        pid = proposal.strip().lower() if isinstance(proposal, str) else ""
        if not _ID.match(pid):
            raise InvalidInput(
                "a proposal id is 8 to 32 hexadecimal characters",
                hint="copy the id from the list of proposals (the entities tool with action 'list', or "
                "`mnemograph entities list`)",
            )
        with self.graph.read() as conn:
            matches = [p for p in self.graph.same_as(conn) if p.id.startswith(pid)]
            seen = [p for p in matches if self._sees(conn, p, principal, Level.READ)]
            if len(seen) > 1:
                raise InvalidInput(
                    f"{len(seen)} proposals start with {pid}", hint="give more characters of the id"
                )
            if not seen:
                raise NotFound(
                    f"no proposal with id {pid}",
                    hint="list the proposals you may see (the entities tool with action 'list' and status 'all', "
                    "or `mnemograph entities list --status all`)",
                )
            if not self._sees(conn, seen[0], principal, Level.WRITE):
                raise ScopeDenied(
                    f"{principal.name} may not decide proposal {pid}",
                    hint="a decision changes recall in every scope the proposal applies to (including any "
                    "you cannot read), so it needs a write grant on each of them; ask a principal who may "
                    "write them all",
                )
        target = seen[0]

        def intent(tx: Tx) -> SameAs:
            now = self.graph.same_as(tx.conn, [target.id])
            if not now:
                raise NotFound(f"proposal {target.id} is gone (its memory was erased)", hint="list again")
            cur = now[0]
            if action == "undo":
                if cur.status == "pending":
                    raise Conflict(
                        f"proposal {cur.id} is pending: there is no decision to undo",
                        hint="accept or reject it",
                    )
                self.graph.decide_same(tx.conn, cur.id, "pending", None, "")
                new = dataclasses.replace(cur, status="pending", decided_at=None, decided_by="")
            else:
                before, after = _NEXT[action]
                if cur.status != before:
                    raise Conflict(
                        f"proposal {cur.id} is already {cur.status}",
                        hint="undo it first if you want to decide it again",
                    )
                self.graph.decide_same(tx.conn, cur.id, after, tx.now, principal.name)
                new = dataclasses.replace(cur, status=after, decided_at=tx.now, decided_by=principal.name)
            # Recorded so that other nodes of a shared store notice and reload their lexicon.
            tx.record("resolve", cur.memory_id)
            return new

        result = self.reconciler.submit(intent)
        if result.status == "accepted":
            self.lexicon.join(result.a, result.b, result.scopes)
        else:
            self.lexicon.part(result.a, result.b, result.scopes)
        self.audit.record(
            f"proposal_{action}", principal=principal.name, client=principal.client, ids=[result.id]
        )
        return self._shown(result, principal)

    def _spelt(self, conn: Session, scopes: Sequence[str], name: str) -> str:
        """``name`` as a memory in ``scopes`` spells it: itself if one does (or none names it), else the first
        such spelling. An entity's stored name is the spelling whoever named it first gave, perhaps another
        team ("Jonathan SMITHERS" for the reader's "jonathan smithers")."""
        names = self.graph.names_given(conn, entity_key(name), scopes=scopes) if scopes else set()
        return name if name in names or not names else min(names)

    def _shown(self, p: SameAs, principal: Principal) -> SameAs:
        """``p`` as ``principal`` may see it: only the scopes it may read (as every other answer names them), and
        each entity by a name a memory it may read gave it (``_spelt``)."""
        if principal.unrestricted:
            return p
        tree = self._tree()
        visible = tuple(s for s in p.scopes if principal.may(Level.READ, ScopeId.parse(s), tree))
        scopes = [str(s) for s in readable(principal.grants or (), tree)]
        with self.graph.read() as conn:
            a, b = self._spelt(conn, scopes, p.a), self._spelt(conn, scopes, p.b)
        return dataclasses.replace(p, a=a, b=b, scopes=visible)

    def _sees(self, conn: Session, p: SameAs, principal: Principal, level: Level) -> bool:
        """Whether ``principal`` may see (READ) or decide (WRITE) proposal ``p``: it reads the memory that
        raised it and a memory mentioning each entity; deciding (WRITE) also needs write on every scope the
        proposal applies to, since an accepted join changes recall in each of them."""
        if principal.unrestricted:
            return True
        tree = self._tree()
        m = self.graph.fetch(conn, [p.memory_id]).get(p.memory_id)
        if m is None or not self._can_read(principal, m, tree):
            return False
        scopes = [str(s) for s in readable(principal.grants or (), tree)]
        for name in (p.a, p.b):
            if not self.graph.mentioning(conn, entity_key(name), scopes=scopes, live_only=False, limit=1):
                return False
        if level is Level.WRITE:
            return all(principal.may(Level.WRITE, ScopeId.parse(s), tree) for s in p.scopes)
        return True


def _encode_cursor(p: SameAs) -> str:
    return base64.urlsafe_b64encode(f"same_as|{p.created_at.isoformat()}|{p.id}".encode()).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        kind, at, pid = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        when = datetime.fromisoformat(at)
        if kind != "same_as" or not re.fullmatch(r"[0-9a-f]{32}", pid) or when.tzinfo is None:
            raise ValueError(cursor)
        return when, pid
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput(
            "cursor is not one a proposal listing issued",
            hint="pass the next_cursor of the previous page unchanged, or list again without a cursor",
        ) from None
