"""The entity-graph lane: entities named in the query -> memories mentioning them, and one or two RELATES hops.

The query is first matched against the in-memory ``EntityLexicon`` (exact name, alias, reordered words,
one-edit typos); a query that names no known entity costs no store access. From each matched entity the
lane follows RELATES edges breadth-first, in both directions, up to ``GraphRule.hops``. An edge counts only
while the memory that recorded it is visible to the query (scope, status, validity: the same canonical
filter as every result), so a relation learnt in another scope, or from a retired memory, neither leaks
nor leads anywhere. The newest ``fanout`` relations of an entity are chosen in the store among those recorded in
the query's scopes, so another scope's relations never push the reader's own out of that window.

Ranking, by graph distance from the query: memories mentioning a query entity (0), memories that
recorded a relation on a path (hop - 1/2), memories mentioning an entity reached after ``hop`` edges (hop);
ties go to memories mentioning more query entities, then to those on a path. Memories reached through a
path carry it as a statement: ``Hotel Aria —located_in→ Lisbon —in→ Portugal``; those that state a relation
on such a path are also reported with the path's length (``Found.statements``), which fusion rewards
(``GraphRule.path_weight``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field

from storage.domain.records import Relation, entity_key
from storage.language.extraction import EntityLexicon, EntityMatch, name_key
from storage.ports.canonical import CanonicalStore, Session
from storage.recall.query import Found, Query, visible
from storage.recall.recipes import GraphRule, Recipe


def _step(path: str | None, r: Relation) -> str:
    """``path`` extended by the edge ``r``; a path starting at a seed (None) starts with the seed as the edge's
    memory spelt it. Each end is named as a memory the reader may see spelt it, never by the entity's display
    name, which may be the spelling another scope stored (docs/security.md)."""
    start = r.own_name if path is None else path
    return (
        f"{start} —{r.predicate}→ {r.other_name}" if r.outgoing else f"{start} ←{r.predicate}— {r.other_name}"
    )


# Threads that read an entity's mentions and relations while the lane's own thread reads another's: the
# queries of one walk stage are independent, and Kùzu releases the GIL while it runs one.
_READERS = 2
# Relations kept between recalls, in all (a few MB), the least recently used entity's dropped first.
_RELATIONS_KEPT = 32_768
# An entity's newest relations over every scope kept for it (``_PREFIX``), from which each reader's window is cut.
_PREFIX = 64
# A cache key: (entity, window size, readable scopes); (entity, 0, ()) is the entity's prefix over every scope.
_Key = tuple[str, int, tuple[str, ...]]


@dataclass
class GraphLane:
    graph: CanonicalStore
    lexicon: EntityLexicon
    name: str = "graph"
    executor: Executor | None = field(default=None, repr=False)
    # The last committed change's number (``LaneContext.head``); without it nothing is kept between recalls.
    head: Callable[[], int] | None = field(default=None, repr=False)
    # Relations read at a stamp (lexicon version, head): finding them is a store query per entity walked from
    # (a hub's edges are thousands: the lane's costliest read), while they change only with a commit or an
    # erasure, and queries keep naming the same people and places. Two kinds: an entity's newest ``_PREFIX``
    # relations over every scope, each with its memory's scopes (and whether that is all of them), from which
    # a reader's window is cut when the prefix holds it whole (the same edges, in the same order, as the store's
    # filtered query); and, where it does not, the reader's window itself, keyed by the readable scopes. Either
    # way a reader gets only edges its scopes hold, and the window is chosen among those alone.
    _kept_relations: OrderedDict[_Key, tuple[tuple[int, int], list[Relation], bool]] = field(
        default_factory=OrderedDict, repr=False
    )
    _kept_total: int = field(default=0, repr=False)
    _kept_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.executor is None:
            self.executor = ThreadPoolExecutor(max_workers=_READERS, thread_name_prefix="graph-lane")

    def prepare(self, q: Query) -> Query:
        return q

    def search(self, q: Query, depth: int, recipe: Recipe) -> Found:
        rule = recipe.graph
        matches = self.lexicon.match(q.text, limit=rule.max_entities, fuzzy=rule.fuzzy)
        if not matches:
            return Found([])
        # Taken before the store is read: a commit after it makes what this recall keeps stale at once.
        stamp = (self.lexicon.version, self.head()) if self.head is not None else None
        with self.graph.read() as conn:
            if q.restricted:
                matches = [c for m in matches for c in self._known_claimants(conn, m, q.scopes)]
                if not matches:
                    return Found([])
            seeds = {entity_key(m.name): m.name for m in matches}
            # Entities an accepted SAME_AS proposal raised in the query's scopes joined to a matched one are walked
            # from too (another team's decision changes nothing here); the walk admits only memories in those
            # scopes, so a joined name reveals nothing beyond them.
            for name in list(seeds.values()):
                for other in self.lexicon.same_as(name, q.scopes):
                    seeds.setdefault(entity_key(other), other)
            return self._walk(conn, q, depth, recipe, seeds, stamp)

    def _alias_known(self, conn: Session, m: EntityMatch, scopes: tuple[str, ...]) -> bool:
        """Whether a match may stand for a principal with grants: by the entity's own name, or by an alias a
        memory in its scopes gave. The lexicon holds every scope's aliases; resolving one learnt only from
        another team's memory would tell the caller which of its entities that alias stands for."""
        if not m.key or m.key == name_key(m.name):
            return True
        return m.key in {
            name_key(a) for a in self.graph.aliases_given(conn, entity_key(m.name), scopes=scopes)
        }

    def _known_claimants(self, conn: Session, m: EntityMatch, scopes: tuple[str, ...]) -> list[EntityMatch]:
        """The entities the matched phrase may stand for to a principal with grants. The lexicon matches a phrase
        to the first entity it was given to; others given it later (another team's alias, or a name equal to
        someone's alias) are tried too, so whether one's own alias or name resolves never depends on (and so
        never tells) what other teams called their entities."""
        out = []
        for name in self.lexicon.claimants(m.key) if m.key else [m.name]:
            c = EntityMatch(name, m.how, m.text, m.key)
            if self._alias_known(conn, c, scopes):
                out.append(c)
        return out

    def _walk(
        self,
        conn: Session,
        q: Query,
        depth: int,
        recipe: Recipe,
        seeds: dict[str, str],
        stamp: tuple[int, int] | None,
    ) -> Found:
        rule = recipe.graph
        rank: dict[str, tuple[float, int, int]] = {}  # id -> (distance, -query entities, -paths)
        paths: dict[str, list[str]] = {}
        stated: dict[str, int] = {}  # id -> hops of the first path on which it states the relation

        def reach(mid: str, distance: float, seed: bool = False, path: str | None = None) -> None:
            d, s, _ = rank.get(mid, (distance, 0, 0))
            statements = paths.setdefault(mid, [])
            if path is not None and path not in statements:
                statements.append(path)
            rank[mid] = (min(d, distance), s - seed, -len(statements))

        # A current-view query reads every visible mention of an entity it walks from (ids only, at most
        # max_mentions): the first ``limit`` rank, and the whole set tells which of the entity's edges the
        # query may follow, as a memory recording a relation mentions both its ends. Without it, each hop
        # would ask the store again which edges' memories are visible.
        seen_mentions: dict[str, set[str]] = {}
        relations: dict[str, list[Relation]] = {}
        names = dict(seeds)  # entity id -> name

        def stage(mentioned: dict[str, tuple[float, int, str | None]], related: list[str]) -> None:
            """Read the mentions of ``mentioned`` (entity -> distance, limit, path) and the relations of
            ``related`` at once (one walk stage's queries are independent), then rank the mentions."""
            mention_list = list(mentioned)
            fanout = {e: self._fanout(names[e], rule, q.scopes) for e in related}
            kept = {e: hit for e in related if (hit := self._window(q, e, fanout[e], stamp)) is not None}
            to_read = [e for e in related if e not in kept]
            items = [(q, rule, e, mentioned[e][1], stamp, False) for e in mention_list] + [
                (q, rule, e, -fanout[e], stamp, self.lexicon.relations(names[e]) <= _PREFIX) for e in to_read
            ]
            got = self.graph.read_each(conn, self._read, items, self.executor) if items else []
            found = got[: len(mention_list)]
            relations.update(kept)
            for e, rels in zip(to_read, got[len(mention_list) :], strict=True):
                relations[e] = [r for r in rels if isinstance(r, Relation)]
            for entity, ids in zip(mention_list, found, strict=True):
                distance, limit, path = mentioned[entity]
                mids = [m for m in ids if isinstance(m, str)]
                if q.live_only and len(mids) <= rule.max_mentions:
                    seen_mentions[entity] = set(mids)
                for mid in mids[:limit]:
                    reach(mid, distance, seed=distance == 0, path=path)

        stage(
            {
                e: (0, rule.per_entity, None)
                for e, n in seeds.items()
                if self.lexicon.mentions(n, q.scopes) <= rule.max_mentions
            },
            [e for e, n in seeds.items() if rule.hops and self.lexicon.relations(n)],
        )
        visited = set(seeds)
        # entity id -> the path that reached it; a seed's is None (each edge from it names it as its memory did)
        frontier: dict[str, str | None] = dict.fromkeys(seeds)
        for hop in range(1, rule.hops + 1):
            # Edges back to an entity an earlier hop reached say nothing new.
            edges = [
                (e, path, r)
                for e, path in frontier.items()
                for r in relations.get(e, ())
                if r.other_id not in visited
            ][: rule.fanout]
            # Bounded per hop, not per entity: since the offline extractor records relations for ordinary
            # facts, most entities have some, and following fanout edges from each of max_entities entities
            # cost a record fetch per edge (160 store queries and 150 ms a recall at 3,000 memories).
            seen = self._visible(conn, q, edges, seen_mentions)
            nxt: dict[str, str | None] = {}
            for _, path, r in edges:
                if r.memory_id not in seen:
                    continue
                statement = _step(path, r)
                reach(r.memory_id, hop - 0.5, path=statement)
                stated.setdefault(r.memory_id, hop)
                if r.other_id not in visited and len(nxt) < max(1, rule.max_entities >> hop):
                    visited.add(r.other_id)
                    nxt[r.other_id] = statement
                    names[r.other_id] = r.other_name
            # Mentions of an entity reached by a hop: at the first hop only (the second hop's answers are the
            # statements on the path; its mentions cost a store query each and rarely rank). Read together with
            # the relations the next hop follows from the same entities.
            stage(
                {
                    e: (hop, max(1, rule.per_entity >> hop), statement)
                    for e, statement in nxt.items()
                    if hop == 1 and self.lexicon.mentions(names[e], q.scopes) <= rule.max_mentions
                },
                [e for e in nxt if hop < rule.hops and self.lexicon.relations(names[e])],
            )
            frontier = nxt
        ordered = sorted(rank, key=lambda mid: (*rank[mid], mid))[:depth]
        return Found(
            ordered,
            {mid: tuple(paths[mid]) for mid in ordered if paths.get(mid)},
            statements={mid: stated[mid] for mid in ordered if mid in stated},
        )

    def _fanout(self, name: str, rule: GraphRule, scopes: Sequence[str]) -> int:
        """How many of the entity's newest relations to follow: ``fanout``, and a quarter of it from a hub (an
        entity named by more than ``max_mentions`` memories). A hub's mentions are not read, so which of its
        edges the query may see is looked up edge by edge; its newest relations of thousands still lead on
        (Hotel Aria -> Lisbon -> Portugal), but fewer of them keep the lookups cheap."""
        return max(1, rule.fanout >> 2) if self._hub(name, rule, scopes) else rule.fanout

    def _hub(self, name: str, rule: GraphRule, scopes: Sequence[str]) -> bool:
        """Named by more than ``max_mentions`` memories in the query's scopes: counted there only, so another
        team writing about an entity never changes how the graph lane answers this reader about it."""
        return self.lexicon.mentions(name, scopes) > rule.max_mentions

    def _window(
        self, q: Query, entity: str, limit: int, stamp: tuple[int, int] | None
    ) -> list[Relation] | None:
        """The entity's newest ``limit`` relations among those the query's scopes hold, from what is kept at
        ``stamp`` (nothing committed or erased since), without a store read; None if it is not kept."""
        prefix = self._kept((entity, 0, ()), stamp)
        if prefix is not None:
            mine = set(q.scopes)
            rels, complete = prefix
            window = [r for r in rels if mine.intersection(r.scopes)][:limit]
            if len(window) == limit or complete:
                return window
        got = self._kept((entity, limit, tuple(sorted(set(q.scopes)))), stamp)
        return None if got is None else got[0]

    def _read_window(
        self, conn: Session, q: Query, entity: str, limit: int, stamp: tuple[int, int] | None, prefix: bool
    ) -> list[Relation]:
        """``_window`` read from the store: the entity's prefix over every scope if it is not kept and ``prefix``
        (one query), and the window chosen in the store among the query's scopes if the prefix does not hold it
        whole. ``prefix`` is whether the entity has at most ``_PREFIX`` relations as the lexicon counts them: the
        prefix is then all of them and serves every reader, while a hub's newest ``_PREFIX`` over every scope
        rarely hold one reader's window, and reading them cost a second query beside the reader's own (half of
        the lane's relation reads with a write before each recall). Either way the window is the same."""
        if stamp is None:
            return self.graph.relations(conn, entity, limit=limit, scopes=q.scopes)
        if prefix and self._kept((entity, 0, ()), stamp) is None:
            rels = self.graph.relations(conn, entity, limit=_PREFIX + 1)
            self._keep((entity, 0, ()), rels[:_PREFIX], len(rels) <= _PREFIX, stamp)
        window = self._window(q, entity, limit, stamp)
        if window is not None:
            return window
        window = self.graph.relations(conn, entity, limit=limit, scopes=q.scopes)
        self._keep((entity, limit, tuple(sorted(set(q.scopes)))), window, True, stamp)
        return window

    def _kept(self, key: _Key, stamp: tuple[int, int] | None) -> tuple[list[Relation], bool] | None:
        """What is kept under ``key`` (relations, whether they are all of them) if read at ``stamp``, else None."""
        if stamp is None:
            return None
        with self._kept_lock:
            got = self._kept_relations.get(key)
            if got is None or got[0] != stamp:
                return None
            self._kept_relations.move_to_end(key)
            return got[1], got[2]

    def _keep(self, key: _Key, rels: list[Relation], complete: bool, stamp: tuple[int, int] | None) -> None:
        if stamp is None:
            return
        with self._kept_lock:
            old = self._kept_relations.pop(key, None)
            self._kept_total -= len(old[1]) if old is not None else 0
            self._kept_relations[key] = (stamp, rels, complete)
            self._kept_total += len(rels)
            while self._kept_total > _RELATIONS_KEPT or len(self._kept_relations) > _RELATIONS_KEPT:
                _, (_, dropped, _) = self._kept_relations.popitem(last=False)
                self._kept_total -= len(dropped)

    def _read(
        self, conn: Session, item: tuple[Query, GraphRule, str, int, tuple[int, int] | None, bool]
    ) -> list[str] | list[Relation]:
        """One store read of a walk stage: an entity's mentions (``limit`` >= 0) or its newest ``-limit``
        relations among those recorded in the query's scopes (< 0, ``_read_window``): relations the query may
        not see never take a place in the window (docs/security.md)."""
        q, rule, entity, limit, stamp, prefix = item
        if limit < 0:
            return self._read_window(conn, q, entity, -limit, stamp, prefix)
        complete = q.live_only
        return self.graph.mentioning(
            conn,
            entity,
            scopes=q.scopes,
            live_only=q.live_only,
            limit=rule.max_mentions + 1 if complete else limit,
            valid_at=q.now if complete else None,
        )

    def _visible(
        self,
        conn: Session,
        q: Query,
        edges: list[tuple[str, str | None, Relation]],
        seen_mentions: dict[str, set[str]],
    ) -> set[str]:
        """Ids of the memories recording ``edges`` that the query may see (``recall.visible``). A current-view
        query answers from the visible mentions already read of the entity an edge leaves from (a memory
        recording a relation mentions its ends), else asks the store once per such entity; a query about
        another time view reads each record, as its rules need the whole history."""
        if q.live_only:
            by_entity: dict[str, list[str]] = {}
            for e, _, r in edges:
                by_entity.setdefault(e, []).append(r.memory_id)
            out: set[str] = set()
            for e, ids in by_entity.items():
                known = seen_mentions.get(e)
                if known is not None:
                    out.update(mid for mid in ids if mid in known)
                else:
                    out.update(self.graph.visible_among(conn, e, ids, scopes=q.scopes, now=q.now))
            return out
        records = self.graph.fetch(conn, {r.memory_id for _, _, r in edges})
        return {mid for mid, m in records.items() if visible(m, q)}
