"""The extraction request and the validation of its answer, shared by every model path (Claude, MCP sampling).

No SDK here: ``storage.enrich.claude`` wraps these for the Anthropic API, ``server._sampling`` for a client's
own model through MCP sampling. Both send the same instructions and tool schema, and both hand the model's
``record_statements`` input to ``parse_statements``, so a malformed answer fails the same way on every path.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from storage.enrich.results import ExtractionFailed, LlmStatement, Usage

__all__ = [
    "INSTRUCTIONS",
    "MAX_STATEMENTS",
    "SCHEMA",
    "STATUSES",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "parse_statements",
    "request_text",
]

STATUSES = ("asserted", "negated", "hypothetical", "uncertain", "reported")
TYPES = ("person", "org", "place", "thing")
MAX_STATEMENTS = 64
_PREDICATE = re.compile(r"[a-z][a-z0-9_]{0,63}")
TOOL_NAME = "record_statements"
TOOL_DESCRIPTION = "Record every statement the memory makes, with its assertion status."
INSTRUCTIONS = """You extract structured statements from one memory written by or about a user, for a
long-term memory store. Call the record_statements tool exactly once.

Rules:
- A statement is (subject, predicate, object). Subjects and objects are names as written in full ("Ana Lima",
  "Acme Corp", "Lisbon") or short common-noun phrases for things ("oat milk", "peanuts").
- "I", "me", "my" refer to the speaker named in the request; use that name. Resolve "he"/"she" to the person
  named earlier in the text when it is clear; otherwise leave the statement out.
- Predicates are snake_case. Prefer: lives_in, works_at, job_title, studies_at, married_to, likes, dislikes,
  allergic_to, owns, visited, born_in, from, phone, email, sibling_of, friend_of, parent_of, child_of,
  partner_of, colleague_of, reports_to; use lived_in, worked_at, studied_at for the past. "moved to X" is
  lives_in X.
- status says how the statement was made: asserted (stated as true), negated ("doesn't", "never", "no
  longer"), hypothetical (conditions, plans, wishes, questions, the future), uncertain ("maybe", "I think"),
  reported (someone else said or believes it). Only asserted statements become facts; report the others
  with their status anyway.
- ended is true when the text says something stopped being true ("no longer works at X").
- types: person, org, place or thing.
- Do not invent anything that is not in the text. An empty list is a valid answer."""
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "statements": {
            "type": "array",
            "maxItems": MAX_STATEMENTS,
            "items": {
                "type": "object",
                "properties": {
                    "subject": {"type": "string"},
                    "subject_type": {"type": "string", "enum": list(TYPES)},
                    "predicate": {"type": "string"},
                    "object": {"type": "string"},
                    "object_type": {"type": "string", "enum": list(TYPES)},
                    "status": {"type": "string", "enum": list(STATUSES)},
                    "ended": {"type": "boolean"},
                },
                "required": ["subject", "predicate", "object", "status"],
            },
        }
    },
    "required": ["statements"],
}


def request_text(content: str, *, written_at: datetime, speaker: str | None) -> str:
    """The per-memory part of the request: who "I" is, when it was written, and the memory itself."""
    return (
        f"Speaker: {speaker or 'unknown (leave first-person statements out)'}\n"
        f"Written at: {written_at.isoformat()}\n\n<memory>\n{content}\n</memory>"
    )


def parse_statements(arguments: Any, usage: Usage, attempt: int) -> tuple[LlmStatement, ...]:
    """The statements of one ``record_statements`` call's input; ExtractionFailed on anything malformed
    (nothing is then applied)."""
    raw = arguments.get("statements") if isinstance(arguments, dict) else None
    if not isinstance(raw, list) or len(raw) > MAX_STATEMENTS:
        raise ExtractionFailed(
            f"malformed answer: 'statements' is not a list of at most {MAX_STATEMENTS}", usage, attempt
        )
    out = []
    for n, item in enumerate(raw):
        ok = isinstance(item, dict) and all(
            isinstance(item.get(k), str) and 0 < len(item[k].strip()) <= 200
            for k in ("subject", "predicate", "object")
        )
        if not ok or item.get("status") not in STATUSES or not _PREDICATE.fullmatch(item["predicate"]):
            raise ExtractionFailed(
                f"malformed answer: statement {n} is not a valid statement", usage, attempt
            )
        out.append(
            LlmStatement(
                item["subject"].strip(),
                item["predicate"],
                item["object"].strip(),
                item["status"],
                item.get("subject_type") if item.get("subject_type") in TYPES else "thing",
                item.get("object_type") if item.get("object_type") in TYPES else "thing",
                item.get("ended") is True,
            )
        )
    return tuple(out)
