"""Salience (docs/recall.md, "Salience"): recency and the caller's own access counts as a small term after fusion.

Counts are the caller's own, survive a restart, leave no byte behind an erase or a purge, never move another
principal's ranking, and with salience off a recall ranks exactly as it did without counts.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scopes import Grant, Principal
from storage import CachedEmbedder, Engine, InvalidInput
from storage.engine import salience
from storage.engine.salience import ACCESS_FILE, MAX_COUNT
from storage.recall.recipes import RECIPES
from tests.conftest import files_containing

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

CORPUS = [
    ("fact", "Ana works at Globex as a tech lead."),
    ("preference", "Ana prefers oat milk in her coffee."),
    ("event", "Ana flew to Lisbon for the Web Summit."),
    ("event", "Ana visited her parents in Porto."),
    ("note", "The wifi password at the office is larch-ferry-42."),
    ("note", "The garage door code is 7731."),
    ("fact", "Ana's dentist is Dr. Okafor on Elm Street."),
    ("fact", "Ana's sister Mia lives in Madrid."),
    ("event", "Ana ran the Berlin half marathon in 1:52."),
    ("message", "I think we should try the Thai place on Friday."),
    ("fact", "Ana's manager is Sam Rivera."),
    ("event", "Ana went hiking in the Alps with Sam."),
]
QUERIES = ["where does Ana work", "trips Ana took", "wifi password", "Ana's sister", "Sam", "food"]


def principal(name: str, *grants: str) -> Principal:
    return Principal(name, client="tests", grants=tuple(Grant.parse(g) for g in grants))


def seed(engine: Engine, scope: str = "user:ana", by: Principal | None = None) -> list[str]:
    ids = []
    for i, (kind, text) in enumerate(CORPUS):
        when = T0 + timedelta(days=7 * i)
        timed = {"event_time": when} if kind in ("event", "message") else {"valid_from": when}
        extra = {"principal": by} if by is not None else {}
        ids.append(
            engine.write(text, [scope], kind=kind, metadata={"session": f"s{i % 3}"}, **timed, **extra).id
        )
    return ids


def rankings(engine: Engine, scope: str = "user:ana", **kw: object) -> dict[str, list[tuple[str, float]]]:
    out = {}
    for q in QUERIES:
        for group_by in (None, "session"):
            hits = engine.recall(q, [scope], k=10, now=NOW, group_by=group_by, **kw)  # type: ignore[arg-type]
            out[f"{q} | {group_by}"] = [(h.memory.id, h.score) for h in hits]
    return out


def accesses(engine: Engine, query: str, target: str, who: Principal | None = None) -> int:
    """How many of ``who``'s recalls returned ``target``, as its own explanation reports it."""
    extra = {"principal": who} if who is not None else {}
    for h in engine.recall(query, None if who else ["user:ana"], k=20, now=NOW, salience=True, **extra):
        if h.memory.id == target:
            assert h.salience is not None
            return h.salience.accesses
    raise AssertionError(f"{target} not found for {query!r}")


def test_salience_off_ranks_exactly_as_without_counts(engine: Engine) -> None:
    seed(engine)
    before = rankings(engine)
    assert before == rankings(engine, salience=False)  # off, said or not, is the same call
    for _ in range(5):  # many recalls later (counts recorded), salience off has not moved a place or a score
        engine.recall("wifi password garage door code", ["user:ana"], k=10, now=NOW)
    assert engine.accesses.total() > 0
    assert rankings(engine) == before
    assert rankings(engine, salience=False) == before
    assert all(h.salience is None for h in engine.recall("Sam", ["user:ana"], now=NOW))


def test_access_counts_survive_a_restart(data_dir: Path, embedder: CachedEmbedder) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        ids = seed(engine)
        wifi = ids[4]
        for _ in range(3):
            assert engine.recall("wifi password", ["user:ana"], k=1, now=NOW)[0].memory.id == wifi
        assert accesses(engine, "wifi password", wifi) == 3
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        # The fourth recall (above) counted too: closing flushed every count, without a write per recall.
        assert accesses(engine, "wifi password", wifi) == 4
    assert (data_dir / ACCESS_FILE).exists()


