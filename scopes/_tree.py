"""The scope tree's rules, as pure functions over a parent map (the graph itself lives in storage)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scopes._ids import ScopeId

MAX_DEPTH = 32


def ancestors(scope: ScopeId, parent_of: Mapping[ScopeId, ScopeId]) -> list[ScopeId]:
    """The chain of parents of ``scope``, nearest first, not including ``scope`` itself."""
    out: list[ScopeId] = []
    seen = {scope}
    cur = parent_of.get(scope)
    while cur is not None and cur not in seen and len(out) < MAX_DEPTH:
        out.append(cur)
        seen.add(cur)
        cur = parent_of.get(cur)
    return out


def descendants(scope: ScopeId, parent_of: Mapping[ScopeId, ScopeId]) -> list[ScopeId]:
    """Every scope below ``scope`` (children, grandchildren, ...), breadth first."""
    children: dict[ScopeId, list[ScopeId]] = {}
    for child, parent in parent_of.items():
        children.setdefault(parent, []).append(child)
    out: list[ScopeId] = []
    frontier = [scope]
    seen = {scope}
    while frontier:
        nxt: list[ScopeId] = []
        for s in frontier:
            for c in sorted(children.get(s, ())):
                if c not in seen:
                    seen.add(c)
                    out.append(c)
                    nxt.append(c)
        frontier = nxt
    return out


def visible_scopes(
    requested: Iterable[ScopeId], parent_of: Mapping[ScopeId, ScopeId], *, include_descendants: bool = False
) -> list[ScopeId]:
    """The scopes a recall in ``requested`` reads: each scope, its ancestors and, if asked, its subtree."""
    out: dict[ScopeId, None] = {}
    for s in requested:
        out[s] = None
        for a in ancestors(s, parent_of):
            out[a] = None
        if include_descendants:
            for d in descendants(s, parent_of):
                out[d] = None
    return list(out)


def would_cycle(child: ScopeId, new_parent: ScopeId, parent_of: Mapping[ScopeId, ScopeId]) -> bool:
    """True when placing ``child`` under ``new_parent`` would make a scope its own ancestor."""
    return child == new_parent or child in ancestors(new_parent, parent_of)
