"""What every UI page shares: the signed-in context, the CSRF and Origin checks, rendering and error pages.

A request is handled as ``Ctx`` (session, principal, engine). Reads and writes go through the same Engine
operations as the MCP tools, with the signed-in principal, so the UI can never do more than that principal's
tokens allow over MCP. Every POST must carry the session's CSRF token and, when it came through an HTTP front,
an ``Origin`` header (the owner has already checked it against the front's allowed origins); the session cookie
is also ``SameSite=Strict``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qs, quote

import anyio.to_thread
from jinja2 import Environment, FileSystemLoader, select_autoescape
from mcp.server.auth.provider import TokenVerifier
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from scopes import Level, Principal, ScopeId
from server import _protocol
from server._auth import principal_of
from server._engine import EngineHolder
from server.ui._sessions import COOKIE, Sessions, UiSession
from storage.domain.errors import (
    Conflict,
    InvalidInput,
    MnemographError,
    NotFound,
    ScopeDenied,
    StorageUnavailable,
)

if TYPE_CHECKING:
    from storage import Engine

log = logging.getLogger(__name__)

UI_PATH = _protocol.UI_PATH
CLIENT = "mnemograph-ui"  # the client name in the provenance of what the UI writes
RELAYED_KEY = (
    _protocol.UI_RELAYED_KEY
)  # set in the ASGI scope by the owner: True when an HTTP front relayed it
HERE = Path(__file__).parent
T = TypeVar("T")

_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; connect-src 'self'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # Not no-referrer: with it Chrome sends "Origin: null" on form posts, which the Origin check refuses.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class Refused(Exception):
    """A request the UI answers with an error page (status, sentence, what to do next)."""

    def __init__(self, status: int, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.status, self.message, self.hint = status, message, hint


@dataclass(slots=True)
class Ctx:
    request: Request
    session: UiSession
    principal: Principal | None
    engine_holder: EngineHolder

    @property
    def user(self) -> Principal:
        if self.principal is None:
            raise Refused(401, "you are not signed in", "sign in with a token, or run `mnemograph ui`")
        return self.principal

    async def run(self, op: Callable[[Engine], T]) -> T:
        """Run one Engine operation in a worker thread (the Engine is synchronous)."""
        try:
            engine = await self.engine_holder.get()
        except StorageUnavailable as exc:
            raise Refused(503, str(exc), "try again in a moment") from None
        return await anyio.to_thread.run_sync(op, engine)


class Web:
    """Sessions, templates and the request guard shared by the UI's pages."""

    def __init__(self, holder: EngineHolder, verifier: TokenVerifier) -> None:
        self.holder = holder
        self.verifier = verifier
        self.sessions = Sessions()
        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["when"] = _when
        self.env.filters["q"] = lambda s: quote(str(s), safe="")
        self.env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str)

    async def context(self, request: Request) -> tuple[Ctx, bool]:
        """The request's context; the flag says the session is new (its cookie must be set)."""
        session = self.sessions.get(request.cookies.get(COOKIE))
        fresh = session is None
        if session is None:
            session = self.sessions.new()
        principal = session.principal
        if principal is not None and session.token is not None:
            verified = await self.verifier.verify_token(session.token)  # a revoke ends the session now
            if verified is None:
                self.sessions.end(session.sid)
                session, fresh, principal = self.sessions.new(), True, None
            else:
                principal = principal_of(verified, CLIENT)
        elif principal is not None:
            principal = dataclasses.replace(principal, client=CLIENT)
        return Ctx(request, session, principal, self.holder), fresh

    def handler(
        self, view: Callable[[Ctx], Awaitable[Response]], *, post: bool = False, signed_in: bool = True
    ) -> Callable[[Request], Awaitable[Response]]:
        """Wrap a view: context, sign-in and CSRF checks, domain errors as pages, cookie and headers."""

        async def endpoint(request: Request) -> Response:
            ctx, fresh = await self.context(request)
            try:
                if post:
                    await self._check_post(ctx)
                if signed_in and ctx.principal is None:
                    if post:
                        raise Refused(401, "you are not signed in", "sign in again; nothing was changed")
                    nxt = quote(request.url.path + ("?" + request.url.query if request.url.query else ""))
                    response: Response = RedirectResponse(f"{UI_PATH}/login?next={nxt}", status_code=303)
                else:
                    response = await view(ctx)
            except Refused as exc:
                response = self.page(ctx, "error.html", status=exc.status, error=exc)
            except MnemographError as exc:
                refused = Refused(_status(exc), exc.message, exc.hint)
                response = self.page(ctx, "error.html", status=refused.status, error=refused)
            if fresh and not _sets_cookie(response):  # a sign-in sets its own (new) session's cookie
                set_cookie(response, ctx.session.sid)
            for name, value in _SECURITY_HEADERS.items():
                response.headers.setdefault(name, value)
            return response

        return endpoint

    async def _check_post(self, ctx: Ctx) -> None:
        request = ctx.request
        if request.scope.get(RELAYED_KEY):
            origin = request.headers.get("origin")
            # The owner checked a present Origin against the front's allow-list; here it must be present.
            if not origin or origin == "null":
                raise Refused(
                    403, "this form was not sent from a Mnemograph page", "reload the page and retry"
                )
        if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            raise Refused(403, "this form was sent from another site", "reload the page and retry")
        form = await read_form(request)
        if not ctx.session.check_csrf(form.get("csrf")):
            raise Refused(403, "the form's security token is missing or stale", "reload the page and retry")
        request.state.form = form

    def page(self, ctx: Ctx, template: str, *, status: int = 200, **values: Any) -> HTMLResponse:
        principal = ctx.principal
        html = self.env.get_template(template).render(
            ui=UI_PATH,
            me=principal,
            csrf=ctx.session.csrf,
            is_admin=principal is not None and is_admin(principal),
            path=ctx.request.url.path,
            **values,
        )
        return HTMLResponse(html, status_code=status)


