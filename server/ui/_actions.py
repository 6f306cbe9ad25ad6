"""The UI's posts: sign in and out, amend / retire / erase a memory, create and revoke tokens.

Every post passed the CSRF and Origin checks in ``Web.handler``. Changes go through the Engine with the
signed-in principal, which refuses what that principal may not do (403), whatever the page showed.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.responses import RedirectResponse, Response

from scopes import Grant, InvalidGrant, Level, Principal, ScopeId
from server._auth import principal_of
from server._tokens import TokenError, TokenInfo, TokenStore
from server.ui._web import UI_PATH, Ctx, Refused, Web, form_of, is_admin, parent_map, set_cookie
from storage.engine.audit import AuditLog


class Actions:
    def __init__(self, web: Web, tokens: TokenStore, audit: AuditLog) -> None:
        self.web = web
        self.tokens = tokens
        self.audit = audit

    # -- signing in ---------------------------------------------------------------------------------

    async def login_page(self, ctx: Ctx) -> Response:
        return self.web.page(
            ctx, "login.html", next=_next(ctx.request.query_params.get("next")), failed=False
        )

    async def login(self, ctx: Ctx) -> Response:
        form = form_of(ctx)
        token = form.get("token", "").strip()
        verified = await self.web.verifier.verify_token(token) if token else None
        if verified is None:
            return self.web.page(ctx, "login.html", status=401, next=_next(form.get("next")), failed=True)
        return self._signed_in(ctx, principal_of(verified), token, _next(form.get("next")))

    async def redeem(self, ctx: Ctx) -> Response:
        """A one-time link from ``mnemograph ui``: sign in as the local user who asked for it."""
        principal = self.web.sessions.redeem(ctx.request.path_params["code"])
        if principal is None:
            raise Refused(
                403,
                "this sign-in link was already used or has expired",
                "run `mnemograph ui` again for a new one",
            )
        return self._signed_in(ctx, principal, None, f"{UI_PATH}/")

    def _signed_in(self, ctx: Ctx, principal: Principal, token: str | None, to: str) -> Response:
        self.web.sessions.end(ctx.session.sid)
        session = self.web.sessions.new(principal, token)
        response = RedirectResponse(to, status_code=303)
        set_cookie(response, session.sid)
        return response

    async def logout(self, ctx: Ctx) -> Response:
        self.web.sessions.end(ctx.session.sid)
        response = RedirectResponse(f"{UI_PATH}/login", status_code=303)
        response.delete_cookie("mnemograph_ui", path=UI_PATH)
        return response

    # -- changing memories --------------------------------------------------------------------------

    async def amend(self, ctx: Ctx) -> Response:
        me, form, mid = ctx.user, form_of(ctx), ctx.request.path_params["id"]
        content = form.get("content", "")
        receipt = await ctx.run(lambda e: e.amend(mid, content, reason=form.get("reason", ""), principal=me))
        return RedirectResponse(f"{UI_PATH}/memory/{receipt.id}?done=amended", status_code=303)

    async def retire(self, ctx: Ctx) -> Response:
        me, form, mid = ctx.user, form_of(ctx), ctx.request.path_params["id"]
        if form.get("confirm", "").strip() != mid[:8]:
            raise Refused(400, "to retire, type the memory's first 8 characters", "nothing was changed")
        await ctx.run(lambda e: e.retire(mid, reason=form.get("reason", ""), principal=me))
        return RedirectResponse(f"{UI_PATH}/memory/{mid}?done=retired", status_code=303)

    async def erase(self, ctx: Ctx) -> Response:
        me, form, mid = ctx.user, form_of(ctx), ctx.request.path_params["id"]
        confirm = form.get("confirm", "").strip()
        receipt = await ctx.run(
            lambda e: e.erase(mid, confirm=confirm, reason=form.get("reason", ""), principal=me)
        )
        return self.web.page(ctx, "erased.html", receipt=receipt)

    # -- tokens ------------------------------------------------------------------------------------

    async def tokens_page(self, ctx: Ctx, *, created: tuple[str, TokenInfo] | None = None) -> Response:
        me = ctx.user
        tree = await self._tree(ctx)
        shown = [t for t in self.tokens.all() if _manages(me, t.grants, tree)]
        return self.web.page(ctx, "tokens.html", tokens=shown, created=created)

    async def create_token(self, ctx: Ctx) -> Response:
        me, form = ctx.user, form_of(ctx)
        tree = await self._tree(ctx)
        raw = [g.strip() for g in form.get("grants", "").replace(",", " ").split() if g.strip()]
        try:
            grants = [Grant.parse(g) for g in raw]
        except InvalidGrant as exc:
            raise Refused(400, str(exc), "write grants as SCOPE=r|w|admin, e.g. team:t=w") from None
        if not _manages(me, grants, tree):
            raise Refused(
                403,
                f"{me.name} may not grant {' '.join(raw)}",
                "you can only hand out grants on scopes you administer",
            )
        try:
            value, info = self.tokens.create(form.get("name", "").strip(), raw)
        except TokenError as exc:
            raise Refused(400, str(exc), "pick another name or fix the grants") from None
        self.audit.record(
            "token_create",
            principal=me.name,
            client=me.client,
            token=info.name,
            grants=[str(g) for g in info.grants],
        )
        return await self.tokens_page(ctx, created=(value, info))

    async def revoke_token(self, ctx: Ctx) -> Response:
        me, name = ctx.user, ctx.request.path_params["name"]
        tree = await self._tree(ctx)
        found = next((t for t in self.tokens.all() if t.name == name), None)
        if found is None or not _manages(me, found.grants, tree):
            raise Refused(404, f"no token named {name!r} that you manage", "the tokens page lists them")
        if form_of(ctx).get("confirm", "").strip() != name:
            raise Refused(400, "to revoke, type the token's name", "nothing was changed")
        try:
            self.tokens.revoke(name)
        except TokenError as exc:
            raise Refused(409, str(exc)) from None
        self.audit.record("token_revoke", principal=me.name, client=me.client, token=name)
        return RedirectResponse(f"{UI_PATH}/tokens", status_code=303)

    async def _tree(self, ctx: Ctx) -> dict[ScopeId, ScopeId]:
        me = ctx.user
        if not is_admin(me):
            raise Refused(403, f"{me.name} administers no scope", "token management needs an 'admin' grant")
        return parent_map(await ctx.run(lambda e: e.list_scopes(principal=me)))


def _manages(me: Principal, grants: Any, tree: dict[ScopeId, ScopeId]) -> bool:
    """Whether ``me`` may see, hand out or revoke a token with ``grants``: admin on every scope they name."""
    return me.unrestricted or (bool(grants) and all(me.may(Level.ADMIN, g.scope, tree) for g in grants))


def _next(raw: str | None) -> str:
    """Where to go after signing in: a path inside the UI only (never another site)."""
    if raw and raw.startswith(UI_PATH + "/") and not raw.startswith("//") and "\\" not in raw:
        return quote(raw, safe="/?=&%:-_.~")
    return f"{UI_PATH}/"
