"""Conversation digests written by Claude through the real ``anthropic`` SDK (HTTP faked by an
``httpx2.MockTransport``): the model's digest, its cost, retries on 529, and the offline digest kept when the
answer is malformed. Real stores and embedding model otherwise."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2

from storage import Engine
from storage.enrich.claude import ClaudeExtractor
from storage.enrich.digest_claude import ClaudeDigester
from tests.storage.test_claude import MODEL, Fake, error
from tests.storage.test_conversations import MOVE


def digest_answer(text: Any) -> httpx2.Response:
    body = {
        "id": "msg_d",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "tool_use", "id": "tu_d", "name": "record_digest", "input": {"digest": text}}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 400, "output_tokens": 60, "cache_read_input_tokens": 300},
    }
    return httpx2.Response(200, json=body)


def with_claude(engine: Engine, fake: Fake) -> Engine:
    client = anthropic.Anthropic(
        api_key="sk-test", http_client=httpx2.Client(transport=httpx2.MockTransport(fake))
    )
    engine.use_llm_digests(ClaudeDigester(ClaudeExtractor(client, MODEL, sleep=fake.sleeps.append)))
    return engine


def the_digest(engine: Engine) -> Any:
    with engine.graph.read() as conn:
        (digest,) = engine.graph.all_digests(conn)
    return engine.read(digest).memory


def test_claude_writes_the_digest_after_the_commit_and_its_cost_is_kept(engine: Engine) -> None:
    fake = Fake(
        error(529), digest_answer("The user moved to Lisbon for Acme Corp; sister Ines visits June 3.")
    )
    with_claude(engine, fake)
    engine.write_conversation("chat-c", MOVE, ["user:ana"])
    assert fake.requests == []  # nothing asked on the write path
    assert engine.consolidate() == 1
    d = the_digest(engine)
    assert d.content.startswith("Digest of conversation 'chat-c': 4 messages")
    assert "sister Ines visits June 3" in d.content
    assert d.metadata["digest_by"] == MODEL
    assert d.metadata["tokens_in"] == 400
    assert d.metadata["tokens_out"] == 60
    assert len(fake.requests) == 2  # the 529 was retried
    assert len(fake.sleeps) == 1
    sent = fake.requests[-1]
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert sent["tool_choice"] == {"type": "tool", "name": "record_digest"}
    assert "user: I just moved to Lisbon" in sent["messages"][0]["content"]


def test_a_malformed_answer_keeps_the_offline_digest_and_says_why(engine: Engine) -> None:
    with_claude(engine, Fake(digest_answer(["not", "text"])))
    engine.write_conversation("chat-m", MOVE, ["user:ana"])
    assert engine.consolidate() == 1
    d = the_digest(engine)
    assert "user: I just moved to Lisbon for a job at Acme Corp." in d.content  # the offline digest
    assert d.metadata["digest_by"] == "offline"
    assert d.metadata["llm"] == "failed (malformed answer: no digest text in record_digest)"
