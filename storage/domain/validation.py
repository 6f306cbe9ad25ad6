"""Argument checks shared by every operation. Each failure is an InvalidInput that says what to send instead.

All checks run before anything is queued for the writer, so a rejected call never changes a store.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from scopes import InvalidScopeId, ScopeId
from storage.domain.errors import InvalidInput
from storage.domain.models import (
    MAX_CONTENT_CHARS,
    MAX_ENTITIES,
    MAX_GROUP_KEY_CHARS,
    MAX_K,
    MAX_METADATA_BYTES,
    MAX_NAME_CHARS,
    MAX_QUERY_CHARS,
    MAX_REASON_CHARS,
    MAX_RELATIONS,
    MAX_SCOPES_PER_CALL,
    MAX_TOKEN_BUDGET,
    EntityIn,
    MemoryKind,
    RelationIn,
)

_HEX = re.compile(r"[0-9a-f]+")
_PREDICATE = re.compile(r"[\w .:/-]{1,64}", re.UNICODE)
MIN_PREFIX = 8
ID_LENGTH = 32
MAX_METADATA_DEPTH = 8


def text(value: object, what: str, *, limit: int, allow_empty: bool = False) -> str:
    """A clean string: no NUL bytes, no lone surrogates, within ``limit`` characters."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{what} is empty", hint=f"send the {what} as non-empty text")
    if len(value) > limit:
        raise InvalidInput(
            f"{what} is {len(value):,} characters, over the limit of {limit:,}",
            hint="split it into several smaller memories" if what == "content" else f"shorten the {what}",
        )
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL byte", hint="remove control characters and retry")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            f"{what} contains an unpaired surrogate (invalid Unicode)", hint="send valid UTF-8"
        ) from None
    return value


def content(value: object) -> str:
    return text(value, "content", limit=MAX_CONTENT_CHARS)


def query(value: object) -> str:
    return text(value, "query", limit=MAX_QUERY_CHARS)


def reason(value: object) -> str:
    return text(value, "reason", limit=MAX_REASON_CHARS, allow_empty=True)


def scope(value: object) -> ScopeId:
    try:
        return ScopeId.parse(value)
    except InvalidScopeId as exc:
        raise InvalidInput(str(exc)) from None


def scope_list(values: object) -> list[ScopeId]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InvalidInput("scopes must be a list of scope ids like ['user:ana']")
    if not values:
        raise InvalidInput("scopes is empty", hint="name at least one scope, e.g. 'user:ana'")
    if len(values) > MAX_SCOPES_PER_CALL:
        raise InvalidInput(f"{len(values)} scopes given; at most {MAX_SCOPES_PER_CALL} per call")
    return list(dict.fromkeys(scope(v) for v in values))


def kind(value: object) -> MemoryKind:
    try:
        if isinstance(value, str):
            return MemoryKind(value)
    except ValueError:
        pass
    kinds = ", ".join(k.value for k in MemoryKind)
    raise InvalidInput(f"kind {value!r} is not one of: {kinds}")


def choice(value: object, name: str, allowed: Sequence[str]) -> str:
    """``value`` when it is one of ``allowed``; else an error naming them."""
    if isinstance(value, str) and value in allowed:
        return value
    raise InvalidInput(f"{name} {value!r} is not one of: {', '.join(allowed)}")


def kinds(values: Sequence[str] | None) -> list[MemoryKind] | None:
    return None if values is None else list(dict.fromkeys(kind(v) for v in values))


def when(value: datetime | None, what: str) -> datetime | None:
    """Aware UTC datetimes; naive ones are taken as UTC."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput(f"{what} must be a datetime")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def reference_time(value: datetime | None) -> datetime | None:
    """The caller's "now": aware, in its own time zone (calendar days are counted there); naive is UTC."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput("now must be a datetime")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def salience(value: object, default: bool) -> bool:
    """Whether a recall applies salience: ``value`` when given (true or false), else ``default``."""
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidInput(
            f"salience must be true or false (or left out for the server's default), got {value!r}"
        )
    return value


