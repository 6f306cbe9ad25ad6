"""The web UI in a real browser: Debian's chromium driven by Playwright, against a real HTTP front and owner.

Memories are written by a real MCP client over HTTP with CLI-made tokens; the browser then signs in, searches,
opens, amends and erases them. A read-only token sees no edit controls and is refused if it posts anyway; posts
without the CSRF token or from another origin are refused. Set MNEMOGRAPH_UI_SCREENSHOTS to a directory to keep
the screenshots (docs/ui/ holds the ones in docs/ui.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from playwright.async_api import Browser, Page, async_playwright

from tests.e2e.conftest import MNEMOGRAPH, HttpServer, Store, call, http_server
from tests.e2e.test_auth import as_token, make_token

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(autouse=True)
def _chromium() -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make browser` (installs Debian's chromium)")


@asynccontextmanager
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            await b.close()


def shots(tmp_path: Path) -> Path:
    target = Path(os.environ.get("MNEMOGRAPH_UI_SCREENSHOTS") or tmp_path / "shots")
    target.mkdir(parents=True, exist_ok=True)
    return target


async def sign_in(page: Page, server: HttpServer, token: str) -> None:
    await page.goto(f"{server.base}/ui/")
    assert "/ui/login" in page.url  # not signed in yet: the UI sends us to its sign-in page
    await page.fill("#token", token)
    await page.click("form[action='/ui/login'] button[type=submit]")
    await page.wait_for_url(re.compile(r".*/ui/search$"))


async def seed(server: HttpServer, token: str) -> dict[str, str]:
    async with as_token(server.url, token) as client:
        ids = {}
        for key, content, extra in (
            ("tea", "Ana prefers green tea in the afternoon.", {"kind": "preference"}),
            (
                "office",
                "Ana works at Acme in Lisbon since March 2024.",
                {
                    "entities": [{"name": "Ana", "type": "person"}, {"name": "Acme", "type": "org"}],
                    "relations": [{"subject": "Ana", "predicate": "works_at", "object": "Acme"}],
                },
            ),
            ("door", "The office door code is 4711.", {}),
        ):
            written = await call(client, "memory_write", {"content": content, "scopes": ["team:t"], **extra})
            # The UI addresses memories by full id (a person types it to erase); the tool showed the first 12.
            ids[key] = (await call(client, "memory_read", {"id": written["id"]}))["memory"]["id"]
        return ids


async def test_sign_in_search_amend_erase(store: Store, tmp_path: Path) -> None:
    admin = await make_token(store, "ana", "team:t=admin")
    out = shots(tmp_path)
    async with http_server(store, auth=True) as server, browser() as b:
        ids = await seed(server, admin)
        page = await (await b.new_context(viewport={"width": 1200, "height": 800})).new_page()
        await page.goto(f"{server.base}/ui/")
        await page.screenshot(path=str(out / "login.png"))
        await sign_in(page, server, admin)
        assert await page.inner_text("#principal") == "ana"

        # Search: the result, and why it is there.
        await page.fill("#q", "what does Ana like to drink")
        await page.press("#q", "Enter")
        await page.wait_for_selector("#results li.mem")
        first = page.locator("#results li.mem").first
        assert "green tea" in await first.locator(".content").inner_text()
        why = await first.locator(".why").inner_text()
        assert "meaning #" in why
        await page.screenshot(path=str(out / "search.png"), full_page=True)

        # Open it: provenance and a one-version chain.
        await first.locator("a.content").click()
        await page.wait_for_url(re.compile(f".*/ui/memory/{ids['tea']}$"))
        assert "ana" in await page.inner_text("#provenance")
        assert await page.locator("#versions li").count() == 1

        # Amend it, and see the new version with the old one superseded in its chain.
        await page.fill("#amend-content", "Ana prefers jasmine tea in the afternoon.")
        await page.fill("#amend-reason", "she said so today")
        await page.click("#amend-form button[type=submit]")
        await page.wait_for_selector("#done")
        assert await page.inner_text("#content") == "Ana prefers jasmine tea in the afternoon."
        new_id = await page.inner_text("#memory-id")
        assert new_id != ids["tea"]
        versions = page.locator("#versions li")
        assert await versions.count() == 2
        assert "superseded" in await versions.nth(0).inner_text()
        assert "green tea" in await versions.nth(0).inner_text()
        assert "mnemograph-ui" in await versions.nth(1).inner_text()  # provenance names the UI as the client
        await page.screenshot(path=str(out / "memory.png"), full_page=True)

        # The other main pages render what is there.
        await page.goto(f"{server.base}/ui/scopes?scope=team:t")
        assert "team:t" in await page.inner_text("#scope-tree")
        await page.screenshot(path=str(out / "scopes.png"), full_page=True)
        await page.goto(f"{server.base}/ui/timeline")
        assert "door code" in await page.inner_text("#timeline")
        await page.screenshot(path=str(out / "timeline.png"), full_page=True)
        await page.goto(f"{server.base}/ui/graph?memory={ids['office']}")
        graph = await page.text_content("#graph") or ""
        assert "Acme" in graph
        assert "works_at" in graph
        await page.screenshot(path=str(out / "graph.png"), full_page=True)
        await page.goto(f"{server.base}/ui/audit")
        audit = await page.inner_text("#audit")
        assert "amend" in audit
        assert "ana" in audit
        await page.screenshot(path=str(out / "audit.png"), full_page=True)

        # Erase one, with its full id typed; then it is gone from its page and from search.
        await page.goto(f"{server.base}/ui/memory/{ids['door']}")
        assert await page.locator("#erase-form button").is_disabled()  # until the id is typed
        await page.fill("#erase-confirm", ids["door"])
        await page.click("#erase-form button[type=submit]")
        await page.wait_for_selector("#erased")
        response = await page.goto(f"{server.base}/ui/memory/{ids['door']}")
        assert response is not None
        assert response.status == 404
        await page.goto(f"{server.base}/ui/search?q=door+code")
        assert "4711" not in await page.inner_text("main")

        # Tokens: an admin hands out a read grant in a scope it administers, and sees the value once.
        await page.goto(f"{server.base}/ui/tokens")
        await page.fill("#token-name", "viewer")
        await page.fill("#token-grants", "team:t=r")
        await page.click("#create-token button[type=submit]")
        value = await page.input_value("#new-token")
        assert value.startswith("mg_")
        await page.screenshot(path=str(out / "tokens.png"), full_page=True)
        # ... but not one on a scope it does not administer.
        await page.fill("#token-name", "sneaky")
        await page.fill("#token-grants", "user:other=admin")
        await page.click("#create-token button[type=submit]")
        assert "may not grant" in await page.inner_text("#error")
    tokens = await anyio.run_process(
        [MNEMOGRAPH, "token", "list", "--data-dir", str(store.data_dir)], check=True
    )
    assert b"viewer" in tokens.stdout
    assert b"sneaky" not in tokens.stdout


async def test_read_only_token_sees_no_edit_controls_and_is_refused(store: Store) -> None:
    admin = await make_token(store, "ana", "team:t=admin", "user:ana=w")
    reader = await make_token(store, "rita", "team:t=r")
    async with http_server(store, auth=True) as server, browser() as b:
        ids = await seed(server, admin)
        async with as_token(server.url, admin) as client:  # a private memory the reader must never see
            await call(
                client,
                "memory_write",
                {
                    "content": "Ana secretly moves to Porto next spring.",
                    "scopes": ["user:ana"],
                    "relations": [{"subject": "Ana", "predicate": "moves_to", "object": "Porto"}],
                },
            )
        page = await (await b.new_context()).new_page()
        await sign_in(page, server, reader)
        # Every read page shows only what the token may read: no private memory, relation, scope or event.
        for url, selector in (
            ("/ui/search?q=where+does+Ana+move", "main"),
            ("/ui/timeline", "main"),
            ("/ui/scopes", "#scope-tree"),
            ("/ui/graph?entity=Ana", "#graph"),
            ("/ui/audit", "#audit"),
        ):
            await page.goto(server.base + url)
            shown = await page.text_content(selector) or ""
            for secret in ("Porto", "moves_to", "user:ana"):
                assert secret not in shown, (url, secret)
            # The reader administers nothing, so the audit log shows only its own actions (none).
            assert "write" not in shown or not url.endswith("audit"), shown
        await page.goto(f"{server.base}/ui/graph?entity=Ana")
        assert "works_at" in (await page.text_content("#graph") or "")  # what it may read is there
        await page.goto(f"{server.base}/ui/memory/{ids['tea']}")
        assert "green tea" in await page.inner_text("#content")
        assert await page.locator("#edit-controls").count() == 0
        assert await page.locator("#erase-controls").count() == 0
        assert await page.locator("header nav a[href='/ui/tokens']").count() == 0
        # Posting anyway, with a valid session, CSRF token and Origin: the Engine refuses.
        csrf = await page.locator("input[name=csrf]").first.input_value()
        for action, form in (
            ("amend", {"content": "Ana hates tea.", "csrf": csrf}),
            ("retire", {"confirm": ids["tea"][:8], "csrf": csrf}),
            ("erase", {"confirm": ids["tea"], "csrf": csrf}),
        ):
            response = await page.request.post(
                f"{server.base}/ui/memory/{ids['tea']}/{action}", form=form, headers={"Origin": server.base}
            )
            assert response.status == 403, (action, await response.text())
        denied = await page.request.get(f"{server.base}/ui/tokens")
        assert denied.status == 403
        await page.goto(f"{server.base}/ui/memory/{ids['tea']}")
        assert "green tea" in await page.inner_text("#content")
        assert await page.inner_text("#status") == "current"


async def test_a_token_sees_relations_in_its_own_spelling_not_another_teams(store: Store) -> None:
    """Team a stored "ZORBLAX CORPORATION"; bo's token recorded "Bo works at zorblax corporation". Bo's graph page
    and search explanations drew the relation's end by the entity's stored name, team a's spelling."""
    ana = await make_token(store, "ana", "team:a=w")
    bo = await make_token(store, "bo", "team:b=w")
    async with http_server(store, auth=True) as server, browser() as b:
        async with as_token(server.url, ana) as client:
            await call(
                client,
                "memory_write",
                {
                    "content": "ZORBLAX CORPORATION is hiring in Porto.",
                    "scopes": ["team:a"],
                    "entities": [{"name": "ZORBLAX CORPORATION", "type": "org"}],
                },
            )
        async with as_token(server.url, bo) as client:
            await call(
                client,
                "memory_write",
                {
                    "content": "Bo works at zorblax corporation.",
                    "scopes": ["team:b"],
                    "relations": [
                        {"subject": "Bo", "predicate": "works_at", "object": "zorblax corporation"}
                    ],
                },
            )
        page = await (await b.new_context()).new_page()
        await sign_in(page, server, bo)
        for url, selector in (
            ("/ui/graph?entity=Bo", "#graph"),
            ("/ui/search?q=who+works+at+zorblax+corporation", "main"),
        ):
            await page.goto(server.base + url)
            shown = await page.text_content(selector) or ""
            assert "zorblax corporation" in shown, (url, shown)
            assert "ZORBLAX" not in shown, (url, shown)


