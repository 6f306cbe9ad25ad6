"""Per-session settings, carried to tool calls in a context variable.

Several front-ends share one owner, and each may be configured differently (a Cursor window with
``MNEMOGRAPH_DEFAULT_SCOPE=project:site``, a Claude Desktop with none). So a session's defaults travel with the
session: the stdio front-end sends them in its hello line, the HTTP front in a request header, and the owner
sets this variable around the session. The SDK runs each handler in the context of the message that caused
it, so tool calls see their own session's value.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from scopes import LOCAL_PRINCIPAL, InvalidScopeId, Level, Principal, ScopeId


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What the owner knows about one client session."""

    default_scopes: tuple[str, ...]
    transport: str  # "stdio", "http" or "memory": the fallback client name in provenance
    principal: Principal = LOCAL_PRINCIPAL  # who acts: the local principal, or a verified token's
    # MCP sampling as this session's own front-end asked (its MNEMOGRAPH_SAMPLING): the seconds its client gets
    # to answer when on, False when off, None when the front-end did not say (the owner's setting applies).
    sampling: float | bool | None = None


current_session: ContextVar[SessionInfo | None] = ContextVar("mnemograph_session", default=None)


def parse_scopes(raw: Any) -> tuple[str, ...] | None:
    """Scope ids from a hello line or header (a list or a comma-separated string); None when absent or invalid.

    Invalid values are ignored rather than refused: the owner then falls back to its own default scope.
    """
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, list):
        return None
    try:
        scopes = tuple(str(ScopeId.parse(s.strip() if isinstance(s, str) else s)) for s in items)
    except InvalidScopeId:
        return None
    return scopes or None


def parse_sampling(raw: Any) -> float | bool | None:
    """A hello line's ``sampling``: a timeout in seconds (on), False (off), or None when absent or invalid."""
    if raw is False:
        return False
    if isinstance(raw, int | float) and not isinstance(raw, bool) and 1.0 <= raw <= 3_600.0:
        return float(raw)
    return None


def local_principal(raw: Any) -> Principal:
    """The unrestricted local principal named in a hello line or header (``local`` when absent or invalid)."""
    if isinstance(raw, str) and raw and len(raw) <= 64 and all(c.isalnum() or c in "._@-" for c in raw):
        return Principal(raw)
    return LOCAL_PRINCIPAL


def defaults_for(principal: Principal, session_defaults: tuple[str, ...]) -> tuple[str, ...]:
    """The default scopes of ``principal``'s calls. A token's session carries the operator's defaults (the
    front sends them), which are not the token's to use or to learn: a token gets those of them its grants
    name, else the one scope it may write in if there is exactly one, else none (its calls name scopes)."""
    if principal.grants is None:
        return session_defaults
    granted = {str(g.scope) for g in principal.grants}
    named = tuple(s for s in session_defaults if s in granted)
    if named:
        return named
    writable = sorted({str(g.scope) for g in principal.grants if g.level >= Level.WRITE})
    return (writable[0],) if len(writable) == 1 else ()
