"""The owner's HTTP app, served on its private Unix socket.

- ``/mcp``: the SDK's streamable HTTP transport, stateless (every request stands alone, so an HTTP client
  survives an owner restart without a session to lose; Mnemograph's tools never call back to the client),
  answering each POST with one ``application/json`` body rather than an event stream: the spec lets a server
  choose either for a client that accepts both, no tool sends a notification or request within its call
  (progress, logging, sampling; see ``server._sampling``), and a client that has read a JSON body to its end
  keeps its connection for the next call, where an event stream's early close costs it a new TCP
  connection per call (docs/benchmarks/mcp.md).
- ``/healthz``: whether the store is open.
- ``/-/verify``, ``/-/reindex``, ``/-/erase``, ``/-/export``, ``/-/backup``: admin operations for the CLI
  (the HTTP front never proxies them).
- ``/ui``: the web UI (``server.ui``), with its own sign-in; relayed by every HTTP front.
- ``/-/lease``: a long-lived request that an HTTP front holds so the owner stays up while the front runs.

DNS-rebinding protection: requests relayed by an HTTP front carry the front's allowed hosts and origins in
``mnemograph-*`` headers, and are checked here (``server._rebinding``) against the client's own Host and Origin
headers, which the front passes through unchanged. The check lives here, not in the front, so the front stays
free of the web framework's heavier parts and starts fast. Requests that come straight to the socket (the
CLI) carry no policy: a browser cannot reach a Unix socket, and its directory is private to this user.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from mcp.server.auth.provider import TokenVerifier
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server._activity import Activity
from server._admin import OPERATIONS, PROGRESS_PATH, AdminError, perform, progress_state, scope_op
from server._auth import METADATA_PATH, BearerGate, authenticated_principal
from server._engine import EngineHolder
from server._protocol import (
    ALLOWED_HOSTS_HEADER,
    ALLOWED_ORIGINS_HEADER,
    AUTH_HEADER,
    DEFAULT_SCOPES_HEADER,
    FRONT_HEADER,
    HEALTH_PATH,
    LEASE_PATH,
    MAX_MESSAGE_BYTES,
    MCP_PATH,
    PRINCIPAL_HEADER,
    UI_PATH,
    UI_RELAYED_KEY,
)
from server._rebinding import refusal
from server._session import SessionInfo, current_session, local_principal, parse_scopes
from server.app import VERSION, MnemographMCP
from storage.domain.errors import MnemographError, StorageUnavailable

if TYPE_CHECKING:
    from storage import Engine


def owner_app(
    server: MnemographMCP,
    holder: EngineHolder,
    activity: Activity,
    *,
    data_dir: Path,
    stopping: anyio.Event,
    started: anyio.Event,
    verifier: TokenVerifier,
    issuer: str | None = None,
) -> ASGIApp:
    """The owner's ASGI app. ``started`` is set once the MCP session manager runs; ``stopping`` ends leases.

    ``verifier`` checks the bearer tokens of requests that a front relays with auth required; ``issuer`` is
    the external OAuth authorization server that issues them, if any (see ``server._auth``).
    """
    mcp_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        # Checked per request in _PerRequest instead: the policy is each front's own.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    async def healthz(request: Request) -> JSONResponse:
        projections = holder.projections
        state = holder.state
        status = {"ready": "ok", "opening": "starting", "unreachable": "unavailable", "failed": "failed"}[
            state
        ]
        if status == "ok" and projections is not None and projections["error"] is not None:
            status = "degraded"  # answering, but recall may miss the newest writes until the retry succeeds
        # Scale-out: the shared canonical store does not answer, so every call fails until it is back.
        unreachable = state == "unreachable" or (
            status != "failed" and projections is not None and projections["canonical_error"] is not None
        )
        if unreachable:
            status = "unavailable"
        body: dict[str, object] = {"status": status, "engine": state, "version": VERSION}
        if ALLOWED_HOSTS_HEADER in request.headers:
            # Relayed by a public HTTP front, so anyone who can reach the port may ask: no process id, path,
            # client count or error text (which can name files). The owner's private socket shows them.
            if unreachable:
                body["problem"] = "the shared canonical store does not answer; the server's log says why"
            elif holder.problem:
                body["problem"] = "the store failed to open or stopped; the server's log says why"
        else:
            body |= {
                "problem": holder.problem,
                "pid": os.getpid(),
                "data_dir": str(data_dir),
                # The probe itself is not counted (see _PerRequest), so an idle owner shows 0.
                "clients": activity.busy,
                "sessions": activity.count("session"),
                "fronts": activity.fronts(),
                "projections": projections,
            }
        return JSONResponse(body, status_code=503 if holder.state == "failed" or unreachable else 200)

    async def _progress(request: Request) -> Response:
        return JSONResponse(progress_state())  # the CLI's progress bar polls it while an operation runs

    async def admin(request: Request) -> Response:
        op = request.path_params["op"]
        if op not in OPERATIONS:
            return JSONResponse(
                {"error": "not_found", "message": f"no admin operation {op!r}"}, status_code=404
            )
        try:
            args = json.loads(await request.body() or b"{}")
        except ValueError:
            return JSONResponse(
                {"error": "invalid_input", "message": "the body is not JSON"}, status_code=400
            )
        return await _admin(
            holder, lambda engine: perform(engine, op, args if isinstance(args, dict) else {})
        )

    async def scope(request: Request) -> Response:
        body = await request.json()
        try:
            engine = await holder.get()
            result = await anyio.to_thread.run_sync(scope_op, engine, body)
        except StorageUnavailable as exc:
            return JSONResponse({"error": exc.code, "message": str(exc)}, status_code=503)
        except (MnemographError, AdminError) as exc:
            return JSONResponse({"error": "refused", "message": str(exc)}, status_code=400)
        return JSONResponse(result)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # The MCP app is mounted, so Starlette will not run its lifespan: run its session manager here.
        async with server.session_manager.run():
            started.set()
            yield

    app = Starlette(
        routes=[
            Route(HEALTH_PATH, healthz, methods=["GET"]),
            Route("/-/scope", scope, methods=["POST"]),
            Route(PROGRESS_PATH, _progress, methods=["GET"]),
            Route("/-/{op}", admin, methods=["POST"]),
            Route(LEASE_PATH, _Lease(activity, stopping), methods=["GET"]),
            Route(UI_PATH, _to_ui_home),
            Mount(UI_PATH, app=_LazyUi(holder, verifier, data_dir)),
            Mount("/", app=mcp_app),
        ],
        lifespan=lifespan,
    )
    return _PerRequest(app, activity, server.default_scopes, BearerGate(verifier, issuer))


class _LazyUi:
    """The web UI, built on its first request: its templates and their engine (jinja2) cost every owner 0.07 s
    of CPU and 2 MiB before its first answer, for a page most owners never serve (docs/benchmarks/coldstart.md)."""

    def __init__(self, holder: EngineHolder, verifier: TokenVerifier, data_dir: Path) -> None:
        self._args = (holder, verifier, data_dir)
        self._app: ASGIApp | None = None
        self._lock = anyio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            async with self._lock:
                if self._app is None:
                    self._app = await anyio.to_thread.run_sync(self._build)
        await self._app(scope, receive, send)

    def _build(self) -> ASGIApp:
        from server.ui import ui_app

        return ui_app(*self._args)


async def _to_ui_home(request: Request) -> Response:
    return RedirectResponse(f"{UI_PATH}/", status_code=308)


async def _admin(holder: EngineHolder, op: Callable[[Engine], dict[str, Any]]) -> Response:
    try:
        engine = await holder.get()
        report = await anyio.to_thread.run_sync(op, engine)
    except StorageUnavailable as exc:
        return JSONResponse({"error": exc.code, "message": str(exc)}, status_code=503)
    except MnemographError as exc:
        return JSONResponse({"error": exc.code, "message": str(exc)}, status_code=400)
    return JSONResponse(report)


class _Lease:
    """Holds the owner up while the client keeps this request open; ends when the client goes or we stop."""

    def __init__(self, activity: Activity, stopping: anyio.Event) -> None:
        self._activity = activity
        self._stopping = stopping

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
        )
        await send({"type": "http.response.body", "body": b"leased\n", "more_body": True})
        with self._activity.front(_front_info(Headers(scope=scope))):
            async with anyio.create_task_group() as tg:

                async def end_when_stopping() -> None:
                    await self._stopping.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(end_when_stopping)
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def _front_info(headers: Headers) -> dict[str, Any]:
    """What a front said about itself on its lease (it comes over the private socket: this user's process)."""
    try:
        info = json.loads(headers.get(FRONT_HEADER, "{}"))
    except ValueError:
        info = None
    if not isinstance(info, dict):
        return {}
    return {k: info[k] for k in ("pid", "url", "command") if isinstance(info.get(k), (int, str))}


class _PerRequest:
    """For every HTTP request: apply the relaying front's DNS-rebinding policy, authenticate it unless the front
    runs with ``--no-auth``, give the request its principal and the session defaults the front sent
    (``server._session``), and count it as activity so the owner never stops in the middle of one.

    Requests that come straight to the socket (no front policy) are the local user's: the socket is private.
    A front's request without an auth header is authenticated: only an explicit ``none`` turns auth off.
    """

    def __init__(
        self, app: ASGIApp, activity: Activity, default_scopes: tuple[str, ...], gate: BearerGate
    ) -> None:
        self._app = app
        self._activity = activity
        self._default_scopes = default_scopes
        self._gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == LEASE_PATH:  # a lease counts itself
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_MESSAGE_BYTES:
            too_big = JSONResponse(
                {
                    "error": "too_large",
                    "message": f"a request body may hold at most {MAX_MESSAGE_BYTES} bytes",
                },
                status_code=413,
            )
            await too_big(scope, receive, send)
            return
        receive = _bounded(receive)
        hosts = headers.get(ALLOWED_HOSTS_HEADER)
        ui = scope["path"] == UI_PATH or scope["path"].startswith(UI_PATH + "/")
        if hosts is not None:
            # The UI's forms are urlencoded, not JSON: it checks Host and Origin here and the rest itself.
            is_post = scope["method"] == "POST" and not ui
            rejected = refusal(headers, hosts, headers.get(ALLOWED_ORIGINS_HEADER, ""), is_post=is_post)
            if rejected is not None:
                await rejected(scope, receive, send)
                return
        if scope["path"] == HEALTH_PATH:  # a probe (what `mnemograph status` sends) is not a client
            await self._app(scope, receive, send)
            return
        if ui:
            # The UI signs people in with its own session cookie (server.ui), not a bearer header.
            scope[UI_RELAYED_KEY] = hosts is not None
            with self._activity.hold():
                await self._app(scope, receive, send)
            return
        requested = headers.get(DEFAULT_SCOPES_HEADER)
        defaults = (parse_scopes(requested) if requested is not None else None) or self._default_scopes
        guarded = scope["path"] == MCP_PATH or scope["path"].startswith(METADATA_PATH)
        if hosts is not None and headers.get(AUTH_HEADER) != "none" and guarded:
            # The Host header has passed the front's allow-list above, so it names this server to its client.
            resource = f"http://{headers.get('host', 'localhost')}{MCP_PATH}"

            async def authenticated(scope: Scope, receive: Receive, send: Send) -> None:
                principal = authenticated_principal(scope)
                assert principal is not None  # RequireAuthMiddleware lets only authenticated requests through
                await self._serve(scope, receive, send, SessionInfo(defaults, "http", principal))

            with self._activity.hold():
                await self._gate(scope, receive, send, resource=resource, app=authenticated)
            return
        local = local_principal(headers.get(PRINCIPAL_HEADER))
        with self._activity.hold():
            await self._serve(scope, receive, send, SessionInfo(defaults, "http", local))

    async def _serve(self, scope: Scope, receive: Receive, send: Send, session: SessionInfo) -> None:
        token = current_session.set(session)
        try:
            await self._app(scope, receive, send)
        finally:
            current_session.reset(token)


def _bounded(receive: Receive) -> Receive:
    """A body without a Content-Length (chunked) is cut off, as a disconnect, once it passes the limit."""
    seen = 0

    async def bounded() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > MAX_MESSAGE_BYTES:
                return {"type": "http.disconnect"}
        return message

    return bounded
