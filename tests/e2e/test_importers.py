"""``mnemograph import --from mcp-memory|mem0|markdown``: other tools' memory into a scope, merged into an
existing store, idempotent; the MCP memory server's file is produced by the server itself."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.e2e.conftest import MNEMOGRAPH, Store, call
from tools._wire import short_id

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

INSTALL = Path(__file__).parent / "install_server_memory.sh"
FIXTURES = Path(__file__).parent / "fixtures"


async def run(store: Store, *args: str) -> tuple[int, str, str]:
    argv = [MNEMOGRAPH, *args, "--data-dir", str(store.data_dir)]
    done = await anyio.run_process(argv, env={**os.environ, **store.env()}, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def listed(store: Store, *args: str) -> list[dict[str, Any]]:
    status, out, err = await run(store, "list", "--json", "--limit", "500", *args)
    assert status == 0, err
    memories: list[dict[str, Any]] = json.loads(out)["memories"]
    return memories


async def _reference_memory_file(tmp_path: Path) -> Path:
    """A memory.jsonl written by @modelcontextprotocol/server-memory, driven through its own MCP tools."""
    entry = (await anyio.run_process([str(INSTALL)], check=True)).stdout.decode().strip()
    node = shutil.which("node")
    assert node is not None, "node is needed to run the reference memory server"
    target = tmp_path / "memory.jsonl"
    params = StdioServerParameters(command=node, args=[entry], env={"MEMORY_FILE_PATH": str(target)})
    async with Client(params, mode="legacy") as client:
        await client.call_tool(
            "create_entities",
            {
                "entities": [
                    {
                        "name": "Ana_Lima",
                        "entityType": "person",
                        "observations": ["Speaks Portuguese and Spanish"],
                    },
                    {
                        "name": "Acme_Robotics",
                        "entityType": "organization",
                        "observations": ["Builds warehouse robots"],
                    },
                    {"name": "Lisbon", "entityType": "city", "observations": []},
                ]
            },
        )
        await client.call_tool(
            "create_relations",
            {
                "relations": [
                    {"from": "Ana_Lima", "to": "Acme_Robotics", "relationType": "works_at"},
                    {"from": "Ana_Lima", "to": "Lisbon", "relationType": "lives in"},
                ]
            },
        )
        await client.call_tool(
            "add_observations",
            {"observations": [{"entityName": "Ana_Lima", "contents": ["Prefers morning meetings"]}]},
        )
    assert target.exists()
    return target


async def test_the_mcp_memory_servers_graph_imports_into_a_scope_once(store: Store, tmp_path: Path) -> None:
    source = await _reference_memory_file(tmp_path)
    # An existing store with a memory of its own: the import merges into it.
    async with Client(store.stdio(), mode="legacy") as client:
        mine = await call(
            client, "memory_write", {"content": "Ana's birthday is 4 June.", "scopes": ["user:ana"]}
        )
    status, out, err = await run(store, "import", "--from", "mcp-memory", str(source), "--scope", "user:ana")
    assert status == 0, err
    assert "imported 6 memories" in out
    assert "6 new" in out
    contents = {m["content"]: m for m in await listed(store, "--scope", "user:ana")}
    assert mine["id"] in [short_id(m["id"]) for m in contents.values()]  # the CLI lists full ids
    assert "Ana_Lima: Prefers morning meetings" in contents
    assert "Lisbon is a city." in contents
    works = contents["Ana_Lima works at Acme_Robotics."]
    assert sorted(works["entities"]) == ["Acme_Robotics", "Ana_Lima"]
    status, out, _ = await run(store, "show", works["id"], "--json")
    assert json.loads(out)["relations"] == [
        {"subject": "Ana_Lima", "predicate": "works_at", "object": "Acme_Robotics"}
    ]
    assert contents["Ana_Lima lives in Lisbon."]["metadata"]["relation"] == "lives in"

    # Twice: nothing new. And recall reaches the imported memories through a client.
    status, out, err = await run(store, "import", "--from", "mcp-memory", str(source), "--scope", "user:ana")
    assert status == 0, err
    assert "0 new, 6 already there" in out
    assert len(await listed(store, "--scope", "user:ana")) == 7
    async with Client(store.stdio(), mode="legacy") as client:
        found = await call(client, "recall", {"query": "where does Ana work", "scopes": ["user:ana"], "k": 3})
        assert short_id(works["id"]) in [h["id"] for h in found["results"]]  # works: from the CLI, full


# Mem0's documented get_all() answer (docs.mem0.ai, "Get All Memories"): a list under "results".
MEM0_EXPORT = {
    "results": [
        {
            "id": "892db2ae-06d9-49e5-8b3e-585ef9b85b8e",
            "memory": "User is planning a trip to Japan next spring",
            "hash": "e2ea4a3ef5f2ab5f6ef2c5e2e8a0e4f4",
            "metadata": {"source": "chat"},
            "categories": ["travel"],
            "created_at": "2024-07-20T01:18:17.110000-07:00",
            "updated_at": "2024-07-20T01:18:17.110000-07:00",
            "user_id": "alex",
        },
        {
            "id": "a4d3e7c1-1b2c-4d5e-9f60-7a8b9c0d1e2f",
            "memory": "Is allergic to peanuts",
            "hash": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
            "metadata": None,
            "categories": ["health"],
            "created_at": "2024-03-02T09:00:00Z",
            "updated_at": None,
            "user_id": "alex",
        },
    ]
}


async def test_a_mem0_export_keeps_its_dates_and_ids(store: Store, tmp_path: Path) -> None:
    source = tmp_path / "mem0.json"
    source.write_text(json.dumps(MEM0_EXPORT))
    for attempt in range(2):
        status, out, err = await run(store, "import", "--from", "mem0", str(source), "--scope", "user:alex")
        assert status == 0, err
        assert ("2 new" if attempt == 0 else "0 new, 2 already there") in out
    by_content = {m["content"]: m for m in await listed(store, "--scope", "user:alex")}
    trip = by_content["User is planning a trip to Japan next spring"]
    assert trip["event_time"].startswith("2024-07-20T08:18:17")
    assert trip["metadata"]["mem0_id"] == "892db2ae-06d9-49e5-8b3e-585ef9b85b8e"
    assert trip["metadata"]["mem0_categories"] == ["travel"]
    assert by_content["Is allergic to peanuts"]["valid_from"].startswith("2024-03-02T09:00:00")


async def test_a_mem0_export_written_by_mem0_itself_imports_once(store: Store, tmp_path: Path) -> None:
    """``fixtures/mem0/get_all_ana.json``: Mem0 2.2.1's own get_all() answer (see the README beside it)."""
    source = FIXTURES / "mem0" / "get_all_ana.json"
    exported = json.loads(source.read_text())["results"]
    for attempt in range(2):
        status, out, err = await run(store, "import", "--from", "mem0", str(source), "--scope", "user:ana")
        assert status == 0, err
        assert ("3 new" if attempt == 0 else "0 new, 3 already there") in out
    by_content = {m["content"]: m for m in await listed(store, "--scope", "user:ana")}
    assert set(by_content) == {m["memory"] for m in exported}
    for original in exported:
        imported = by_content[original["memory"]]
        assert imported["metadata"]["mem0_id"] == original["id"]
        assert imported["event_time"][:19] == original["created_at"][:19]


