"""recall: lanes, fusion, scopes and their ancestors, filters. Real stores, real model."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from storage import RECIPES, Engine, InvalidInput
from storage.adapters.kuzu._cypher import PARALLEL_FETCH
from storage.recall.pipeline import Recipe, fuse

FACTS = [
    "Ana's passport number ends in 4471.",
    "Ana is allergic to peanuts and carries an EpiPen.",
    "The team retro happens every second Friday.",
    "Ana's favourite band is Radiohead.",
    "Our staging database runs PostgreSQL 16 on a small VM.",
]


@pytest.fixture
def stocked(engine: Engine) -> Engine:
    for fact in FACTS:
        engine.write(fact, ["user:ana"])
    engine.write("Bob's passport number ends in 9902.", ["user:bob"])
    return engine


def test_bm25_finds_exact_rare_tokens(stocked: Engine) -> None:
    hits = stocked.recall("4471", ["user:ana"], recipe="bm25")
    assert hits[0].memory.content == FACTS[0]
    assert hits[0].lanes == {"bm25": 1}


def test_vector_finds_paraphrases(stocked: Engine) -> None:
    hits = stocked.recall("food allergy", ["user:ana"], recipe="vector")
    assert hits[0].memory.content == FACTS[1]
    assert "vector" in hits[0].lanes


def test_fusion_reports_every_lane_and_rank(stocked: Engine) -> None:
    hits = stocked.recall("which database does staging use", ["user:ana"], k=3)
    top = hits[0]
    assert top.memory.content == FACTS[4]
    assert top.lanes.get("bm25") == 1
    assert top.lanes.get("vector") == 1
    assert top.score == pytest.approx(2 / (RECIPES["default"].rrf_k + 1))  # first in both lanes
    # k is an upper bound: the rest are word matches or similar enough (docs/recall.md, the similarity rule).
    assert 1 <= len(hits) <= 3


def test_scopes_isolate_and_ancestors_are_inherited(stocked: Engine) -> None:
    assert all("Bob" not in h.memory.content for h in stocked.recall("passport number", ["user:ana"]))
    stocked.create_scope("project:site", parent="user:ana")
    stocked.write("The site deploys from the main branch.", ["project:site"])
    from_project = {h.memory.content for h in stocked.recall("passport", ["project:site"], k=20)}
    assert FACTS[0] in from_project  # inherited from the parent user scope
    from_user = {h.memory.content for h in stocked.recall("deploys main branch", ["user:ana"], k=20)}
    assert "The site deploys from the main branch." not in from_user
    down = {
        h.memory.content for h in stocked.recall("deploys main branch", ["user:ana"], k=20, descendants=True)
    }
    assert "The site deploys from the main branch." in down


def test_kind_and_event_time_filters(engine: Engine) -> None:
    engine.write(
        "Flew to Tokyo for the conference.",
        ["user:ana"],
        kind="event",
        event_time=datetime(2023, 4, 2, tzinfo=UTC),
    )
    engine.write(
        "Flew to Oslo for the offsite.",
        ["user:ana"],
        kind="event",
        event_time=datetime(2023, 9, 9, tzinfo=UTC),
    )
    engine.write("Prefers aisle seats when flying.", ["user:ana"], kind="preference")
    events = engine.recall("flights", ["user:ana"], kinds=["event"])
    assert {h.memory.kind.value for h in events} == {"event"}
    spring = engine.recall(
        "flew", ["user:ana"], since=datetime(2023, 3, 1, tzinfo=UTC), until=datetime(2023, 6, 1, tzinfo=UTC)
    )
    assert [h.memory.content for h in spring] == ["Flew to Tokyo for the conference."]


@pytest.mark.parametrize(
    "query",
    [
        "title:*",
        "' OR 1=1 --",
        "MATCH (n) DETACH DELETE n",
        'content:"x" AND NOT id:[a TO z]',
        "DROP TABLE memories; --",
        "\u202eevil\u202c",
        "*",
    ],
)
def test_query_syntax_is_only_words(stocked: Engine, query: str) -> None:
    before = stocked.verify()
    stocked.recall(query, ["user:ana"])
    after = stocked.verify()
    assert after.ok
    assert after.counts == before.counts


def test_recall_arguments_are_checked(stocked: Engine) -> None:
    with pytest.raises(InvalidInput, match="k must"):
        stocked.recall("x", ["user:ana"], k=0)
    with pytest.raises(InvalidInput, match="k must"):
        stocked.recall("x", ["user:ana"], k=101)
    with pytest.raises(InvalidInput, match="query is empty"):
        stocked.recall("   ", ["user:ana"])
    with pytest.raises(InvalidInput, match="recipe"):
        stocked.recall("x", ["user:ana"], recipe="magic")


def test_unknown_scope_recalls_nothing(stocked: Engine) -> None:
    assert stocked.recall("passport", ["user:nobody"]) == []


def test_fuse_is_weighted_reciprocal_rank() -> None:
    recipe = Recipe("t", {"bm25": 2.0, "vector": 1.0}, rrf_k=10)
    fused = fuse({"bm25": ["a", "b"], "vector": ["b", "c"], "graph": ["z"]}, recipe)
    scores = {m: s for m, s, _ in fused}
    assert scores["a"] == pytest.approx(2 / 11)
    assert scores["b"] == pytest.approx(2 / 12 + 1 / 11)
    assert "z" not in scores  # a lane without weight contributes nothing
    assert [m for m, _, _ in fused] == ["b", "a", "c"]
    assert set(RECIPES) >= {"default", "bm25", "vector", "hybrid"}


class _Counting(ThreadPoolExecutor):
    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def test_a_fetch_split_over_two_connections_returns_every_record(stocked: Engine) -> None:
    with stocked.graph.read() as conn:
        ids = sorted(stocked.graph.all_ids(conn))
        wanted = [*ids, "0" * 64, ids[0]]  # an unknown id and a repeat
        assert len(dict.fromkeys(wanted)) >= PARALLEL_FETCH
        alone = stocked.graph.fetch(conn, wanted)
        with _Counting(1) as pool:
            split = stocked.graph.fetch(conn, wanted, pool)
            assert pool.submitted == 1  # half of it went to the worker
    assert set(alone) == set(ids)
    assert split == alone


def test_a_split_fetch_does_not_wait_for_a_busy_pool(stocked: Engine) -> None:
    """With every worker taken (other recalls' lanes, maybe waiting for a lock), the caller reads both halves."""
    release = threading.Event()
    with stocked.graph.read() as conn, ThreadPoolExecutor(1) as pool:
        blocker = pool.submit(release.wait, 60)
        ids = sorted(stocked.graph.all_ids(conn))
        try:
            assert set(stocked.graph.fetch(conn, ids, pool)) == set(ids)
            assert not blocker.done()  # answered while the only worker was still busy
        finally:
            release.set()