@pytest.mark.parametrize("how", ["erase", "purge"])
def test_erase_and_purge_leave_no_count_bytes_on_disk(
    data_dir: Path, embedder: CachedEmbedder, how: str
) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        secret = engine.write("The vault combination is 31-7-22.", ["run:secret"]).id
        kept = engine.write("The vault is in the basement.", ["user:ana"]).id
        for _ in range(3):
            engine.recall("vault", ["run:secret", "user:ana"], k=5, now=NOW)
    # Persisted by the close: the erased memory's id is on disk in the counts (and only there, by id).
    assert data_dir / ACCESS_FILE in files_containing(data_dir, secret.encode())
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        if how == "erase":
            engine.erase(secret, confirm=secret)
        else:
            engine.purge("run:secret", confirm="run:secret")
        # Before close: the erasure itself rewrote the counts, no later flush needed.
        assert files_containing(data_dir, secret.encode()) == []
        assert accesses(engine, "vault basement", kept) == 3  # the other memory's count stays
    assert files_containing(data_dir, secret.encode()) == []


def test_another_principals_recalls_never_move_mine(engine: Engine) -> None:
    """A and C make the same recalls in a shared scope; between them B keeps asking about the garage code.
    With counts shared per scope C would see B's interest; per principal, C sees exactly what A saw."""
    a, b, c = (principal(n, "team:t=w") for n in "ABC")
    ids = seed(engine, "team:t", by=a)
    garage = ids[5]
    seen_by_a = rankings(engine, "team:t", principal=a, salience=True)
    for _ in range(20):
        assert engine.recall("garage door code", ["team:t"], k=1, now=NOW, principal=b)[0].memory.id == garage
    assert rankings(engine, "team:t", principal=c, salience=True) == seen_by_a
    query = "office wifi password or the garage door code"
    assert accesses(engine, query, garage, c) == accesses(engine, query, garage, a) < 20
    assert accesses(engine, query, garage, b) >= 20
    # The same recalls made by A itself do count for A (the rule above is not idle):
    for _ in range(20):
        engine.recall("garage door code", ["team:t"], k=1, now=NOW, principal=a)

    def garage_score(who: Principal) -> float:
        hits = engine.recall(query, ["team:t"], k=10, now=NOW, principal=who, salience=True)
        return next(h.score for h in hits if h.memory.id == garage)

    assert garage_score(a) > garage_score(c)


@pytest.mark.parametrize("bad", ["yes", 1, 0.5, "on"])
def test_a_bad_salience_value_is_refused_and_counts_nothing(engine: Engine, bad: object) -> None:
    ids = seed(engine)
    wifi = ids[4]
    before = accesses(engine, "wifi password", wifi)
    with pytest.raises(InvalidInput, match="salience must be true or false"):
        engine.recall("wifi password", ["user:ana"], now=NOW, salience=bad)  # type: ignore[arg-type]
    assert accesses(engine, "wifi password", wifi) == before + 1  # only the checking recall itself


@pytest.mark.parametrize(
    "change",
    [{"weight": 2.0}, {"weight": -0.1}, {"half_life_days": 0}, {"recency_share": 1.5}, {"saturation": 0}],
)
def test_a_bad_salience_rule_is_refused(change: dict[str, float]) -> None:
    with pytest.raises(InvalidInput, match="salience"):
        RECIPES["default"].with_(salience={"enabled": True, **change})


def _top(engine: Engine, query: str, k: int = 5, **kw: object) -> Sequence[str]:
    return [h.memory.id for h in engine.recall(query, ["user:ana"], k=k, now=NOW, **kw)]  # type: ignore[arg-type]


