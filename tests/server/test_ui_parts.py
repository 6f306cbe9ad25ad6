"""The web UI's pure parts: where a sign-in may send the browser, the scope tree's counts, login codes."""

from __future__ import annotations

from scopes import Principal
from server.ui._actions import _next
from server.ui._pages import tree_rows
from server.ui._sessions import Sessions
from storage import ScopeInfo


def test_after_sign_in_the_browser_stays_inside_the_ui() -> None:
    assert _next("/ui/memory/abc?done=1") == "/ui/memory/abc?done=1"
    for hostile in ("//evil.example/ui/", "https://evil.example/ui/", "/ui\\@evil.example", "/mcp", "", None):
        assert _next(hostile) == "/ui/", hostile


def test_scope_tree_rows_carry_depth_and_subtree_totals() -> None:
    scopes = [
        ScopeInfo("team:t", None, 2),
        ScopeInfo("project:a", "team:t", 3),
        ScopeInfo("run:x", "project:a", 1),
        ScopeInfo("user:me", None, 5),
    ]
    rows = [(depth, s.id, total) for depth, s, total in tree_rows(scopes)]
    assert rows == [(0, "team:t", 6), (1, "project:a", 4), (2, "run:x", 1), (0, "user:me", 5)]


def test_a_login_code_works_once() -> None:
    sessions = Sessions()
    code = sessions.mint_code(Principal("me"))
    assert sessions.redeem("not-" + code) is None
    assert sessions.redeem(code) == Principal("me")
    assert sessions.redeem(code) is None
