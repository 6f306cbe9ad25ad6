"""Settings that only the process owning the store applies: a client started with other ones is told so.

Two clients of one data directory share one owner, started by whichever came first with its environment. A
second client configured with, say, no transitive predicates or an Anthropic key was silently served by the
first one's settings; now its ``mnemograph serve`` says, on the stderr the client logs, which settings are not
in effect and how to apply them.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from mcp import Client, StdioServerParameters

from tests.e2e.conftest import MNEMOGRAPH, Store, call

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def serve_stderr(store: Store, **env: str) -> str:
    """What ``mnemograph serve`` (stdio) started with ``env`` tells its client's log before any MCP traffic."""
    done = subprocess.run(
        [MNEMOGRAPH, "serve", "--data-dir", str(store.data_dir)],
        input=b"",
        env=store.env(**env),
        capture_output=True,
        timeout=60,
    )
    return done.stderr.decode()


def status_json(store: Store) -> str:
    done = subprocess.run(
        [MNEMOGRAPH, "status", "--data-dir", str(store.data_dir), "--json"],
        env=store.env(),
        capture_output=True,
        timeout=60,
        check=True,
    )
    return done.stdout.decode()


async def test_a_client_with_other_owner_settings_is_told_which_are_not_in_effect(store: Store) -> None:
    first = StdioServerParameters(
        command=MNEMOGRAPH,
        args=["serve", "--data-dir", str(store.data_dir)],
        env=store.env(
            MNEMOGRAPH_TRANSITIVE_PREDICATES="none", MNEMOGRAPH_ANTHROPIC_API_KEY="sk-ant-not-a-key"
        ),
    )
    async with Client(first, mode="legacy") as client:
        await call(client, "list_scopes", {})  # starts the owner with the first client's settings
        owner = store.owner_pid()
        other = serve_stderr(store)
        assert "was started with other settings" in other
        assert "MNEMOGRAPH_TRANSITIVE_PREDICATES is none there (this client: the default)" in other
        assert "MNEMOGRAPH_ANTHROPIC_API_KEY is set there (this client: unset)" in other
        assert "sk-ant-not-a-key" not in other  # a secret is only ever said to be set
        assert f"mnemograph stop --data-dir {store.data_dir}" in other
        assert "MNEMOGRAPH_EMBEDDER" not in other  # only what differs
        same = serve_stderr(
            store, MNEMOGRAPH_TRANSITIVE_PREDICATES="none", MNEMOGRAPH_ANTHROPIC_API_KEY="sk-ant-another-key"
        )
        assert "other settings" not in same
        assert store.owner_pid() == owner  # telling changes nothing
        # and `mnemograph status` shows what the running owner applies
        shown = status_json(store)
        (status,) = json.loads(shown)
        assert status["settings"]["MNEMOGRAPH_TRANSITIVE_PREDICATES"] == "none"
        assert status["settings"]["MNEMOGRAPH_ANTHROPIC_API_KEY"] == "set"
        assert "sk-ant-not-a-key" not in shown
