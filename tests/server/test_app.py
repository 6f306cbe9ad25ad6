"""The MCP surface as a client sees it: tool list, annotations, schemas, instructions, and the error channels."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from mcp import Client, MCPError
from mcp.types import INVALID_PARAMS

from server._engine import EngineHolder
from server.app import build_server, inline_refs
from storage import Engine, StorageUnavailable
from tools import ALL_TOOLS, INSTRUCTIONS

pytestmark = pytest.mark.anyio

TOOL_NAMES = [
    "memory_write",
    "conversation_write",
    "recall",
    "amend",
    "retire",
    "memory_read",
    "list_scopes",
    "create_scope",
    "move_scope",
    "link_memory",
    "unlink_memory",
    "entities",
    "purge",
    "erase",
]


def _server_over(engine: Engine) -> Any:
    async def source() -> Engine:
        return engine

    return build_server(source, default_scopes=("user:tester",))


async def test_tools_are_listed_with_truthful_annotations(engine: Engine) -> None:
    async with Client(_server_over(engine), mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert list(tools) == TOOL_NAMES
    hints = {
        name: (t.annotations.read_only_hint, t.annotations.destructive_hint, t.annotations.idempotent_hint)
        for name, t in tools.items()
        if t.annotations is not None
    }
    assert hints == {
        "memory_write": (False, False, True),
        "conversation_write": (False, False, True),
        "recall": (True, False, True),
        "amend": (False, False, False),
        "retire": (False, False, True),
        "memory_read": (True, False, True),
        "list_scopes": (True, False, True),
        "create_scope": (False, False, True),
        "move_scope": (False, True, True),
        "link_memory": (False, False, True),
        "unlink_memory": (False, False, False),
        "entities": (False, False, False),
        "purge": (False, True, True),
        "erase": (False, True, True),
    }
    assert all(t.annotations is not None and t.annotations.open_world_hint is False for t in tools.values())


async def test_published_schemas_are_the_tool_models_and_describe_every_argument(engine: Engine) -> None:
    async with Client(_server_over(engine), mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for spec in ALL_TOOLS:
        tool = tools[spec.name]
        assert tool.input_schema == spec.input_model.model_json_schema()
        assert tool.output_schema == inline_refs(spec.output_model.model_json_schema(mode="serialization"))
        assert tool.input_schema.get("additionalProperties") is False
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{spec.name}.{name} has no description for the model"
        assert tool.description
        assert tool.title


async def test_output_schemas_are_published_without_refs_and_still_hold_answers_to_their_shape(
    engine: Engine,
) -> None:
    # Every SDK client validates each result against the published output schema, and jsonschema resolves a
    # $ref anew for every object it checks: published inline, the same constraints cost it half the time.
    engine.write("Priya Raman maintains the billing service.", ["user:tester"])
    async with Client(_server_over(engine), mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        answer = await client.call_tool("recall", {"query": "billing", "explain": True})  # the SDK validates
    for spec in ALL_TOOLS:
        assert "$ref" not in json.dumps(tools[spec.name].output_schema), spec.name
    schema = tools["recall"].output_schema
    assert schema is not None
    content = answer.structured_content
    assert content is not None
    assert content["results"], content
    validator = Draft202012Validator(schema)
    assert not list(validator.iter_errors(content))
    broken = {"results": [{k: v for k, v in content["results"][0].items() if k != "id"}]}
    assert [e.message for e in validator.iter_errors(broken)] == ["'id' is a required property"]
    lanes = {
        "results": [{**content["results"][0], "explain": {**content["results"][0]["explain"], "lanes": 3}}]
    }
    assert list(validator.iter_errors(lanes)), "an explanation's lanes must stay an object"


async def test_the_handshake_carries_instructions_on_both_protocol_eras(engine: Engine) -> None:
    async with Client(_server_over(engine), mode="legacy") as client:
        assert client.instructions == INSTRUCTIONS
        assert client.server_info is not None
        assert client.server_info.name == "mnemograph"
    async with Client(_server_over(engine)) as client:  # auto: the 2026 discover path in process
        assert client.instructions == INSTRUCTIONS
        assert [t.name for t in (await client.list_tools()).tools] == TOOL_NAMES


async def test_an_unknown_tool_is_a_protocol_error(engine: Engine) -> None:
    async with Client(_server_over(engine), mode="legacy") as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("forget_everything", {})
    assert caught.value.code == INVALID_PARAMS
    assert "call tools/list" in caught.value.message


async def test_a_store_that_is_still_opening_is_an_error_result_not_a_hang(tmp_path: Any) -> None:
    holder = EngineHolder(tmp_path / "never-opened", wait=0.05)  # never run: stays "opening"
    server = build_server(holder.get, default_scopes=("user:tester",))
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("recall", {"query": "x"})
    assert result.is_error
    assert result.meta is not None
    assert result.meta["mnemograph/error"] == {"code": "storage_unavailable"}
    assert result.content[0].text == (  # type: ignore[union-attr]
        "the memory store is still opening; wait a few seconds and call the tool again"
    )


async def test_a_crash_in_a_tool_reaches_the_model_without_internals(engine: Engine, caplog: Any) -> None:
    async def broken() -> Engine:
        raise RuntimeError("secret internal detail")

    server = build_server(broken, default_scopes=("user:tester",))
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("list_scopes", {})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "internal error" in text
    assert "secret" not in text
    assert "secret internal detail" in caplog.text  # the traceback is in the server log


async def test_the_holder_retries_a_busy_directory_and_then_serves(tmp_path: Any, engine: Engine) -> None:
    # ``engine`` holds its data directory; a holder on the same directory must wait, not fail.
    holder = EngineHolder(engine.data_dir, wait=10)
    async with anyio.create_task_group() as tg:
        tg.start_soon(holder.run)
        with anyio.fail_after(10):
            while True:  # polls: the holder reports its retries only through ``problem``
                if holder.problem is not None:
                    break
                await anyio.sleep(0.01)
        assert holder.state == "opening"
        assert "owned by another Mnemograph process" in (holder.problem or "")
        await anyio.to_thread.run_sync(engine.close)
        opened = await holder.get()
        assert opened.data_dir == engine.data_dir
        await holder.close()
    with pytest.raises(StorageUnavailable):
        await holder.get()
