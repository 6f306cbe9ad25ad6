"""Bearer tokens for remote clients, kept in ``DATA/tokens.json`` (outside Kùzu).

Outside the stores on purpose: ``mnemograph token create|list|revoke`` must work while an owner process holds
the store's lock, and a revoke must reach a running owner at once. So the file is replaced atomically (temp
file, fsync, rename, under ``flock`` on ``tokens.lock``), and the owner re-reads it whenever its inode, size or
modification time changes (one ``stat`` per request).

A token is ``mg_`` + 43 URL-safe characters (32 random bytes), independent of its name. Only an HMAC-SHA-256
of it is stored, keyed by a per-token salt; verification compares every stored hash with
``hmac.compare_digest``, so timing reveals nothing about which token was close. The token itself is printed
once by ``token create`` and never stored or logged.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scopes import Grant, InvalidGrant, Principal

TOKENS_FILE = "tokens.json"
PREFIX = "mg_"
_SECRET_BYTES = 32
_NAME = re.compile(r"[A-Za-z0-9._@-]{1,64}")
MAX_TOKEN_CHARS = 200  # anything longer is not one of ours; refused before hashing


class TokenError(ValueError):
    """A token operation was refused; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """One token's public record (never its value)."""

    name: str
    grants: tuple[Grant, ...]
    created: str
    revoked: str | None


@dataclass(frozen=True, slots=True)
class _Entry:
    info: TokenInfo
    salt: bytes
    digest: bytes


def _digest(salt: bytes, token: str) -> bytes:
    return hmac.new(salt, token.encode(), hashlib.sha256).digest()


