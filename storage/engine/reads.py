"""Reads: one memory, a page of a scope, and recall (the read path's entry)."""

from __future__ import annotations

import base64
import builtins
import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from scopes import (
    LOCAL_PRINCIPAL,
    Level,
    Principal,
    ScopeId,
    readable,
)
from storage.domain import validation as v
from storage.domain.errors import Ambiguous, InvalidInput, NotFound
from storage.domain.models import (
    Hit,
    Memory,
    MemoryRecord,
    Page,
    Recalled,
    Status,
)
from storage.domain.records import RelationState
from storage.engine.access import _Access
from storage.engine.state import (
    _PREFIX_CANDIDATES,
    _now,
    _relation_line,
)
from storage.enrich import llm
from storage.ports.canonical import Session
from storage.recall.pipeline import prepare as prepare_recall
from storage.recall.pipeline import run as run_recall
from storage.recall.query import Query
from storage.recall.recipes import Recipe, resolve
from storage.recall.understanding import analyse

_AMBIGUOUS_NAMED = 5  # candidates an ambiguous id's error names
_GIST_CHARS = 50


def _gist(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _GIST_CHARS else line[: _GIST_CHARS - 1] + "…"


class _Reads(_Access):
    # -- reads -------------------------------------------------------------------------------------

    def _resolve_id(self, id_or_prefix: str, principal: Principal) -> str:
        """The full id of the one memory ``principal`` may read whose id starts with ``id_or_prefix``.

        Memories it may not read are not candidates: a prefix of one answers exactly like an unknown id (the
        text repeats what was sent, never a full id), and does not make a readable match ambiguous.
        """
        found: dict[str, Memory] = {}
        with self.graph.read() as conn:
            matches = self.graph.ids_with_prefix(conn, id_or_prefix, limit=_PREFIX_CANDIDATES)
            if matches and (len(matches) > 1 or not principal.unrestricted):
                found = self.graph.fetch(conn, matches)
            if not principal.unrestricted and matches:
                tree = self._tree()
                matches = [i for i in matches if i in found and self._can_read(principal, found[i], tree)]
        if not matches:
            raise NotFound(f"no memory with id {id_or_prefix}", hint="call recall to find it")
        if len(matches) > 1:
            # Tools show ids short (12 hex characters); one that has come to match a second memory is refused,
            # never guessed. Only memories the caller may read are named, with their full ids, so it can choose.
            named = ", ".join(
                f"{i} ({_gist(found[i].content)!r})" if i in found else i for i in matches[:_AMBIGUOUS_NAMED]
            )
            more = f" and {len(matches) - _AMBIGUOUS_NAMED} more" if len(matches) > _AMBIGUOUS_NAMED else ""
            raise Ambiguous(
                f"id {id_or_prefix} matches {len(matches)} memories you can read: {named}{more}; nothing was "
                "changed",
                hint="send the full 32-character id of the one you mean (memory_read shows a memory's full id)",
            )
        return matches[0]

    def read(self, id: str, *, principal: Principal = LOCAL_PRINCIPAL) -> MemoryRecord:
        """The full record and its version chain (oldest first). Accepts a unique prefix of >= 8 hex chars.

        A memory the principal may not read is reported as not found; so are versions of it, which are left
        out of the chain.
        """
        mid = self._resolve_id(v.memory_id(id), principal)
        # The model pass commits its relations and its outcome together, but these reads are separate
        # queries: read whether it is queued, then its outcome, and only then the relations, so a pass shown
        # as done is never shown without what it added.
        pending = self._enrichment_pending(mid)
        with self.graph.read() as conn:
            enrichment = self.graph.enrichment_of(conn, mid)
            ids = [mid, *self.graph.chain(conn, mid)]
            records = self.graph.fetch(conn, ids)
            relations = self.graph.relation_history(conn, [mid])
            conflicting = self.graph.contradictions(conn, mid)
            enders = [r.ended_by for r in relations if r.ended_by]
            others = self.graph.fetch(conn, list(dict.fromkeys([*conflicting, *enders])))
        tree = self._tree()
        if mid not in records or not self._can_read(principal, records[mid], tree):
            raise NotFound(f"no memory with id {mid}", hint="call recall to find it")
        shown = self._seen_all(
            principal, [m for m in records.values() if self._can_read(principal, m, tree)], tree
        )
        versions = sorted(shown, key=lambda m: (m.recorded_at, m.id))
        readable = {m.id for m in shown} | {
            i for i, m in others.items() if self._can_read(principal, m, tree)
        }
        return MemoryRecord(
            next(m for m in shown if m.id == mid),
            tuple(versions),
            # In a fixed order (valid time, then the words): the store's match order is its layout, which a
            # restore (or any unrelated edge written meanwhile) changes.
            relations=tuple(_relation_line(r, readable) for r in sorted(relations, key=_relation_order)),
            contradicts=tuple(i for i in conflicting if i in readable),
            enrichment=llm.describe(enrichment, pending),
        )

    def list(
        self,
        scope: str,
        *,
        cursor: str | None = None,
        include_retired: bool = False,
        limit: int = 50,
        principal: Principal = LOCAL_PRINCIPAL,
    ) -> Page:
        """Memories directly in ``scope``, oldest first, ``limit`` at a time; pass ``next_cursor`` back."""
        sid = v.scope(scope)
        self._authorize(principal, [sid], Level.READ, "list memories")
        self._require_scope(sid)
        if not 1 <= limit <= 500:
            raise InvalidInput("limit must be from 1 to 500")
        after = _decode_cursor(cursor) if cursor else None
        with self.graph.read() as conn:
            ids = self.graph.list_scope(
                conn, str(sid), after=after, live_only=not include_retired, limit=limit + 1
            )
            records = self.graph.fetch(conn, ids[:limit])
        tree = self._tree()
        items = tuple(self._seen_all(principal, [records[i] for i in ids[:limit] if i in records], tree))
        nxt = _encode_cursor(items[-1]) if len(ids) > limit and items else None
        return Page(items, nxt)

    def recall(
        self,
        query: str,
        scopes: Sequence[str] | None,
        *,
        k: int = 10,
        as_of: datetime | None = None,
        include_history: bool = False,
        kinds: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        descendants: bool = False,
        recipe: str | Recipe = "default",
        now: datetime | None = None,
        token_budget: int | None = None,
        group_by: str | None = None,
        known_at: datetime | None = None,
        cut_chars: int | None = None,
        principal: Principal = LOCAL_PRINCIPAL,
        salience: bool | None = None,
    ) -> Recalled:
        """The best ``k`` memories for ``query`` in ``scopes`` and their ancestors (and subtrees with
        ``descendants``). Current memories only, unless ``include_history`` or an ``as_of`` time is given,
        or the query asks about change ("used to", "previously", "what did I use before"): then superseded
        versions come too, each chain oldest first.

        ``now`` is the caller's present (default: the clock), with its UTC offset: time expressions in the
        query ("last Tuesday", "in May", "two weeks ago") are resolved against it, in its time zone, and boost
        memories whose event time falls in that window. It does not move validity (that is ``as_of``).
        ``recipe`` is a name from ``RECIPES`` or a ``Recipe``. ``token_budget`` keeps results, best first,
        while their estimated tokens (characters / 4, counting at most ``cut_chars`` of each when the caller
        shows only that much) fit.

        ``group_by`` names a metadata key (``"session"``): memories sharing its value are ranked as one
        conversation (``Recipe.group``). Only this call groups; nothing stored switches grouping on.
        ``as_of`` answers on valid time (what was true then, as we know it now); ``known_at`` on transaction
        time (what the store believed at that instant: memories recorded by then and not yet superseded or
        retired by then). Both may be combined.

        ``salience`` (true or false; None: the recipe's rule, else the server's default) adds a small bonus after
        fusion for recent memories and those this principal's recalls keep returning (``Recipe.salience``,
        docs/recall.md); each hit then carries its ``salience``. Every recall counts, for its principal, the
        memories it returned (``count_accesses``), in memory: nothing is written on this path.

        Naming a scope the principal may not read is refused (ScopeDenied); ancestors and descendants it may
        not read are skipped. ``scopes=None`` reads every scope the principal may read.

        Writes acknowledged before the call are found, unless the projections are stalled: then recall waits
        for them once (``Reconciler.read_wait``), answers from what they hold, and the result's ``behind``
        counts the changes it could not see (see ``Recalled``).
        """
        text = v.query(query)
        chosen = resolve(recipe)
        # Salience: the call says (true or false), else the recipe's rule or the server's default applies.
        on = v.salience(salience, self.salience_default or chosen.salience.enabled)
        if on and not chosen.salience.enabled:
            chosen = chosen.with_(salience={"enabled": True, "half_life_days": self.salience_half_life})
        elif not on and chosen.salience.enabled:
            chosen = chosen.with_(salience={"enabled": False})
        if group_by is not None:
            chosen = chosen.with_(group={"key": v.group_key(group_by)})
        ref = v.reference_time(now)
        budget = v.token_budget(token_budget)
        # A store shared with other nodes: their scopes reach this node's tree through the log, so catch up
        # first, then read the tree (own writes are in it already, so the embedded store waits below).
        behind = self.reconciler.wait_fresh() if self.graph.shared else 0
        tree = self._tree()
        if scopes is None:
            if principal.grants is None:
                with self._tree_lock:
                    requested = [ScopeId.parse(s) for s in sorted(self._scopes)]
            else:
                requested = readable(principal.grants, tree)
        else:
            requested = v.scope_list(scopes)
            self._authorize(principal, requested, Level.READ, "recall", tree)
        intent = analyse(text, ref or _now(), chosen.time)
        history = bool(include_history) or (chosen.history_questions and intent.change is not None)
        q = Query(
            text=text,
            scopes=tuple(self.visible(requested, descendants=descendants, principal=principal)),
            k=v.k(k),
            now=_now(),
            as_of=v.when(as_of, "as_of"),
            include_history=history,
            kinds=tuple(v.kinds(kinds) or ()) or None,
            since=v.when(since, "since"),
            until=v.when(until, "until"),
            search_text=intent.search_text,
            intervals=intent.intervals,
            token_budget=budget,
            known_at=v.when(known_at, "known_at"),
            cut_chars=cut_chars,
            restricted=not principal.unrestricted,
            present=ref,
        )
        # Read-your-writes, within reason: a stalled projection costs one wait, then answers say how stale.
        if not self.graph.shared:
            # The commits made before this call, taken now; the query is embedded meanwhile. Right after a write
            # the projections take 25-140 ms to catch up, and the embedding (20 ms) used to wait for them too.
            upto = self.reconciler.committed_seq
            if q.scopes:
                q = prepare_recall(q, self._lanes, chosen)
            behind = self.reconciler.wait_fresh(upto)
        if not q.scopes:
            return Recalled(behind=behind)
        # Salience reads the caller's own access counts from memory; without it nothing is looked up.
        # Keyed apart for restricted principals: a token named "local" (or as a local client calls itself) is
        # not the unrestricted local user, and must not read what that user recalled.
        who = principal.name if principal.unrestricted else f"~{principal.name}"
        counts = self.accesses.of(who) if chosen.salience.enabled else None
        hits = self._with_conflicts(
            run_recall(q, self._lanes, self.graph, chosen, self._lane_pool, self.digests, counts),
            principal,
            tree,
        )
        if self.count_accesses and hits:
            self.accesses.record(who, [h.memory.id for h in hits])
        if principal.unrestricted:
            return Recalled(hits, behind=behind)
        seen = self._seen_all(principal, [h.memory for h in hits], tree)
        return Recalled(
            [
                dataclasses.replace(
                    h,
                    memory=m,
                    # Earlier versions the query matched: only those the caller may read, as it may see them.
                    via=tuple(
                        self._seen_all(
                            principal, [o for o in h.via if self._can_read(principal, o, tree)], tree
                        )
                    ),
                )
                for h, m in zip(hits, seen, strict=True)
            ],
            behind=behind,
        )

    def _with_conflicts(
        self, hits: Sequence[Hit], principal: Principal, tree: Mapping[ScopeId, ScopeId]
    ) -> builtins.list[Hit]:
        """Each hit with ``conflicts``: the memories a ``CONTRADICTS`` link ties to it that are current (not
        superseded, retired or ended) and that ``principal`` may read; the others are never named. One
        query for all hits, and a fetch only when some hit has a link."""
        if not hits:
            return list(hits)
        seq = self.reconciler.committed_seq  # before the read: what it reads is at least this recent
        with self.graph.read() as conn:
            every = self._contradiction_links(conn, seq)
            if every is None:
                links = self.graph.contradictions_of(conn, [h.memory.id for h in hits])
            else:
                links = {h.memory.id: list(every[h.memory.id]) for h in hits if h.memory.id in every}
            if not links:
                return list(hits)
            others = self.graph.fetch(conn, sorted({o for ids in links.values() for o in ids}))
        now = _now()
        valid = {
            i
            for i, m in others.items()
            if m.status is Status.CURRENT
            and (m.valid_to is None or m.valid_to > now)
            and (principal.unrestricted or self._can_read(principal, m, tree))
        }
        return [
            dataclasses.replace(h, conflicts=tuple(i for i in links.get(h.memory.id, ()) if i in valid))
            if h.memory.id in links
            else h
            for h in hits
        ]

    def _contradiction_links(self, conn: Session, seq: int) -> Mapping[str, tuple[str, ...]] | None:
        """Every CONTRADICTS link of the store by memory (both ways), read again only after a commit: a recall
        then asks the store nothing for its hits' links (a statement per recall cost 4-6 ms at 10,000
        memories). None on a shared store (another node's commit is not seen here before the head is read) or
        past ``MAX_CACHED_LINKS`` links: the hits' own links are asked for then."""
        if self.graph.shared:
            return None
        cached = self._links_at
        if cached is not None and cached[0] == seq:
            return cached[1]
        rows = self.graph.export_contradictions(conn)
        if len(rows) > MAX_CACHED_LINKS:
            self._links_at = None
            return None
        links: dict[str, list[str]] = {}
        for new, old, _predicate, _at in rows:
            links.setdefault(new, []).append(old)
            links.setdefault(old, []).append(new)
        every = {m: tuple(sorted(set(o))) for m, o in links.items()}
        self._links_at = (seq, every)
        return every


# More CONTRADICTS links than this are not held in memory (``_contradiction_links``): about 15 MB at this count.
MAX_CACHED_LINKS = 50_000


def _encode_cursor(m: Memory) -> str:
    return base64.urlsafe_b64encode(f"{m.recorded_at.isoformat()}|{m.id}".encode()).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        ts, mid = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        return datetime.fromisoformat(ts), v.memory_id(mid)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput(
            "cursor is not one this server issued", hint="start again without a cursor"
        ) from None


def _relation_order(r: RelationState) -> tuple[datetime, str, str, str, datetime]:
    far = datetime.max.replace(tzinfo=UTC)
    return (
        r.valid_from or datetime.min.replace(tzinfo=UTC),
        r.subject,
        r.predicate,
        r.object,
        r.valid_to or far,
    )
