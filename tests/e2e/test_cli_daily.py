"""The command line a person meets: what `serve` says, `status` and `stop`, a mistyped --data-dir, argument
errors, and looking at memory (`list`, `show`, `search`, `forget`) with or without a server running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.e2e.conftest import MNEMOGRAPH, Store, _alive, await_for, call, free_port, wait_for
from tools._wire import short_id

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def run(store: Store, *args: str) -> tuple[int, str, str]:
    done = await anyio.run_process([MNEMOGRAPH, *args], env={**os.environ, **store.env()}, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _d(store: Store) -> tuple[str, str]:
    return ("--data-dir", str(store.data_dir))


async def test_list_show_search_forget_through_the_owner_and_without_one(store: Store) -> None:
    async with Client(store.stdio(), mode="legacy") as client:
        first = await call(
            client, "memory_write", {"content": "Ana's dentist is Dr. Okafor.", "scopes": ["user:ana"]}
        )
        second = await call(
            client,
            "memory_write",
            {"content": "The website launch was on 3 March.", "scopes": ["project:site"], "kind": "event"},
        )
        third = await call(client, "memory_write", {"content": "Ana lives in Porto.", "scopes": ["user:ana"]})
        moved = await call(client, "amend", {"id": third["id"], "content": "Ana lives in Lisbon since May."})

        # Newest first, paged; by scope and kind.
        status, out, err = await run(store, "list", "--json", "--limit", "2", *_d(store))
        assert status == 0, err
        page = json.loads(out)
        assert [short_id(m["id"]) for m in page["memories"]] == [moved["id"], second["id"]]
        assert (page["total"], page["next_offset"]) == (3, 2)
        status, out, _ = await run(store, "list", "--json", "--limit", "2", "--page", "2", *_d(store))
        assert [short_id(m["id"]) for m in json.loads(out)["memories"]] == [first["id"]]
        status, out, _ = await run(store, "list", "--json", "--kind", "event", *_d(store))
        assert [short_id(m["id"]) for m in json.loads(out)["memories"]] == [second["id"]]
        status, out, _ = await run(
            store, *_d(store), "list", "--scope", "user:ana"
        )  # --data-dir first works too
        assert status == 0
        assert out.splitlines()[-1] == "1-2 of 2, newest first"
        assert "Lisbon" in out
        assert "Porto" not in out

        # One memory: its version chain and provenance.
        status, out, err = await run(store, "show", moved["id"][:10], *_d(store))
        assert status == 0, err
        assert out.splitlines()[0].startswith(moved["id"])
        assert "written by local via" in out
        assert "versions (oldest first):" in out
        assert third["id"][:12] in out
        status, out, _ = await run(store, "show", moved["id"], "--json", *_d(store))
        shown = json.loads(out)
        assert [short_id(v["id"]) for v in shown["versions"]] == [third["id"], moved["id"]]

        # Search explains itself.
        status, out, _ = await run(store, "search", "who", "is", "Ana's", "dentist", "--json", *_d(store))
        results = json.loads(out)["results"]
        assert short_id(results[0]["id"]) == first["id"]  # the CLI shows full ids, the tools 12 characters
        assert results[0]["lanes"]
        status, out, _ = await run(store, "search", "dentist", *_d(store))
        assert "found by" in out

        # Forget retires: recall in the running session no longer returns it.
        status, out, err = await run(store, "forget", first["id"], "--reason", "asked to", *_d(store))
        assert status == 0, err
        assert "retired" in out
        found = await call(client, "recall", {"query": "Ana's dentist", "scopes": ["user:ana"]})
        assert first["id"] not in [h["id"] for h in found["results"]]
    store.kill_owner(signal.SIGTERM)

    # No owner: the CLI opens the store itself, sees the same, and leaves no owner behind.
    status, out, err = await run(store, "list", "--json", *_d(store))
    assert status == 0, err
    assert [short_id(m["id"]) for m in json.loads(out)["memories"]] == [moved["id"], second["id"]]
    status, out, _ = await run(store, "list", "--json", "--all", *_d(store))
    assert {short_id(m["id"]) for m in json.loads(out)["memories"]} == {
        first["id"],
        second["id"],
        third["id"],
        moved["id"],
    }
    status, _, err = await run(store, "show", "0" * 32, *_d(store))
    assert status == 2
    assert "no memory" in err
    # In a terminal the way on is a command, not an MCP tool.
    assert "call recall" not in err
    assert "run `mnemograph search` to find it" in err
    status, _, err = await run(store, "list", "--scope", "user:nobody", *_d(store))
    assert status == 2
    assert "list_scopes" not in err
    assert "`mnemograph scope list`" in err
    assert store.owner_pid() is None


async def test_status_lists_a_running_owner_and_stop_stops_it(store: Store) -> None:
    async with Client(store.stdio(), mode="legacy") as client:
        await call(client, "memory_write", {"content": "Status check memory.", "scopes": ["user:st"]})
        pid = store.owner_pid()
        assert pid is not None
        status, out, _ = await run(store, "status", "--json")
        assert status == 0
        mine = [o for o in json.loads(out) if o["data_dir"] == str(store.data_dir)]
        assert len(mine) == 1
        assert mine[0]["pid"] == pid
        assert mine[0]["clients"] >= 1
        status, out, _ = await run(store, "status")
        assert str(store.data_dir) in out
        assert "client(s) attached" in out
    status, _, err = await run(store, "stop", *_d(store))
    assert status == 0, err
    assert f"pid {pid}" in err
    assert not _alive(pid), "stop returns once the owner has exited"
    status, out, _ = await run(store, "status", "--json")
    assert str(store.data_dir) not in [o["data_dir"] for o in json.loads(out)]
    status, _, err = await run(store, "stop", *_d(store))
    assert status == 1
    assert "no server is running" in err
    # It stopped cleanly: the stores agree.
    status, out, _ = await run(store, "verify", *_d(store))
    assert out.splitlines()[-1] == "ok"


@pytest.mark.parametrize(
    "argv",
    [
        ["verify"],
        ["reindex"],
        ["list"],
        ["show", "abcdef012345"],
        ["search", "anything"],
        ["forget", "abcdef012345"],
        ["export"],
        ["backup", "/tmp/never-made-by-mnemograph-tests"],
        ["scope", "list"],
        ["token", "list"],
        ["erase", "abcdef012345", "--confirm", "abcdef012345"],
    ],
)
async def test_a_mistyped_data_dir_is_an_error_and_creates_nothing(store: Store, argv: list[str]) -> None:
    typo = store.data_dir.parent / "dta"
    status, out, err = await run(store, *argv, "--data-dir", str(typo))
    assert status == 2
    assert f"no Mnemograph store at {typo}" in err
    assert "typo" in err
    assert out == ""
    assert not typo.exists()


async def test_argument_errors_are_sentences(store: Store) -> None:
    cases = {
        ("verfy",): "'verfy' is not a command; choose one of",
        ("erase",): "ID and --confirm are missing",
        ("serve", "--port", "eighty"): "--port needs a port number from 0 to 65535, not 'eighty'",
        ("verify", "--bogus"): "`mnemograph verify` does not take --bogus",
        ("setup", "emacs"): "'emacs' is not a value for client",
        ("list", "--page", "0"): "--page needs a whole number from 1, not '0'",
    }
    for argv, sentence in cases.items():
        status, _, err = await run(store, *argv)
        assert status == 2, argv
        assert sentence in err, err
        assert "usage:" not in err
        assert "Run `mnemograph" in err
    status, out, _ = await run(store, "--version")
    assert status == 0
    assert out.startswith("mnemograph ")


def test_serve_over_http_says_what_it_serves(store: Store) -> None:
    port = free_port()
    process = subprocess.Popen(
        [MNEMOGRAPH, "serve", "--transport", "http", "--port", str(port), "--data-dir", str(store.data_dir)],
        env={**os.environ, **store.env()},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        banner = "".join(process.stderr.readline() for _ in range(6))
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
    assert f"data {store.data_dir}" in banner
    assert f"MCP over streamable HTTP at http://127.0.0.1:{port}/mcp" in banner
    assert "auth: bearer token required" in banner
    assert f"log: {store.paths.log_file}" in banner
    assert Path(store.paths.log_file).parent == store.paths.root


def _owner_status(store: Store) -> dict[str, object] | None:
    """This store's entry in `mnemograph status --json`, or None when no server runs it."""
    done = subprocess.run(
        [MNEMOGRAPH, "status", "--json"], env={**os.environ, **store.env()}, capture_output=True, check=True
    )
    mine = [o for o in json.loads(done.stdout) if o["data_dir"] == str(store.data_dir)]
    assert len(mine) <= 1, done.stdout
    return mine[0] if mine else None