def test_the_fact_the_user_keeps_asking_about_beats_a_stale_near_duplicate(engine: Engine) -> None:
    """Two locker codes answer "which code opens my locker" equally well (each lane ranks a different one
    first); the user keeps looking up the pool locker it uses now. Written the same day, so recency is even."""
    year_ago = T0 - timedelta(days=400)
    old = engine.write("Locker code 1893, old gym.", ["user:ana"], kind="note", valid_from=year_ago).id
    used = engine.write("My pool locker opens with 4417.", ["user:ana"], kind="note", valid_from=year_ago).id
    for text in ("Ana's bike lock code is 5521.", "The garage door code is 7731.", "Ana swims on Tuesdays."):
        engine.write(text, ["user:ana"], kind="note", valid_from=T0)
    query = "which code opens my locker"
    plain = _top(engine, query)
    assert plain[:2] == [old, used], plain  # a tie by the words alone, broken by id: the stale one leads
    for _ in range(6):
        assert _top(engine, "pool locker", k=1) == [used]
    assert _top(engine, query, salience=False)[:2] == [old, used]
    hits = engine.recall(query, ["user:ana"], k=5, now=NOW, salience=True)
    assert [h.memory.id for h in hits[:2]] == [used, old]
    assert hits[0].salience is not None
    assert hits[0].salience.moved == "up"
    assert hits[0].salience.accesses >= 6


def test_a_popular_memory_does_not_drown_a_better_match(engine: Engine) -> None:
    popular = engine.write("The office wifi password is larch-ferry-42.", ["user:ana"], kind="note").id
    asked = engine.write(
        "The guest wifi network at the cabin is called Pinecone.", ["user:ana"], kind="note"
    ).id
    for _ in range(50):
        engine.recall("office wifi password", ["user:ana"], k=3, now=NOW)
    hits = engine.recall(
        "what is the guest wifi network at the cabin called", ["user:ana"], k=5, now=NOW, salience=True
    )
    assert hits[0].memory.id == asked
    assert (
        any(h.memory.id == popular and h.salience and h.salience.accesses >= 50 for h in hits)
        or len(hits) == 1
    )


def test_the_call_decides_over_the_recipe_and_the_server_default(engine: Engine) -> None:
    seed(engine)
    on = RECIPES["default"].with_(salience={"enabled": True})
    assert engine.recall("Sam", ["user:ana"], now=NOW, recipe=on)[0].salience is not None
    assert engine.recall("Sam", ["user:ana"], now=NOW, recipe=on, salience=False)[0].salience is None
    engine.salience_default = True
    assert engine.recall("Sam", ["user:ana"], now=NOW)[0].salience is not None
    assert engine.recall("Sam", ["user:ana"], now=NOW, salience=False)[0].salience is None


@pytest.mark.parametrize(
    "planted",
    [
        "[" * 100_000 + "]" * 100_000,  # nested past the JSON parser's depth
        "huge",  # a count too large for a float
        "fifo",  # a named pipe at the path: reading it would never end
    ],
)
def test_a_hostile_counts_file_costs_the_counts_never_the_store(
    data_dir: Path, embedder: CachedEmbedder, planted: str
) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        vault = engine.write("The vault combination is 31-7-22.", ["user:ana"]).id
        engine.recall("vault", ["user:ana"], now=NOW)
    path = data_dir / ACCESS_FILE
    path.unlink()
    if planted == "huge":
        path.write_text(json.dumps({"version": 1, "counts": {"local": {vault: 10**400}}}))
    elif planted == "fifo":
        os.mkfifo(path, 0o600)
    else:
        path.write_text(planted)
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        (hit,) = engine.recall("vault combination", ["user:ana"], k=1, now=NOW, salience=True)
        assert hit.memory.id == vault
        assert hit.salience is not None
        assert hit.salience.accesses in (0, MAX_COUNT)  # a huge count reads as the most there can be
    # The close wrote a proper file in its place.
    assert json.loads(path.read_text())["counts"]["local"][vault] >= 1


def test_the_counts_file_is_private_and_never_written_through_a_link(
    tmp_path: Path, data_dir: Path, embedder: CachedEmbedder
) -> None:
    """Library use, with a lax umask: the counts are born 0600 like the audit log, and a link planted at the
    temporary name the rewrite uses does not make it write over the file the link points to."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    old = os.umask(0o022)
    try:
        with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
            engine.write("The vault combination is 31-7-22.", ["user:ana"])
            (data_dir / (ACCESS_FILE + ".tmp")).symlink_to(victim)
            engine.recall("vault", ["user:ana"], now=NOW)
    finally:
        os.umask(old)
    assert victim.read_text() == "precious"
    path = data_dir / ACCESS_FILE
    assert not path.is_symlink()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["counts"]["local"]


def test_a_memory_written_again_after_its_erasure_is_counted_again(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    """The same words written again after an erase get the same id: the erasure's guard against a recall that
    raced it must not keep the new memory's recalls from counting."""
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        first = engine.write("The vault combination is 31-7-22.", ["user:ana"]).id
        engine.recall("vault", ["user:ana"], now=NOW)
        engine.erase(first, confirm=first)
        again = engine.write("The vault combination is 31-7-22.", ["user:ana"]).id
        for _ in range(3):
            engine.recall("vault", ["user:ana"], now=NOW)
        assert accesses(engine, "vault combination", again) == 3


