"""Week digests and a scope's own time zone, as a user meets them: a scope's memories over several days of one
week digested once the week is over, recallable only through the memories the query found, withdrawn and rebuilt
when one changes, erased with them (bytes on disk), never exported (rebuilt after import), never readable by
someone who cannot read the scope; and days and weeks counted in the scope's time zone when it sets one."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from scopes import Grant, Principal
from storage import Engine, InvalidInput, NotFound, ScopeDenied
from storage.enrich import days
from tests.conftest import files_containing

MONDAY = [
    "Ana moved to Lisbon in March for a job at Acme Corp.",
    "Ana's sister Ines visits her on June 3.",
    "Ana is allergic to peanuts.",
]
WEDNESDAY = [
    "Ana prefers window seats on long flights.",
    "Ana's dentist is Dr. Sousa on Rua Augusta.",
    "Ana's cat is called Miso.",
]
WEEK = date(2026, 11, 2)  # the Monday of ISO week 2026-W45


def at(day: date, hour: int = 10, minute: int = 0) -> str:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC).isoformat()


def import_recorded(
    engine: Engine, tmp_path: Path, when: Mapping[str, str], scope: str = "user:ana"
) -> dict[str, str]:
    """Memories recorded at the given times (content -> ISO time), by way of an export: content -> id."""
    src = Engine.open(tmp_path / f"src-{uuid.uuid4().hex[:8]}", warm=False)
    try:
        for line in when:
            src.write(line, [scope] if isinstance(scope, str) else scope)
        buf = io.StringIO()
        src.export(buf)
    finally:
        src.close()
    out = []
    ids = {}
    for rec in (json.loads(line) for line in buf.getvalue().splitlines()):
        if rec.get("type") == "memory":
            t = when[rec["content"]]
            rec["recorded_at"] = rec["valid_from"] = rec["event_time"] = t
            rec["scopes"] = {s: t for s in rec["scopes"]}
            ids[rec["content"]] = rec["id"]
        out.append(json.dumps(rec) + "\n")
    engine.merge_export(io.StringIO("".join(out)))
    return ids


def a_week(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    when = {line: at(WEEK) for line in MONDAY} | {line: at(WEEK + timedelta(days=2)) for line in WEDNESDAY}
    return when | dict(extra or {})


def digests_of(engine: Engine) -> dict[str, str]:
    with engine.graph.read() as conn:
        return engine.graph.all_digests(conn)


def week_digests(engine: Engine) -> list[str]:
    return sorted(d for d, key in digests_of(engine).items() if days.is_week_key(key))


def day_digests(engine: Engine) -> list[str]:
    return sorted(d for d, key in digests_of(engine).items() if days.is_day_key(key))


def test_a_scopes_week_is_digested_from_its_memories_and_lifts_only_what_the_query_found(
    engine: Engine, tmp_path: Path
) -> None:
    ids = import_recorded(engine, tmp_path, a_week())

    def found(q: str) -> set[str]:
        return {h.memory.content for h in engine.recall(q, ["user:ana"], k=5)}

    queries = ["Lisbon Acme cat Miso", "computer", "memories recorded in the week between ana"]
    alone = {q: found(q) for q in queries}
    engine.consolidate()
    (week,) = week_digests(engine)
    assert len(day_digests(engine)) == 2
    d = engine.read(week).memory
    assert d.kind == "summary"
    assert d.scopes == ("user:ana",)
    assert d.provenance.source == "digest"
    assert d.metadata["week"] == "2026-W45"
    assert d.metadata["scope"] == "user:ana"
    assert d.metadata["memories"] == 6
    assert d.metadata["sources"] == sorted(ids.values())
    assert d.content.startswith(
        "Digest of the memories recorded in user:ana in the week 2026-W45, 2026-11-02 to 2026-11-08: 6 memories"
    )
    assert "Miso" in d.content
    assert "Lisbon" in d.content
    hits = engine.recall("Lisbon Acme cat Miso", ["user:ana"], k=5)
    assert hits
    assert all(h.memory.kind != "summary" for h in hits)
    # Lifted memories are ones the lanes found: no memory comes only because it shares the week.
    for q in queries:
        assert found(q) <= alone[q], q
    assert {MONDAY[0], WEDNESDAY[2]} <= alone["Lisbon Acme cat Miso"]
    assert [h for h in hits if h.digest is not None]  # the digests' match lifted them
    shown = engine.recall("Lisbon Acme cat Miso", ["user:ana"], kinds=["summary"])
    assert week in {h.memory.id for h in shown}


def test_a_week_of_one_day_or_too_few_memories_gets_no_week_digest(engine: Engine, tmp_path: Path) -> None:
    import_recorded(engine, tmp_path, {line: at(WEEK) for line in [*MONDAY, *WEDNESDAY]})  # all on Monday
    later = WEEK + timedelta(days=7)
    import_recorded(
        engine,
        tmp_path,
        {MONDAY[0] + " Again.": at(later), WEDNESDAY[0] + " Again.": at(later + timedelta(days=1))},
    )
    engine.consolidate()
    assert week_digests(engine) == []
    assert len(day_digests(engine)) == 1


def test_a_running_week_waits_for_its_local_end_or_for_the_scope_to_go_quiet() -> None:
    key = days.week_key("user:ana", date(2026, 11, 4))
    assert key == days.week_key("user:ana", WEEK)
    assert key != days.week_key("user:bo", WEEK)
    sunday = datetime(2026, 11, 8, 23, 0, tzinfo=UTC)
    end = datetime(2026, 11, 9, tzinfo=UTC)
    assert days.hold(key, sunday, 7200) == end
    assert days.hold(key, datetime(2026, 11, 3, 9, 0, tzinfo=UTC), 3600) == datetime(
        2026, 11, 3, 10, 0, tzinfo=UTC
    )
    assert days.hold(key, end + timedelta(days=1), 3600) is None
    tokyo = ZoneInfo("Asia/Tokyo")  # the week ends at Monday 00:00 in Tokyo: Sunday 15:00 UTC
    assert days.hold(key, datetime(2026, 11, 8, 14, 0, tzinfo=UTC), 7200, tokyo) == datetime(
        2026, 11, 8, 15, 0, tzinfo=UTC
    )
    last = days.week_key("user:ana", date(9999, 12, 31))  # no week after it: quiet time alone, no error
    assert days.hold(last, sunday, 60) == sunday + timedelta(seconds=60)


def test_amending_a_memory_withdraws_the_week_digest_at_once_and_rebuilds_it(
    engine: Engine, tmp_path: Path
) -> None:
    ids = import_recorded(engine, tmp_path, a_week())
    engine.consolidate()
    (old,) = week_digests(engine)
    new = engine.amend(ids[MONDAY[2]], "Ana is allergic to shellfish.", reason="wrong allergen").id
    assert old not in digests_of(engine)
    assert week_digests(engine) == []
    hits = engine.recall("peanuts allergy", ["user:ana"], kinds=["summary"])
    assert all("peanuts" not in h.memory.content for h in hits)
    engine.consolidate()
    (rebuilt,) = week_digests(engine)
    m = engine.read(rebuilt).memory
    assert "shellfish" in m.content
    assert "peanuts" not in m.content
    assert new in m.metadata["sources"]


def test_erasing_a_memory_erases_the_week_digest_bytes_and_rebuilds_it(
    engine: Engine, data_dir: Path, tmp_path: Path
) -> None:
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    secret = f"Ana's door code is {canary}."
    ids = import_recorded(engine, tmp_path, a_week({secret: at(WEEK + timedelta(days=4))}))
    engine.consolidate()
    (week,) = week_digests(engine)
    assert canary in engine.read(week).memory.content
    erased = engine.erase(ids[secret], confirm=ids[secret])
    assert week in erased.erased
    assert files_containing(data_dir, canary.encode()) == []
    engine.consolidate()
    (again,) = week_digests(engine)
    assert canary not in engine.read(again).memory.content
    assert files_containing(data_dir, canary.encode()) == []


def test_purging_the_scope_leaves_no_week_digest_bytes(
    engine: Engine, data_dir: Path, tmp_path: Path
) -> None:
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    import_recorded(
        engine, tmp_path, a_week({f"Ana's locker code is {canary}.": at(WEEK + timedelta(days=5))})
    )
    engine.consolidate()
    assert len(week_digests(engine)) == 1
    engine.purge("user:ana", confirm="user:ana")
    assert week_digests(engine) == []
    engine.consolidate()
    assert files_containing(data_dir, canary.encode()) == []


def test_another_principal_never_reads_a_week_digest_of_a_scope_it_cannot_read(
    engine: Engine, tmp_path: Path
) -> None:
    import_recorded(engine, tmp_path, a_week())
    engine.consolidate()
    (week,) = week_digests(engine)
    stranger = Principal("rui", client="t", grants=(Grant.parse("project:web=r"),))
    with pytest.raises(NotFound):
        engine.read(week, principal=stranger)


def test_week_digests_are_not_exported_and_are_rebuilt_after_import(engine: Engine, tmp_path: Path) -> None:
    import_recorded(engine, tmp_path, a_week())
    engine.consolidate()
    (week,) = week_digests(engine)
    buf = io.StringIO()
    engine.export(buf)
    assert week not in buf.getvalue()
    assert "Digest of the memories" not in buf.getvalue()
    assert "week:" not in buf.getvalue()
    copy = Engine.open(tmp_path / "copy", warm=False)
    try:
        copy.merge_export(io.StringIO(buf.getvalue()))
        copy.consolidate()
        (rebuilt,) = week_digests(copy)
        assert copy.read(rebuilt).memory.metadata["week"] == "2026-W45"
    finally:
        copy.close()


def test_a_scope_in_tokyo_counts_a_memory_recorded_at_2330_utc_in_the_next_day(
    engine: Engine, tmp_path: Path
) -> None:
    # Sunday 23:30 UTC is Monday 08:30 in Tokyo: that memory falls in the next day and the next ISO week.
    late = datetime(2026, 11, 8, 23, 30, tzinfo=UTC)
    assert days.local_day(late, ZoneInfo("Asia/Tokyo")) == date(2026, 11, 9)
    when = {line: late.isoformat() for line in MONDAY}
    when |= {line: (late + timedelta(days=1)).isoformat() for line in WEDNESDAY}
    engine.create_scope("user:ana")
    assert engine.scope_time_zone("user:ana") == "UTC"
    engine.consolidate()
    import_recorded(engine, tmp_path, when)
    engine.consolidate()
    utc_days = sorted(engine.read(d).memory.metadata["day"] for d in day_digests(engine))
    assert utc_days == ["2026-11-08", "2026-11-09"]
    assert week_digests(engine) == []  # W45 and W46 hold one day each
    # The zone changes: the memories are regrouped by their local day at once, the digests rebuilt.
    assert engine.set_scope_time_zone("user:ana", "Asia/Tokyo") == "Asia/Tokyo"
    assert engine.scope_time_zone("user:ana") == "Asia/Tokyo"
    assert day_digests(engine) == []
    engine.consolidate()
    tokyo_days = sorted(engine.read(d).memory.metadata["day"] for d in day_digests(engine))
    assert tokyo_days == ["2026-11-09", "2026-11-10"]
    (week,) = week_digests(engine)
    assert engine.read(week).memory.metadata["week"] == "2026-W46"
    # A new write is counted in the scope's zone too.
    engine.write("Ana's plants need water on Thursdays.", ["user:ana"])
    with engine.graph.read() as conn:
        pending = [k for k, _ in engine.graph.pending_conversations(conn)]
    today = days.local_day(datetime.now(UTC), ZoneInfo("Asia/Tokyo"))
    assert days.day_key("user:ana", today) in pending
    # Back to UTC: regrouped again.
    engine.set_scope_time_zone("user:ana", "UTC")
    engine.consolidate()
    assert sorted(engine.read(d).memory.metadata["day"] for d in day_digests(engine)) == utc_days


def test_a_bad_time_zone_is_refused_and_nothing_changes(engine: Engine, tmp_path: Path) -> None:
    import_recorded(engine, tmp_path, a_week())
    engine.consolidate()
    before = digests_of(engine)
    for bad in ("Mars/Olympus", "../../etc/passwd", "", "Asia/Tokyo\x00"):
        with pytest.raises(InvalidInput) as refused:
            engine.set_scope_time_zone("user:ana", bad)
        assert "IANA" in (refused.value.hint or "")
        assert "nothing was changed" in (refused.value.hint or "")
    assert engine.scope_time_zone("user:ana") == "UTC"
    assert digests_of(engine) == before
    reader = Principal("sis", client="t", grants=(Grant.parse("user:ana=r"),))
    with pytest.raises(Exception, match="admin"):
        engine.set_scope_time_zone("user:ana", "Asia/Tokyo", principal=reader)
    assert engine.scope_time_zone("user:ana") == "UTC"


def test_a_scopes_time_zone_survives_a_restart_and_goes_with_a_purge(
    data_dir: Path, tmp_path: Path, embedder: object
) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:  # type: ignore[arg-type]
        engine.create_scope("user:ana")
        engine.set_scope_time_zone("user:ana", "Asia/Tokyo")
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:  # type: ignore[arg-type]
        assert engine.scope_time_zone("user:ana") == "Asia/Tokyo"
        engine.write("Ana's plants need water on Thursdays.", ["user:ana"])
        engine.purge("user:ana", confirm="user:ana")
    assert files_containing(data_dir, b"Asia/Tokyo") == []


def test_an_export_carries_the_scopes_time_zone_and_the_import_counts_days_in_it(
    engine: Engine, tmp_path: Path
) -> None:
    late = datetime(2026, 11, 8, 23, 30, tzinfo=UTC)  # Monday 08:30 in Tokyo
    engine.create_scope("user:ana")
    engine.set_scope_time_zone("user:ana", "Asia/Tokyo")
    import_recorded(engine, tmp_path, {line: late.isoformat() for line in MONDAY})
    buf = io.StringIO()
    engine.export(buf)
    copy = Engine.open(tmp_path / "copy", warm=False)
    try:
        copy.merge_export(io.StringIO(buf.getvalue()))
        assert copy.scope_time_zone("user:ana") == "Asia/Tokyo"
        copy.consolidate()
        (day,) = day_digests(copy)
        assert copy.read(day).memory.metadata["day"] == "2026-11-09"
    finally:
        copy.close()
    # A zone the machine does not know refuses the whole file, naming it; nothing is imported.
    bad = buf.getvalue().replace('"time_zone": "Asia/Tokyo"', '"time_zone": "Mars/Olympus"')
    assert bad != buf.getvalue()
    other = Engine.open(tmp_path / "other", warm=False)
    try:
        with pytest.raises(InvalidInput, match="Mars/Olympus"):
            other.merge_export(io.StringIO(bad))
        assert "user:ana" not in {s.id for s in other.list_scopes()}
    finally:
        other.close()


def test_unlinking_or_retiring_a_memory_takes_its_words_out_of_the_week_digest_read_in_that_scope(
    engine: Engine, tmp_path: Path
) -> None:
    friday = {"Ana's brother Joao visits on Friday evening.": at(WEEK + timedelta(days=4))}
    ids = import_recorded(engine, tmp_path, a_week(friday), scope=["user:ana", "team:family"])
    engine.consolidate()
    family = Principal("sis", client="t", grants=(Grant.parse("team:family=r"),))

    def week_said_in_family() -> str:
        hits = engine.recall(
            "peanuts allergy Lisbon Miso", ["team:family"], kinds=["summary"], principal=family
        )
        return " ".join(h.memory.content for h in hits if "in the week" in h.memory.content)

    assert "peanuts" in week_said_in_family()
    engine.unlink(ids[MONDAY[2]], "team:family")
    assert "peanuts" not in week_said_in_family()  # at once, before any rebuild
    engine.retire(ids[WEDNESDAY[2]], reason="the cat moved out")
    engine.consolidate()
    said = week_said_in_family()
    assert "Lisbon" in said
    assert "peanuts" not in said
    assert "Miso" not in said
    by_scope = {engine.read(w).memory.metadata["scope"]: engine.read(w).memory for w in week_digests(engine)}
    assert "peanuts" in by_scope["user:ana"].content  # still in every scope it is in
    with pytest.raises(NotFound):
        engine.read(next(w for w in week_digests(engine) if engine.read(w).memory.metadata["scope"] == "user:ana"),
                    principal=family)  # fmt: skip


def test_a_zone_that_is_no_iana_name_is_refused_and_a_miscased_one_is_named(
    engine: Engine, tmp_path: Path
) -> None:
    # "localtime" follows this machine's /etc/localtime (the scope's days would move with the machine, and an
    # export would mean another zone elsewhere); "right/..." zones count leap seconds, which Python misreads
    # (right/Europe/Berlin said UTC+2 in November); "posix/..." and "posixrules" are copies a machine may lack.
    import_recorded(engine, tmp_path, a_week())
    engine.consolidate()
    before = digests_of(engine)
    for bad in ("localtime", "posixrules", "right/Europe/Berlin", "right/UTC", "posix/Europe/Berlin"):
        with pytest.raises(InvalidInput) as refused:
            engine.set_scope_time_zone("user:ana", bad)
        assert "nothing was changed" in (refused.value.hint or ""), bad
    assert engine.scope_time_zone("user:ana") == "UTC"
    assert digests_of(engine) == before
    with pytest.raises(InvalidInput) as refused:
        engine.set_scope_time_zone("user:ana", "europe/berlin")
    assert "Europe/Berlin" in (refused.value.hint or "")
    # An export naming such a zone is refused too, nothing imported.
    buf = io.StringIO()
    engine.export(buf)
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    for rec in lines:
        if rec.get("type") == "scope" and rec["id"] == "user:ana":
            rec["time_zone"] = "localtime"
    other = Engine.open(tmp_path / "other", warm=False)
    try:
        with pytest.raises(InvalidInput, match="localtime"):
            other.merge_export(io.StringIO("".join(json.dumps(r) + "\n" for r in lines)))
        assert "user:ana" not in {s.id for s in other.list_scopes()}
    finally:
        other.close()


def test_the_zone_of_a_scope_that_does_not_exist_is_not_said_to_be_utc(engine: Engine) -> None:
    # A typo ("user:anna") or a purged scope: "days and weeks in UTC" would be a false answer.
    with pytest.raises(NotFound, match="user:anna"):
        engine.scope_time_zone("user:anna")
    engine.create_scope("user:ana")
    engine.set_scope_time_zone("user:ana", "Asia/Tokyo")
    engine.purge("user:ana", confirm="user:ana")
    with pytest.raises(NotFound):
        engine.scope_time_zone("user:ana")
    stranger = Principal("rui", client="t", grants=(Grant.parse("project:web=r"),))
    with pytest.raises(ScopeDenied) as denied:  # the same refusal whether it exists or not
        engine.scope_time_zone("user:anna", principal=stranger)
    engine.create_scope("user:anna")
    with pytest.raises(ScopeDenied) as again:
        engine.scope_time_zone("user:anna", principal=stranger)
    assert str(again.value) == str(denied.value)


def test_a_digest_scores_a_sentence_by_the_names_in_it_as_a_scan_of_every_name_would() -> None:
    import random

    from storage.enrich.digest import named_in

    rng = random.Random(7)
    words = ["ana", "anabela", "bruno", "rua augusta", "acme corp", "lis", "lisbon", "miso", "ines", "sousa"]
    for _ in range(300):
        names = rng.sample(words, rng.randint(0, len(words)))
        by_prefix: dict[str, list[str]] = {}
        for k in names:
            if len(k) > 2:
                by_prefix.setdefault(k[:3], []).append(k)
        low = " ".join(rng.choice([*words, "the", "cat", "banana", "x"]) for _ in range(rng.randint(0, 12)))
        assert named_in(low, by_prefix) == min(2, sum(1 for k in names if k in low and len(k) > 2)), (
            low,
            names,
        )


def test_a_stored_zone_this_machine_no_longer_takes_counts_as_utc_and_is_left_out_of_the_export(
    engine: Engine, tmp_path: Path
) -> None:
    # "localtime" set before such names were refused (or a zone a later zone database dropped): the scope
    # counts in UTC, says so, and its export still imports elsewhere.
    engine.create_scope("user:ana")
    engine.write("Ana's plants need water on Thursdays.", ["user:ana"])
    engine.reconciler.submit(lambda tx: engine.graph.set_scope_zone(tx.conn, "user:ana", "localtime"))
    engine._reload_zones()
    assert engine.scope_time_zone("user:ana") == "UTC"
    buf = io.StringIO()
    engine.export(buf)
    assert "localtime" not in buf.getvalue()
    copy = Engine.open(tmp_path / "copy", warm=False)
    try:
        copy.merge_export(io.StringIO(buf.getvalue()))
        assert copy.scope_time_zone("user:ana") == "UTC"
        assert [h.memory.content for h in copy.recall("plants water", ["user:ana"])]
    finally:
        copy.close()
    # A purge forgets it too (the scope's name is kept with it).
    engine.purge("user:ana", confirm="user:ana")
    with engine.graph.read() as conn:
        assert "user:ana" not in engine.graph.scope_zones(conn)


def test_purging_a_scope_drops_its_days_and_weeks_even_of_memories_shared_with_another(
    engine: Engine, data_dir: Path, tmp_path: Path
) -> None:
    # The memories stay in project:web; user:ana's days and weeks of them went on naming user:ana (by its tag,
    # a hash anyone can compute from a guessed name) after the purge, and a user:ana made again later got back
    # days of memories never recorded in it.
    engine.create_scope("user:ana")
    engine.create_scope("project:web")
    ids = import_recorded(engine, tmp_path, a_week(), scope=["user:ana", "project:web"])  # type: ignore[arg-type]
    engine.consolidate()
    tag = days.scope_tag("user:ana")
    with engine.graph.read() as conn:  # what the purge finds of them, without reading every membership
        own = [k for k, _ in engine.graph.export_conversations(conn) if days.tag_of(k) == tag]
        assert own
        assert engine.graph.conversation_keys_ending(conn, ":" + tag) == sorted(own)
    engine.purge("user:ana", confirm="user:ana")
    engine.consolidate()
    with engine.graph.read() as conn:
        assert [k for k, _ in engine.graph.export_conversations(conn) if days.tag_of(k) == tag] == []
        assert engine.graph.conversation_keys_ending(conn, ":" + tag) == []
    assert files_containing(data_dir, tag.encode()) == []
    assert len(week_digests(engine)) == 1  # project:web's own
    engine.create_scope("user:ana")
    for line in MONDAY:
        engine.link(ids[line], "user:ana")
    engine.consolidate()
    assert [d for d in digests_of(engine) if engine.read(d).memory.scopes == ("user:ana",)] == []
