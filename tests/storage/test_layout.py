"""The layout's promises that the import contracts cannot state: registries agree, the public API is wired."""

from __future__ import annotations

from storage import Engine
from storage.compose import open_stores
from storage.engine.core import EngineCore
from storage.recall import lanes, recipes


def test_every_registered_lane_is_one_recipes_may_weight() -> None:
    assert tuple(lanes.LANES) == recipes.LANES
    assert set(recipes.DEFAULT.weights) <= set(lanes.LANES)


def test_the_public_engine_is_the_use_cases_wired_by_the_composition_root() -> None:
    assert issubclass(Engine, EngineCore)
    assert Engine.__module__ == "storage.compose"
    assert open_stores.__module__ == "storage.compose"
