"""``mnemograph sweep``: contradictions the write-time rules missed (two values of a predicate that was not functional
when they were written), linked by the command as the rules link them, once."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from storage import CachedEmbedder, Engine, RelationIn
from tests.e2e.conftest import MNEMOGRAPH

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_sweep_links_a_missed_contradiction_once(tmp_path: Path, embedder: CachedEmbedder) -> None:
    data = tmp_path / "data"
    with Engine.open(data, embedder=embedder, warm=False) as engine:
        # Written while lives_in was not a functional predicate (a store older than today's list, or one run
        # with MNEMOGRAPH_FUNCTIONAL_PREDICATES set otherwise): the rules saw no conflict. The command's owner
        # uses the default list, where it is one.
        engine.functional = frozenset()
        porto = engine.write("Ana lives in Porto.", ["team:a"], kind="fact",
                             relations=[RelationIn("Ana", "lives_in", "Porto")]).id  # fmt: skip
        braga = engine.write("Ana lives in Braga.", ["team:a"], kind="fact",
                             relations=[RelationIn("Ana", "lives_in", "Braga")]).id  # fmt: skip
        assert engine.read(porto).contradicts == ()
    sweep = [MNEMOGRAPH, "sweep", "--json", "--data-dir", str(data)]
    done = await anyio.run_process(sweep, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"contradictions_linked": 1, "pairs": [[braga, porto]], "ok": True}
    again = await anyio.run_process([MNEMOGRAPH, "sweep", "--data-dir", str(data)], check=False)
    assert again.stdout.decode().strip() == "0 contradiction(s) linked"
    with Engine.open(data, embedder=embedder, warm=False) as engine:
        assert engine.read(porto).contradicts == (braga,)


async def test_the_commands_on_a_directory_use_the_predicates_the_environment_sets(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    # With no server running the command opens the directory itself: it must still take the user's lists, or
    # the sweep links what the user said is not one-valued (people hold several jobs here) and `digests`
    # derives chains of a predicate the user took off the transitive list.
    data = tmp_path / "data"
    with Engine.open(data, embedder=embedder, warm=False) as engine:
        engine.transitive = frozenset()  # written before derivations
        engine.write("Ana works at Acme.", ["team:a"], kind="fact",
                     relations=[RelationIn("Ana", "works_at", "Acme")])  # fmt: skip
        globex = engine.write("Ana works at Globex.", ["team:b"], kind="fact",
                              relations=[RelationIn("Ana", "works_at", "Globex")]).id  # fmt: skip
        engine.link(globex, "team:a")
        engine.write("The Grand Palm is in Udaipur.", ["team:a"], kind="fact",
                     relations=[RelationIn("Grand Palm", "located_in", "Udaipur")])  # fmt: skip
        engine.write("Udaipur is in Rajasthan.", ["team:a"], kind="fact",
                     relations=[RelationIn("Udaipur", "located_in", "Rajasthan")])  # fmt: skip
    env = {
        **os.environ,
        "MNEMOGRAPH_FUNCTIONAL_PREDICATES": "lives_in",
        "MNEMOGRAPH_TRANSITIVE_PREDICATES": "part_of",
    }
    done = await anyio.run_process(
        [MNEMOGRAPH, "sweep", "--json", "--data-dir", str(data)], check=False, env=env
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["contradictions_linked"] == 0
    done = await anyio.run_process([MNEMOGRAPH, "digests", "--data-dir", str(data)], check=False, env=env)
    assert done.returncode == 0, done.stderr
    with Engine.open(data, embedder=embedder, warm=False) as engine:
        engine.consolidate()
        found = engine.recall("Grand Palm Rajasthan", ["team:a"], kinds=["summary"], k=10)
        assert [h.memory.content for h in found if "derived" in h.memory.content] == []
