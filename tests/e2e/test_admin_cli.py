"""``mnemograph erase``, ``export``, ``import`` and ``backup`` from the command line, through a running owner
(which holds the store) and without one."""

from __future__ import annotations

import json
import os
import pty
import shlex
import signal
import subprocess
import threading
import uuid
from pathlib import Path

import anyio
import pytest
from mcp import Client

from storage import Engine, content_id
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
        full = content_id(f"Door code {canary}.")  # the receipt's id is short; erase confirms the full one
        assert full.startswith(secret["id"])
        erased = await _cli("erase", secret["id"][:8], "--confirm", full, "--json", "--data-dir", data)
        assert erased.returncode == 0, erased.stderr
        assert json.loads(erased.stdout)["erased"] == [full]
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
    # Importing again merges: nothing is added, every memory is reported as already there.
    again = await _cli("import", str(tmp_path / "dump.jsonl"), "--data-dir", str(tmp_path / "restored"))
    assert again.returncode == 0, again.stderr
    assert b"imported 4 memories" in again.stdout
    assert b": 0 new, 4 already there" in again.stdout
    # The owner may already have left on its idle timeout (30 s in tests) on a loaded machine.
    if store.owner_pid() is not None:
        store.kill_owner(signal.SIGTERM)
    verify = await _cli("verify", "--json", "--data-dir", str(tmp_path / "restored"))
    assert json.loads(verify.stdout)["ok"] is True
    assert json.loads(verify.stdout)["counts"]["kuzu"] == 4


def _run_on_terminal(*args: str) -> tuple[int, bytes, bytes]:
    """Run the CLI with stderr on a pseudo-terminal (stdout piped): its exit code, stdout and terminal bytes."""
    main, side = pty.openpty()
    proc = subprocess.Popen([MNEMOGRAPH, *args], stdout=subprocess.PIPE, stderr=side)
    os.close(side)
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # EIO once the process closed its end
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    out, _ = proc.communicate()
    reader.join()
    os.close(main)
    return proc.returncode, out, b"".join(chunks)


def test_progress_bar_on_a_terminal_and_none_when_piped(engine: Engine, tmp_path: Path) -> None:
    for n in range(5):
        engine.write(f"Crate {n} sits on the north wall.", ["user:cli"])
    dump = tmp_path / "dump.jsonl"
    with dump.open("w", encoding="utf-8") as out:
        engine.export(out)

    # On a terminal: an import into a new directory draws a bar up to 100%, then the result on stdout.
    code, out, terminal = _run_on_terminal("import", str(dump), "--data-dir", str(tmp_path / "tty"))
    assert code == 0, terminal
    assert b"imported 5 memories" in out
    assert b"\rmnemograph import: writing [" + b"#" * 30 + b"] 5/5 100%" in terminal
    # Merging into it (the work runs in the store's process) and exporting show their progress line too.
    code, out, terminal = _run_on_terminal("import", str(dump), "--data-dir", str(tmp_path / "tty"))
    assert code == 0, terminal
    assert b": 0 new, 5 already there" in out
    assert b"\rmnemograph import: " in terminal
    code, out, terminal = _run_on_terminal(
        "export", "-o", str(tmp_path / "again.jsonl"), "--data-dir", str(tmp_path / "tty")
    )
    assert code == 0, terminal
    assert b"\rmnemograph export: " in terminal

    # Piped: the same commands write no bar bytes at all.
    for args in (
        ["import", str(dump), "--data-dir", str(tmp_path / "piped")],
        ["import", str(dump), "--data-dir", str(tmp_path / "piped")],
        ["export", "-o", str(tmp_path / "piped.jsonl"), "--data-dir", str(tmp_path / "piped")],
    ):
        piped = subprocess.run([MNEMOGRAPH, *args], capture_output=True, check=False)
        assert piped.returncode == 0, piped.stderr
        assert b"\r" not in piped.stderr
        assert b"\r" not in piped.stdout
        assert b"[#" not in piped.stderr
    assert (tmp_path / "piped.jsonl").read_text().count('"type": "memory"') == 5


