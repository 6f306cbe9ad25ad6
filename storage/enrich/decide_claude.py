"""The reconcile decision asked of Claude, when an API key is configured (``storage.enrich.decide``).

Same request machinery as the extraction pass (``ClaudeExtractor.ask``: fixed instructions cached with
``cache_control``, the tool forced with ``tool_choice``, requests spaced by the shared rate limit, retries with
backoff on 429/529/5xx/timeouts, tokens counted). Run on the enrichment worker after the commit, so a slow or
failing model never touches a write.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from anthropic.types import ToolParam

from storage.enrich import decide
from storage.enrich.claude import ClaudeExtractor, ExtractionFailed, Usage

TOOL: ToolParam = {
    "name": decide.TOOL_NAME,
    "description": decide.TOOL_DESCRIPTION,
    "input_schema": decide.SCHEMA,
}


class ClaudeDecider:
    """Asks Claude for the reconcile decision through an extractor's client (its spacing and retries are
    shared with the extraction and digest requests)."""

    def __init__(self, claude: ClaudeExtractor) -> None:
        self._claude = claude
        self.model = claude.model

    def decide(
        self,
        content: str,
        *,
        written_at: datetime,
        speaker: str | None,
        candidates: Sequence[decide.Candidate],
    ) -> decide.Decided:
        request = decide.request_text(content, written_at=written_at, speaker=speaker, candidates=candidates)
        blocks, usage, model, attempt = self._claude.ask(decide.INSTRUCTIONS, TOOL, request)
        return decide.Decided(_parse(blocks, candidates, usage, attempt), usage, model)


def _parse(
    blocks: Any, candidates: Sequence[decide.Candidate], usage: Usage, attempt: int
) -> tuple[decide.Verdict, ...]:
    call = next((b for b in blocks if getattr(b, "type", "") == "tool_use" and b.name == TOOL["name"]), None)
    if call is None:
        raise ExtractionFailed(f"malformed answer: the model did not call {TOOL['name']}", usage, attempt)
    return decide.parse_decision(call.input, candidates, usage, attempt)
