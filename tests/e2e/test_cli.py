"""``mnemograph verify`` and ``reindex``: the same answer with or without an owner serving the directory."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import threading

import anyio
import pytest
from mcp import Client

from storage import CachedEmbedder, Engine
from tests.e2e.conftest import MNEMOGRAPH, Store, call

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def _cli(store: Store, *args: str) -> subprocess.CompletedProcess[bytes]:
    return await anyio.run_process([MNEMOGRAPH, *args, "--data-dir", str(store.data_dir)], check=False)


async def test_verify_and_reindex_through_a_running_owner_and_without_one(store: Store) -> None:
    async with Client(store.stdio(), mode="legacy") as client:
        for n in range(3):
            await call(client, "memory_write", {"content": f"CLI fact number {n}.", "scopes": ["user:cli"]})
        owner = store.owner_pid()
        # With the owner running, the CLI cannot open the store itself: it goes through the owner.
        verify = await _cli(store, "verify", "--json")
        assert verify.returncode == 0, verify.stderr
        report = json.loads(verify.stdout)
        assert (report["ok"], report["counts"]) == (True, {"kuzu": 3, "lancedb": 3, "tantivy": 3})
        reindex = await _cli(store, "reindex")
        assert reindex.returncode == 0, reindex.stderr
        assert store.owner_pid() == owner
        found = await call(client, "recall", {"query": "CLI fact number 2", "scopes": ["user:cli"]})
        assert found["results"], "recall works after a reindex through the owner"
    store.kill_owner(signal.SIGTERM)

    # Without an owner, the CLI opens the store directly.
    verify = await _cli(store, "verify")
    assert verify.returncode == 0, verify.stderr
    lines = verify.stdout.decode().splitlines()
    assert lines[0].split() == ["store", "memories", "watermark"]
    assert any(line.split()[:2] == ["kuzu", "3"] for line in lines)
    assert lines[-1] == "ok"
    assert (await _cli(store, "reindex")).returncode == 0
    assert store.owner_pid() is None


async def test_bad_settings_exit_with_status_2(store: Store) -> None:
    done = await anyio.run_process(
        [MNEMOGRAPH, "verify", "--data-dir", str(store.data_dir)],
        env={"MNEMOGRAPH_LOG_LEVEL": "LOUD", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 2
    assert b"MNEMOGRAPH_LOG_LEVEL must be one of" in done.stderr


async def test_a_second_owner_for_a_served_directory_steps_aside(store: Store) -> None:
    async with Client(store.stdio(), mode="legacy") as client:
        await client.list_tools()
        owner = store.owner_pid()
        done = await _cli(store, "daemon")
        assert done.returncode == 0
        assert b"another process owns" in done.stderr
        assert store.owner_pid() == owner


async def test_scope_commands_with_and_without_a_running_owner(store: Store) -> None:
    created = await _cli(store, "scope", "create", "project:site", "--parent", "user:ana", "--json")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout) == [{"id": "project:site", "parent": "user:ana", "memories": 0}]
    async with Client(store.stdio(), mode="legacy") as client:
        await call(client, "memory_write", {"content": "Ana's site uses Hugo.", "scopes": ["project:site"]})
        moved = await _cli(store, "scope", "move", "project:site", "--parent", "team:web")
        assert moved.returncode == 0, moved.stderr
        listing = await _cli(store, "scope", "list", "team:web")
        assert listing.stdout.decode().split() == [
            "project:site", "1", "memories", "(inside", "team:web)", "team:web", "0", "memories",
        ]  # fmt: skip
        scopes = {s["id"]: s["parent"] for s in (await call(client, "list_scopes", {}))["scopes"]}
        assert scopes["project:site"] == "team:web"
        cycle = await _cli(store, "scope", "move", "team:web", "--parent", "project:site")
        assert cycle.returncode == 2
        assert b"its own ancestor" in cycle.stderr
    store.kill_owner(signal.SIGTERM)
    missing = await _cli(store, "scope", "move", "project:nope")
    assert missing.returncode == 2
    assert b"no scope project:nope" in missing.stderr
    top = await _cli(store, "scope", "move", "project:site", "--json")
    assert json.loads(top.stdout)[0]["parent"] is None


def _filled(store: Store, embedder: CachedEmbedder) -> None:
    with Engine.open(store.data_dir, embedder=embedder, warm=False) as engine:
        for n in range(4):
            engine.write(f"Locker {n} holds the blue helmets.", ["user:cli"])


async def test_verify_on_a_store_whose_indexes_were_damaged_rebuilds_them_and_says_ok(
    store: Store, embedder: CachedEmbedder
) -> None:
    """What a data directory removed under a running owner can leave behind: a vector table without its versions
    and a text watermark that is not a number. The open behind ``verify`` rebuilds both (it failed with
    "Table 'memories' was not found", naming no way out)."""
    _filled(store, embedder)
    shutil.rmtree(next((store.data_dir / "vectors").glob("*.lance")) / "_versions")
    (store.data_dir / "text" / "WATERMARK").write_bytes(b"")
    verify = await _cli(store, "verify")
    assert verify.returncode == 0, verify.stderr
    lines = verify.stdout.decode().splitlines()
    assert [line.split()[:2] for line in lines[1:4]] == [["kuzu", "4"], ["lancedb", "4"], ["tantivy", "4"]]
    assert lines[-1] == "ok"


async def test_an_index_path_taken_by_a_file_is_made_anew_and_reindex_works_without_a_server(
    store: Store, embedder: CachedEmbedder
) -> None:
    """Nothing the adapters can set aside: the vector index's path is a file (on main: a FileExistsError
    traceback, exit 1). The open deletes the indexes and rebuilds them; ``reindex`` without a server, which
    deletes them first, repairs a store just as well."""
    _filled(store, embedder)
    shutil.rmtree(store.data_dir / "vectors")
    (store.data_dir / "vectors").write_bytes(b"not a directory")
    verify = await _cli(store, "verify", "--json")
    assert verify.returncode == 0, verify.stderr
    assert json.loads(verify.stdout)["counts"] == {"kuzu": 4, "lancedb": 4, "tantivy": 4}
    (store.data_dir / "text" / "WATERMARK").write_text("12345")  # ahead of the canonical store
    reindex = await _cli(store, "reindex")
    assert reindex.returncode == 0, reindex.stderr
    assert reindex.stdout.decode().splitlines()[-1] == "ok"
    assert (store.data_dir / "text" / "WATERMARK").read_text() == "4"


async def test_an_owner_that_stops_mid_answer_is_explained_not_a_json_error(
    store: Store, embedder: CachedEmbedder
) -> None:
    """The owner went away while it answered (its data directory removed under it, a crash): the CLI read an
    empty body and printed 'Expecting value: line 1 column 1 (char 0)'."""
    _filled(store, embedder)
    store.paths.ensure()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(store.paths.http_socket))
    listener.listen(1)
    listener.settimeout(60)  # the thread ends even if the CLI never connects

    def owner_that_dies() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)  # the request
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n")
        conn.close()

    serving = threading.Thread(target=owner_that_dies)
    serving.start()
    try:
        verify = await _cli(store, "verify")
    finally:
        serving.join(timeout=30)
        listener.close()
        store.paths.http_socket.unlink()
    assert verify.returncode == 2
    said = verify.stderr.decode()
    assert "Expecting value" not in said
    assert "stopped or failed before it answered /-/verify" in said
    assert str(store.paths.log_file) in said
    assert "mnemograph reindex --data-dir" in said