def token_budget(value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKEN_BUDGET:
        raise InvalidInput(f"token_budget must be a whole number from 1 to {MAX_TOKEN_BUDGET}, got {value!r}")
    return value


def k(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_K:
        raise InvalidInput(f"k must be a whole number from 1 to {MAX_K}, got {value!r}")
    return value


def memory_id(value: object) -> str:
    """A full id or a prefix of at least 8 hex characters (lower-cased)."""
    if not isinstance(value, str):
        raise InvalidInput("id must be a string of hex characters")
    v = value.strip().lower()
    if not (MIN_PREFIX <= len(v) <= ID_LENGTH) or not _HEX.fullmatch(v):
        raise InvalidInput(
            f"id {value[:40]!r} is not a memory id",
            hint=f"pass the id returned by memory_write or recall (or its first {MIN_PREFIX}+ hex characters)",
        )
    return v


def name(value: object, what: str) -> str:
    return text(value, what, limit=MAX_NAME_CHARS).strip()


def entities(values: Sequence[EntityIn] | None) -> list[EntityIn]:
    if not values:
        return []
    if len(values) > MAX_ENTITIES:
        raise InvalidInput(f"{len(values)} entities given; at most {MAX_ENTITIES}")
    out = []
    for e in values:
        aliases = tuple(name(a, "entity alias") for a in e.aliases[:16])
        out.append(
            EntityIn(
                name=name(e.name, "entity name"), type=name(e.type or "thing", "entity type"), aliases=aliases
            )
        )
    return out


def relations(values: Sequence[RelationIn] | None) -> list[RelationIn]:
    if not values:
        return []
    if len(values) > MAX_RELATIONS:
        raise InvalidInput(f"{len(values)} relations given; at most {MAX_RELATIONS}")
    out = []
    for r in values:
        predicate = name(r.predicate, "relation predicate")
        if not _PREDICATE.fullmatch(predicate):
            raise InvalidInput(
                f"relation predicate {predicate[:40]!r} is invalid",
                hint="use a short verb phrase of letters, digits, spaces, '_', '-', e.g. 'works_at'",
            )
        out.append(
            RelationIn(name(r.subject, "relation subject"), predicate, name(r.object, "relation object"))
        )
    return out


def metadata(value: Mapping[str, Any] | None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput("metadata must be a JSON object")
    _depth(value, 0)
    try:
        encoded = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"metadata is not plain JSON: {exc}") from None
    if len(encoded.encode("utf-8", "surrogatepass")) > MAX_METADATA_BYTES:
        raise InvalidInput(f"metadata is over {MAX_METADATA_BYTES:,} bytes of JSON")
    if "\x00" in encoded or "\\u0000" in encoded:
        raise InvalidInput("metadata contains a NUL character")
    try:
        encoded.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("metadata contains an unpaired surrogate (invalid Unicode)") from None
    result: dict[str, Any] = json.loads(encoded)
    return result


def _depth(value: object, level: int) -> None:
    if level > MAX_METADATA_DEPTH:
        raise InvalidInput(f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput("metadata keys must be strings")
            _depth(item, level + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _depth(item, level + 1)


# The range a supplied vector's largest number must lie in. The stores keep a vector
# as half-precision numbers times a power of two (storage.adapters._half) and read it back as 32-bit floats: past
# 2**127 the largest comes back infinite (float32 stops at 3.4e38, and rounding to half precision can carry it up
# to 2**128), giving an ``export --vectors`` that no import takes and a vector no cosine can use; below 2**-125 its
# smaller numbers come back as float32 subnormals cut to fewer bits than were stored (exported and imported again,
# they are not the same numbers), down to nothing (a vector without a direction).
MIN_VECTOR_TOP = 2.0**-125
MAX_VECTOR_TOP = 2.0**127


def keepable_vector(value: Sequence[float]) -> bool:
    """Whether ``vector`` would take these numbers for their range: all finite, the largest magnitude from
    ``MIN_VECTOR_TOP`` to ``MAX_VECTOR_TOP``. (A restore embeds a memory's content again where an export made
    before this rule holds a vector outside it: one all zeros, or infinite.)"""
    top = max((abs(x) for x in value), default=0.0)
    return math.isfinite(top) and MIN_VECTOR_TOP <= top <= MAX_VECTOR_TOP


def vector(value: Sequence[float], dim: int) -> list[float]:
    """A supplied embedding: ``dim`` finite numbers (it must come from the data directory's embedder), the
    largest magnitude among them from ``MIN_VECTOR_TOP`` to ``MAX_VECTOR_TOP`` (about 2.4e-38 to 1.7e38)."""
    try:
        out = [float(x) for x in value]
    except (TypeError, ValueError):
        raise InvalidInput("vector must be a list of numbers") from None
    if len(out) != dim or not all(math.isfinite(x) for x in out):
        raise InvalidInput(f"vector must have {dim} finite numbers, got {len(out)}")
    top = max((abs(x) for x in out), default=0.0)
    if not MIN_VECTOR_TOP <= top <= MAX_VECTOR_TOP:
        raise InvalidInput(
            f"vector's largest number must have a magnitude from {MIN_VECTOR_TOP:.3g} to {MAX_VECTOR_TOP:.3g} "
            f"(what 32-bit floats hold to half precision), got {top:.3g}"
            + (" (all zeros: no direction)" if top == 0 else ""),
            hint="pass the embedding as the data directory's model computed it",
        )
    return out


def group_key(value: object) -> str:
    """A metadata key to group recall by: a short non-empty string."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_GROUP_KEY_CHARS:
        raise InvalidInput(
            f"group_by must be a metadata key of 1 to {MAX_GROUP_KEY_CHARS} characters, got {value!r}",
            hint="pass the metadata key your memories share per conversation, e.g. 'session'",
        )
    return value.strip()