def _clients(store: Store) -> object:
    found = _owner_status(store)
    return found["clients"] if found else None


async def test_status_counts_only_real_clients(store: Store) -> None:
    """An idle owner shows 0 clients: `status`'s own probe is not one."""
    async with Client(store.stdio(), mode="legacy") as client:
        await call(client, "memory_write", {"content": "Counting clients.", "scopes": ["user:st"]})
        attached = _owner_status(store)
        assert attached is not None
        assert (attached["clients"], attached["sessions"]) == (1, 1)
        _, out, _ = await run(store, "status")
        assert "1 client(s) attached" in out
        assert "1 stdio session(s)" in out
    # The session ends as the client exits; the owner stays up (idle timeout) with nobody attached.
    await await_for(lambda: _clients(store) == 0, within=30, what="the session to end")
    _, out, _ = await run(store, "status")
    assert "0 client(s) attached" in out


def test_status_names_the_http_front_and_stop_stops_it_for_good(store: Store) -> None:
    """A front restarts its owner at once, so `stop` alone could not stop the server: status names the front
    (pid, URL), and stop stops it first; afterwards no owner comes back."""
    port = free_port()
    front = subprocess.Popen(
        [MNEMOGRAPH, "serve", "--transport", "http", "--port", str(port), *_d(store)],
        env={**os.environ, **store.env()},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    env = {**os.environ, **store.env()}
    try:
        wait_for(
            lambda: bool((_owner_status(store) or {}).get("fronts")), timeout=60, what="the front's lease"
        )
        owner = _owner_status(store)
        assert owner is not None
        url = f"http://127.0.0.1:{port}/mcp"
        assert owner["fronts"] == [{"pid": front.pid, "url": url, "command": "serve"}]
        out = subprocess.run([MNEMOGRAPH, "status"], env=env, capture_output=True, text=True).stdout
        assert f"kept up by mnemograph serve --transport http (pid {front.pid}, {url})" in out
        # A second server on the same port: one sentence naming the first, no banner.
        second = subprocess.run(
            [MNEMOGRAPH, "serve", "--transport", "http", "--port", str(port), *_d(store)],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 2
        assert (
            f"port {port} is already served by mnemograph serve --transport http (pid {front.pid}"
            in second.stderr
        )
        assert "MCP over streamable HTTP" not in second.stderr
        done = subprocess.run(
            [MNEMOGRAPH, "stop", "--json", *_d(store)], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert f"stopped mnemograph serve --transport http (pid {front.pid}" in done.stderr
        assert json.loads(done.stdout)[0]["stopped"] is True
        assert front.wait(timeout=30) is not None
        # Nothing restarted it: the front is gone, and no owner serves the store.
        assert _owner_status(store) is None
        assert store.owner_pid() is None
    finally:
        if front.poll() is None:
            front.kill()
            front.wait()


async def test_a_busy_port_is_one_sentence_before_any_banner(store: Store) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with anyio.fail_after(60):
            status, _, err = await run(store, "serve", "--transport", "http", "--port", str(port), *_d(store))
    assert status == 2
    assert err.strip() == (
        f"mnemograph serve: port {port} on 127.0.0.1 is already in use (by another `mnemograph serve "
        "--transport http`, which `mnemograph status` lists, or another program); pass --port N to use another port"
    )
    assert "MCP over streamable HTTP" not in err
    status, _, err = await run(store, "serve", "--transport", "http", "--port", "99999", *_d(store))
    assert status == 2
    assert "--port needs a port number from 0 to 65535, not '99999'" in err
    assert "MNEMOGRAPH_PORT" not in err


async def test_ui_and_token_create_refuse_a_mistyped_data_dir(store: Store) -> None:
    typo = store.data_dir.parent / "nope-ui"
    with anyio.fail_after(60):  # before the fix it served a new, empty store until interrupted
        status, _, err = await run(store, "ui", "--no-browser", "--data-dir", str(typo))
    assert status == 2
    assert f"mnemograph ui: no Mnemograph store at {typo}" in err
    assert not typo.exists()
    status, _, err = await run(store, "token", "create", "--name", "x", "--data-dir", str(typo))
    assert status == 2
    assert "--grant" in err
    assert not typo.exists(), "a refused token creates no directory"


async def test_token_commands_name_themselves_and_speak_json(store: Store) -> None:
    status, out, err = await run(
        store, "token", "create", "--name", "j1", "--grant", "user:ana=r", "--json", *_d(store)
    )
    assert status == 0, err
    created = json.loads(out)
    assert (created["name"], created["grants"]) == ("j1", ["user:ana=r"])
    assert created["token"].startswith("mg_")
    status, out, err = await run(store, "token", "list", "--json", *_d(store))
    assert [(t["name"], t["revoked"]) for t in json.loads(out)] == [("j1", None)]
    status, out, err = await run(store, "token", "revoke", "j1", "--json", *_d(store))
    assert status == 0, err
    assert json.loads(out)["revoked"]
    status, _, err = await run(store, "token", "create", "--name", "j2", "--grant", "user:ana=r", "--bogus")
    assert status == 2
    assert "`mnemograph token create` does not take --bogus" in err
    typo = store.data_dir.parent / "typo"
    status, _, err = await run(store, "--data-dir", str(typo), "token", "revoke", "foo")
    assert status == 2
    assert err.startswith(f"mnemograph token revoke: no Mnemograph store at {typo}")


async def test_a_listing_piped_into_head_ends_quietly(store: Store) -> None:
    # `mnemograph list | head -1`: head exits after its line and the rest of the listing meets a closed pipe.
    # Made deterministic by closing the reading end before the command writes anything.
    async with Client(store.stdio(), mode="legacy") as client:
        for text in ("Ana lives in Porto.", "Bob likes tea.", "Cy owns a boat."):
            await call(client, "memory_write", {"content": text, "scopes": ["user:ana"]})
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            done = await anyio.run_process(
                [MNEMOGRAPH, "list", *_d(store)],
                stdout=write_end,
                env={**os.environ, **store.env()},
                check=False,
            )
        finally:
            os.close(write_end)
    assert done.stderr.decode() == ""  # no BrokenPipeError traceback, no "Exception ignored" line
    assert done.returncode == 141  # what a command killed by SIGPIPE reports (128 + 13), as `git log | head`
