"""A conversation's digest written by Claude, when an API key is configured; the offline digest otherwise.

Same request machinery as the extraction pass (``ClaudeExtractor.ask``: cached fixed instructions, forced tool
use, spacing, retries with backoff on 429/529/5xx/timeouts). Run by the consolidator's thread, after the
commit, so a slow or failing model never touches a write. Anything malformed is a failure; the caller then
keeps the offline digest and says so in the digest's metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from anthropic.types import ToolParam

from storage.enrich.claude import ClaudeExtractor, ExtractionFailed, Usage
from storage.enrich.digest import MAX_DIGEST_CHARS, Said

MAX_REQUEST_CHARS = 60_000  # of the conversation sent; a longer one is sent from its start and end
INSTRUCTIONS = f"""You write the digest of one conversation for a long-term memory store. Call the
record_digest tool exactly once.

Rules:
- The digest says who took part and when, and the main statements: facts about people, places, jobs, plans,
  preferences, dates and numbers, each attributed to who said it ("the user said ...").
- Keep what was said as it was said: do not add, infer or judge anything. Leave out small talk.
- Keep hypothetical, uncertain or negated statements marked as such.
- At most {MAX_DIGEST_CHARS} characters. Plain text, one statement per line."""
TOOL: ToolParam = {
    "name": "record_digest",
    "description": "Record the conversation's digest.",
    "input_schema": {
        "type": "object",
        "properties": {"digest": {"type": "string", "maxLength": MAX_DIGEST_CHARS}},
        "required": ["digest"],
    },
}


@dataclass(frozen=True, slots=True)
class LlmDigest:
    text: str
    usage: Usage
    model: str


class ClaudeDigester:
    """Asks Claude for a digest through an extractor's client (its spacing and retries are shared)."""

    def __init__(self, claude: ClaudeExtractor) -> None:
        self._claude = claude
        self.model = claude.model

    def digest(self, conversation: str, messages: Sequence[Said]) -> LlmDigest:
        lines = [
            f"[{m.time.isoformat()}] {m.speaker or m.role}: {m.content}"
            for m in sorted(messages, key=lambda m: (m.time, m.id))
        ]
        text = "\n".join(lines)
        if len(text) > MAX_REQUEST_CHARS:
            half = MAX_REQUEST_CHARS // 2
            text = text[:half] + "\n[... middle of the conversation left out ...]\n" + text[-half:]
        request = f"Conversation {conversation!r}:\n<conversation>\n{text}\n</conversation>"
        blocks, usage, model, attempt = self._claude.ask(INSTRUCTIONS, TOOL, request)
        return LlmDigest(_parse(blocks, usage, attempt), usage, model)


def _parse(blocks: Any, usage: Usage, attempt: int) -> str:
    call = next((b for b in blocks if getattr(b, "type", "") == "tool_use" and b.name == TOOL["name"]), None)
    raw = call.input.get("digest") if call is not None and isinstance(call.input, dict) else None
    if not isinstance(raw, str) or not raw.strip():
        raise ExtractionFailed("malformed answer: no digest text in record_digest", usage, attempt)
    return raw.strip()[:MAX_DIGEST_CHARS]
