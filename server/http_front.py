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
401 with protected-resource metadata, and serves that metadata, which this front proxies too. The front checks
the token against the token file too, from the headers alone, before it reads a byte of the body: a request
without a live token is relayed to the owner without its body (so the client gets the owner's own 401), and
never costs the front more than its headers. With ``--no-auth`` it serves only connections of its own OS user.

Resource limits (docs/security.md): a connection cap and a header deadline (``server._front_guard``), a body
deadline and size limit here, and so a bounded amount of memory per connection.

If the owner dies while handling a request (before its JSON answer, or while streaming an event stream), the
client gets a JSON-RPC error for its request (never a silent, empty 200): it says the outcome is unknown, so
the client checks before retrying. So does a client whose owner does not answer within ``owner_timeout``
seconds (hung). A JSON answer of known size is read whole before it is sent on, so an owner dying in the middle
of it gets the client that error too; in the middle of any other body, the client's connection is aborted: a cut
body is never ended as if it were whole. ``GET /mcp`` is 405: the owner sends no server-initiated messages, so an event stream
would only hold a connection slot (``HEAD /mcp`` gets the same answer).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from http.cookiejar import CookieJar, DefaultCookiePolicy

import anyio
import anyio.to_thread
import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from server._front_guard import connection_peer_ok, guarded
from server._owner import OwnerUnavailable, ensure_owner
from server._protocol import (
    ALLOWED_HOSTS_HEADER,
    ALLOWED_ORIGINS_HEADER,
    AUTH_HEADER,
    DEFAULT_SCOPES_HEADER,
    FRONT_HEADER,
    HEADER_PREFIX,
    HEALTH_PATH,
    LEASE_PATH,
    MAX_MESSAGE_BYTES,
    MCP_PATH,
    OWNER_KEEP_ALIVE,
    PRINCIPAL_HEADER,
)
from server._runtime import RuntimePaths
from server._tokens import TokenError, TokenStore
from server.settings import Settings

log = logging.getLogger(__name__)

# The protected-resource metadata (RFC 9728) the owner serves for this front's /mcp, at both places clients look.
METADATA_PATHS = ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp")
PROXIED_PATHS = (MCP_PATH, HEALTH_PATH, *METADATA_PATHS)
UI_PATHS = ("/ui", "/ui/{rest:path}")
MAX_BODY = MAX_MESSAGE_BYTES  # the SDK's own request limit (docs/limits.md)
# A UI form (sign-in with a token, or an amend of at most 32,000 characters, form-encoded) fits in this; the UI
# signs in by cookie, which the front cannot check, so its posts are read unauthenticated, but capped low.
MAX_UI_BODY = 512 * 1024
# An owner's JSON answer up to this size is read whole before it is sent on (``HttpFront._answer_whole``): a
# recall answer is a few KiB; larger ones are relayed as they come, so a connection never holds more.
MAX_ANSWER = MAX_MESSAGE_BYTES
_HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer",
     b"transfer-encoding", b"upgrade", b"content-length"}
)  # fmt: skip
# The owner's Date and Server are not relayed: the front's server adds its own (Date may appear only once).
_NOT_RELAYED = _HOP_BY_HOP | {b"date", b"server"}
_INTERNAL_ERROR = -32603
_LOST = "Mnemograph's owner process stopped while handling this request; retry it (a new owner is starting)."
_CUT = (
    "Mnemograph's owner process stopped while handling this request, after it had started: its outcome is "
    "unknown (a write, purge or erase may or may not have been committed). A new owner is starting; check the "
    "result (memory_read, recall or list_scopes) before you retry."
)
_NOT_YOU = (
    "this server runs with --no-auth, which serves only processes of the OS user that started it; connect "
    "as that user, or ask its owner for a bearer token (`mnemograph token create`)"
)


