"""Grants: what a principal may do in which scopes. Pure functions over the scope tree's parent map.

A grant ``scope=level`` covers ``scope`` and everything placed below it. Levels are ordered: ``r`` (recall,
read, list) < ``w`` (also write, amend, retire, link) < ``admin`` (also purge, scope management, grants).
A principal without grants (``grants is None``) is unrestricted: the local user on their own data directory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from scopes._ids import InvalidScopeId, ScopeId
from scopes._tree import ancestors, descendants


class Level(IntEnum):
    """A grant's level; a higher level includes every lower one."""

    READ = 1
    WRITE = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        return _LABELS[self]

    @classmethod
    def parse(cls, raw: str) -> Level:
        for level, label in _LABELS.items():
            if raw == label:
                return level
        raise InvalidGrant(f"grant level {raw[:20]!r} is not one of: r, w, admin")


_LABELS = {Level.READ: "r", Level.WRITE: "w", Level.ADMIN: "admin"}


class InvalidGrant(ValueError):
    """A malformed grant; the message says what a valid one looks like."""


@dataclass(frozen=True, slots=True, order=True)
class Grant:
    """``level`` on ``scope`` and its whole subtree."""

    scope: ScopeId
    level: Level

    @classmethod
    def parse(cls, raw: str) -> Grant:
        """Parse ``kind:name=r|w|admin``; raise InvalidGrant on anything else (no wildcards, no paths)."""
        scope_s, sep, level_s = raw.rpartition("=")
        if not sep:
            raise InvalidGrant(f"grant {raw[:60]!r} has no '='; write it as SCOPE=r|w|admin, e.g. 'team:t=w'")
        try:
            scope = ScopeId.parse(scope_s)
        except InvalidScopeId as exc:
            raise InvalidGrant(str(exc)) from None
        return cls(scope, Level.parse(level_s))

    def __str__(self) -> str:
        return f"{self.scope}={self.level.label}"


def level_in(grants: Iterable[Grant], scope: ScopeId, parent_of: Mapping[ScopeId, ScopeId]) -> Level | None:
    """The highest level the grants give on ``scope``: from a grant on it or on any scope it sits inside."""
    covering = {scope, *ancestors(scope, parent_of)}
    levels = [g.level for g in grants if g.scope in covering]
    return max(levels) if levels else None


def readable(grants: Iterable[Grant], parent_of: Mapping[ScopeId, ScopeId]) -> list[ScopeId]:
    """Every scope the grants let one read: each granted scope and its subtree (sorted, no duplicates)."""
    out: set[ScopeId] = set()
    for g in grants:
        out.add(g.scope)
        out.update(descendants(g.scope, parent_of))
    return sorted(out)