async def test_posts_without_csrf_token_or_from_another_origin_are_refused(store: Store) -> None:
    admin = await make_token(store, "ana", "team:t=admin")
    async with http_server(store, auth=True) as server, browser() as b:
        ids = await seed(server, admin)
        page = await (await b.new_context()).new_page()
        await sign_in(page, server, admin)
        await page.goto(f"{server.base}/ui/memory/{ids['tea']}")
        csrf = await page.locator("input[name=csrf]").first.input_value()
        url = f"{server.base}/ui/memory/{ids['tea']}/amend"
        cases = (
            ({"content": "Ana hates tea."}, {"Origin": server.base}),  # no CSRF token
            ({"content": "Ana hates tea.", "csrf": "x" * 43}, {"Origin": server.base}),  # a wrong one
            ({"content": "Ana hates tea.", "csrf": csrf}, {"Origin": "http://evil.example"}),  # another site
            ({"content": "Ana hates tea.", "csrf": csrf}, {"Origin": "null"}),  # an opaque origin
        )
        for form, headers in cases:
            response = await page.request.post(url, form=form, headers=headers)
            assert response.status == 403, (form, headers, await response.text())
        await page.goto(f"{server.base}/ui/memory/{ids['tea']}")
        assert "green tea" in await page.inner_text("#content")
        assert await page.locator("#versions li").count() == 1
        # The session cookie is HttpOnly and SameSite=Strict.
        cookies = await page.context.cookies()
        ui_cookie = next(c for c in cookies if c["name"] == "mnemograph_ui")
        assert ui_cookie["httpOnly"] is True
        assert ui_cookie["sameSite"] == "Strict"
        # Revoking the token ends its UI session at the next request.
        await anyio.run_process(
            [MNEMOGRAPH, "token", "revoke", "ana", "--data-dir", str(store.data_dir)], check=True
        )
        await page.goto(f"{server.base}/ui/search")
        assert "/ui/login" in page.url