class HttpFront:
    """The front's ASGI app (``self.app``) and its connection to the owner."""

    def __init__(self, settings: Settings, paths: RuntimePaths, command: str = "serve") -> None:
        self._settings = settings
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        path = "/ui/" if command == "ui" else MCP_PATH
        # Told to the owner on the lease, so `mnemograph status` and `stop` can name what keeps it up.
        about = {"pid": os.getpid(), "url": f"http://{host}:{settings.port}{path}", "command": command}
        self._about = {FRONT_HEADER: json.dumps(about)}
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
            # The owner answers a call once the tool is done (one JSON body), so the read timeout bounds a whole
            # call: longer than any legitimate one (settings.owner_timeout), so it only frees clients of a hung
            # owner. The lease, which carries no bytes, waits without one (``_keep_lease``).
            # A hung owner also stops taking a large request's bytes: writing waits as long, for the same 504.
            timeout=httpx2.Timeout(
                connect=10.0, read=settings.owner_timeout, write=settings.owner_timeout, pool=60.0
            ),
            # Idle connections are dropped before the owner's own keep-alive timeout (``server.owner``) closes
            # them, so a request is never sent on a connection the owner is closing at the same moment.
            limits=httpx2.Limits(keepalive_expiry=OWNER_KEEP_ALIVE / 2),
            # The front relays for many clients through this one client: a cookie the owner sets (the UI's
            # session) is the visitor's, never the relay's. A jar that keeps nothing, or the next visitor without
            # a cookie of its own would be sent the last one's session (found by a newcomer's walk-through).
            cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
        )
        self._wait = settings.owner_timeout
        self._tokens = TokenStore(paths.data_dir)
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
        if self._settings.no_auth and not connection_peer_ok(scope):
            await JSONResponse({"error": "forbidden", "message": _NOT_YOU}, status_code=403)(
                scope, receive, send
            )
            return
        if scope["method"] in ("GET", "HEAD") and scope["path"] == MCP_PATH and self._authenticated(scope):
            # The owner sends no server-initiated messages (stateless sessions), so a GET stream would stay
            # empty and hold a connection slot for as long as the client keeps it; the spec's answer is 405.
            # HEAD gets GET's answer without its body (the owner's own 405 would name GET and DELETE as allowed).
            await _no_event_stream()(scope, receive, send)
            return
        body = b""
        # Only an authenticated POST to /mcp has a body worth reading; anything else goes on without one, so
        # an unauthenticated client never makes the front hold more than its headers.
        limit = 0
        if scope["method"] == "POST" and scope["path"] == MCP_PATH and self._authenticated(scope):
            limit = MAX_BODY
        elif scope["method"] == "POST" and scope["path"].startswith("/ui"):
            limit = MAX_UI_BODY
        if limit:
            read = await _read_body(scope, receive, send, self._settings.body_timeout, limit)
            if read is None:
                return
            body = read
            if scope["path"] == MCP_PATH and body.lstrip()[:1] == b"[":
                await _batch_refused()(scope, receive, send)
                return
        # The client's own headers go through (the owner checks Host and Origin against our policy), except
        # hop-by-hop ones and any that would pose as ours.
        headers = [(k, v) for k, v in scope["headers"] if k not in _HOP_BY_HOP and not k.startswith(_PREFIX)]
        upstream = self._owner.build_request(
            scope["method"], scope["path"], params=scope["query_string"], headers=headers + self._policy,
            content=body,
        )  # fmt: skip
        try:
            response = await self._send(upstream)
        except OwnerUnavailable as exc:
            await _rpc_error(503, body, f"Mnemograph is unavailable: {exc}")(scope, receive, send)
            return
        except httpx2.ConnectError:
            await _rpc_error(502, body, _LOST)(scope, receive, send)
            return
        except (httpx2.ReadTimeout, httpx2.WriteTimeout):
            log.warning(
                "the owner did not answer %s %s within %gs", scope["method"], scope["path"], self._wait
            )
            await _rpc_error(504, body, _hung(self._wait))(scope, receive, send)
            return
        except httpx2.TransportError:
            # The request reached the owner, which went away before its answer's first byte: the owner answers
            # a call with one JSON body once the tool is done, so it may have acted on it (a write committed).
            await _rpc_error(502, body, _CUT if body else _LOST)(scope, receive, send)
            return
        try:
            if _whole(response):
                await self._answer_whole(response, body, scope, receive, send)
            else:
                await _relay(response, receive, send, _request_id(body), self._wait)
        finally:
            await response.aclose()

    async def _answer_whole(
        self, response: httpx2.Response, body: bytes, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Read a JSON answer of known, bounded size whole, then send it in one piece: one write to the client
        instead of a chunk stream (and no task to watch the client meanwhile), and an owner that dies in the middle
        of it gets the client a JSON-RPC error saying so, not a cut answer."""
        try:
            answer = await response.aread()
        except httpx2.ReadTimeout:
            log.warning("the owner stalled for %gs in the middle of an answer", self._wait)
            await _rpc_error(504, body, _hung(self._wait))(scope, receive, send)
            return
        except httpx2.TransportError:
            log.warning("the owner went away in the middle of an answer")
            await _rpc_error(502, body, _CUT if body else _LOST)(scope, receive, send)
            return
        headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _NOT_RELAYED]
        # A HEAD answer has no body but the length GET's would have (RFC 9110), which the owner gave.
        length = response.headers["content-length"] if scope["method"] == "HEAD" else str(len(answer))
        headers.append((b"content-length", length.encode()))
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": answer, "more_body": False})

    def _authenticated(self, scope: Scope) -> bool:
        """Whether the request may send a body: auth is off (same user, checked above) or its bearer token is
        live in the token file. The owner checks the token again; this only decides what the front reads."""
        if self._settings.no_auth:
            return True
        value = Headers(scope=scope).get("authorization", "")
        if not value.lower().startswith("bearer "):
            return False
        try:
            return self._tokens.verify(value[7:]) is not None
        except TokenError:
            return False  # a damaged token file refuses every token (the owner logs why)

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
                async with self._owner.stream(
                    "GET", LEASE_PATH, headers=self._about, timeout=_NO_READ_TIMEOUT
                ) as response:
                    async for _ in response.aiter_raw():
                        delay = 0.5
                log.info("the owner ended our lease; starting or finding another")
            except (httpx2.HTTPError, OwnerUnavailable) as exc:
                log.warning("no owner lease: %s", exc)
            await anyio.sleep(delay)  # never spin if the owner cannot start
            delay = min(delay * 2, 10.0)


_PREFIX = HEADER_PREFIX.encode()
_NO_READ_TIMEOUT = httpx2.Timeout(connect=10.0, read=None, write=60.0, pool=60.0)
_MAX_HEADER_BYTES = 64 * 1024  # request line and headers together; larger is answered 400


class _Asgi:
    """Marks a method as a raw ASGI endpoint (Starlette treats plain functions and methods as request->response)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


async def _read_body(
    scope: Scope, receive: Receive, send: Send, deadline: float, limit: int = MAX_BODY
) -> bytes | None:
    """The request's body, or None once the client has been answered (413 too large, 408 too slow) or left."""
    too_big = f"a request body may hold at most {limit} bytes"
    declared = Headers(scope=scope).get("content-length", "")
    # A declared size past the limit is refused before any wait: otherwise a client could hold a connection
    # slot for the whole body timeout without sending a byte. (Malformed values were refused by the server.)
    if declared.isdigit() and int(declared) > limit:
        await JSONResponse({"error": "too_large", "message": too_big}, status_code=413)(scope, receive, send)
        return None
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(deadline):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await JSONResponse({"error": "too_large", "message": too_big}, status_code=413)(
                    scope, receive, send
                )
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
    slow = f"the request body did not arrive within {deadline:g}s"
    await JSONResponse({"error": "timeout", "message": slow}, status_code=408)(scope, receive, send)
    return None


async def _relay(response: httpx2.Response, receive: Receive, send: Send, rid: object, wait: float) -> None:
    """Stream the owner's response to the client as it arrives; stop if the client disconnects. If the owner
    dies (or stalls past ``wait`` seconds) before an event stream carried the answer, end the stream with a
    JSON-RPC error for request ``rid``; in the middle of any other body, abort the connection instead of ending
    the body, so the client sees a broken answer and never a short one that looks complete."""
    headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _NOT_RELAYED]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    watch = (
        _AnswerWatch(rid)
        if response.headers.get("content-type", "").startswith("text/event-stream")
        else None
    )
    cut = False
    async with anyio.create_task_group() as tg:

        async def stop_on_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(stop_on_disconnect)
        try:
            async for chunk in response.aiter_raw():
                if watch is not None:
                    watch.feed(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx2.ReadTimeout:
            log.warning("the owner stalled for %gs in the middle of a response", wait)
            cut = True
        except httpx2.TransportError:
            log.warning("the owner went away in the middle of a response")
            cut = True
        tg.cancel_scope.cancel()
    if cut and watch is None:
        # Returning without the body's end makes the server close the connection (uvicorn: "ASGI callable
        # returned without completing response"): the chunked body stops short of its last chunk.
        return
    if cut and watch is not None and not watch.answered:
        error = {"jsonrpc": "2.0", "id": rid, "error": {"code": _INTERNAL_ERROR, "message": _CUT}}
        event = f"event: message\ndata: {json.dumps(error)}\n\n".encode()
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": event, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class _AnswerWatch:
    """Follows a relayed event stream just far enough to know whether the answer to request ``rid`` (a
    JSON-RPC result or error with that id) has passed. Holds at most one event's bytes."""

    def __init__(self, rid: object) -> None:
        self._rid = rid
        self._pending = b""
        self.answered = False

    def feed(self, chunk: bytes) -> None:
        if self.answered:
            return
        self._pending += chunk.replace(b"\r\n", b"\n")
        *events, self._pending = self._pending.split(b"\n\n")
        for event in events:
            data = b"\n".join(line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:"))
            try:
                message = json.loads(data) if data else None
            except ValueError:
                continue
            if (
                isinstance(message, dict)
                and message.get("id") == self._rid
                and ("result" in message or "error" in message)
            ):
                self.answered = True
                self._pending = b""
                return


def _whole(response: httpx2.Response) -> bool:
    """Whether the owner's response is a JSON answer of declared size small enough to hold (every MCP answer;
    event streams and pages sent in chunks are relayed as they come)."""
    length = response.headers.get("content-length", "")
    return (
        response.headers.get("content-type", "").startswith("application/json")
        and length.isdigit()
        and int(length) <= MAX_ANSWER
    )


def _request_id(body: bytes) -> object:
    try:
        request = json.loads(body) if body else None
    except ValueError:
        return None
    return request.get("id") if isinstance(request, dict) else None


_BATCH = (
    "this server takes one JSON-RPC message per POST (the MCP 2025-06-18 protocol has no batches); send each "
    "request or notification of the array in a POST of its own"
)
_INVALID_REQUEST = -32600


def _batch_refused() -> Response:
    """A JSON-RPC batch (an array) is refused in a sentence: the SDK's own answer is a dump of its validation."""
    payload = {"jsonrpc": "2.0", "id": None, "error": {"code": _INVALID_REQUEST, "message": _BATCH}}
    return JSONResponse(payload, status_code=400)


def _hung(wait: float) -> str:
    return (
        f"Mnemograph's owner process did not answer this request within {wait:g}s "
        f"(MNEMOGRAPH_OWNER_TIMEOUT): its outcome is unknown (a write, purge or erase may or may not have been "
        "committed). Check the result (memory_read, recall or list_scopes) before you retry; if the owner stays "
        "unresponsive, see `mnemograph status` and restart it with `mnemograph stop`."
    )


def _no_event_stream() -> Response:
    """405 to ``GET /mcp``: this server sends no messages outside the answers to requests, so it offers no
    event stream (the MCP streamable HTTP transport lets a server answer GET so)."""
    payload = {
        "error": "method_not_allowed",
        "message": "this server opens no event stream (it sends no server-initiated messages); POST requests to /mcp",
    }
    return JSONResponse(payload, status_code=405, headers={"Allow": "POST"})


def _rpc_error(status: int, body: bytes, message: str) -> Response:
    """A JSON-RPC error answering the request in ``body`` (by its id, when it has one)."""
    payload = {
        "jsonrpc": "2.0",
        "id": _request_id(body),
        "error": {"code": _INTERNAL_ERROR, "message": message},
    }
    return JSONResponse(payload, status_code=status)


async def run_front(
    settings: Settings, paths: RuntimePaths, sock: socket.socket | None = None, command: str = "serve"
) -> None:
    """Serve the HTTP front until interrupted, on ``sock`` when the caller bound it already (so that a busy port
    is reported before anything says it serves), else on ``settings.host:settings.port``."""
    front = HttpFront(settings, paths, command)
    config = uvicorn.Config(
        front.app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        lifespan="on",
        # The front is the first hop: a request's X-Forwarded-For must never change who its client is (uvicorn
        # trusts it from 127.0.0.1 by default, and the --no-auth peer check looks the client up by address).
        proxy_headers=False,
        http=guarded(settings.max_connections, settings.header_timeout),
        h11_max_incomplete_event_size=_MAX_HEADER_BYTES,
        # On SIGTERM (`mnemograph stop`), open event streams get this long to finish before they are closed.
        timeout_graceful_shutdown=5,
    )
    await uvicorn.Server(config).serve(sockets=[sock] if sock is not None else None)


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready socket on host:port, as uvicorn binds it; ``OSError`` when the port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock
