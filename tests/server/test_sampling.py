"""MCP sampling (issue 15, layer 4) through a real SDK ``Client`` that implements the sampling callback, on the
real server over a real Engine (in-process transport, the handshake era that allows a server's requests).

What the user sees: relations recorded and reconciled from the client's model's answer, recall, and
``memory_read``'s enrichment line for a good answer, a malformed one, a refusal, a client without the
capability, a client whose session ended, and the setting off.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ErrorData,
    Implementation,
    SamplingCapability,
    SamplingToolsCapability,
    TextContent,
    ToolUseContent,
)

from server._sampling import SamplingPolicy
from server.app import build_server
from storage import Engine

pytestmark = pytest.mark.anyio

MODEL = "client-model-1"
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
NEWS = "Big news from Ana today: she signed with the Acme people."


class Model:
    """The client's model: answers each sampling request with ``answer(params)`` and keeps every request."""

    def __init__(self, answer: Callable[[CreateMessageRequestParams], Any]) -> None:
        self.answer = answer
        self.requests: list[CreateMessageRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | CreateMessageResultWithTools | ErrorData:
        self.requests.append(params)
        result = self.answer(params)
        return await result if hasattr(result, "__await__") else result

    def texts(self) -> list[str]:
        return [
            m.content.text for p in self.requests for m in p.messages if isinstance(m.content, TextContent)
        ]


def tool_call(statements: Any) -> CreateMessageResultWithTools:
    call = ToolUseContent(
        type="tool_use", name="record_statements", id="tu_1", input={"statements": statements}
    )
    return CreateMessageResultWithTools(role="assistant", content=[call], model=MODEL, stop_reason="toolUse")


def text(answer: str) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text=answer), model=MODEL)


@asynccontextmanager
async def connect(
    engine: Engine,
    model: Model | None,
    *,
    sampling: bool = True,
    tools: bool = True,
    mode: str = "legacy",
) -> AsyncIterator[Client]:
    """A client named ``tests`` on a server with sampling on (or off), declaring sampling (with tools) when
    it brings a model."""

    async def source() -> Engine:
        return engine

    if sampling:
        engine.use_sampling()
    server = build_server(
        source, default_scopes=("user:sam",), sampling=SamplingPolicy(timeout=30) if sampling else None
    )
    caps = SamplingCapability(tools=SamplingToolsCapability()) if tools and model is not None else None
    async with Client(
        server,
        mode=mode,  # type: ignore[arg-type]
        client_info=Implementation(name="tests", version="1"),
        sampling_callback=model,
        sampling_capabilities=caps,
    ) as client:
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def settled(engine: Engine) -> None:
    """Wait (in a thread, so this loop keeps serving the sampling requests) until every pass has run."""
    assert await anyio.to_thread.run_sync(engine.wait_enriched)


async def test_the_clients_model_extracts_and_reconciles_after_the_write(engine: Engine) -> None:
    model = Model(lambda p: tool_call([]) if "Initech" in p.messages[0].content.text else tool_call(WORKS))  # type: ignore[union-attr]
    async with connect(engine, model) as client:
        before = await call(client, "memory_write", {"content": "Ana works at Initech."})
        new = await call(client, "memory_write", {"content": NEWS})
        assert new["relations"] == []  # the offline pass reads nothing here; the model does, later
        await settled(engine)
        record = await call(client, "memory_read", {"id": new["id"]})
        assert [r.split(" [")[0] for r in record["relations"]] == [
            "Ana —works_at→ Acme"
        ]  # not the hypothetical
        assert record["enrichment"] == (
            f"sampling (the client's model {MODEL}): done (1 relation(s) added, 1 superseded, 0 contradicted)"
        )
        old = await call(client, "memory_read", {"id": before["id"]})
        assert old["memory"]["status"] == "superseded"  # the new job closed the old one
        found = await call(client, "recall", {"query": "Where does Ana work?"})
        ids = [r["id"] for r in found["results"]]
        assert new["id"] in ids
        assert before["id"] not in ids
    sent = model.requests[-1]
    assert sent.tools is not None
    assert [t.name for t in sent.tools] == ["record_statements"]
    assert sent.tool_choice is not None
    assert sent.tool_choice.mode == "required"
    assert sent.include_context == "none"
    assert "Speaker: sam" in model.texts()[-1]
    assert NEWS in model.texts()[-1]


async def test_a_client_without_sampling_tools_answers_in_json(engine: Engine) -> None:
    answer = '```json\n{"statements": [{"subject": "Ana", "predicate": "works_at", "object": "Acme", "status": "asserted"}]}\n```'
    model = Model(lambda p: text(answer))
    async with connect(engine, model, tools=False) as client:
        new = await call(client, "memory_write", {"content": NEWS})
        await settled(engine)
        record = await call(client, "memory_read", {"id": new["id"]})
    assert [r.split(" [")[0] for r in record["relations"]] == ["Ana —works_at→ Acme"]
    assert "done (1 relation(s) added" in record["enrichment"]
    assert model.requests[0].tools is None
    assert "Answer with one JSON object" in (model.requests[0].system_prompt or "")


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (lambda p: text("Ana works at Acme, I think."), "malformed answer: not a JSON object"),
        (
            lambda p: tool_call(
                [{"subject": "Ana", "predicate": "Works At!", "object": "Acme", "status": "asserted"}]
            ),
            "malformed answer: statement 0 is not a valid statement",
        ),
        (lambda p: ErrorData(code=-1, message="the user declined"), "the client refused: the user declined"),
    ],
    ids=["prose", "bad-statement", "refused"],
)
async def test_a_bad_answer_or_a_refusal_changes_nothing_and_is_visible(
    engine: Engine, answer: Callable[[CreateMessageRequestParams], Any], reason: str
) -> None:
    async with connect(engine, Model(answer)) as client:
        before = await call(client, "memory_write", {"content": "Ana works at Initech."})
        new = await call(client, "memory_write", {"content": NEWS})
        await settled(engine)
        record = await call(client, "memory_read", {"id": new["id"]})
        old = await call(client, "memory_read", {"id": before["id"]})
    assert record["relations"] == []
    assert record["enrichment"] == f"sampling: failed ({reason}); the offline extraction stands"
    assert old["memory"]["status"] == "current"