async def test_ui_command_signs_in_the_local_user_once(store: Store) -> None:
    # `ui` opens an existing store only (a mistyped --data-dir is an error): make one, as a first client would.
    argv = [MNEMOGRAPH, "scope", "create", "project:ui", "--data-dir", str(store.data_dir)]
    await anyio.run_process(argv, env={**os.environ, **store.env()}, check=True)
    process = await anyio.open_process(
        [MNEMOGRAPH, "ui", "--no-browser", "--port", "0", "--data-dir", str(store.data_dir)],
        env={**os.environ, **store.env(), "MNEMOGRAPH_PRINCIPAL": "me"},
    )
    try:
        assert process.stdout is not None
        seen = b""
        with anyio.fail_after(90):
            while b"\n(a one-time" not in seen:
                seen += await process.stdout.receive()
        url = re.search(rb"Mnemograph UI: (\S+)", seen)
        assert url is not None, seen
        link = url.group(1).decode()
        base = link.split("/ui/")[0]
        async with browser() as b:
            page = await (await b.new_context()).new_page()
            await page.goto(link)
            await page.wait_for_url(re.compile(r".*/ui/search$"))
            assert await page.inner_text("#principal") == "me"
            # The link worked once: a second browser gets nothing from it.
            other = await (await b.new_context()).new_page()
            response = await other.goto(link)
            assert response is not None
            assert response.status == 403
            # Nobody reaching the port can mint a link: only the owner's private socket answers.
            minted = await other.request.post(f"{base}/ui/-/login-code", headers={"Origin": base})
            assert minted.status == 404
    finally:
        process.terminate()
        await process.wait()
        await process.aclose()


