"""Grants: parsing, ordering, coverage of a subtree, and what a principal may read. Pure functions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scopes import (
    LOCAL_PRINCIPAL,
    Grant,
    InvalidGrant,
    Level,
    Principal,
    ScopeId,
    ancestors,
    level_in,
    readable,
)


def sid(raw: str) -> ScopeId:
    return ScopeId.parse(raw)


TREE = {sid("agent:planner"): sid("team:support"), sid("team:support"): sid("org:acme")}


def test_grants_parse_and_print_round_trip() -> None:
    g = Grant.parse("team:t=admin")
    assert (g.scope, g.level) == (sid("team:t"), Level.ADMIN)
    assert str(g) == "team:t=admin"
    assert Level.READ < Level.WRITE < Level.ADMIN


@pytest.mark.parametrize(
    "raw",
    [
        "team:t",
        "team:t=",
        "team:*=r",
        "team:t/..=r",
        "=w",
        "team:t=W",
        "team:t=rw",
        "planet:x=r",
        "team:t=w=r",
    ],
)
def test_malformed_grants_are_refused(raw: str) -> None:
    with pytest.raises(InvalidGrant):
        Grant.parse(raw)


def test_a_grant_covers_its_subtree_and_nothing_above() -> None:
    grants = [Grant.parse("team:support=w")]
    assert level_in(grants, sid("team:support"), TREE) is Level.WRITE
    assert level_in(grants, sid("agent:planner"), TREE) is Level.WRITE
    assert level_in(grants, sid("org:acme"), TREE) is None
    assert level_in(grants, sid("agent:other"), TREE) is None


def test_the_highest_covering_grant_wins() -> None:
    p = Principal("x", grants=(Grant.parse("org:acme=r"), Grant.parse("agent:planner=admin")))
    assert p.level(sid("agent:planner"), TREE) is Level.ADMIN
    assert p.level(sid("team:support"), TREE) is Level.READ
    assert p.may(Level.READ, sid("team:support"), TREE)
    assert not p.may(Level.WRITE, sid("team:support"), TREE)


def test_unrestricted_and_empty_principals() -> None:
    assert LOCAL_PRINCIPAL.unrestricted
    assert LOCAL_PRINCIPAL.may(Level.ADMIN, sid("user:anyone"), {})
    nobody = Principal("nobody", grants=())
    assert not nobody.unrestricted
    assert not nobody.may(Level.READ, sid("user:anyone"), TREE)


def test_readable_lists_granted_scopes_and_their_subtrees() -> None:
    assert readable([Grant.parse("team:support=r")], TREE) == [sid("agent:planner"), sid("team:support")]
    assert readable([], TREE) == []


names = st.sampled_from(["a", "b", "c", "d", "e"])
scope_ids = st.builds(lambda n: sid(f"team:{n}"), names)


@given(
    parents=st.dictionaries(scope_ids, scope_ids, max_size=6),
    granted=scope_ids,
    target=scope_ids,
    level=st.sampled_from(list(Level)),
)
def test_coverage_is_exactly_being_the_scope_or_below_it(
    parents: dict[ScopeId, ScopeId], granted: ScopeId, target: ScopeId, level: Level
) -> None:

    covered = level_in([Grant(granted, level)], target, parents) is not None
    assert covered == (target == granted or granted in ancestors(target, parents))
    assert covered == (target in readable([Grant(granted, level)], parents) or target == granted)
