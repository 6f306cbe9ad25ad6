"""Scope identities: ``kind:name``, validated once at the edge and immutable afterwards."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class ScopeKind(StrEnum):
    USER = "user"
    AGENT = "agent"
    APP = "app"
    RUN = "run"
    PROJECT = "project"
    TEAM = "team"
    ORG = "org"


MAX_SCOPE_NAME = 128
_NAME = re.compile(r"[A-Za-z0-9._@-]{1,128}")
# Names made only of dots would read like path segments ("user:.."); refuse them outright.
_DOTS_ONLY = re.compile(r"\.+")


class InvalidScopeId(ValueError):
    """Raised for a malformed scope id; the message says what a valid one looks like."""


@dataclass(frozen=True, slots=True, order=True)
class ScopeId:
    """A validated scope id. Two ScopeIds are equal exactly when their ``kind:name`` strings are."""

    kind: ScopeKind
    name: str

    @classmethod
    def parse(cls, raw: object) -> ScopeId:
        """Parse ``kind:name``; raise InvalidScopeId with an actionable message on anything else."""
        if isinstance(raw, ScopeId):
            return raw
        if not isinstance(raw, str):
            raise InvalidScopeId(f"a scope id must be a string like 'user:ana', got {type(raw).__name__}")
        kind_s, sep, name = raw.partition(":")
        kinds = ", ".join(k.value for k in ScopeKind)
        if not sep:
            raise InvalidScopeId(f"scope id {_show(raw)} has no ':'; write it as kind:name, e.g. 'user:ana'")
        try:
            kind = ScopeKind(kind_s)
        except ValueError:
            raise InvalidScopeId(f"scope kind {_show(kind_s)} is not one of: {kinds}") from None
        if not _NAME.fullmatch(name) or _DOTS_ONLY.fullmatch(name):
            raise InvalidScopeId(
                f"scope name {_show(name)} is invalid: use 1-{MAX_SCOPE_NAME} characters from "
                "A-Z a-z 0-9 . _ @ - (not only dots)"
            )
        return cls(kind, name)

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.name}"


def _show(s: str) -> str:
    return repr(s if len(s) <= 60 else s[:57] + "...")
