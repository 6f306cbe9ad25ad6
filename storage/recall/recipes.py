"""Fusion recipes: every number that shapes recall, in one declarative table.

A ``Recipe`` is a frozen dataclass; vary it with ``dataclasses.replace`` (or ``Recipe.with_``) and pass the
result to ``Engine.recall(..., recipe=...)``, or pick a named one from ``RECIPES``. Nothing on the read path
hard-codes a weight, a threshold or a cap: it reads them from the recipe it was given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from storage.domain.errors import InvalidInput

LANES = ("bm25", "vector", "graph")


MAX_BOOST = 100.0
MAX_NARROW_DAYS = 3_660.0


@dataclass(frozen=True, slots=True)
class TimeRule:
    """How a time expression in the query ("last Tuesday", "in May 2023") moves results.

    Soft, never a filter: a memory whose event time lies in the query's interval has its fused score
    multiplied by ``1 + boost``; outside, the extra factor decays exponentially with the distance to the
    interval, ``1 + boost * exp(-distance / scale)``, where ``scale = max(width * decay_width, min_decay_days)``
    (so a wrong or loose parse costs a little ranking, never recall). ``window`` is how many fused candidates
    are re-scored (records are fetched one key at a time, so it bounds the cost).

    A closed window of at most ``narrow_days`` ("5 days ago", "last Saturday", "two weeks ago": a day or a
    week) names the time on purpose and holds few memories, so it boosts by ``narrow_boost`` instead (``None``:
    ``boost``); a loose one ("in 2023", "recently") keeps the gentle ``boost``.
    """

    enabled: bool = True
    boost: float = 0.5
    narrow_boost: float | None = None
    narrow_days: float = 8.0
    decay_width: float = 0.5
    min_decay_days: float = 1.0
    window: int = 60
    strip: bool = True  # remove the time expression from the text given to BM25 and the vector lane


@dataclass(frozen=True, slots=True)
class GraphRule:
    """Bounds of the entity-graph lane: how many query entities, hops and edges it may follow."""

    max_entities: int = 8  # entities matched in the query (exact, then alias, token and fuzzy matches)
    hops: int = 2  # RELATES hops followed from a matched entity (0: mentions only)
    fanout: int = 20  # RELATES edges followed per entity and direction
    per_entity: int = 50  # memories taken per entity that mentions it
    # An entity mentioned by more memories than this picks none out (as a common word would not): its mentions
    # are left to BM25 and only its relations are followed. Also bounds the cost of one mention lookup.
    max_mentions: int = 500
    fuzzy: bool = True  # allow one-edit typos in names of 5+ characters
    # A memory stating a relation on a path from a query entity gains path_weight / (rrf_k + hops) after
    # fusion (storage.recall.pipeline._with_paths): the answer to a two-hop question shares no words with it.
    path_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class GroupRule:
    """Rank groups of memories (the turns of one conversation, say) instead of single memories.

    With ``key`` set, each lane's list is collapsed to groups (a memory's group is ``metadata[key]``; a memory
    without it is its own group) and a group takes the rank of its best member in that lane; the collapsed
    lists are fused by weighted RRF with ``Recipe.rrf_k``, and the time rule multiplies a group's score by the
    factor of its best member's event time. The first ``head`` places go to the groups of the best memories
    of plain memory-level fusion (one strongly matching memory should win); the collapsed order fills the
    rest. The answer lists, group by group, each group's best ``per_group`` members (by memory-level fused
    score) and also every other member that plain memory-level fusion ranks among its first ``keep_top``
    (0: none): grouping gathers and reorders the best results ungrouped recall would show, it does not hide them.
    Measured on LongMemEval_S (docs/benchmarks/longmemeval.md).
    """

    key: str | None = None
    head: int = 0
    per_group: int = 1
    keep_top: int = 20


MAX_HALF_LIFE_DAYS = 36_500.0


@dataclass(frozen=True, slots=True)
class SalienceRule:
    """Salience: a small bonus after fusion for memories that are recent or that the caller keeps recalling.

    Off unless asked for (``Engine.recall(salience=True)``, the recall tool's ``salience``, or the setting
    ``MNEMOGRAPH_RECALL_SALIENCE``): measured on LongMemEval (docs/benchmarks/salience.md) before any default.
    A candidate gains ``weight / (rrf_k + 1) * (recency_share * recency + (1 - recency_share) * accesses)``:

    - ``recency = 0.5 ** (age_days / half_life_days)``, the age measured from the memory's event time (events,
      messages, dated notes) or the start of its validity (facts, preferences) to the caller's ``now``;
    - ``accesses = min(1, log(1 + n) / log(1 + saturation))``, where ``n`` counts how often *this principal's*
      recalls returned the memory (another principal's recalls never count: docs/recall.md).

    With the default recipe (``rrf_k`` 5) the whole bonus is at most 0.25 / 6 = 0.042, a quarter of a first
    place in one lane: it breaks near-ties and lifts a result a few places, never over a clearly better match.
    ``window`` bounds how many fused candidates are re-scored: past the first ``k``, only while the next one's
    fused score plus the largest bonus could still reach the k-th (each costs a record lookup).
    """

    enabled: bool = False
    weight: float = 0.25
    half_life_days: float = 30.0
    recency_share: float = 0.5
    saturation: int = 10
    window: int = 30


@dataclass(frozen=True, slots=True)
class Recipe:
    """How lanes are weighted and fused, and what happens to the fused list. Named recipes live in RECIPES.

    Weighted reciprocal rank fusion: ``score = sum over lanes of weight / (rrf_k + rank)``; a lane with weight
    0 (or absent) is not run at all.
    """

    name: str
    weights: Mapping[str, float]
    rrf_k: int = 60
    depth: int = 50  # candidates each lane contributes, at least; scaled up with k and filters
    description: str = ""
    time: TimeRule = field(default_factory=TimeRule)
    graph: GraphRule = field(default_factory=GraphRule)
    group: GroupRule = field(default_factory=GroupRule)
    salience: SalienceRule = field(default_factory=SalienceRule)
    history_questions: bool = True  # "what did I use before", "used to", ... include superseded versions
    dedup_cosine: float | None = 0.97  # fold results this similar to a better one (None: text equality only)
    # A lane hit on a superseded version counts for the chain's current version (explained in the result).
    follow_versions: bool = True
    # The relevance rule: a result whose fused score is below ``relevance_floor`` x the best result's score is
    # dropped (0: keep every result up to k). See docs/recall.md.
    relevance_floor: float = 0.0
    # The absolute rule: a result only the vector lane found, whose cosine similarity to the query is below
    # this, is dropped (None: no such rule). Without it, a question about nothing stored returns the k nearest
    # memories anyway, each "found by vector", as ranks, not similarities, decide fused scores.
    min_similarity: float | None = None

    def __post_init__(self) -> None:
        unknown = set(self.weights) - set(LANES)
        if unknown:
            raise InvalidInput(f"recipe {self.name!r}: unknown lane(s) {sorted(unknown)}; lanes are {LANES}")
        if any(w < 0 for w in self.weights.values()) or not any(w > 0 for w in self.weights.values()):
            raise InvalidInput(f"recipe {self.name!r}: weights must be >= 0 and at least one > 0")
        if self.rrf_k < 0 or self.depth < 1:
            raise InvalidInput(f"recipe {self.name!r}: rrf_k must be >= 0 and depth >= 1")
        if self.group.head < 0 or self.group.per_group < 1 or self.group.keep_top < 0:
            raise InvalidInput(
                f"recipe {self.name!r}: group.head and group.keep_top must be >= 0 and group.per_group >= 1"
            )
        t = self.time
        boosts = (t.boost, t.boost if t.narrow_boost is None else t.narrow_boost)
        if not all(0 <= b <= MAX_BOOST for b in boosts) or not 0 <= t.narrow_days <= MAX_NARROW_DAYS:
            raise InvalidInput(
                f"recipe {self.name!r}: time.boost and time.narrow_boost must be in [0, {MAX_BOOST}], "
                f"time.narrow_days in [0, {MAX_NARROW_DAYS}]"
            )
        if not 0 <= self.relevance_floor <= 1:
            raise InvalidInput(f"recipe {self.name!r}: relevance_floor must be in [0, 1]")
        if self.min_similarity is not None and not -1 <= self.min_similarity <= 1:
            raise InvalidInput(f"recipe {self.name!r}: min_similarity must be in [-1, 1] or None")
        if self.dedup_cosine is not None and not 0 < self.dedup_cosine <= 1:
            raise InvalidInput(f"recipe {self.name!r}: dedup_cosine must be in (0, 1] or None")
        sal = self.salience
        if not (
            0 <= sal.weight <= 1
            and 0 < sal.half_life_days <= MAX_HALF_LIFE_DAYS
            and 0 <= sal.recency_share <= 1
            and sal.saturation >= 1
            and sal.window >= 1
        ):
            raise InvalidInput(
                f"recipe {self.name!r}: salience.weight and salience.recency_share must be in [0, 1], "
                f"salience.half_life_days in (0, {MAX_HALF_LIFE_DAYS}], salience.saturation and "
                "salience.window >= 1"
            )
        object.__setattr__(self, "weights", MappingProxyType(dict(self.weights)))

    def with_(self, **changes: Any) -> Recipe:
        """A copy with some fields changed; ``time``, ``graph``, ``group`` and ``salience`` also accept a dict of
        their own fields."""
        for key in ("time", "graph", "group", "salience"):
            if isinstance(changes.get(key), Mapping):
                changes[key] = replace(getattr(self, key), **changes[key])
        return replace(self, **changes)


# Chosen on the LongMemEval_S development split (docs/benchmarks/longmemeval.md): a small RRF k (a first place
# in a lane matters more than a tail); a gentle time boost, stronger for a window of a day or a week; the graph
# lane at a quarter weight (at full weight it pulled fillers that name the same entities to the top). No
# grouping: ranking a conversation as a whole is asked for per call (``Engine.recall(group_by=...)``, the
# recall tool's ``group_by``), never switched on by what some memory's metadata happens to hold. The group rule
# below only says how a requested grouping behaves (the memory-level winner keeps first place).
DEFAULT = Recipe(
    "default",
    {"bm25": 1.0, "vector": 1.0, "graph": 0.25},
    rrf_k=5,
    time=TimeRule(boost=0.25, narrow_boost=1.0),
    group=GroupRule(key=None, head=1),
    relevance_floor=0.35,
    min_similarity=0.2,
    description="all lanes, time rule, version chains followed, history questions, relevance rule",
)


def _baseline(name: str, weights: dict[str, float], description: str) -> Recipe:
    """A plain RRF baseline (k 60) over ``weights``' lanes: no grouping, time rule, history questions, folding,
    version following or relevance rule."""
    return DEFAULT.with_(
        name=name,
        weights=weights,
        rrf_k=60,
        group={"key": None, "head": 0},
        time={"enabled": False},
        history_questions=False,
        dedup_cosine=None,
        follow_versions=False,
        relevance_floor=0.0,
        description=description,
    )


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        DEFAULT,
        _baseline("hybrid", {"bm25": 1.0, "vector": 1.0}, "plain BM25 + vector RRF (baseline)"),
        _baseline("bm25", {"bm25": 1.0}, "BM25 lane only (baseline)"),
        _baseline("vector", {"vector": 1.0}, "vector lane only (baseline)"),
        DEFAULT.with_(name="graph", weights={"graph": 1.0}, description="entity-graph lane only"),
        DEFAULT.with_(
            name="no_time", time={"enabled": False}, description="all lanes, time expressions ignored"
        ),
    )
}


def resolve(recipe: str | Recipe) -> Recipe:
    """A Recipe given itself or its name; an unknown name is an InvalidInput that lists the known ones."""
    if isinstance(recipe, Recipe):
        return recipe
    found = RECIPES.get(recipe) if isinstance(recipe, str) else None
    if found is None:
        raise InvalidInput(f"unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
    return found
