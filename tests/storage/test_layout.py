"""The layout's promises that the import contracts cannot state: registries agree, the public API is wired."""

from __future__ import annotations

import json
import os
import sys
import types
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from storage import CachedEmbedder, Engine
from storage.adapters.watermark import Watermark
from storage.compose import open_stores
from storage.domain.records import ProjectionRow
from storage.engine.core import EngineCore
from storage.recall import lanes, recipes
from tests.conftest import files_containing

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


class StagedIds:
    """The rewrite after an erasure: new rows beside the live ones, caught up, then switched in (the file is
    rewritten whole, so nothing erased stays in it)."""

    def __init__(self, owner: IdsProjection, rows: dict[str, bool]) -> None:
        self._owner, self._rows = owner, rows

    def apply(self, upserts: Sequence[ProjectionRow], deletes: Sequence[str]) -> None:
        self._rows.update({r.id: r.live for r in upserts})
        for mid in deletes:
            self._rows.pop(mid, None)

    def switch(self) -> None:
        self._owner.replace_all([])
        self._owner._rows = self._rows
        self._owner._save()

    def drop_old(self) -> None:
        """The one file was rewritten in place."""

    def discard(self) -> None:
        """Nothing was written."""


class IdsProjection:
    """A projection in a few lines: every memory's id and whether it is live, in one JSON file."""

    name = "ids"

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._file = directory / "ids.json"
        self.watermark = Watermark(directory / "WATERMARK")
        self._rows: dict[str, bool] = json.loads(self._file.read_text()) if self._file.exists() else {}

    def _save(self) -> None:
        self._file.write_text(json.dumps(self._rows))

    def apply(
        self, upserts: Sequence[ProjectionRow], deletes: Sequence[str], *, fresh: Sequence[str] = ()
    ) -> None:
        self._rows.update({r.id: r.live for r in upserts})
        for mid in deletes:
            self._rows.pop(mid, None)
        self._save()

    def replace_all(self, rows: Sequence[ProjectionRow]) -> None:
        self._rows = {r.id: r.live for r in rows}
        self._save()

    def build(self, rows: Sequence[ProjectionRow]) -> StagedIds:
        return StagedIds(self, {r.id: r.live for r in rows})

    def live_status(self) -> dict[str, bool]:
        return dict(self._rows)

    def count(self) -> int:
        return len(self._rows)

    def duplicates(self) -> list[str]:
        return []  # a dict holds each id once

    damaged = None
    appends_since_maintain = 0

    def maintain(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_projection_is_one_module_plus_its_registration(tmp_path: Path, embedder: CachedEmbedder) -> None:
    data = tmp_path / "data"
    data.mkdir()
    stores = replace(open_stores(data, embedder), extra=(IdsProjection(data / "ids"),))  # the registration
    eng = EngineCore(data, embedder, os.open(data / "owner.lock", os.O_RDWR | os.O_CREAT, 0o600), stores)
    eng.start()
    try:
        old = eng.write("Ana lives in Porto.", ["user:ana"])
        new = eng.amend(old.id, "Ana lives in Lisbon.")
        report = eng.verify()
        assert report.ok
        assert report.counts["ids"] == 2
        assert report.watermarks["ids"] == report.canonical_seq
        assert json.loads((data / "ids" / "ids.json").read_text()) == {old.id: False, new.id: True}
        receipt = eng.erase(new.id, confirm=new.id)
        assert receipt.per_store["ids"] == 2
        assert files_containing(data / "ids", old.id.encode()) == []
    finally:
        eng.close()