async def test_a_visitor_without_a_cookie_never_gets_the_last_sign_in(store: Store) -> None:
    """The HTTP front relays every visitor through one client to the owner. Its cookie jar kept the session the
    owner set at a sign-in and sent it with every later request that had no cookie of its own: anyone who could
    reach the port (another OS user on loopback, anyone with --host) browsed, retired and minted tokens as the
    last person who signed in."""
    admin = await make_token(store, "ana", "team:t=admin")
    async with http_server(store, auth=True) as server, browser() as b:
        await seed(server, admin)
        page = await (await b.new_context()).new_page()
        await sign_in(page, server, admin)
        assert await page.inner_text("#principal") == "ana"
        async with httpx2.AsyncClient(base_url=server.base, follow_redirects=False) as stranger:
            for path in ("/ui/search?q=door+code", "/ui/tokens", "/ui/audit"):
                answer = await stranger.get(path)
                assert answer.status_code == 303, (path, answer.status_code)
                assert answer.headers["location"].startswith("/ui/login"), answer.headers["location"]
                assert "4711" not in answer.text
            refused = await stranger.post(
                "/ui/tokens",
                data={"name": "mallory", "grants": "team:t=admin"},
                headers={"Origin": server.base},
            )
            assert refused.status_code in (303, 403), refused.status_code
        # the person who signed in still is
        await page.goto(f"{server.base}/ui/search?q=door+code")
        assert "4711" in await page.inner_text("main")
