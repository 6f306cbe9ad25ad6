"""bench/peers.py's scoring and footprint helpers, on cases worked out by hand: how returned memories become a
session ranking (the one rule every server is scored by), the two metrics on that ranking, and the resident
memory of a real process tree read from /proc."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

# Appended, not prepended: bench/mcp.py must not shadow the MCP SDK for the rest of the session.
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

from _peers_proc import descendants, tree_rss
from _peers_rank import Written, quantile, scores


def written() -> Written:
    w = Written()
    for key, session in [
        ("a", "s1"),
        ("b", "s2"),
        ("c", "s1"),  # a second memory of s1
        ("d", "s3"),
        ("e", "s2"),
        ("e", "s4"),  # one text in two sessions: a de-duplicating server holds it once, for both
        ("a", "s1"),  # written twice from the same session: recorded once
    ]:
        w.record(key, session)
    return w


def test_sessions_rank_where_their_first_memory_appears() -> None:
    # b->s2, c->s1, x (never written) skipped, a->s1 (already ranked), e->s2 (ranked) and s4, d->s3
    assert written().rank(["b", "c", "x", "a", "e", "d"]) == ["s2", "s1", "s4", "s3"]
    assert written().sessions_of["a"] == ["s1"]
    assert written().rank([]) == []


def test_recall_at_5_and_ndcg_at_10_on_a_hand_computed_ranking() -> None:
    ranked = written().rank(["b", "c", "x", "a", "e", "d"])  # s2, s1, s4, s3
    # evidence s1 and s4 at ranks 2 and 3: DCG = 1/log2(3) + 1/log2(4); ideal = 1 + 1/log2(3)
    got = scores(ranked, frozenset({"s1", "s4"}))
    assert got["R@5"] == 1.0
    assert got["NDCG@10"] == pytest.approx((1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3)))
    assert got["NDCG@10"] == pytest.approx(0.69343, abs=1e-5)
    # evidence never returned: both zero
    assert scores(ranked, frozenset({"s9"})) == {"R@5": 0.0, "NDCG@10": 0.0}
    # evidence at rank 6 only: outside R@5, inside NDCG@10 (1/log2(7))
    six = ["s0", "s1", "s2", "s3", "s4", "s5"]
    assert scores(six, frozenset({"s5"})) == {"R@5": 0.0, "NDCG@10": pytest.approx(1 / math.log2(7))}


def test_quantiles_interpolate_like_numpy() -> None:
    assert quantile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.95) == pytest.approx(4.8)
    assert math.isnan(quantile([], 0.5))


def test_tree_rss_counts_a_grandchild() -> None:
    """A process that starts another holding 64 MiB (as a server starting a worker would): both are found, and
    the grandchild's memory is in the total."""
    grand = "import sys; b = b'x' * (64 << 20); print('ready', flush=True); sys.stdin.read()"
    code = (
        "import subprocess, sys; "
        f"g = subprocess.Popen([sys.executable, '-c', {grand!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE); "
        "g.stdout.readline(); print(g.pid, flush=True); sys.stdin.read(); g.stdin.close(); g.wait()"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdin is not None
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())  # printed once the grandchild's 64 MiB are written
        assert descendants(child.pid) == [grandchild]
        total, each = tree_rss([child.pid])
        by_pid = {int(k.split()[0]): v for k, v in each.items()}
        assert set(by_pid) == {child.pid, grandchild}
        assert by_pid[grandchild] >= 64
        assert total == pytest.approx(sum(by_pid.values()))
        assert total >= 64 + by_pid[child.pid] > 64
        child.stdin.close()
        child.wait(timeout=30)


def _questions(counts: dict[str, int]) -> list:
    from datetime import UTC, datetime

    from _lme_data import Question

    when = datetime(2023, 5, 30, tzinfo=UTC)
    out = []
    for t, n in counts.items():
        for i in range(n):
            out.append(Question(f"{t}-{i}", t, "q?", when, (), (), (), frozenset()))
        out.append(Question(f"{t}-x_abs", t, "q?", when, (), (), (), frozenset()))  # never picked
    return out


def test_the_subset_covers_every_type_in_proportion() -> None:
    from peers import subset

    qs = _questions({"a": 10, "b": 5, "c": 2})
    # one of each type, the first of each (evenly spaced from the start)
    assert [q.id for q in subset(qs, 3)] == ["a-0", "b-0", "c-0"]
    # fewer than the types: the most common ones
    assert [q.id for q in subset(qs, 2)] == ["a-0", "b-0"]
    # 8 of 17: shares 4.7 / 2.4 / 0.9 -> 4 / 2 / 1, the one left to the largest remainder (a); a's 5 are every
    # second of its 10, b's 2 are b-0 and b-2 (step 2.5)
    assert [q.id for q in subset(qs, 8)] == ["a-0", "a-2", "a-4", "a-6", "a-8", "b-0", "b-2", "c-0"]
    assert len(subset(qs, 100)) == 17


def test_a_run_cut_short_still_covers_every_type() -> None:
    from peers import interleaved, subset

    qs = subset(_questions({"a": 10, "b": 5, "c": 2}), 8)
    order = interleaved(qs)
    # the run order takes one of each type in turn: any first 3 questions cover a, b and c
    assert [q.id for q in order] == ["a-0", "b-0", "c-0", "a-2", "b-2", "a-4", "a-6", "a-8"]
    assert sorted(q.id for q in order) == sorted(q.id for q in qs)


def test_a_case_only_twin_refused_by_mcp_memory_service_scores_as_the_first_copy() -> None:
    """mcp-memory-service hashes the stripped, lower-cased text and refuses a twin as an "exact match" without
    naming the memory it matched. The peer is not installed where tests run, so a stand-in answers with its words."""
    import hashlib
    from datetime import UTC, datetime
    from types import SimpleNamespace

    import anyio
    from _peers_servers import McpMemoryService

    class StandIn:
        def __init__(self) -> None:
            self.held: set[str] = set()

        async def call_tool(self, name: str, args: dict[str, str]) -> SimpleNamespace:
            h = hashlib.sha256(args["content"].strip().lower().encode()).hexdigest()
            refused = h in self.held
            self.held.add(h)
            said = (
                "Error storing memory: Duplicate content detected (exact match)"
                if refused
                else f"stored, hash: {h}"
            )
            return SimpleNamespace(is_error=refused, content=[SimpleNamespace(text=said)])

    peer = McpMemoryService()
    peer.keys, peer.refused = {}, 0
    client, when = StandIn(), datetime(2023, 5, 30, tzinfo=UTC)

    async def both() -> tuple[str, str]:
        first = await peer.write(client, "was there any incident prior to this?", 0, when, "s1")  # type: ignore[arg-type]
        twin = await peer.write(client, "Was there any incident prior to this? ", 1, when, "s2")  # type: ignore[arg-type]
        return first, twin

    first, twin = anyio.run(both)
    assert twin == first
    assert peer.refused == 1
