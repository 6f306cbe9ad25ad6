import pytest

from scopes import InvalidScopeId, ScopeId, ScopeKind, ancestors, descendants, visible_scopes, would_cycle


@pytest.mark.parametrize(
    "raw", ["user:ana", "agent:planner.v2", "team:support", "run:2024-05-01_x", "org:a@b", "app:" + "x" * 128]
)
def test_valid_scope_ids_round_trip(raw: str) -> None:
    assert str(ScopeId.parse(raw)) == raw


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("ana", "no ':'"),
        ("galaxy:ana", "not one of"),
        ("user:", "invalid"),
        ("user:a/../b", "invalid"),
        ("team:*", "invalid"),
        ("user:..", "only dots"),
        ("user:" + "x" * 129, "invalid"),
        ("user:ana bob", "invalid"),
        ("user:ana\x00", "invalid"),
        ("User:ana", "not one of"),
        ("user:ana'; DROP", "invalid"),
    ],
)
def test_malformed_scope_ids_are_refused_with_a_reason(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidScopeId, match=fragment):
        ScopeId.parse(raw)


def test_non_strings_are_refused() -> None:
    with pytest.raises(InvalidScopeId, match="must be a string"):
        ScopeId.parse(42)


def _tree() -> dict[ScopeId, ScopeId]:
    p = ScopeId.parse
    return {p("project:site"): p("user:ana"), p("run:r1"): p("project:site"), p("agent:a"): p("team:t")}


def test_ancestors_and_descendants() -> None:
    p = ScopeId.parse
    tree = _tree()
    assert ancestors(p("run:r1"), tree) == [p("project:site"), p("user:ana")]
    assert descendants(p("user:ana"), tree) == [p("project:site"), p("run:r1")]
    assert ancestors(p("user:ana"), tree) == []


def test_visible_scopes_reads_up_by_default_and_down_on_request() -> None:
    p = ScopeId.parse
    tree = _tree()
    assert visible_scopes([p("project:site")], tree) == [p("project:site"), p("user:ana")]
    down = visible_scopes([p("user:ana")], tree, include_descendants=True)
    assert set(down) == {p("user:ana"), p("project:site"), p("run:r1")}


def test_cycles_are_detected() -> None:
    p = ScopeId.parse
    tree = _tree()
    assert would_cycle(p("user:ana"), p("run:r1"), tree)
    assert would_cycle(p("user:ana"), p("user:ana"), tree)
    assert not would_cycle(p("team:t"), p("user:ana"), tree)
    assert ScopeKind("team") is ScopeKind.TEAM
