"""MCP sampling (issue 15, layer 4): the writing client's own model reads a memory's statements.

Off by default (``MNEMOGRAPH_SAMPLING``). When on, each tool call that writes gets an extractor bound to the
one MCP session that made it (``SamplingPolicy.extractor_for``). The engine queues the memory after the commit
(``Engine.enrich_later``) and its sampling worker calls ``ClientSampling.extract``, which sends one
``sampling/createMessage`` back on that session's channel: the same instructions and ``record_statements``
schema as the Claude path (``storage.enrich.prompt``), as a forced tool call when the client declared
``sampling.tools``, else as a JSON answer. The answer is validated like Claude's; anything wrong is a failure
that applies nothing and shows in ``memory_read``.

Where sampling cannot work the memory keeps its offline extraction and ``memory_read`` says why (or, with an
Anthropic key, Claude reads it as without sampling): the client did not declare the capability; it speaks MCP
2026-07-28, which forbids a server's requests outside a call; the session is HTTP (stateless: it ends with
its request); the session ended before its turn came; the client did not answer an earlier request in time.

Security: the extractor holds only its own session, so a memory's text is sent to the client that wrote it and
to no other principal's session, and what comes back is applied with the writer's own access.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mcp import MCPError
from mcp.server.mcpserver import Context
from mcp.server.session import ServerSession
from mcp.shared.exceptions import NoBackChannelError
from mcp.types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ModelPreferences,
    SamplingCapability,
    SamplingMessage,
    SamplingToolsCapability,
    TextContent,
    Tool,
    ToolChoice,
    ToolUseContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

if TYPE_CHECKING:
    from storage.enrich.llm import Extractor
    from storage.enrich.results import LlmResult, LlmStatement

# storage.enrich is imported where it is used, in tool calls and the engine's worker: this module loads on the
# MCP handshake path, which must not pay for the extractor's modules.

log = logging.getLogger(__name__)

MAX_TOKENS = 2048  # of the model's answer, as for Claude
MAX_ANSWER_CHARS = 100_000  # a text answer longer than this is malformed (64 statements fit in far less)


@dataclass(frozen=True, slots=True)
class SamplingPolicy:
    """Settings of the sampling path. ``fallback_llm``: an Anthropic key is configured, so a session that
    cannot be sampled is left to Claude instead of being recorded as skipped."""

    timeout: float = 60.0
    fallback_llm: bool = False

    def extractor_for(self, context: Context[Any, Any] | None, transport: str) -> Extractor | None:
        """The extractor for the memories this call writes: the calling session's model, a record of why it
        cannot be asked, or None (the configured LLM reads them)."""
        session = _session_of(context)
        reason = unavailable(session, context, transport)
        if reason is None and session is not None:
            loop = asyncio.get_running_loop()
            tools = session.check_client_capability(
                ClientCapabilities(sampling=SamplingCapability(tools=SamplingToolsCapability()))
            )
            return ClientSampling(session, loop, tools=tools, timeout=self.timeout)
        from storage.enrich.results import Skip

        return None if self.fallback_llm else Skip(reason or "no MCP session")


def unavailable(
    session: ServerSession | None, context: Context[Any, Any] | None, transport: str
) -> str | None:
    """Why this session's model cannot be asked after the call returns, or None when it can."""
    if session is None:
        return "no MCP session"
    # First: a stateless HTTP request's connection does not even remember what the client declared.
    if transport == "http" or (context is not None and context.request_context.request is not None):
        return "HTTP sessions end with their request, before the model could be asked"
    if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return (
            f"the client speaks MCP {session.protocol_version}, where a server may not send it requests "
            "outside a call"
        )
    if not session.check_client_capability(ClientCapabilities(sampling=SamplingCapability())):
        return "the client did not declare the sampling capability"
    return None


