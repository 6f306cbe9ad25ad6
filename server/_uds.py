"""The owner's MCP socket: one MCP session per Unix-socket connection, newline-delimited JSON-RPC.

This is the stdio transport carried over a socket, so a stdio front-end can pump bytes without parsing them.
A connection may start with one ``hello`` line (see ``server._shim``) carrying the session's defaults; any
other first line is already MCP.
"""

from __future__ import annotations

import json
import logging

import anyio
from anyio.abc import SocketListener, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

from server._activity import Activity
from server._protocol import HELLO_KEY, MAX_MESSAGE_BYTES
from server._session import SessionInfo, current_session, local_principal, parse_sampling, parse_scopes
from server.app import MnemographMCP

log = logging.getLogger(__name__)

MAX_LINE = MAX_MESSAGE_BYTES  # far above any valid request (content is capped at 32k characters)
_GONE = (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError)


async def serve_sessions(
    listener: SocketListener, server: MnemographMCP, activity: Activity, default_scopes: tuple[str, ...]
) -> None:
    """Accept connections until cancelled, serving each as its own MCP session."""

    async def handle(stream: SocketStream) -> None:
        with activity.hold("session"):
            try:
                async with stream:
                    await _session(stream, server, default_scopes)
            except Exception:  # one broken session must never stop the listener
                log.exception("MCP socket session failed")

    await listener.serve(handle)


async def _session(stream: SocketStream, server: MnemographMCP, default_scopes: tuple[str, ...]) -> None:
    lines = BufferedByteReceiveStream(stream)
    try:
        first = await lines.receive_until(b"\n", MAX_LINE)
    except (*_GONE, anyio.DelimiterNotFound):
        return  # a front-end checking that the owner is up, or a client that left at once
    info, pending = _hello(first, default_scopes)
    current_session.set(info)  # the SDK runs this session's handlers in copies of this task's context

    to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    to_client, from_server = anyio.create_memory_object_stream[SessionMessage](16)

    async def read_client() -> None:
        async with to_server:
            if pending is not None:
                await to_server.send(_decode(pending))
            while True:
                try:
                    line = await lines.receive_until(b"\n", MAX_LINE)
                except _GONE:
                    return  # EOF: the server finishes the session
                except anyio.DelimiterNotFound:
                    log.warning("closing an MCP socket session: a message exceeded %d bytes", MAX_LINE)
                    return
                if line.strip():
                    await to_server.send(_decode(line))

    async def write_client() -> None:
        async with from_server:
            async for message in from_server:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                try:
                    await stream.send(data)
                except _GONE:
                    tg.cancel_scope.cancel()  # the client is gone: end the session
                    return

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_client)
        tg.start_soon(write_client)
        await server.serve_streams(from_client, to_client)


def _hello(line: bytes, default_scopes: tuple[str, ...]) -> tuple[SessionInfo, bytes | None]:
    """The session's settings from a hello line, and the line itself when it was MCP instead."""
    try:
        message = json.loads(line)
    except ValueError:
        message = None
    if not isinstance(message, dict) or HELLO_KEY not in message:
        return SessionInfo(default_scopes, "socket"), line
    scopes = parse_scopes(message.get("default_scopes")) or default_scopes
    transport = message.get("transport")
    kind = transport if isinstance(transport, str) else "socket"
    principal = local_principal(message.get("principal"))
    return SessionInfo(scopes, kind, principal, parse_sampling(message.get("sampling"))), None


def _decode(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception as exc:  # handed to the server, which answers with a parse error, as over stdio
        return exc
