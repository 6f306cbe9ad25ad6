"""Every operation refuses bad input with a typed, actionable error and changes nothing."""

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from storage import Conflict, Engine, EntityIn, InvalidInput, MnemographError, NotFound, RelationIn
from storage.domain.models import MAX_CONTENT_CHARS

BAD_CALLS: dict[str, Callable[[Engine], object]] = {
    "empty content": lambda e: e.write("", ["user:ana"]),
    "blank content": lambda e: e.write(" \n\t", ["user:ana"]),
    "over-long content": lambda e: e.write("x" * (MAX_CONTENT_CHARS + 1), ["user:ana"]),
    "NUL byte": lambda e: e.write("a\x00b", ["user:ana"]),
    "lone surrogate": lambda e: e.write("bad \ud800 text", ["user:ana"]),
    "no scopes": lambda e: e.write("x", []),
    "scope string not list": lambda e: e.write("x", "user:ana"),
    "path escape": lambda e: e.write("x", ["user:a/../b"]),
    "wildcard scope": lambda e: e.write("x", ["team:*"]),
    "unknown scope kind": lambda e: e.write("x", ["planet:earth"]),
    "too many scopes": lambda e: e.write("x", [f"user:u{i}" for i in range(17)]),
    "unknown kind": lambda e: e.write("x", ["user:ana"], kind="rumour"),
    "valid_to before valid_from": lambda e: e.write(
        "x",
        ["user:ana"],
        valid_from=datetime(2024, 1, 2, tzinfo=UTC),
        valid_to=datetime(2024, 1, 1, tzinfo=UTC),
    ),
    "deep metadata": lambda e: e.write(
        "x", ["user:ana"], metadata={"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": {}}}}}}}}}}
    ),
    "non-json metadata": lambda e: e.write("x", ["user:ana"], metadata={"a": object()}),
    "NUL in metadata": lambda e: e.write("x", ["user:ana"], metadata={"a": "\x00"}),
    "empty entity": lambda e: e.write("x", ["user:ana"], entities=[EntityIn("")]),
    "bad predicate": lambda e: e.write(
        "x", ["user:ana"], relations=[RelationIn("a", "') DETACH DELETE", "b")]
    ),
    "unknown id": lambda e: e.read("deadbeefdeadbeef"),
    "short id": lambda e: e.read("abc"),
    "non-hex id": lambda e: e.amend("zzzzzzzzzz", "new"),
    "amend unknown": lambda e: e.amend("0123456789abcdef", "new"),
    "retire unknown": lambda e: e.retire("0123456789abcdef"),
    "purge mismatch": lambda e: e.purge("user:ana", confirm="user:bob"),
    "purge wildcard": lambda e: e.purge("user:*", confirm="user:*"),
    "recall injection scope": lambda e: e.recall("x", ["user:ana' OR '1'='1"]),
    "recall cypher": lambda e: e.recall("x", ["user:ana}) MATCH (n) DETACH DELETE n //"]),
}


@pytest.fixture
def seeded(engine: Engine) -> Engine:
    m = engine.write("Ana prefers window seats.", ["user:ana"])
    engine.amend(m.id, "Ana prefers aisle seats.")
    engine.write("Shared fact.", ["user:ana", "team:t"])
    return engine


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_bad_input_is_refused_and_changes_nothing(seeded: Engine, name: str) -> None:
    before = seeded.verify()
    scopes_before = seeded.list_scopes()
    with pytest.raises(MnemographError) as info:
        BAD_CALLS[name](seeded)
    assert isinstance(info.value, InvalidInput | NotFound | Conflict)
    assert info.value.message  # a sentence the caller can act on
    after = seeded.verify()
    assert after.ok
    assert (after.counts, after.canonical_seq, after.live_memories) == (
        before.counts,
        before.canonical_seq,
        before.live_memories,
    )
    assert seeded.list_scopes() == scopes_before
