"""A neighbourhood drawn as server-side SVG: the centre in the middle, its direct neighbours on a ring, the
rest on an outer ring. Deterministic (sorted), so a page looks the same on every load; no JavaScript."""

from __future__ import annotations

import math
from dataclasses import dataclass

from storage.engine.explore import Neighbourhood, Node

WIDTH, HEIGHT = 960, 640
_R1, _R2 = 180, 290


@dataclass(frozen=True, slots=True)
class Placed:
    node: Node
    x: float
    y: float
    centre: bool


@dataclass(frozen=True, slots=True)
class Edge:
    x1: float
    y1: float
    x2: float
    y2: float
    label: str
    lx: float
    ly: float


@dataclass(frozen=True, slots=True)
class Drawing:
    width: int
    height: int
    nodes: tuple[Placed, ...]
    edges: tuple[Edge, ...]


def layout(hood: Neighbourhood) -> Drawing:
    cx, cy = WIDTH / 2, HEIGHT / 2
    near = {lk.target for lk in hood.links if lk.source == hood.centre}
    near |= {lk.source for lk in hood.links if lk.target == hood.centre}
    near.discard(hood.centre)
    by_key = {n.key: n for n in hood.nodes}
    ring1 = sorted(k for k in by_key if k in near)
    ring2 = sorted(k for k in by_key if k not in near and k != hood.centre)
    pos: dict[str, tuple[float, float]] = {hood.centre: (cx, cy)}
    for ring, radius, turn in ((ring1, _R1, 0.0), (ring2, _R2, 0.5)):
        for i, key in enumerate(ring):
            angle = 2 * math.pi * (i + turn) / max(len(ring), 1) - math.pi / 2
            pos[key] = (cx + radius * math.cos(angle), cy + radius * 0.8 * math.sin(angle))
    placed = tuple(Placed(by_key[k], x, y, k == hood.centre) for k, (x, y) in pos.items() if k in by_key)
    edges = tuple(
        Edge(
            *pos[lk.source],
            *pos[lk.target],
            lk.label if lk.label != "mentions" else "",
            *_mid(pos, lk.source, lk.target),
        )
        for lk in hood.links
        if lk.source in pos and lk.target in pos
    )
    return Drawing(WIDTH, HEIGHT, placed, edges)


def _mid(pos: dict[str, tuple[float, float]], a: str, b: str) -> tuple[float, float]:
    (x1, y1), (x2, y2) = pos[a], pos[b]
    return (x1 + x2) / 2, (y1 + y2) / 2 - 4
