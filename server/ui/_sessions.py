"""Browser sessions of the web UI: who is signed in, each session's CSRF token, and one-time login links.

Sessions live in the owner's memory only (a restart signs everyone out, which is the safe direction). The
cookie carries a random session id and nothing else; it is HttpOnly and SameSite=Strict. A session signed in
with a bearer token keeps the token and verifies it again on every request, so a revoke ends the session at
once. One-time login codes (``mnemograph ui``) are minted only for a request on the owner's private socket,
live two minutes and work once.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from scopes import Principal

COOKIE = "mnemograph_ui"
IDLE_SECONDS = 8 * 3600.0
CODE_SECONDS = 120.0
MAX_SESSIONS = (
    2_000  # anonymous visitors get a session (for the login form's CSRF token); the oldest go first
)
MAX_CODES = 64


@dataclass(slots=True)
class UiSession:
    sid: str
    csrf: str
    principal: Principal | None = None
    token: str | None = None  # the bearer token it signed in with (None: the local user, or anonymous)
    last: float = field(default_factory=time.monotonic)

    def check_csrf(self, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(sent.encode(), self.csrf.encode())


class Sessions:
    """In-memory sessions and login codes. Used from the event loop only (no locking needed)."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[str, UiSession] = OrderedDict()
        self._codes: OrderedDict[str, tuple[Principal, float]] = OrderedDict()

    def get(self, sid: str | None) -> UiSession | None:
        if not sid:
            return None
        found = self._sessions.get(sid)
        now = time.monotonic()
        if found is None or now - found.last > IDLE_SECONDS:
            self._sessions.pop(sid, None)
            return None
        found.last = now
        self._sessions.move_to_end(sid)
        return found

    def new(self, principal: Principal | None = None, token: str | None = None) -> UiSession:
        """A fresh session (a new id on every sign-in, so a planted session id is worth nothing)."""
        session = UiSession(secrets.token_urlsafe(32), secrets.token_urlsafe(32), principal, token)
        self._sessions[session.sid] = session
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return session

    def end(self, sid: str) -> None:
        self._sessions.pop(sid, None)

    def mint_code(self, principal: Principal) -> str:
        code = secrets.token_urlsafe(32)
        self._codes[code] = (principal, time.monotonic() + CODE_SECONDS)
        while len(self._codes) > MAX_CODES:
            self._codes.popitem(last=False)
        return code

    def redeem(self, code: str) -> Principal | None:
        """The principal a login code was minted for, once; None when unknown, used or expired."""
        for known in list(self._codes):
            if hmac.compare_digest(known.encode(), code.encode()):
                principal, expires = self._codes.pop(known)
                return principal if time.monotonic() < expires else None
        return None