async def test_entities_lists_accepts_and_undoes_proposals_through_a_running_owner(store: Store) -> None:
    """Issue 15: ``mnemograph entities`` decides the SAME_AS proposals a client's writes raised, through the
    owner that holds the store; what it decides is what the client's recall sees."""
    data = str(store.data_dir)
    async with Client(store.stdio(), mode="legacy") as client:
        lunch = await call(
            client, "memory_write", {"content": "I had lunch with John Smith.", "scopes": ["user:cli"]}
        )
        sent = await call(
            client,
            "memory_write",
            {"content": "Yesterday Jon Smith sent the contract.", "scopes": ["user:cli"]},
        )
        [pid] = sent["proposals"]

        listed = await _cli("entities", "list", "--data-dir", data)
        assert listed.returncode == 0, listed.stderr
        assert f"{pid}  pending   'Jon Smith' same as 'John Smith'" in listed.stdout.decode()
        bad = await _cli("entities", "accept", "ffffffffffff", "--data-dir", data)
        assert bad.returncode == 2
        assert b"no proposal with id ffffffffffff" in bad.stderr
        assert b"`mnemograph entities list --status all`" in bad.stderr  # attack9 F5: the CLI's own command

        accepted = await _cli("entities", "accept", pid, "--json", "--data-dir", data)
        assert accepted.returncode == 0, accepted.stderr
        assert json.loads(accepted.stdout)["proposals"][0]["status"] == "accepted"
        found = await call(
            client, "recall", {"query": "lunch with Jon Smith", "scopes": ["user:cli"], "explain": True}
        )
        assert (
            "graph"
            in next(r for r in found["results"] if r["id"].startswith(lunch["id"]))["explain"]["lanes"]
        )

        undone = await _cli("entities", "undo", pid, "--data-dir", data)
        assert undone.returncode == 0, undone.stderr
        assert "pending" in undone.stdout.decode()
        found = await call(
            client, "recall", {"query": "lunch with Jon Smith", "scopes": ["user:cli"], "explain": True}
        )
        assert all(
            "graph" not in r["explain"]["lanes"] for r in found["results"] if r["id"].startswith(lunch["id"])
        )

        # attack9 F4: the listing pages; the CLI prints the command for the next page, refuses bad arguments.
        await call(
            client,
            "memory_write",
            {"content": "Katherine Johnson leads the budget review.", "scopes": ["user:cli"]},
        )
        johnston = await call(
            client,
            "memory_write",
            {"content": "Katherine Johnston runs the warehouse.", "scopes": ["user:cli"]},
        )
        [second] = johnston["proposals"]
        first = await _cli("entities", "list", "--limit", "1", "--data-dir", data)
        assert first.returncode == 0, first.stderr
        lines = first.stdout.decode().splitlines()
        assert lines[0].startswith(f"{pid}  pending")
        # The printed command runs as printed: it names the --data-dir it was given.
        assert lines[1].startswith(
            f"more: mnemograph entities list --data-dir {data} --status pending --limit 1 --cursor "
        )
        rest = await _cli(*shlex.split(lines[1])[2:])
        assert rest.returncode == 0, rest.stderr
        assert rest.stdout.decode().splitlines() == [
            f"{second}  pending   'Katherine Johnston' same as 'Katherine Johnson'  (fuzzy, 0.94; memory "
            f"{johnston['id'][:12]})"
        ]
        for bad, says in (
            (["--limit", "0"], b"out of range: use 1 to 200"),
            (["--limit", "ten"], b"not a whole number"),
            (["--cursor", "bm9wZQ=="], b"list again without a cursor"),
        ):
            refused = await _cli("entities", "list", *bad, "--data-dir", data)
            assert refused.returncode == 2
            assert says in refused.stderr, refused.stderr