class TokenStore:
    """The token file of one data directory. Thread-safe; safe across processes."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / TOKENS_FILE
        self._lock_path = data_dir / "tokens.lock"
        self._cache_key: tuple[int, int, int] | None = None
        self._entries: list[_Entry] = []
        self._mutex = threading.Lock()

    # -- reading -----------------------------------------------------------------------------------

    def _load(self) -> list[_Entry]:
        """The current entries, re-read only when the file changed (or appeared, or vanished)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            with self._mutex:
                self._cache_key, self._entries = None, []
            return []
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        with self._mutex:
            if key != self._cache_key:
                self._entries = _parse(self.path.read_text())
                self._cache_key = key
            return self._entries

    def verify(self, token: str) -> TokenInfo | None:
        """The live token ``token`` is, or None (unknown, revoked, malformed). Reads the file if it changed."""
        if not token.startswith(PREFIX) or len(token) > MAX_TOKEN_CHARS:
            return None
        found: TokenInfo | None = None
        for entry in self._load():
            # Every entry is compared, whatever matched before: no early exit to time.
            if hmac.compare_digest(_digest(entry.salt, token), entry.digest) and entry.info.revoked is None:
                found = entry.info
        return found

    def stands(self, principal: Principal) -> bool:
        """Whether ``principal``'s token was not revoked (True for a name this file does not know: the local
        user, a principal from an external issuer). Reads the file if it changed. The owner asks it before
        work that runs after a call acts for its caller (``Engine.principal_live``)."""
        return not any(e.info.name == principal.name and e.info.revoked is not None for e in self._load())

    def all(self) -> list[TokenInfo]:
        return [e.info for e in self._load()]

    def holders(self) -> dict[str, frozenset[str]]:
        """Each scope some token's grant names, with the names of the tokens naming it (revoked ones too:
        names are never reused, and a revoked grant is usually re-issued)."""
        out: dict[str, set[str]] = {}
        for info in self.all():
            for g in info.grants:
                out.setdefault(str(g.scope), set()).add(info.name)
        return {scope: frozenset(names) for scope, names in out.items()}

    # -- changing ----------------------------------------------------------------------------------

    def create(self, name: str, grants: Sequence[str]) -> tuple[str, TokenInfo]:
        """Add a token named ``name`` with ``grants`` (``SCOPE=r|w|admin``); returns its value, once."""
        parsed = self.check(name, grants)
        value = PREFIX + secrets.token_urlsafe(_SECRET_BYTES)
        salt = secrets.token_bytes(16)
        info = TokenInfo(name, parsed, datetime.now(UTC).isoformat(timespec="seconds"), None)
        with self._locked():
            entries = self._read_fresh()
            if any(e.info.name == name for e in entries):
                raise TokenError(
                    f"a token named {name!r} already exists",
                    # Names are kept after a revoke so the audit log's principal names stay unambiguous.
                )
            entries.append(_Entry(info, salt, _digest(salt, value)))
            self._write(entries)
        return value, info

    @staticmethod
    def check(name: str, grants: Sequence[str]) -> tuple[Grant, ...]:
        """The parsed grants of a token ``create`` would make; ``TokenError`` (touching nothing) if invalid."""
        if not _NAME.fullmatch(name):
            raise TokenError(f"token name {name[:70]!r} is invalid: use 1-64 of A-Z a-z 0-9 . _ @ -")
        if not grants:
            raise TokenError("a token needs at least one --grant SCOPE=r|w|admin, e.g. --grant team:t=w")
        try:
            return tuple(dict.fromkeys(Grant.parse(g) for g in grants))
        except InvalidGrant as exc:
            raise TokenError(str(exc)) from None

    def revoke(self, name: str) -> TokenInfo:
        """Revoke the token named ``name``; a running owner refuses it from its next request."""
        with self._locked():
            entries = self._read_fresh()
            for n, entry in enumerate(entries):
                if entry.info.name == name:
                    if entry.info.revoked is not None:
                        raise TokenError(f"token {name!r} was already revoked at {entry.info.revoked}")
                    revoked = TokenInfo(
                        name,
                        entry.info.grants,
                        entry.info.created,
                        datetime.now(UTC).isoformat(timespec="seconds"),
                    )
                    entries[n] = _Entry(revoked, entry.salt, entry.digest)
                    self._write(entries)
                    return revoked
        raise TokenError(f"no token named {name[:70]!r}; `mnemograph token list` shows the tokens")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read_fresh(self) -> list[_Entry]:
        try:
            return list(_parse(self.path.read_text()))
        except FileNotFoundError:
            return []

    def _write(self, entries: Sequence[_Entry]) -> None:
        doc = {"version": 1, "tokens": [_dump(e) for e in entries]}
        tmp = self.path.with_name(f".{TOKENS_FILE}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, json.dumps(doc, indent=1).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _dump(e: _Entry) -> dict[str, Any]:
    return {
        "name": e.info.name,
        "grants": [str(g) for g in e.info.grants],
        "created": e.info.created,
        "revoked": e.info.revoked,
        "salt": e.salt.hex(),
        "hmac_sha256": e.digest.hex(),
    }


def _parse(text: str) -> list[_Entry]:
    try:
        doc = json.loads(text)
        return [
            _Entry(
                TokenInfo(
                    t["name"], tuple(Grant.parse(g) for g in t["grants"]), t["created"], t.get("revoked")
                ),
                bytes.fromhex(t["salt"]),
                bytes.fromhex(t["hmac_sha256"]),
            )
            for t in doc["tokens"]
        ]
    except (ValueError, KeyError, TypeError) as exc:
        # A damaged file must fail closed (no token verifies), loudly.
        raise TokenError(f"the token file is damaged ({type(exc).__name__}: {exc})") from None


def scope_holders(tokens: TokenStore, local: Iterable[str]) -> Callable[[], dict[str, frozenset[str]]]:
    """For ``Engine.reserve_scopes``: the scopes tokens are granted on, plus the local user's default scopes
    (held by "", a name no token can have). Read on every call, so a token created later counts at once."""
    mine = frozenset(local)

    def holders() -> dict[str, frozenset[str]]:
        out = dict(tokens.holders())
        for scope in mine:
            out[scope] = out.get(scope, frozenset()) | {""}
        return out

    return holders