class ClientSampling:
    """An ``Extractor`` that asks one MCP session's client for a memory's statements.

    ``extract`` runs in the engine's sampling worker thread and waits for the answer on the server's event
    loop, never longer than ``timeout`` (plus a margin for the loop itself). One is built per tool call: after
    its session ended or timed out once, the call's later memories (a conversation's messages) are skipped at
    once rather than waited for again."""

    model = "sampling"  # storage.enrich.results.SAMPLING: the outcome is recorded as the client's model's

    def __init__(
        self,
        session: ServerSession,
        loop: asyncio.AbstractEventLoop,
        *,
        tools: bool,
        timeout: float,
        max_tokens: int = MAX_TOKENS,
    ) -> None:
        self._session, self._loop = session, loop
        # The engine queues jobs per owner (storage.enrich.llm.Enricher): this connection's memories wait for
        # this client only, so one that never answers cannot hold up another session's. The SDK builds a
        # ServerSession per request around the connection's one ``Connection``, which it does not expose: read
        # it here (the one module that knows the SDK); tests/server/test_sampling.py fails if it stops being
        # shared by one client's calls (the per-session bound would then apply per call).
        self.owner: object = getattr(session, "_connection", session)
        self._tools, self._timeout, self._max_tokens = tools, timeout, max_tokens
        self._gone: str | None = None

    def extract(self, content: str, *, written_at: datetime, speaker: str | None) -> LlmResult:
        from storage.enrich import prompt
        from storage.enrich.results import ExtractionFailed, ExtractionSkipped, LlmResult, Usage

        if self._gone is not None:
            raise ExtractionSkipped(self._gone)
        request = prompt.request_text(content, written_at=written_at, speaker=speaker)
        try:
            future = asyncio.run_coroutine_threadsafe(self._ask(request, prompt), self._loop)
        except RuntimeError:  # the event loop is closed: the server stopped
            raise ExtractionSkipped("the server stopped before the client's model could be asked") from None
        try:
            result = future.result(self._timeout + 5)
        except concurrent.futures.TimeoutError:
            future.cancel()
            self._gone = f"the client did not answer an earlier request within {self._timeout:g} s"
            raise ExtractionFailed(
                f"the client did not answer within {self._timeout:g} s", Usage(), 1
            ) from None
        except NoBackChannelError:
            raise ExtractionSkipped("the session has no channel for the server's requests") from None
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                self._gone = "the session that wrote it had ended"
                raise ExtractionSkipped(self._gone) from None
            if exc.error.code == REQUEST_TIMEOUT:
                self._gone = f"the client did not answer an earlier request within {self._timeout:g} s"
                raise ExtractionFailed(
                    f"the client did not answer within {self._timeout:g} s", Usage(), 1
                ) from None
            raise ExtractionFailed(f"the client refused: {exc.error.message[:200]}", Usage(), 1) from None
        except ValidationError:
            raise ExtractionFailed("malformed answer: not a sampling result", Usage(), 1) from None
        except (concurrent.futures.CancelledError, asyncio.CancelledError):
            raise ExtractionSkipped("the server stopped before the client's model answered") from None
        return LlmResult(_statements(result), Usage(), result.model[:200], 1)

    async def _ask(self, request: str, prompt: Any) -> CreateMessageResult | CreateMessageResultWithTools:
        json_answer = (
            "\n\nAnswer with one JSON object and nothing else, of this JSON schema (the record_statements "
            f"tool's input):\n{json.dumps(prompt.SCHEMA, separators=(',', ':'))}"
        )
        system = prompt.INSTRUCTIONS + ("" if self._tools else json_answer)
        params = CreateMessageRequestParams(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=request))],
            system_prompt=system,
            include_context="none",  # the memory alone: nothing else of this server's goes to the model
            temperature=0.0,
            max_tokens=self._max_tokens,
            model_preferences=ModelPreferences(
                intelligence_priority=0.5, speed_priority=0.5, cost_priority=0.5
            ),
            tools=[
                Tool(name=prompt.TOOL_NAME, description=prompt.TOOL_DESCRIPTION, input_schema=prompt.SCHEMA)
            ]
            if self._tools
            else None,
            tool_choice=ToolChoice(mode="required") if self._tools else None,
        )
        kind: type[CreateMessageResult] | type[CreateMessageResultWithTools] = (
            CreateMessageResultWithTools if self._tools else CreateMessageResult
        )
        # ServerSession.send_request without a related request id uses the connection's own channel, which
        # outlives the tool call that created this extractor (the deprecated create_message helper is avoided).
        return await self._session.send_request(
            CreateMessageRequest(params=params), kind, request_read_timeout_seconds=self._timeout
        )


def _statements(result: CreateMessageResult | CreateMessageResultWithTools) -> tuple[LlmStatement, ...]:
    """The statements in the client's answer: a ``record_statements`` tool call, or a JSON object of the same
    shape in text. ExtractionFailed on anything else."""
    from storage.enrich import prompt
    from storage.enrich.results import ExtractionFailed, Usage

    blocks = result.content if isinstance(result.content, list) else [result.content]
    for block in blocks:
        if isinstance(block, ToolUseContent) and block.name == prompt.TOOL_NAME:
            return prompt.parse_statements(block.input, Usage(), 1)
    text = "".join(b.text for b in blocks if isinstance(b, TextContent)).strip()
    if not text:
        raise ExtractionFailed("malformed answer: the model did not call record_statements", Usage(), 1)
    if len(text) > MAX_ANSWER_CHARS:
        raise ExtractionFailed("malformed answer: longer than 100,000 characters", Usage(), 1)
    if text.startswith("```"):  # models like to fence JSON even when told not to
        text = text.strip("`").removeprefix("json").strip()
    try:
        arguments = json.loads(text)
    except ValueError:
        raise ExtractionFailed("malformed answer: not a JSON object", Usage(), 1) from None
    return prompt.parse_statements(arguments, Usage(), 1)


def _session_of(context: Context[Any, Any] | None) -> ServerSession | None:
    if context is None:
        return None
    try:
        return context.request_context.session
    except ValueError:  # no request (a direct call from Python)
        return None