async def test_export_and_import_carry_entity_proposals_and_their_decisions(
    store: Store, tmp_path: Path
) -> None:
    data = str(store.data_dir)
    async with Client(store.stdio(), mode="legacy") as client:
        await call(
            client, "memory_write", {"content": "I had lunch with John Smith.", "scopes": ["user:cli"]}
        )
        sent = await call(
            client,
            "memory_write",
            {"content": "Yesterday Jon Smith sent the contract.", "scopes": ["user:cli"]},
        )
        [accepted] = sent["proposals"]
        await call(
            client, "memory_write", {"content": "Katherine Johnson leads the review.", "scopes": ["user:cli"]}
        )
        other = await call(
            client,
            "memory_write",
            {"content": "Katherine Johnston runs the warehouse.", "scopes": ["user:cli"]},
        )
        [rejected] = other["proposals"]
        await call(client, "entities", {"action": "accept", "id": accepted})
        await call(client, "entities", {"action": "reject", "id": rejected})
        exported = await _cli("export", "-o", str(tmp_path / "dump.jsonl"), "--data-dir", data)
        assert exported.returncode == 0, exported.stderr
        before = await _cli("entities", "list", "--status", "all", "--json", "--data-dir", data)
    if store.owner_pid() is not None:
        store.kill_owner(signal.SIGTERM)
    restored = str(tmp_path / "restored")
    imported = await _cli("import", str(tmp_path / "dump.jsonl"), "--data-dir", restored)
    assert imported.returncode == 0, imported.stderr
    after = await _cli("entities", "list", "--status", "all", "--json", "--data-dir", restored)
    assert after.returncode == 0, after.stderr

    def decided(out: bytes) -> dict[str, tuple[str, str, str, str]]:
        return {
            p["id"][:12]: (p["a"], p["b"], p["status"], p["decided_by"]) for p in json.loads(out)["proposals"]
        }

    assert decided(after.stdout) == decided(before.stdout)
    assert {k: v[2] for k, v in decided(after.stdout).items()} == {accepted: "accepted", rejected: "rejected"}


async def test_a_merge_refuses_a_file_that_gives_a_stored_id_other_words(
    store: Store, tmp_path: Path
) -> None:
    """attack12: a file naming the id of a memory the store holds (ids are content hashes: anyone who knows the
    words computes it) with other words was merged: that memory was skipped as "already there", but the file's
    CONTRADICTS link was attached to it, so a hostile file planted its text beside any memory. Refused, naming
    the line, and nothing of the file is written."""
    canary = f"PLANTED{uuid.uuid4().hex.upper()}"
    data = str(store.data_dir)
    async with Client(store.stdio(), mode="legacy") as client:
        await call(client, "memory_write", {"content": "Ana likes tea.", "scopes": ["user:cli"]})
    store.stop_owner()
    exported = await _cli("export", "--data-dir", data)
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(x) for x in exported.stdout.decode().splitlines()]
    mine = next(x for x in lines if x["type"] == "memory")
    planted = dict(
        mine, id=content_id(f"{canary} says Ana hates tea."), content=f"{canary} says Ana hates tea."
    )
    hostile = [
        *(x for x in lines if x["type"] in ("header", "scope", "entity")),  # what the memory mentions
        dict(mine, content="Ana likes coffee."),  # the stored id, other words
        planted,
        {
            "type": "contradicts",
            "new": planted["id"],
            "old": mine["id"],
            "predicate": "likes",
            "at": mine["recorded_at"],
        },
    ]
    (tmp_path / "hostile.jsonl").write_text("".join(json.dumps(x) + "\n" for x in hostile))
    refused = await _cli("import", str(tmp_path / "hostile.jsonl"), "--data-dir", data)
    assert refused.returncode == 2
    n = next(i for i, x in enumerate(hostile, 1) if x.get("content") == "Ana likes coffee.")
    assert f"line {n}: memory {mine['id']} has other words".encode() in refused.stderr
    assert b"nothing was imported" in refused.stderr
    store.stop_owner()
    assert files_containing(store.data_dir, canary.encode()) == []
    with Engine.open(store.data_dir, warm=False) as engine:
        assert engine.read(mine["id"]).contradicts == ()
        assert [h.memory.id for h in engine.recall("Ana tea", ["user:cli"])] == [mine["id"]]
