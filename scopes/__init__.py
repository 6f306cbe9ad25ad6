"""Scope identities, the scope tree's rules, grants and principals. Imports nothing from the other layers."""

from scopes._grants import Grant, InvalidGrant, Level, level_in, readable
from scopes._ids import MAX_SCOPE_NAME, InvalidScopeId, ScopeId, ScopeKind
from scopes._principal import LOCAL_PRINCIPAL, Principal
from scopes._tree import ancestors, descendants, visible_scopes, would_cycle

__all__ = [
    "LOCAL_PRINCIPAL",
    "MAX_SCOPE_NAME",
    "Grant",
    "InvalidGrant",
    "InvalidScopeId",
    "Level",
    "Principal",
    "ScopeId",
    "ScopeKind",
    "ancestors",
    "descendants",
    "level_in",
    "readable",
    "visible_scopes",
    "would_cycle",
]
