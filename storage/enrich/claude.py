"""Layer 3: Claude reads a memory's statements through tool use (structured output), after the commit.

One request per memory: fixed instructions (cached with ``cache_control``, so repeated calls pay for them
once per cache lifetime) and the memory's text; the model must answer by calling ``record_statements``. Rate
limits (429), overload (529), other 5xx, timeouts and connection errors are retried here with exponential
backoff and jitter, honouring ``retry-after``; the SDK's own retries are off so attempts are counted once.
Anything malformed is a failure: nothing is applied and the reason is kept for ``memory_read``.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import anthropic
from anthropic.types import MessageParam, TextBlockParam, ToolChoiceToolParam, ToolParam

from storage.enrich import prompt

# Re-exported: these lived here before storage.enrich.results, which the engine imports without the SDK.
from storage.enrich.results import ExtractionFailed, LlmResult, LlmStatement, Usage

__all__ = ["ClaudeExtractor", "ExtractionFailed", "LlmResult", "LlmStatement", "Usage"]

STATUSES, MAX_STATEMENTS, INSTRUCTIONS = prompt.STATUSES, prompt.MAX_STATEMENTS, prompt.INSTRUCTIONS
TOOL: ToolParam = {
    "name": prompt.TOOL_NAME,
    "description": prompt.TOOL_DESCRIPTION,
    "input_schema": prompt.SCHEMA,
}


class ClaudeExtractor:
    """Ask Claude for a memory's statements. Thread-safe; calls are spaced by ``min_interval`` seconds (a
    simple rate limit shared by all callers) and retried ``max_attempts`` times in all."""

    def __init__(
        self,
        client: anthropic.Anthropic,
        model: str,
        *,
        max_attempts: int = 4,
        base_delay: float = 0.5,
        max_delay: float = 20.0,
        min_interval: float = 0.0,
        max_tokens: int = 2048,
        timeout: float = 60.0,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        # The SDK's own default is 600 s a request: with 4 attempts a hung API would hold the worker (and a
        # shutdown waiting for the request in flight) for 40 minutes.
        self._client = client.with_options(max_retries=0, timeout=timeout)
        self._stopping = threading.Event()
        self.model = model
        self._max_attempts, self._base, self._cap = max_attempts, base_delay, max_delay
        self._min_interval, self._max_tokens = min_interval, max_tokens
        self._sleep: Callable[[float], object] = sleep if sleep is not None else self._stopping.wait
        self._lock = threading.Lock()
        self._last = 0.0

    def extract(self, content: str, *, written_at: datetime, speaker: str | None) -> LlmResult:
        request = prompt.request_text(content, written_at=written_at, speaker=speaker)
        blocks, usage, model, attempt = self.ask(INSTRUCTIONS, TOOL, request)
        return LlmResult(_parse(blocks, usage, attempt), usage, model, attempt)

    def ask(self, instructions: str, tool: ToolParam, request: str) -> tuple[Any, Usage, str, int]:
        """One forced call of ``tool`` with the fixed ``instructions`` (cached) and ``request``, with this
        extractor's spacing and retries: (content blocks, tokens used, model, attempts). ExtractionFailed when
        the API could not be reached or refused."""
        usage = Usage()
        for attempt in range(1, self._max_attempts + 1):
            self._space()
            system: list[TextBlockParam] = [
                {"type": "text", "text": instructions, "cache_control": {"type": "ephemeral"}}
            ]
            choice: ToolChoiceToolParam = {"type": "tool", "name": tool["name"]}
            messages: list[MessageParam] = [{"role": "user", "content": request}]
            try:
                response = self._client.messages.create(
                    model=self.model,
                    max_tokens=self._max_tokens,
                    system=system,
                    tools=[tool],
                    tool_choice=choice,
                    messages=messages,
                )
            except (anthropic.APITimeoutError, anthropic.APIConnectionError) as exc:
                reason = "timed out" if isinstance(exc, anthropic.APITimeoutError) else "could not connect"
                self._retry_or_fail(reason, None, usage, attempt)
                continue
            except anthropic.APIStatusError as exc:
                reason = f"HTTP {exc.status_code} ({_kind(exc.status_code)})"
                if exc.status_code in (408, 409, 429) or exc.status_code >= 500:
                    self._retry_or_fail(reason, exc.response.headers, usage, attempt)
                    continue
                raise ExtractionFailed(f"{reason}: not retried", usage, attempt) from None
            usage = usage + _usage(response.usage)
            return response.content, usage, response.model, attempt
        raise AssertionError("unreachable")  # pragma: no cover

    def stop(self) -> None:
        """The server is stopping: the request in flight is the last (no retry, no wait for a retry)."""
        self._stopping.set()

    def _retry_or_fail(self, reason: str, headers: Any, usage: Usage, attempt: int) -> None:
        if attempt >= self._max_attempts:
            raise ExtractionFailed(f"{reason} after {attempt} attempts", usage, attempt)
        if not self._stopping.is_set():
            self._sleep(self.backoff(attempt, headers))
        if self._stopping.is_set():
            raise ExtractionFailed(f"{reason}; not retried: the server is stopping", usage, attempt)

    def backoff(self, attempt: int, headers: Any = None) -> float:
        """Seconds before attempt ``attempt + 1``: the server's ``retry-after`` when given, else exponential
        from ``base_delay`` with up to 25% jitter, capped at ``max_delay``."""
        if headers is not None:
            for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
                try:
                    value = float(headers.get(name)) * scale
                except (TypeError, ValueError):
                    continue
                if 0 <= value <= 60:
                    return value
        return min(self._base * 2 ** (attempt - 1), self._cap) * (1 - 0.25 * random.random())

    def _space(self) -> None:
        with self._lock:
            wait = self._last + self._min_interval - time.monotonic()
            if wait > 0:
                self._sleep(wait)
            self._last = time.monotonic()


def _kind(status: int) -> str:
    return {429: "rate limited", 529: "overloaded", 408: "request timeout", 409: "conflict"}.get(
        status, "server error" if status >= 500 else "refused"
    )


def _usage(u: Any) -> Usage:
    return Usage(
        int(u.input_tokens or 0),
        int(u.output_tokens or 0),
        int(getattr(u, "cache_read_input_tokens", 0) or 0),
        int(getattr(u, "cache_creation_input_tokens", 0) or 0),
    )


def _parse(blocks: Any, usage: Usage, attempt: int) -> tuple[LlmStatement, ...]:
    """The statements of the ``record_statements`` call; ExtractionFailed on anything else."""
    call = next((b for b in blocks if getattr(b, "type", "") == "tool_use" and b.name == TOOL["name"]), None)
    if call is None:
        raise ExtractionFailed("malformed answer: the model did not call record_statements", usage, attempt)
    return prompt.parse_statements(call.input, usage, attempt)
