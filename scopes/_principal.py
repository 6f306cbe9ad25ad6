"""Who is acting, and what they were granted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scopes._grants import Grant, Level, level_in
from scopes._ids import ScopeId


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of an operation: recorded as provenance on every memory it writes.

    ``grants`` is None for an unrestricted principal (the local user, full rights on their own data
    directory); otherwise the principal may act only where a grant covers the scope.
    """

    name: str
    client: str = ""
    grants: tuple[Grant, ...] | None = None

    @property
    def unrestricted(self) -> bool:
        return self.grants is None

    def level(self, scope: ScopeId, parent_of: Mapping[ScopeId, ScopeId]) -> Level | None:
        """The principal's level on ``scope`` given the scope tree (ADMIN when unrestricted)."""
        if self.grants is None:
            return Level.ADMIN
        return level_in(self.grants, scope, parent_of)

    def may(self, need: Level, scope: ScopeId, parent_of: Mapping[ScopeId, ScopeId]) -> bool:
        have = self.level(scope, parent_of)
        return have is not None and have >= need


LOCAL_PRINCIPAL = Principal(name="local")
