"""The Claude path (layer 3) through the real ``anthropic`` SDK, with the HTTP API faked by an
``httpx2.MockTransport``: success, malformed tool output, 429 and 529 with retry, timeouts, and the write
acknowledged before the model answers. Real stores and model otherwise."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import anthropic
import httpx2
import pytest

from storage import Engine, EntityIn, RelationIn
from storage.enrich.claude import ClaudeExtractor

MODEL = "claude-sonnet-4-6"
Handler = Callable[[httpx2.Request], httpx2.Response]


def answer(statements: Any, *, cache_read: int = 100) -> httpx2.Response:
    body = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [
            {
                "type": "tool_use",
                "id": "tu_1",
                "name": "record_statements",
                "input": {"statements": statements},
            }
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 120,
            "output_tokens": 30,
            "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": 0,
        },
    }
    return httpx2.Response(200, json=body)


def error(status: int, headers: dict[str, str] | None = None) -> httpx2.Response:
    kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
    return httpx2.Response(
        status, headers=headers or {}, json={"type": "error", "error": {"type": kind, "message": kind}}
    )


class Fake:
    """The Messages API: answers in turn from ``script`` and keeps every request it got."""

    def __init__(self, *script: httpx2.Response | type[Exception]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.sleeps: list[float] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, type):
            raise step("timed out", request=request)  # type: ignore[call-arg]
        return step

    def extractor(self) -> ClaudeExtractor:
        client = anthropic.Anthropic(
            api_key="sk-test", http_client=httpx2.Client(transport=httpx2.MockTransport(self))
        )
        return ClaudeExtractor(client, MODEL, sleep=self.sleeps.append)


WORKS = [
    {
        "subject": "Ana",
        "subject_type": "person",
        "predicate": "works_at",
        "object": "Acme",
        "object_type": "org",
        "status": "asserted",
    },
    {"subject": "Ana", "predicate": "likes", "object": "sushi", "status": "hypothetical"},
]


@pytest.fixture
def fake_engine(engine: Engine) -> Iterator[Callable[[Fake], Engine]]:
    def use(fake: Fake) -> Engine:
        engine.use_llm(fake.extractor())
        return engine

    return use


def test_statements_from_claude_are_recorded_and_reconciled_after_the_commit(
    fake_engine: Callable[[Fake], Engine],
) -> None:
    fake = Fake(answer([]), answer(WORKS))
    engine = fake_engine(fake)
    before = engine.write("Ana works at Initech.", ["user:sam"])
    new = engine.write("Big news from Ana today: she signed with the Acme people.", ["user:sam"])
    assert engine.wait_enriched()
    record = engine.read(new.id)
    assert [r.split(" [")[0] for r in record.relations] == ["Ana —works_at→ Acme"]  # not the hypothetical one
    assert record.enrichment is not None
    assert "done (1 relation(s) added, 1 superseded" in record.enrichment
    assert "tokens in 120 (cache read 100, cache write 0), out 30" in record.enrichment
    assert engine.read(before.id).memory.status == "superseded"
    sent = fake.requests[-1]
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}  # the fixed instructions are cached
    assert sent["tool_choice"] == {"type": "tool", "name": "record_statements"}
    assert "Speaker: sam" in sent["messages"][0]["content"]


def test_a_relation_claude_finds_in_a_planned_change_ends_the_old_value_at_its_date(
    fake_engine: Callable[[Fake], Engine],
) -> None:
    """The pass reconciles a memory valid from a later date as its write did (issue #14): the employer it
    replaces stays current until then, instead of being superseded when the model answered."""
    fake = Fake(answer([]), answer(WORKS))
    engine = fake_engine(fake)
    before = engine.write("Ana works at Initech.", ["user:sam"])
    starts = datetime(datetime.now(UTC).year + 2, 1, 1, tzinfo=UTC)
    new = engine.write("Big news from Ana: she signed with the Acme people.", ["user:sam"], valid_from=starts)
    assert engine.wait_enriched()
    record = engine.read(new.id)
    assert [r.split(" [")[0] for r in record.relations] == ["Ana —works_at→ Acme"]
    old = engine.read(before.id)
    assert (old.memory.status, old.memory.valid_to) == ("current", starts)
    assert old.relations == (f"Ana —works_at→ Initech [? → {starts.date().isoformat()}, ended by {new.id}]",)


def test_malformed_tool_output_changes_nothing_and_is_visible(fake_engine: Callable[[Fake], Engine]) -> None:
    fake = Fake(answer("not a list"))
    engine = fake_engine(fake)
    receipt = engine.write("Ana lives in Lisbon.", ["user:sam"])
    assert engine.wait_enriched()
    record = engine.read(receipt.id)
    assert record.relations == ("Ana —lives_in→ Lisbon [? → open]",)  # the offline pass, untouched
    assert record.enrichment is not None
    assert "failed (malformed answer: 'statements' is not a list" in record.enrichment
    assert record.memory.status == "current"


@pytest.mark.parametrize(("status", "headers"), [(429, {"retry-after-ms": "5"}), (529, {})])
def test_rate_limits_and_overload_are_retried_with_backoff(
    fake_engine: Callable[[Fake], Engine], status: int, headers: dict[str, str]
) -> None:
    fake = Fake(error(status, headers), error(status, headers), answer(WORKS))
    engine = fake_engine(fake)
    receipt = engine.write("Ana's new employer is Acme.", ["user:sam"])
    assert engine.wait_enriched()
    assert len(fake.requests) == 3
    if headers:
        assert fake.sleeps == [0.005, 0.005]  # the server's retry-after is honoured
    else:
        assert 0.375 <= fake.sleeps[0] <= 0.5 < fake.sleeps[1] <= 1.0  # exponential, with jitter
    record = engine.read(receipt.id)
    assert record.enrichment is not None
    assert "done" in record.enrichment
    assert any(r.startswith("Ana —works_at→ Acme") for r in record.relations)


def test_timeouts_are_retried_then_recorded_as_a_failure(fake_engine: Callable[[Fake], Engine]) -> None:
    fake = Fake(httpx2.ReadTimeout)
    engine = fake_engine(fake)
    receipt = engine.write("Ana moved to Porto.", ["user:sam"])
    assert engine.wait_enriched()
    assert len(fake.requests) == 4
    assert len(fake.sleeps) == 3
    assert fake.sleeps[0] < fake.sleeps[2]
    record = engine.read(receipt.id)
    assert record.enrichment is not None
    assert "failed (timed out after 4 attempts)" in record.enrichment
    assert record.relations == ("Ana —lives_in→ Porto [? → open]",)


def test_the_write_is_acknowledged_before_the_model_answers(fake_engine: Callable[[Fake], Engine]) -> None:
    release = threading.Event()
    fake = Fake(answer(WORKS))

    def slow(request: httpx2.Request) -> httpx2.Response:
        assert release.wait(30)
        return fake(request)

    client = anthropic.Anthropic(
        api_key="sk-test", http_client=httpx2.Client(transport=httpx2.MockTransport(slow))
    )
    engine = fake_engine(fake)
    engine.enricher = None
    engine.use_llm(ClaudeExtractor(client, MODEL, sleep=fake.sleeps.append))
    receipt = engine.write(
        "Ana signed with Acme.", ["user:sam"]
    )  # returns while the model is still "thinking"
    assert engine.read(receipt.id).enrichment == "llm: pending"
    release.set()
    assert engine.wait_enriched()
    record = engine.read(receipt.id)
    assert record.enrichment is not None
    assert record.enrichment.startswith(f"llm {MODEL}: done")


class Held(Fake):
    """A Fake whose answers after the first wait until ``release`` is set."""

    def __init__(self, *script: httpx2.Response) -> None:
        super().__init__(*script)
        self.release = threading.Event()

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if self.requests:
            self.release.wait(30)
        return super().__call__(request)


def test_a_relation_claude_adds_is_followed_by_the_next_recall(fake_engine: Callable[[Fake], Engine]) -> None:
    """The graph lane keeps each walked entity's relations between recalls until the next commit. The LLM pass
    commits a relation after the write was acknowledged, and after a recall walked that entity: the next
    recall follows the new relation."""
    star = {
        "subject": "Hotel Aria",
        "subject_type": "place",
        "predicate": "awarded_by",
        "object": "Michelin",
        "object_type": "org",
        "status": "asserted",
    }
    fake = Held(answer([]), answer([star]))
    engine = fake_engine(fake)
    engine.write(
        "Hotel Aria is in Lisbon.", ["user:ana"], relations=[RelationIn("Hotel Aria", "located_in", "Lisbon")]
    )
    assert engine.wait_enriched()

    def paths() -> set[str]:
        return {
            p for h in engine.recall("What about Hotel Aria?", ["user:ana"], recipe="graph") for p in h.paths
        }

    news = engine.write("Big news from Hotel Aria: the inspectors came and gave it a star.", ["user:ana"])
    assert paths() == {"Hotel Aria —located_in→ Lisbon"}  # recalled before the model answered
    fake.release.set()
    assert engine.wait_enriched()
    assert [r.split(" [")[0] for r in engine.read(news.id).relations] == ["Hotel Aria —awarded_by→ Michelin"]
    assert "Hotel Aria —awarded_by→ Michelin" in paths()


def test_what_claude_finds_is_walked_by_the_next_recall_without_a_restart(
    fake_engine: Callable[[Fake], Engine],
) -> None:
    """Entities and relations the LLM pass adds after the commit reach the graph lane at once: the query names
    the new entity, and the walk follows the new relation from an entity that had none before."""
    engine = fake_engine(Fake(answer(WORKS)))
    news = engine.write("Big news from Ana today: she signed with the Acme people.", ["user:sam"])
    assert engine.wait_enriched()
    assert [r.split(" [")[0] for r in engine.read(news.id).relations] == ["Ana —works_at→ Acme"]
    paths = {p for h in engine.recall("Where does Ana work?", ["user:sam"], recipe="graph") for p in h.paths}
    assert "Ana —works_at→ Acme" in paths


def test_a_relation_claude_spells_differently_stays_on_the_memorys_own_entity(
    fake_engine: Callable[[Fake], Engine],
) -> None:
    """The model writes "Acme Inc" where the memory mentions "Acme Inc."; another team knows an "Acme Inc". The
    relation is recorded on the entity the memory mentions: its writer's recall follows it, the other team's
    entity gets no edge, and unlinking the memory from a scope takes the relation from that scope's readers
    (failed before: the edge was hung on the other team's entity, the writer's recall never reached it, and its
    copy of the memory's scopes kept the unlinked one, so that scope's readers' windows still held it)."""
    employs = {
        "subject": "Acme Inc",
        "subject_type": "org",
        "predicate": "employs",
        "object": "Bo",
        "object_type": "person",
        "status": "asserted",
    }
    engine = fake_engine(Fake(answer([]), answer([employs])))
    engine.write(
        "Globex bought Acme Inc last year.",
        ["team:y"],
        entities=[EntityIn("Acme Inc", "org"), EntityIn("Globex")],
    )
    hired = engine.write(
        "Acme Inc. took Bo on in May.",
        ["team:x", "team:w"],
        entities=[EntityIn("Acme Inc.", "org"), EntityIn("Bo", "person")],
    )
    assert engine.wait_enriched()
    assert [r.split(" [")[0] for r in engine.read(hired.id).relations] == ["Acme Inc. —employs→ Bo"]

    def paths(scope: str) -> set[str]:
        return {p for h in engine.recall("Where does Bo work?", [scope], recipe="graph") for p in h.paths}

    assert "Bo ←employs— Acme Inc." in paths("team:x")
    assert not any("Bo" in p for p in paths("team:y"))
    with engine.graph.read() as conn:
        # team:y's entity gets no edge of this memory
        assert hired.id not in {r.memory_id for r in engine.graph.relations(conn, "acme inc", limit=10)}
    engine.unlink(hired.id, "team:w")
    with engine.graph.read() as conn:
        for entity in ("acme inc.", "bo"):
            assert engine.graph.relations(conn, entity, limit=10, scopes=["team:w"]) == []
            assert [r.scopes for r in engine.graph.relations(conn, entity, limit=10)] == [("team:x",)]
