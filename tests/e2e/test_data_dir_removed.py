"""A person removes the data directory to start afresh while the server idles (it stays up 10 minutes after the
last client leaves). Found by a newcomer: the owner went on writing into files no longer there, re-created part
of the directory, and every later call failed, also after `mnemograph stop` (the next owner took the
leftovers for a damaged store). Now the owner notices within a second and stops without writing; the next
call starts a fresh store at the path."""

from __future__ import annotations

import shutil
import subprocess

import anyio
import pytest
from mcp import Client

from tests.e2e.conftest import MNEMOGRAPH, Store, await_for, call

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def verify(store: Store) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MNEMOGRAPH, "verify", "--data-dir", str(store.data_dir)],
        env=store.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_removing_the_data_directory_under_an_idle_owner_starts_afresh(store: Store) -> None:
    async with Client(store.stdio(), mode="legacy") as client:
        await call(client, "memory_write", {"content": "The staging password is larch-ferry-42."})
        await call(client, "recall", {"query": "staging password"})  # the indexes hold the write
        owner = store.owner_pid()
        assert owner is not None
    await anyio.sleep(2)  # the owner idles: no client attached, its indexes' merges done
    shutil.rmtree(store.data_dir)
    await await_for(lambda: store.owner_pid() != owner, within=10, what="the owner to stop")
    assert not store.data_dir.exists()  # nothing re-created by the old owner
    async with Client(store.stdio(), mode="legacy") as client:
        written = await call(client, "memory_write", {"content": "Ana prefers green tea."})
        assert written["status"] == "added"
        found = await call(client, "recall", {"query": "password or tea"})
        assert [r["content"] for r in found["results"]] == ["Ana prefers green tea."]
    checked = verify(store)
    assert checked.returncode == 0, checked.stdout + checked.stderr
