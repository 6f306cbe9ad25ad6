"""MCP sampling end to end: ``mnemograph serve`` processes with ``MNEMOGRAPH_SAMPLING=on``, and a real SDK
client implementing the sampling callback over stdio (through the stdio front-end and the owner's socket)
and over streamable HTTP (stateless: its session ends with each request, so the memory keeps the offline
extraction and says why)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.types import (
    CreateMessageRequestParams,
    CreateMessageResultWithTools,
    SamplingCapability,
    SamplingToolsCapability,
    TextContent,
    ToolUseContent,
)

from tests.e2e.conftest import Store, call, http_server

pytestmark = pytest.mark.anyio

NEWS = "Big news from Ana today: she signed with the Acme people."
STATEMENTS = [{"subject": "Ana", "predicate": "works_at", "object": "Acme", "status": "asserted"}]
TOOLS = SamplingCapability(tools=SamplingToolsCapability())


class Model:
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(
        self, context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResultWithTools:
        self.seen += [m.content.text for m in params.messages if isinstance(m.content, TextContent)]
        call = ToolUseContent(
            type="tool_use", name="record_statements", id="t1", input={"statements": STATEMENTS}
        )
        return CreateMessageResultWithTools(role="assistant", content=[call], model="stdio-model")


async def settled(client: Client, memory_id: str) -> dict[str, Any]:
    """memory_read once the pass after the commit has run (polls another process's state)."""
    with anyio.fail_after(60):
        while True:
            record = await call(client, "memory_read", {"id": memory_id})
            if record["enrichment"] is not None and not record["enrichment"].endswith("pending"):
                return record
            await anyio.sleep(0.05)


async def test_a_stdio_clients_model_reads_what_it_writes(store: Store) -> None:
    params = store.stdio(default_scope="user:sam")
    params.env = {**(params.env or {}), "MNEMOGRAPH_SAMPLING": "on"}
    model = Model()
    async with Client(params, mode="legacy", sampling_callback=model, sampling_capabilities=TOOLS) as client:
        new = await call(client, "memory_write", {"content": NEWS})
        record = await settled(client, new["id"])
        found = await call(client, "recall", {"query": "Where does Ana work?"})
    assert record["enrichment"].startswith(
        "sampling (the client's model stdio-model): done (1 relation(s) added"
    ), record["enrichment"]
    assert [r.split(" [")[0] for r in record["relations"]] == ["Ana —works_at→ Acme"], record
    assert any(NEWS in text for text in model.seen), model.seen
    assert new["id"] in [r["id"] for r in found["results"]], found


async def test_an_http_session_ends_with_its_request_so_nothing_is_sampled(store: Store) -> None:
    model = Model()
    async with (
        http_server(store, env={"MNEMOGRAPH_SAMPLING": "on"}) as server,
        Client(server.url, mode="legacy", sampling_callback=model, sampling_capabilities=TOOLS) as client,
    ):
        new = await call(client, "memory_write", {"content": "Ana moved to Lisbon.", "scopes": ["user:sam"]})
        record = await settled(client, new["id"])
    assert model.seen == []
    assert [r.split(" [")[0] for r in record["relations"]] == ["Ana —lives_in→ Lisbon"]
    assert record["enrichment"] == (
        "sampling: skipped (HTTP sessions end with their request, before the model could be asked); "
        "the offline extraction stands"
    )


async def test_sampling_asked_by_a_client_works_when_another_client_started_the_owner_without_it(
    store: Store,
) -> None:
    # The newcomer's case: a first client (no MNEMOGRAPH_SAMPLING) started the store's owner; a second one
    # configured with MNEMOGRAPH_SAMPLING=on reaches that running owner, and its model must still be asked.
    plain = store.stdio(default_scope="user:sam")
    asking = store.stdio(default_scope="user:sam")
    asking.env = {**(asking.env or {}), "MNEMOGRAPH_SAMPLING": "on"}
    model, other = Model(), Model()
    async with Client(plain, mode="legacy", sampling_callback=other, sampling_capabilities=TOOLS) as first:
        await call(first, "memory_write", {"content": "Sam likes tea."})
        async with Client(
            asking, mode="legacy", sampling_callback=model, sampling_capabilities=TOOLS
        ) as second:
            new = await call(second, "memory_write", {"content": NEWS})
            record = await settled(second, new["id"])
        later = await call(first, "memory_write", {"content": "Sam visited Porto."})
        plain_record = await call(first, "memory_read", {"id": later["id"]})
    assert record["enrichment"].startswith(
        "sampling (the client's model stdio-model): done (1 relation(s) added"
    ), record["enrichment"]
    assert any(NEWS in text for text in model.seen), model.seen
    # The first client did not ask for sampling: its model is never sent anything.
    assert other.seen == []
    assert plain_record["enrichment"] is None, plain_record


class Silent(Model):
    """A client whose model does not answer until released (a stuck or very slow client)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = anyio.Event()
        self.release = anyio.Event()

    async def __call__(
        self, context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResultWithTools:
        self.asked.set()
        await self.release.wait()
        return await super().__call__(context, params)


async def test_a_client_that_does_not_answer_never_holds_up_another_sessions_sampling(store: Store) -> None:
    """One connected client left its sampling request unanswered, and every other session's memories waited
    behind it for up to its timeout (here an hour): now each session's memories wait for its own client only."""
    env = {"MNEMOGRAPH_SAMPLING": "on", "MNEMOGRAPH_SAMPLING_TIMEOUT": "3600"}
    stuck_params, prompt_params = store.stdio(default_scope="user:sam"), store.stdio(default_scope="user:ana")
    stuck_params.env = {**(stuck_params.env or {}), **env}
    prompt_params.env = {**(prompt_params.env or {}), **env}
    silent, model = Silent(), Model()
    async with (
        Client(stuck_params, mode="legacy", sampling_callback=silent, sampling_capabilities=TOOLS) as stuck,
        Client(prompt_params, mode="legacy", sampling_callback=model, sampling_capabilities=TOOLS) as prompt,
    ):
        waiting = await call(stuck, "memory_write", {"content": "Sam likes green tea."})
        with anyio.fail_after(60):
            await silent.asked.wait()  # its request is out, and unanswered
        new = await call(prompt, "memory_write", {"content": NEWS})
        record = await settled(prompt, new["id"])
        still = await call(stuck, "memory_read", {"id": waiting["id"]})
        silent.release.set()
        late = await settled(stuck, waiting["id"])
    assert record["enrichment"].startswith("sampling (the client's model stdio-model): done"), record
    assert [r.split(" [")[0] for r in record["relations"]] == ["Ana —works_at→ Acme"], record
    assert any(NEWS in text for text in model.seen)
    assert all(NEWS not in text for text in silent.seen)  # a memory's text goes only to its writer's client
    assert still["enrichment"] == "sampling: pending"
    assert late["enrichment"].startswith("sampling (the client's model stdio-model): done"), late
