"""Read-only views for people browsing a store (the web UI): a timeline and an entity's neighbourhood.

Both are built from the Engine's own access-checked operations (``list_scopes``, ``list``, ``read``,
``visible``), so they show a principal exactly what recall and ``memory_read`` would: a memory it may not read
never appears, and neither does a relation recorded by such a memory.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scopes import LOCAL_PRINCIPAL, Principal, ScopeId
from storage.domain.errors import NotFound
from storage.domain.models import Memory
from storage.domain.records import Relation, entity_key

if TYPE_CHECKING:
    from storage.engine.core import EngineCore

TIMELINE_CAP = 5_000  # memories gathered for one timeline; past this the oldest are left out (and it says so)


@dataclass(frozen=True, slots=True)
class Timeline:
    """Current memories, newest event first. ``truncated`` when the store held more than the cap."""

    items: tuple[Memory, ...]
    total: int
    truncated: bool


def timeline(
    engine: EngineCore,
    *,
    scope: str | None = None,
    offset: int = 0,
    limit: int = 50,
    principal: Principal = LOCAL_PRINCIPAL,
) -> Timeline:
    """Current memories in every scope ``principal`` may read (or in ``scope`` and its subtree), newest event
    time first, ``limit`` from ``offset``."""
    scopes = [s.id for s in engine.list_scopes(scope, principal=principal)]
    found: dict[str, Memory] = {}
    truncated = False
    for sid in scopes:
        cursor: str | None = None
        while True:
            page = engine.list(sid, cursor=cursor, limit=500, principal=principal)
            for m in page.items:
                found.setdefault(m.id, m)
            cursor = page.next_cursor
            if cursor is None or len(found) >= TIMELINE_CAP:
                break
        if len(found) >= TIMELINE_CAP:
            truncated = True
            break
    ordered = sorted(found.values(), key=lambda m: (m.event_time, m.recorded_at, m.id), reverse=True)
    return Timeline(tuple(ordered[offset : offset + limit]), len(ordered), truncated)


@dataclass(frozen=True, slots=True)
class Link:
    """One edge of a neighbourhood: ``source`` and ``target`` are node keys (``m:<id>`` or ``e:<key>``)."""

    source: str
    target: str
    label: str


@dataclass(frozen=True, slots=True)
class Node:
    key: str  # "m:<memory id>" or "e:<entity key>"
    label: str
    kind: str  # "memory" or "entity"
    ref: str  # the memory id, or the entity's name (what a link to its own neighbourhood needs)


@dataclass(frozen=True, slots=True)
class Neighbourhood:
    centre: str
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]


def neighbourhood(
    engine: EngineCore,
    *,
    memory: str | None = None,
    entity: str | None = None,
    per_entity: int = 6,
    principal: Principal = LOCAL_PRINCIPAL,
) -> Neighbourhood:
    """The entities a memory mentions (or one entity), the relations between entities that readable memories
    recorded, and other readable current memories mentioning them. Raises NotFound for a memory the principal
    may not read, as ``read`` does."""
    nodes: dict[str, Node] = {}
    links: dict[tuple[str, str, str], Link] = {}
    readable: dict[str, Memory | None] = {}

    def seen(mid: str) -> Memory | None:
        if mid not in readable:
            try:
                readable[mid] = engine.read(mid, principal=principal).memory
            except NotFound:
                readable[mid] = None
        return readable[mid]

    def add_memory(m: Memory) -> str:
        key = f"m:{m.id}"
        nodes.setdefault(key, Node(key, _short(m.content), "memory", m.id))
        return key

    def add_entity(name: str) -> str:
        key = f"e:{entity_key(name)}"
        nodes.setdefault(key, Node(key, name, "entity", name))
        return key

    names: builtins.list[str]
    if memory is not None:
        m = engine.read(memory, principal=principal).memory
        readable[m.id] = m
        centre = add_memory(m)
        names = list(m.entities)
        for name in names:
            links[(centre, add_entity(name), "mentions")] = Link(centre, add_entity(name), "mentions")
    elif entity is not None:
        centre = add_entity(entity)
        names = [entity]
    else:
        raise ValueError("give a memory or an entity")
    scopes = engine.visible(
        [ScopeId.parse(s.id) for s in engine.list_scopes(principal=principal)], principal=principal
    )
    # The store's edges and mentions first, each memory read (``seen``) after: ``Engine.read`` takes its own read of
    # the store, and a second read taken while holding one waits behind a checkpoint that waits for the first.
    found: builtins.list[tuple[str, builtins.list[Relation], builtins.list[str]]] = []
    with engine.graph.read() as conn:
        for name in names:
            eid = entity_key(name)
            # Chosen among the edges the caller's scopes hold: another scope's never take a place in the window.
            rels = builtins.list(engine.graph.relations(conn, eid, limit=per_entity, scopes=scopes))
            mids = (
                builtins.list(
                    engine.graph.mentioning(conn, eid, scopes=scopes, live_only=True, limit=per_entity)
                )
                if scopes
                else []
            )
            found.append((name, rels, mids))
    for name, rels, mids in found:
        ekey = add_entity(name)
        for rel in rels:
            if seen(rel.memory_id) is None:
                continue
            other = add_entity(rel.other_name)
            src, dst = (ekey, other) if rel.outgoing else (other, ekey)
            links[(src, dst, rel.predicate)] = Link(src, dst, rel.predicate)
        for mid in mids:
            memory_found = seen(mid)
            if memory_found is not None:
                mkey = add_memory(memory_found)
                links[(mkey, ekey, "mentions")] = Link(mkey, ekey, "mentions")
    return Neighbourhood(centre, tuple(nodes.values()), tuple(links.values()))


def _short(text: str, n: int = 48) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
