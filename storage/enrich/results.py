"""What an LLM extraction returns or how it failed: plain values, without the Anthropic SDK.

The engine and the enrichment queue (``storage.enrich.llm``) use these on every start; only
``storage.enrich.claude`` (loaded when an API key is configured) imports ``anthropic``. Importing the SDK cost the
owner 1.15 s of CPU and 39 MiB resident before its first answer (docs/benchmarks/coldstart.md, "Footprint").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# The model name of extractors that ask the writing client's own model (MCP sampling); the model the client
# reports is appended ("sampling:claude-x"). memory_read words their outcome differently (no token counts).
SAMPLING = "sampling"


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True, slots=True)
class LlmStatement:
    subject: str
    predicate: str
    object: str
    status: str
    subject_type: str = "thing"
    object_type: str = "thing"
    ended: bool = False


@dataclass(frozen=True, slots=True)
class LlmResult:
    statements: tuple[LlmStatement, ...]
    usage: Usage
    model: str
    attempts: int


class ExtractionFailed(Exception):
    """The model could not be asked or answered badly; ``reason`` is for the reader of ``memory_read``."""

    def __init__(self, reason: str, usage: Usage, attempts: int) -> None:
        super().__init__(reason)
        self.reason, self.usage, self.attempts = reason, usage, attempts


class ExtractionSkipped(ExtractionFailed):
    """The model was not asked at all (the client cannot be sampled, too many jobs waiting): the offline
    extraction stands, and ``reason`` says why for ``memory_read``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, Usage(), 0)


class Skip:
    """The extractor of a job that is not to be asked: recorded as skipped with ``reason``."""

    model = SAMPLING

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def extract(self, content: str, *, written_at: datetime, speaker: str | None) -> LlmResult:
        raise ExtractionSkipped(self.reason)
