"""The layout's promises that the import contracts cannot state: registries agree, the public API is wired."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from storage import CachedEmbedder, Engine
from storage.compose import open_stores
from storage.engine.core import EngineCore
from storage.recall import lanes, recipes

ROOT = Path(__file__).resolve().parents[2]


def test_every_registered_lane_is_one_recipes_may_weight() -> None:
    assert tuple(lanes.LANES) == recipes.LANES
    assert set(recipes.DEFAULT.weights) <= set(lanes.LANES)


def test_the_public_engine_is_the_use_cases_wired_by_the_composition_root() -> None:
    assert issubclass(Engine, EngineCore)
    assert Engine.__module__ == "storage.compose"
    assert open_stores.__module__ == "storage.compose"


def _doc_example(heading: str) -> str:
    """The first python block after ``heading`` in docs/architecture.md."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page[page.index(heading) :]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_docs_example_lane_is_one_module_plus_its_registration(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    # The module, exactly as docs/architecture.md shows it ...
    module = types.ModuleType("storage.recall.lanes.kind")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(_doc_example("### Adding a recall lane"), "docs/architecture.md", "exec"), module.__dict__)
    # ... and its registration, as the docs' second block shows it.
    monkeypatch.setitem(lanes.LANES, "kind", lambda c: module.KindLane(c.canonical))
    monkeypatch.setattr(recipes, "LANES", (*recipes.LANES, "kind"))

    with Engine.open(tmp_path / "data", embedder=embedder, warm=False) as eng:
        pref = eng.write("Ana prefers window seats.", ["user:ana"], kind="preference")
        eng.write("Ana flew to Oslo on Monday.", ["user:ana"], kind="event")
        weighted = recipes.RECIPES["default"].with_(weights={**recipes.DEFAULT.weights, "kind": 0.5})
        hits = eng.recall("what do I prefer", ["user:ana"], recipe=weighted)
        assert hits[0].memory.id == pref.id
        assert "kind" in hits[0].lanes
        # Without a weight the lane runs but counts for nothing: the default recipe is unchanged.
        assert all("kind" not in h.lanes for h in eng.recall("what do I prefer", ["user:ana"]))