BASIC_MEMORY_NOTE = """---
title: Coffee Brewing Methods
type: note
permalink: coffee-brewing-methods
created: 2024-05-01T10:00:00
tags:
- coffee
- brewing
---

# Coffee Brewing Methods

Pour-over gives the cleanest cup; see [[Grinding]] for the grind size.

## Observations
- [method] Pour over provides more clarity #brewing
- [preference] Ana likes a light roast

## Relations
- relates_to [[Coffee Bean Origins]]
- requires [[Grinding]]
"""
OBSIDIAN_NOTE = "Burr grinders give an even grind. Medium-fine for [[Coffee Brewing Methods|pour-over]].\n"


async def test_a_folder_of_markdown_notes_becomes_memories_entities_and_relations(
    store: Store, tmp_path: Path
) -> None:
    vault = tmp_path / "vault"
    (vault / "sub").mkdir(parents=True)
    (vault / ".obsidian").mkdir()
    (vault / "coffee-brewing-methods.md").write_text(BASIC_MEMORY_NOTE)
    (vault / "sub" / "Grinding.md").write_text(OBSIDIAN_NOTE)
    (vault / ".obsidian" / "workspace.md").write_text("not a note")
    status, out, err = await run(
        store, "import", "--from", "markdown", str(vault), "--scope", "project:coffee"
    )
    assert status == 0, err
    assert "imported 6 memories" in out
    memories = await listed(store, "--scope", "project:coffee")
    by_content = {m["content"]: m for m in memories}
    assert not any("not a note" in c for c in by_content)
    liked = by_content["Coffee Brewing Methods: Ana likes a light roast"]
    assert liked["kind"] == "preference"
    assert liked["event_time"].startswith("2024-05-01T10:00:00")
    assert liked["metadata"]["permalink"] == "coffee-brewing-methods"
    related = by_content["Coffee Brewing Methods relates to Coffee Bean Origins."]
    assert related["metadata"]["relation"] == "relates_to"
    body = next(m for m in memories if m["content"].startswith("# Coffee Brewing Methods"))
    assert "Pour-over gives the cleanest cup" in body["content"]
    assert "## Observations" in body["content"]
    grinding = next(m for m in memories if m["content"].startswith("Burr grinders"))
    status, out, _ = await run(store, "show", grinding["id"], "--json")
    assert json.loads(out)["relations"] == [
        {"subject": "Grinding", "predicate": "links_to", "object": "Coffee Brewing Methods"}
    ]
    status, out, _ = await run(store, "import", "--from", "markdown", str(vault), "--scope", "project:coffee")
    assert "0 new, 6 already there" in out


