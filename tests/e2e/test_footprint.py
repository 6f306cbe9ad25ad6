"""What the owner process holds once it has answered: no torch unless asked for (``MNEMOGRAPH_EMBEDDER``).

How fast the first answer comes and how much memory the owner holds are measured by bench/coldstart.py
(docs/benchmarks/coldstart.md); here, only which runtime the owner process actually mapped.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.e2e.conftest import Store, call

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def _mapped_libraries(pid: int) -> set[str]:
    return {Path(line.split()[-1]).name for line in Path(f"/proc/{pid}/maps").read_text().splitlines()}


async def _first_answer(store: Store, params: StdioServerParameters) -> set[str]:
    async with Client(params, mode="legacy") as client:
        written = await call(
            client, "memory_write", {"content": "The heron nests by the river.", "scopes": ["user:a"]}
        )
        found = await call(client, "recall", {"query": "where does the heron nest", "scopes": ["user:a"]})
        assert found["results"][0]["id"] == written["id"]
        pid = store.owner_pid()
        assert pid is not None
        return _mapped_libraries(pid)


async def test_the_owner_answers_without_loading_torch(store: Store) -> None:
    libraries = await _first_answer(store, store.stdio())
    assert "model.safetensors" in libraries  # the numpy runtime maps the bundled weights
    assert not {name for name in libraries if name.startswith("libtorch")}


async def test_the_torch_runtime_is_still_there_when_asked_for(store: Store) -> None:
    params = store.stdio()
    params.env = {**(params.env or {}), "MNEMOGRAPH_EMBEDDER": "torch"}
    libraries = await _first_answer(store, params)
    assert {name for name in libraries if name.startswith("libtorch")}