async def test_with_the_setting_off_nothing_is_sampled(engine: Engine) -> None:
    model = Model(lambda p: tool_call(WORKS))
    async with connect(engine, model, sampling=False) as client:
        new = await call(client, "memory_write", {"content": NEWS})
        await settled(engine)
        record = await call(client, "memory_read", {"id": new["id"]})
    assert model.requests == []
    assert record["enrichment"] is None
    assert record["relations"] == []


@pytest.mark.parametrize(
    ("mode", "with_model", "reason"),
    [
        ("legacy", False, "the client did not declare the sampling capability"),
        (
            "auto",  # negotiates 2026-07-28, which forbids a server's requests outside a call
            True,
            "the client speaks MCP 2026-07-28, where a server may not send it requests outside a call",
        ),
    ],
    ids=["no-capability", "modern-protocol"],
)
async def test_a_client_that_cannot_be_sampled_keeps_the_offline_extraction(
    engine: Engine, mode: str, with_model: bool, reason: str
) -> None:
    model = Model(lambda p: tool_call(WORKS))
    async with connect(engine, model if with_model else None, mode=mode) as client:
        new = await call(client, "memory_write", {"content": "Ana moved to Lisbon."})
        await settled(engine)
        record = await call(client, "memory_read", {"id": new["id"]})
    assert model.requests == []
    assert [r.split(" [")[0] for r in record["relations"]] == ["Ana —lives_in→ Lisbon"]  # the offline pass
    assert record["enrichment"] == f"sampling: skipped ({reason}); the offline extraction stands"


async def test_text_goes_only_to_the_session_that_wrote_it_and_a_gone_session_is_skipped(
    engine: Engine,
) -> None:
    release, asked = anyio.Event(), anyio.Event()

    async def slow(params: CreateMessageRequestParams) -> CreateMessageResultWithTools:
        await release.wait()  # the first client's request stays unanswered while the second comes and goes
        return tool_call([])

    async def never(params: CreateMessageRequestParams) -> CreateMessageResultWithTools:
        asked.set()
        await anyio.sleep_forever()  # the second client leaves without answering
        raise AssertionError

    first, second = Model(slow), Model(never)
    async with connect(engine, first) as a:
        mine = await call(a, "memory_write", {"content": "Sam likes green tea."})
        async with connect(engine, second) as b:
            theirs = await call(b, "memory_write", {"content": NEWS})
            later = await call(b, "memory_write", {"content": "Bo moved to Porto."})  # queued behind NEWS
            with anyio.fail_after(30):  # a guard: before per-session queues it waited behind the first client
                await asked.wait()
        release.set()
        await settled(engine)
        record = await call(a, "memory_read", {"id": theirs["id"]})
        queued = await call(a, "memory_read", {"id": later["id"]})
        own = await call(a, "memory_read", {"id": mine["id"]})
    gone = "sampling: skipped (the session that wrote it had ended); the offline extraction stands"
    assert (record["enrichment"], queued["enrichment"]) == (gone, gone)
    assert record["relations"] == []
    assert own["enrichment"].startswith(f"sampling (the client's model {MODEL}): done")
    assert all("Porto" not in t for t in second.texts())  # its second memory's turn came after it left
    assert all(NEWS not in t for t in first.texts())
    assert any("green tea" in t for t in first.texts())


async def test_conversation_messages_are_read_by_the_clients_model(engine: Engine) -> None:
    model = Model(lambda p: tool_call(WORKS))
    async with connect(engine, model) as client:
        out = await call(
            client,
            "conversation_write",
            {"conversation": "c1", "messages": [{"role": "user", "content": NEWS, "speaker": "sam"}]},
        )
        await settled(engine)
        mid = out["messages"][0]["id"]
        record = await call(client, "memory_read", {"id": mid})
    assert [r.split(" [")[0] for r in record["relations"]] == ["Ana —works_at→ Acme"]
    assert record["enrichment"].startswith(f"sampling (the client's model {MODEL}): done")


async def test_past_the_queue_bound_memories_are_skipped_without_sending_their_text(engine: Engine) -> None:
    engine.use_sampling(limit=1)
    release = anyio.Event()

    async def slow(params: CreateMessageRequestParams) -> CreateMessageResultWithTools:
        await release.wait()  # the first memory stays in flight while the others are written
        return tool_call([])

    model = Model(slow)
    async with connect(engine, model) as client:
        first = await call(client, "memory_write", {"content": "Sam likes green tea."})
        second = await call(client, "memory_write", {"content": NEWS})
        waiting = await call(client, "memory_read", {"id": first["id"]})
        release.set()
        await settled(engine)
        record = await call(client, "memory_read", {"id": second["id"]})
    assert waiting["enrichment"] == "sampling: pending"
    assert record["enrichment"] == (
        "sampling: skipped (1 memories were already waiting for a model); the offline extraction stands"
    )
    assert all(NEWS not in t for t in model.texts())