async def test_an_import_of_a_missing_or_wrong_file_says_what_to_give(store: Store, tmp_path: Path) -> None:
    status, _, err = await run(store, "import", "--from", "mem0", str(tmp_path / "nope.json"))
    assert status == 2
    assert "does not exist" in err
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"something": 1}')
    status, _, err = await run(store, "import", "--from", "mem0", str(wrong))
    assert status == 2
    assert "get_all()" in err


async def test_export_to_markdown_writes_one_private_file_per_memory(store: Store, tmp_path: Path) -> None:
    source = tmp_path / "mem0.json"
    source.write_text(json.dumps(MEM0_EXPORT))
    status, _, err = await run(store, "import", "--from", "mem0", str(source), "--scope", "user:alex")
    assert status == 0, err
    folder = tmp_path / "notes"
    status, out, err = await run(store, "export", "--format", "markdown", "-o", str(folder))
    assert status == 0, err
    assert "memories: 2" in out
    files = sorted(folder.glob("*.md"))
    assert len(files) == 2
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert {oct(f.stat().st_mode & 0o777) for f in files} == {"0o600"}
    by_id = {m["id"]: m for m in await listed(store)}
    for f in files:
        head, _, body = f.read_text().partition("\n---\n\n")
        meta = {k: json.loads(v) for k, v in (line.split(": ", 1) for line in head.splitlines()[1:])}
        memory = by_id[f.stem]
        assert meta["id"] == memory["id"]
        assert body == memory["content"] + "\n"
        assert (meta["event_time"], meta["scopes"], meta["metadata"]) == (
            memory["event_time"],
            ["user:alex"],
            memory["metadata"],
        )
    # Read back as a folder of notes, the front matter's keys survive as the importer's front matter.
    status, out, err = await run(store, "import", "--from", "markdown", str(folder), "--scope", "user:copy")
    assert status == 0, err
    assert "imported 2 memories" in out


