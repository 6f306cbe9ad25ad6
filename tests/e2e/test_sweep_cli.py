"""``mnemograph sweep``: contradictions the write-time rules missed (two statements told to different scopes, then
linked into one), linked by the command as the rules link them, once."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from storage import CachedEmbedder, Engine, RelationIn
from tests.e2e.conftest import MNEMOGRAPH

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_sweep_links_a_missed_contradiction_once(tmp_path: Path, embedder: CachedEmbedder) -> None:
    data = tmp_path / "data"
    with Engine.open(data, embedder=embedder, warm=False) as engine:
        porto = engine.write("Ana was born in Porto.", ["team:a"], kind="fact",
                             relations=[RelationIn("Ana", "born_in", "Porto")]).id  # fmt: skip
        braga = engine.write("Ana was born in Braga.", ["team:b"], kind="fact",
                             relations=[RelationIn("Ana", "born_in", "Braga")]).id  # fmt: skip
        engine.link(braga, "team:a")
    sweep = [MNEMOGRAPH, "sweep", "--json", "--data-dir", str(data)]
    done = await anyio.run_process(sweep, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"contradictions_linked": 1, "pairs": [[braga, porto]], "ok": True}
    again = await anyio.run_process([MNEMOGRAPH, "sweep", "--data-dir", str(data)], check=False)
    assert again.stdout.decode().strip() == "0 contradiction(s) linked"
    with Engine.open(data, embedder=embedder, warm=False) as engine:
        assert engine.read(porto).contradicts == (braga,)
