"""The MCP server: Mnemograph's tools published through the SDK's ``MCPServer``.

``MnemographMCP`` lists and calls tools from ``tools.ALL_TOOLS`` itself (overriding ``list_tools`` and
``call_tool``) instead of registering functions: each tool's own pydantic models then publish its input and
output schemas *and* validate them, and failures map to results in one place (``server._calls``). Everything
else is the SDK's: sessions, both protocol eras, streamable HTTP, and the auth hooks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mcp.server.mcpserver.server as _sdk_server
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import Tool
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.message import SessionMessage
from mcp.types import CallToolResult, ToolAnnotations

from server._auth import principal_of
from server._calls import EngineSource, invoke, unknown_tool
from server._sampling import SamplingPolicy
from server._session import SessionInfo, current_session, defaults_for
from tools import ALL_TOOLS, INSTRUCTIONS, Caller, ToolSpec

try:
    VERSION = version("mnemograph")
except PackageNotFoundError:  # running from a source tree that was never installed
    VERSION = "0+unknown"


def _leave_logging_alone(level: str = "INFO") -> None:
    """Mnemograph configures its own logging (``server.owner.configure_logging``)."""


# MCPServer.__init__ calls the SDK's configure_logging, which imports rich to hand the root logger a RichHandler
# (a no-op in the owner, whose logging is configured before): 0.04 s of CPU and 1.4 MiB at every owner start,
# before its first answer (docs/benchmarks/coldstart.md).
_sdk_server.configure_logging = _leave_logging_alone


class MnemographMCP(MCPServer[Any]):
    """The MCP server over one engine source. Build it with ``build_server``."""

    def __init__(
        self,
        engine: EngineSource,
        *,
        default_scopes: tuple[str, ...],
        tools: Sequence[ToolSpec[Any, Any]] = ALL_TOOLS,
        token_verifier: TokenVerifier | None = None,
        auth: AuthSettings | None = None,
        sampling: SamplingPolicy | None = None,
        llm_fallback: bool = False,
    ) -> None:
        super().__init__(
            name="mnemograph",
            title="Mnemograph",
            description="Long-term memory for AI agents: facts, events and preferences that persist across sessions.",
            instructions=INSTRUCTIONS,
            version=VERSION,
            token_verifier=token_verifier,
            auth=auth,
            log_level="WARNING",
        )
        self._engine = engine
        self._default_scopes = default_scopes
        self._sampling = sampling  # None: MCP sampling is off (the default) unless a session's front-end asks
        self._llm_fallback = llm_fallback  # an LLM is configured: sessions that cannot be sampled go to it
        self._specs = {spec.name: spec for spec in tools}
        self._listing = [_describe(spec) for spec in tools]  # schemas are built once, not per tools/list

    @property
    def default_scopes(self) -> tuple[str, ...]:
        """The scopes used by sessions that bring no defaults of their own."""
        return self._default_scopes

    async def list_tools(self) -> list[Tool]:
        return list(self._listing)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult:
        spec = self._specs.get(name)
        if spec is None:
            raise unknown_tool(name)
        return await invoke(spec, arguments, self._engine, self._caller(context))

    async def serve_streams(
        self,
        read_stream: MemoryObjectReceiveStream[SessionMessage | Exception],
        write_stream: MemoryObjectSendStream[SessionMessage],
    ) -> None:
        """Serve one MCP session over a pair of message streams (the owner's socket sessions)."""
        server = self._lowlevel_server
        await server.run(read_stream, write_stream, server.create_initialization_options())

    def _caller(self, context: Context[Any, Any] | None) -> Caller:
        session = current_session.get() or SessionInfo(self._default_scopes, "memory")
        client = _client_name(context) or session.transport
        # With the SDK's own auth wiring (build_server(token_verifier=..., auth=...)) the verified token is in
        # the SDK's context; the owner's per-front gate (server._auth.BearerGate) puts it in the session.
        token = get_access_token()
        principal = principal_of(token) if token is not None else session.principal
        # Built per call and bound to this call's session: the memories it writes go to this client's model
        # and to no other session's (server._sampling).
        policy = self._sampling_for(session)
        extractor = policy.extractor_for(context, session.transport) if policy is not None else None
        return Caller(
            principal=dataclasses.replace(principal, client=client),
            default_scopes=defaults_for(principal, session.default_scopes),
            extractor=extractor,
        )

    def _sampling_for(self, session: SessionInfo) -> SamplingPolicy | None:
        """MCP sampling for one session. A stdio front-end says what its own client was configured with
        (``MNEMOGRAPH_SAMPLING``), and that decides, whichever client happened to start this owner; a session
        whose front-end did not say gets the owner's setting."""
        if session.sampling is None:
            return self._sampling
        if session.sampling is False:
            return None
        timeout = float(session.sampling)
        return SamplingPolicy(timeout, fallback_llm=self._llm_fallback)


def build_server(
    engine: EngineSource,
    *,
    default_scopes: tuple[str, ...],
    token_verifier: TokenVerifier | None = None,
    auth: AuthSettings | None = None,
    sampling: SamplingPolicy | None = None,
    llm_fallback: bool = False,
) -> MnemographMCP:
    """The MCP server for ``engine``. ``default_scopes`` apply to sessions that bring none of their own.

    ``token_verifier`` and ``auth`` are the SDK's bearer-token hooks, passed through unchanged (issue 4).
    ``sampling``: MCP sampling's settings when it is on (the engine must then ``use_sampling``); None: off,
    except for sessions whose stdio front-end asks for it (``SessionInfo.sampling``). ``llm_fallback``: an LLM
    extractor is configured, so such a session that cannot be sampled is left to it.
    """
    return MnemographMCP(
        engine,
        default_scopes=default_scopes,
        token_verifier=token_verifier,
        auth=auth,
        sampling=sampling,
        llm_fallback=llm_fallback,
    )


def _describe(spec: ToolSpec[Any, Any]) -> Tool:
    return Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_model.model_json_schema(),
        output_schema=inline_refs(spec.output_model.model_json_schema(mode="serialization")),
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.hints.read_only,
            destructive_hint=spec.hints.destructive,
            idempotent_hint=spec.hints.idempotent,
            open_world_hint=spec.hints.open_world,
        ),
    )


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every ``$ref`` to its own ``$defs`` replaced by the definition, and no ``$defs``; the
    schema unchanged when a definition refers to itself (recursion cannot be inlined).

    The same constraints, written out: SDK clients validate every result's ``structuredContent`` against the
    published output schema, and the ``jsonschema`` library resolves each ``$ref`` anew for every object it
    checks. Inlined, a recall answer of 5 results validates in 0.31 ms instead of 0.70 (docs/benchmarks/mcp.md).
    """
    defs = schema.get("$defs", {})

    def walk(node: Any, seen: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [walk(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name in seen or name not in defs:
                raise _Recursive
            target = walk(defs[name], seen | {name})
            rest = {k: walk(v, seen) for k, v in node.items() if k != "$ref"}
            # A $ref with sibling keywords (pydantic puts a field's description beside it): both apply.
            return (
                {**target, **rest}
                if set(rest) <= {"description", "title", "default"}
                else {"allOf": [target], **rest}
            )
        return {k: walk(v, seen) for k, v in node.items() if k != "$defs"}

    try:
        inlined: dict[str, Any] = walk(schema, frozenset())
    except _Recursive:
        return schema
    return inlined


class _Recursive(Exception):
    pass


def _client_name(context: Context[Any, Any] | None) -> str | None:
    if context is None:
        return None
    try:
        params = context.request_context.session.client_params
    except ValueError:  # no request (a direct call from Python)
        return None
    return params.client_info.name if params is not None else None
