"""The web UI, served by the owner at ``/ui`` (and relayed by every HTTP front): see docs/ui.md.

``ui_app`` builds the Starlette app. Pages are rendered on the server from the templates in ``templates/``;
the few static files (CSS, a little JavaScript) are in ``static/``: nothing is fetched from elsewhere.

Signing in: with a bearer token (``mnemograph token create``), or as the local user through a one-time link
that ``mnemograph ui`` asks for on the owner's private socket (``LOGIN_CODE_PATH``). The socket's directory is
private to the user who runs the owner, so being able to ask proves being that user; a front refuses to relay
the request, so nobody reaching the HTTP port can mint a link.
"""

from __future__ import annotations

from pathlib import Path

from mcp.server.auth.provider import TokenVerifier
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from server._engine import EngineHolder
from server._session import local_principal
from server._tokens import TokenStore
from server.ui._actions import Actions
from server.ui._pages import Pages
from server.ui._web import HERE, RELAYED_KEY, UI_PATH, Ctx, Web
from storage.engine.audit import AUDIT_FILE, AuditLog

LOGIN_CODE_PATH = "/-/login-code"  # under UI_PATH; answered only on the owner's private socket

__all__ = ["LOGIN_CODE_PATH", "RELAYED_KEY", "UI_PATH", "ui_app"]


def ui_app(holder: EngineHolder, verifier: TokenVerifier, data_dir: Path) -> Starlette:
    """The UI as an ASGI app to mount at ``UI_PATH``. The owner sets ``RELAYED_KEY`` in each request's scope."""
    web = Web(holder, verifier)
    audit = AuditLog(data_dir / AUDIT_FILE)
    pages = Pages(web, audit)
    actions = Actions(web, TokenStore(data_dir), audit)

    async def home(ctx: Ctx) -> Response:
        return RedirectResponse(f"{UI_PATH}/search", status_code=303)

    async def login_code(request: Request) -> Response:
        if request.scope.get(RELAYED_KEY, True):
            return JSONResponse({"error": "not_found"}, status_code=404)
        principal = local_principal(request.headers.get("mnemograph-principal"))
        code = web.sessions.mint_code(principal)
        return JSONResponse({"path": f"{UI_PATH}/auth/{code}", "principal": principal.name})

    h = web.handler
    routes = [
        Route("/", h(home), methods=["GET"]),
        Route("/login", h(actions.login_page, signed_in=False), methods=["GET"]),
        Route("/login", h(actions.login, post=True, signed_in=False), methods=["POST"]),
        Route("/auth/{code}", h(actions.redeem, signed_in=False), methods=["GET"]),
        Route("/logout", h(actions.logout, post=True), methods=["POST"]),
        Route("/search", h(pages.search), methods=["GET"]),
        Route("/scopes", h(pages.scopes), methods=["GET"]),
        Route("/timeline", h(pages.timeline), methods=["GET"]),
        Route("/graph", h(pages.graph), methods=["GET"]),
        Route("/audit", h(pages.audit_log), methods=["GET"]),
        Route("/memory/{id}", h(pages.memory), methods=["GET"]),
        Route("/memory/{id}/amend", h(actions.amend, post=True), methods=["POST"]),
        Route("/memory/{id}/retire", h(actions.retire, post=True), methods=["POST"]),
        Route("/memory/{id}/erase", h(actions.erase, post=True), methods=["POST"]),
        Route("/tokens", h(actions.tokens_page), methods=["GET"]),
        Route("/tokens", h(actions.create_token, post=True), methods=["POST"]),
        Route("/tokens/{name}/revoke", h(actions.revoke_token, post=True), methods=["POST"]),
        Route(LOGIN_CODE_PATH, login_code, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(routes=routes)