def test_a_token_named_like_the_local_user_does_not_learn_its_recalls(engine: Engine) -> None:
    """A token may be named ``local`` (or as a local client calls itself): it is still another principal, and
    what the unrestricted local user recalled must not show in its counts or move its ranking."""
    ids = seed(engine, "team:t")
    garage = ids[5]
    token = principal("local", "team:t=r")
    stranger = principal("someone-else", "team:t=r")
    before = rankings(engine, "team:t", principal=token, salience=True)
    assert before == rankings(engine, "team:t", principal=stranger, salience=True)
    for _ in range(20):  # the local user (no token) keeps asking about the garage code
        assert engine.recall("garage door code", ["team:t"], k=1, now=NOW)[0].memory.id == garage
    query = "office wifi password or the garage door code"
    assert accesses(engine, query, garage, token) == accesses(engine, query, garage, stranger) < 20


def test_the_counts_file_stays_bounded_however_many_memories_are_returned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, every memory any recall ever returned stayed in the file, rewritten (and synced) by the writer
    every 64 accesses: at 100,000 memories a few MB per principal per flush. Past the cap the least-returned
    are forgotten and the often-returned stay."""
    monkeypatch.setattr(salience, "MAX_PER_PRINCIPAL", 50)
    path = tmp_path / ACCESS_FILE
    counts = salience.AccessCounts(path)
    counts.record("ana", ["hot"] * 5)
    for i in range(400):
        counts.record("ana", [f"m{i:04d}", "hot"])
    counts.record("bob", ["m0001"])
    counts.flush()
    on_disk = json.loads(path.read_bytes())["counts"]
    assert len(on_disk["ana"]) <= 50
    assert on_disk["ana"]["hot"] == 405
    assert on_disk["bob"] == {"m0001": 1}  # another principal's counts are not pruned by ana's
    # a file written before the cap (or by hand) is pruned as it is read
    path.write_text(
        json.dumps({"version": 1, "counts": {"ana": {f"x{i}": 1 + (i == 7) for i in range(500)}}})
    )
    reread = salience.AccessCounts(path)
    assert reread.of("ana")("x7") == 2
    assert reread.total() <= 50 + 1


def test_past_the_cap_the_memory_just_returned_is_counted_and_those_returned_long_ago_are_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found attacking session 19's cap: ties were broken for the earliest counted, so with the cap full of
    memories returned once, the one a recall had just returned was the one forgotten (and the next, and the
    next), while memories last returned long ago stayed for good: salience learnt nothing new."""
    monkeypatch.setattr(salience, "MAX_PER_PRINCIPAL", 50)
    path = tmp_path / ACCESS_FILE
    counts = salience.AccessCounts(path)
    counts.record("ana", [f"old{i:02d}" for i in range(50)])
    counts.record("ana", ["old07"])  # returned again: counted twice
    counts.record("ana", ["new"])  # the 51st: a prune
    assert counts.of("ana")("new") == 1
    assert counts.of("ana")("old07") == 2
    assert counts.of("ana")("old00") == 0  # the longest since returned (once) is forgotten
    counts.record("ana", ["old00"])  # and counted afresh when returned again
    counts.flush()
    on_disk = json.loads(path.read_bytes())["counts"]["ana"]
    assert len(on_disk) <= 50
    assert {on_disk["new"], on_disk["old07"], on_disk["old00"]} == {1, 2}
    # the order counted survives a restart: the next prune, in a new process, still forgets the oldest
    reread = salience.AccessCounts(path)
    reread.record("ana", [f"late{i:02d}" for i in range(10)])
    assert reread.of("ana")("new") == 1
    assert reread.of("ana")("late09") == 1
    assert reread.of("ana")("old01") == 0