async def test_import_says_where_its_scope_lives_and_which_clients_read_it(
    store: Store, tmp_path: Path
) -> None:
    """A new project scope is placed inside the personal scope, as `setup --project` places it; any other new
    scope is top-level, and the output says the personal clients do not read it and how to change that."""
    personal = "user:me"
    store_env = {**os.environ, **store.env(MNEMOGRAPH_DEFAULT_SCOPE=personal)}

    async def imp(*args: str) -> tuple[int, str, str]:
        argv = [MNEMOGRAPH, "import", *args, "--data-dir", str(store.data_dir)]
        done = await anyio.run_process(argv, env=store_env, check=False)
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "Grinding.md").write_text(OBSIDIAN_NOTE)
    status, out, err = await imp("--from", "markdown", str(notes), "--scope", "project:notes")
    assert status == 0, err
    assert f"project:notes is a new scope placed inside {personal}" in out
    assert "--project notes" in out
    status, out, err = await imp(
        "--from", "mem0", str(FIXTURES / "mem0" / "get_all_ana.json"), "--scope", "user:alex"
    )
    assert status == 0, err
    assert (
        f"note: user:alex is a new top-level scope, which your clients (default scope {personal}) do not"
        in out
    )
    assert f"mnemograph scope move user:alex --parent {personal}" in out
    # Lines of a jsonl file that name their own scope: the output names it, and says the clients miss it (before:
    # "into user:me", not a word of team:ops).
    lines = tmp_path / "mixed.jsonl"
    lines.write_text(
        json.dumps({"content": "The on-call rota changes on Mondays.", "scopes": ["team:ops"]})
        + "\n"
        + json.dumps({"content": "I take my coffee black."})
        + "\n"
    )
    status, out, err = await imp("--from", "jsonl", str(lines))
    assert status == 0, err
    assert f"imported 2 memories from {lines} (jsonl) into team:ops, {personal}:" in out
    assert f"note: team:ops is a new top-level scope, which your clients (default scope {personal})" in out
    status, out, err = await run(store, "scope", "list", "--json")
    parents = {s["id"]: s["parent"] for s in json.loads(out)}
    assert parents["project:notes"] == personal
    assert parents["user:alex"] is None
    # A client of that project (as `setup --project notes` configures it) recalls the notes.
    params = StdioServerParameters(
        command=MNEMOGRAPH,
        args=["serve", "--data-dir", str(store.data_dir)],
        env=store.env(MNEMOGRAPH_DEFAULT_SCOPE="project:notes"),
    )
    async with Client(params, mode="legacy") as client:
        found = await call(client, "recall", {"query": "burr grinders"})
        assert any("Burr grinders" in r["content"] for r in found["results"])


async def test_an_import_that_recognises_nothing_is_an_error(store: Store, tmp_path: Path) -> None:
    mcp_memory_file = tmp_path / "memory.jsonl"
    mcp_memory_file.write_text(
        '{"type":"entity","name":"Ana","entityType":"person","observations":["Likes tea"]}\n'
        '{"type":"relation","from":"Ana","to":"Lisbon","relationType":"lives_in"}\n'
    )
    async with Client(store.stdio(), mode="legacy") as client:
        await call(client, "memory_write", {"content": "Already here.", "scopes": ["user:ana"]})
    before = await listed(store, "--all")
    status, out, err = await run(
        store, "import", "--from", "mem0", str(mcp_memory_file), "--scope", "user:ana"
    )
    assert status == 2
    assert out == ""
    assert "found nothing to import" in err
    assert "--from mcp-memory" in err
    assert await listed(store, "--all") == before
