"""Settings that only the process owning the store applies: a client started with other ones is told so.

Two clients of one data directory share one owner, started by whichever came first with its environment. A
second client configured with, say, no transitive predicates or an Anthropic key was silently served by the
first one's settings; now its ``mnemograph serve`` says, on the stderr the client logs, which settings are not
in effect and how to apply them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.e2e.conftest import MNEMOGRAPH, Store, _store, call

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


def as_a_shell_runs(command: str, env: dict[str, str]) -> str:
    """What ``command``, pasted into a shell, prints (stdout and stderr); fails the test unless it succeeds."""
    done = subprocess.run(["sh", "-c", command], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode() + done.stderr.decode()


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


async def test_the_stop_command_a_client_is_told_runs_as_printed_on_a_path_with_spaces_and_quotes(
    tmp_path: Path,
) -> None:
    """Found attacking session 19's note: it printed `mnemograph stop --data-dir /home/me/my data's dir`, which a
    person who pastes it into a shell runs as three arguments and an open quote. Printed shell-quoted, it stops
    the owner of that store (as the note that another store is served did too)."""
    for store in _store(tmp_path / "my data's dir"):
        first = StdioServerParameters(
            command=MNEMOGRAPH,
            args=["serve", "--data-dir", str(store.data_dir)],
            env=store.env(MNEMOGRAPH_DIGESTS="off"),
        )
        async with Client(first, mode="legacy") as client:
            await call(client, "list_scopes", {})
        owner = store.owner_pid()
        assert owner is not None
        told = serve_stderr(store)
        assert "MNEMOGRAPH_DIGESTS is off there (this client: on)" in told
        (command,) = re.findall(r"\(`(mnemograph stop [^`]*)`\)", told)
        env = {**store.env(), "PATH": f"{Path(MNEMOGRAPH).parent}:{os.environ['PATH']}"}
        said = as_a_shell_runs(command, env)
        assert f"stopped the server of {store.data_dir} (pid {owner})" in said
