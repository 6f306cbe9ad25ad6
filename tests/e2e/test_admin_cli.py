"""``mnemograph erase``, ``export``, ``import`` and ``backup`` from the command line, through a running owner
(which holds the store) and without one."""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.conftest import files_containing
from tests.e2e.conftest import MNEMOGRAPH, Store, call

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await anyio.run_process([MNEMOGRAPH, *args], check=False)


async def test_erase_export_import_backup_while_an_owner_serves(store: Store, tmp_path: Path) -> None:
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    data = str(store.data_dir)
    async with Client(store.stdio(), mode="legacy") as client:
        secret = await call(
            client, "memory_write", {"content": f"Door code {canary}.", "scopes": ["user:cli"]}
        )
        for n in range(4):
            await call(
                client,
                "memory_write",
                {"content": f"Shelf {n} holds the blue boxes.", "scopes": ["user:cli"]},
            )
        owner = store.owner_pid()

        refused = await _cli("erase", secret["id"], "--confirm", "nope", "--data-dir", data)
        assert refused.returncode == 2
        assert b"confirm must equal" in refused.stderr
        erased = await _cli(
            "erase", secret["id"][:8], "--confirm", secret["id"], "--json", "--data-dir", data
        )
        assert erased.returncode == 0, erased.stderr
        assert json.loads(erased.stdout)["erased"] == [secret["id"]]
        assert files_containing(store.data_dir, canary.encode()) == []

        exported = await _cli("export", "--vectors", "--data-dir", data)
        assert exported.returncode == 0, exported.stderr
        lines = [json.loads(x) for x in exported.stdout.decode().splitlines()]
        assert sum(x["type"] == "memory" for x in lines) == 4
        (tmp_path / "dump.jsonl").write_bytes(exported.stdout)

        backup = await _cli("backup", str(tmp_path / "snap"), "--data-dir", data)
        assert backup.returncode == 0, backup.stderr
        assert store.owner_pid() == owner  # all of it went through the running owner
        found = await call(client, "recall", {"query": "blue boxes", "scopes": ["user:cli"]})
        assert len(found["results"]) == 4

    # The backup opens as a data directory and verifies; the import recalls what the original recalls.
    verify = await _cli("verify", "--json", "--data-dir", str(tmp_path / "snap"))
    assert verify.returncode == 0, verify.stderr
    assert json.loads(verify.stdout)["counts"]["kuzu"] == 4
    imported = await _cli("import", str(tmp_path / "dump.jsonl"), "--data-dir", str(tmp_path / "restored"))
    assert imported.returncode == 0, imported.stderr
    assert b"imported 4 memories" in imported.stdout
    again = await _cli("import", str(tmp_path / "dump.jsonl"), "--data-dir", str(tmp_path / "restored"))
    assert again.returncode == 2
    assert b"not an empty directory" in again.stderr
    # The owner may already have left on its idle timeout (30 s in tests) on a loaded machine.
    if store.owner_pid() is not None:
        store.kill_owner(signal.SIGTERM)
    verify = await _cli("verify", "--json", "--data-dir", str(tmp_path / "restored"))
    assert json.loads(verify.stdout)["ok"] is True
