"""``mnemograph serve --transport http``: the public streamable-HTTP endpoint, a reverse proxy to the owner.

The front listens on host:port (loopback by default) and streams ``/mcp`` (SSE included) and ``/healthz``
to the owner's HTTP socket, passing the client's headers through and adding its own policy: its allowed hosts
and origins, which the owner enforces with the SDK's DNS-rebinding protection, and its default scopes. It
imports neither the SDK nor the store, so it is up in a fraction of a second.

It holds a lease on the owner so the owner stays up while the front runs, and if the owner goes away it
starts a new one: at once when the lease breaks, or on the next request. A request that never reached a dead
owner is resent; one it died while handling gets a JSON-RPC error saying to retry.

Auth: the front forwards the client's Authorization header untouched and tells the owner whether this front
requires it (``--no-auth`` is refused off loopback). The owner checks the token (``server._auth``), answers
401 with protected-resource metadata, and serves that metadata, which this front proxies too.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import anyio.to_thread
import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from server._owner import OwnerUnavailable, ensure_owner
from server._protocol import (
    ALLOWED_HOSTS_HEADER,
    ALLOWED_ORIGINS_HEADER,
    AUTH_HEADER,
    DEFAULT_SCOPES_HEADER,
    HEADER_PREFIX,
    HEALTH_PATH,
    LEASE_PATH,
    MCP_PATH,
    PRINCIPAL_HEADER,
)
from server._runtime import RuntimePaths
from server.settings import Settings

log = logging.getLogger(__name__)

# The protected-resource metadata (RFC 9728) the owner serves for this front's /mcp, at both places clients look.
METADATA_PATHS = ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp")
PROXIED_PATHS = (MCP_PATH, HEALTH_PATH, *METADATA_PATHS)
UI_PATHS = ("/ui", "/ui/{rest:path}")
MAX_BODY = 4 * 1024 * 1024  # the SDK's own request limit
_HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer",
     b"transfer-encoding", b"upgrade", b"content-length"}
)  # fmt: skip
_INTERNAL_ERROR = -32603
_LOST = "Mnemograph's owner process stopped while handling this request; retry it (a new owner is starting)."


class HttpFront:
    """The front's ASGI app (``self.app``) and its connection to the owner."""

    def __init__(self, settings: Settings, paths: RuntimePaths) -> None:
        self._settings = settings
        self._paths = paths
        self._policy = [
            (ALLOWED_HOSTS_HEADER.encode(), ",".join(settings.allowed_hosts).encode()),
            (ALLOWED_ORIGINS_HEADER.encode(), ",".join(settings.allowed_origins).encode()),
            (DEFAULT_SCOPES_HEADER.encode(), ",".join(settings.default_scopes).encode()),
            # Bearer tokens unless --no-auth (loopback only, checked by settings); the owner verifies them.
            (AUTH_HEADER.encode(), b"none" if settings.no_auth else b"bearer"),
            (PRINCIPAL_HEADER.encode(), settings.principal.encode()),
        ]
        self._owner = httpx2.AsyncClient(
            transport=httpx2.AsyncHTTPTransport(uds=str(paths.http_socket)),
            base_url="http://mnemograph-owner",
            # No read timeout: SSE responses stay open as long as the tool runs (the first call may wait for
            # the embedding model to load).
            timeout=httpx2.Timeout(connect=10.0, read=None, write=60.0, pool=60.0),
        )
        self._starting = anyio.Lock()
        self.app = Starlette(
            routes=[
                Route(path, _Asgi(self._proxy), methods=["GET", "POST", "DELETE"]) for path in PROXIED_PATHS
            ]
            # The web UI (served by the owner, see server.ui): its pages, forms and static files.
            + [Route(path, _Asgi(self._proxy), methods=["GET", "POST"]) for path in UI_PATHS],
            lifespan=self._lifespan,
        )

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with self._owner, anyio.create_task_group() as tg:
            tg.start_soon(self._keep_lease)
            yield
            tg.cancel_scope.cancel()

    async def _proxy(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_BODY:
                await Response("Request body too large", status_code=413)(scope, receive, send)
                return
        # The client's own headers go through (the owner checks Host and Origin against our policy), except
        # hop-by-hop ones and any that would pose as ours.
        headers = [(k, v) for k, v in scope["headers"] if k not in _HOP_BY_HOP and not k.startswith(_PREFIX)]
        upstream = self._owner.build_request(
            scope["method"], scope["path"], params=scope["query_string"], headers=headers + self._policy,
            content=bytes(body),
        )  # fmt: skip
        try:
            response = await self._send(upstream)
        except OwnerUnavailable as exc:
            await _rpc_error(503, body, f"Mnemograph is unavailable: {exc}")(scope, receive, send)
            return
        except httpx2.TransportError:
            await _rpc_error(502, body, _LOST)(scope, receive, send)
            return
        try:
            await _relay(response, receive, send)
        finally:
            await response.aclose()

    async def _send(self, upstream: httpx2.Request) -> httpx2.Response:
        try:
            return await self._owner.send(upstream, stream=True)
        except httpx2.ConnectError:
            # Nobody listens: the owner stopped or died, and never saw this request. Start one and resend.
            await self._ensure_owner()
            return await self._owner.send(upstream, stream=True)

    async def _ensure_owner(self) -> None:
        async with self._starting:
            start = functools.partial(ensure_owner, self._paths, timeout=self._settings.spawn_timeout)
            await anyio.to_thread.run_sync(start)

    async def _keep_lease(self) -> None:
        """Hold a lease on the owner for as long as the front runs, starting a new owner whenever it breaks."""
        delay = 0.5
        while True:
            try:
                await self._ensure_owner()
                async with self._owner.stream("GET", LEASE_PATH) as response:
                    async for _ in response.aiter_raw():
                        delay = 0.5
                log.info("the owner ended our lease; starting or finding another")
            except (httpx2.HTTPError, OwnerUnavailable) as exc:
                log.warning("no owner lease: %s", exc)
            await anyio.sleep(delay)  # never spin if the owner cannot start
            delay = min(delay * 2, 10.0)


_PREFIX = HEADER_PREFIX.encode()


class _Asgi:
    """Marks a method as a raw ASGI endpoint (Starlette treats plain functions and methods as request->response)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


async def _relay(response: httpx2.Response, receive: Receive, send: Send) -> None:
    """Stream the owner's response to the client as it arrives; stop if the client disconnects."""
    headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP_BY_HOP]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    async with anyio.create_task_group() as tg:

        async def stop_on_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(stop_on_disconnect)
        try:
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx2.TransportError:
            log.warning("the owner went away in the middle of a response")
        tg.cancel_scope.cancel()
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _rpc_error(status: int, body: bytes | bytearray, message: str) -> Response:
    """A JSON-RPC error answering the request in ``body`` (by its id, when it has one)."""
    try:
        request = json.loads(body)
    except ValueError:
        request = None
    rid = request.get("id") if isinstance(request, dict) else None
    payload = {"jsonrpc": "2.0", "id": rid, "error": {"code": _INTERNAL_ERROR, "message": message}}
    return JSONResponse(payload, status_code=status)


async def run_front(settings: Settings, paths: RuntimePaths) -> None:
    """Serve the HTTP front on ``settings.host:settings.port`` until interrupted."""
    front = HttpFront(settings, paths)
    config = uvicorn.Config(
        front.app, host=settings.host, port=settings.port, log_level=settings.log_level.lower(), lifespan="on"
    )
    await uvicorn.Server(config).serve()
