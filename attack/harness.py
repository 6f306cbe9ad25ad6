# ruff: noqa  (attack harness scripts: throwaway probes, not product code)
"""Attack harness (session 8): a fresh store, tokens from the CLI, an HTTP server, SDK clients.

Run scripts from the worktree root: ``PYTHONPATH=. .venv/bin/python attack/<script>.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.conftest import MNEMOGRAPH, Store, _store, http_server

__all__ = ["MNEMOGRAPH", "Store", "as_token", "call", "fresh_store", "http_server", "scan", "token"]


@asynccontextmanager
async def fresh_store(base: str | None = None) -> AsyncIterator[Store]:
    root = Path(tempfile.mkdtemp(prefix="atk8-", dir=base))
    gen = _store(root / "data")
    store = next(gen)
    try:
        yield store
    finally:
        with suppress(StopIteration):
            next(gen)


def cli(store: Store, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [MNEMOGRAPH, *args, "--data-dir", str(store.data_dir)], capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"{args}: {done.returncode} {done.stderr}")
    return done


def token(store: Store, name: str, *grants: str) -> str:
    done = cli(store, "token", "create", "--name", name, *[a for g in grants for a in ("--grant", g)])
    return done.stdout.strip()


@asynccontextmanager
async def as_token(url: str, tok: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {tok}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0, read=600.0)) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def call(client: Client, tool: str, args: dict[str, Any]) -> tuple[bool, Any]:
    """(ok, structured content or (code, text))."""
    r = await client.call_tool(tool, args)
    if r.is_error:
        text = r.content[0].text if r.content else ""  # type: ignore[union-attr]
        code = (r.meta or {}).get("mnemograph/error", {}).get("code")
        return False, (code, text)
    return True, r.structured_content


def scan(root: Path, needles: dict[str, bytes]) -> list[tuple[str, str]]:
    """Every (needle name, file) where the needle's bytes occur under root."""
    hits = []
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            try:
                data = p.read_bytes()
            except OSError:
                continue
            for name, needle in needles.items():
                if needle and needle in data:
                    hits.append((name, str(p)))
    return hits


def dump(x: Any) -> str:
    return json.dumps(x, default=str, ensure_ascii=False)


def log(*a: Any) -> None:
    print(*a, file=sys.stderr, flush=True)