def form_of(ctx: Ctx) -> Mapping[str, str]:
    """The POST form that ``handler(post=True)`` already read and checked."""
    form: Mapping[str, str] = ctx.request.state.form
    return form


async def read_form(request: Request) -> dict[str, str]:
    """An urlencoded form (first value of each field). No multipart: the UI uploads nothing."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise Refused(415, "forms must be sent urlencoded", "use the page's own forms")
    body = (await request.body()).decode("utf-8", errors="replace")
    fields = parse_qs(body, keep_blank_values=True, max_num_fields=50)
    return {k: v[0] for k, v in fields.items()}


def set_cookie(response: Response, sid: str) -> None:
    response.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path=UI_PATH)


def _sets_cookie(response: Response) -> bool:
    mine = COOKIE.encode() + b"="
    return any(k == b"set-cookie" and v.startswith(mine) for k, v in response.raw_headers)


def is_admin(principal: Principal) -> bool:
    return principal.unrestricted or any(g.level is Level.ADMIN for g in principal.grants or ())


def parent_map(scopes: list[Any]) -> dict[ScopeId, ScopeId]:
    """The scope tree as far as a principal can see it (from ``list_scopes``): enough to evaluate its grants,
    because a parent it cannot read holds none of its grants, nor does anything above it."""
    return {ScopeId.parse(s.id): ScopeId.parse(s.parent) for s in scopes if s.parent}


def _status(exc: MnemographError) -> int:
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, ScopeDenied):
        return 403
    if isinstance(exc, Conflict):
        return 409
    if isinstance(exc, InvalidInput):
        return 400
    if isinstance(exc, StorageUnavailable):
        return 503
    return 500


def _when(value: datetime | str | None) -> str:
    if value is None:
        return "—"
    when: datetime
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            return value
    else:
        when = value
    if when.utcoffset() is None:
        return when.isoformat()
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
