"""Day digests of long-running scopes, as a user meets them: the plain memories one scope collected on one day,
digested by the product after the commit, recallable through the memories they summarise, rebuilt when one of
them changes, erased with them, never readable by someone who cannot read their scope, and not lost at a stop."""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from scopes import Grant, Principal
from storage import CachedEmbedder, Engine, InvalidInput, NotFound
from storage.domain.models import MessageIn, WriteItem
from storage.enrich import days
from tests.conftest import files_containing

ANA = [
    "Ana moved to Lisbon in March for a job at Acme Corp.",
    "Ana's sister Ines visits her on June 3.",
    "Ana is allergic to peanuts.",
    "Ana prefers window seats on long flights.",
]


def digests_of(engine: Engine) -> dict[str, str]:
    with engine.graph.read() as conn:
        return engine.graph.all_digests(conn)


def day_digests(engine: Engine) -> list[str]:
    return sorted(d for d, key in digests_of(engine).items() if days.is_day_key(key))


def only_day_digest(engine: Engine) -> str:
    (digest,) = day_digests(engine)
    return digest


def write_all(engine: Engine, lines: list[str], scope: str = "user:ana", **kw: object) -> list[str]:
    return [engine.write(line, [scope], **kw).id for line in lines]  # type: ignore[arg-type]


def test_a_scopes_day_is_digested_in_the_background_and_names_its_sources(engine: Engine) -> None:
    ids = write_all(engine, ANA)
    # a conversation in the same scope has its own digest: its messages are not part of the day's
    engine.write_conversation(
        "chat", [MessageIn("user", "I booked the flight to Porto for the Radiohead concert.")], ["user:ana"]
    )
    engine.digest_quiet = 0
    engine.day_digest_quiet = 0
    assert engine.wait_digested(30)
    d = engine.read(only_day_digest(engine)).memory
    assert d.kind == "summary"
    assert d.scopes == ("user:ana",)
    assert d.provenance.principal == "mnemograph"
    assert d.provenance.source == "digest"
    assert d.metadata["sources"] == sorted(ids)
    assert d.metadata["memories"] == 4
    assert d.metadata["scope"] == "user:ana"
    assert d.metadata["day"] == datetime.now(UTC).date().isoformat()
    assert "conversation" not in d.metadata
    assert "Lisbon" in d.content
    assert "peanuts" in d.content
    assert "Ines" in d.content
    assert "Radiohead" not in d.content
    assert d.content.startswith("Digest of the memories recorded in user:ana on ")


def test_a_day_with_too_few_memories_gets_no_digest(engine: Engine) -> None:
    write_all(engine, ANA[: days.MIN_DAY_MEMORIES - 1])
    engine.consolidate()
    assert day_digests(engine) == []


def test_a_day_still_running_waits_for_its_end_or_for_the_scope_to_go_quiet() -> None:
    key = days.day_key("user:ana", date(2024, 5, 1))
    morning = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
    late = datetime(2024, 5, 1, 23, 30, tzinfo=UTC)
    end = datetime(2024, 5, 2, tzinfo=UTC)
    assert days.hold(key, morning, 3600) == morning + timedelta(hours=1)
    assert days.hold(key, late, 3600) == end  # the day ends before the quiet hour does
    assert (
        days.hold(key, end + timedelta(days=3), 3600) is None
    )  # a source amended later: the usual quiet time
    assert days.hold("0" * 32, morning, 3600) is None  # a conversation is not held
    assert days.day_key("user:ana", date(2024, 5, 1)) != days.day_key("user:bo", date(2024, 5, 1))
    assert "user:ana" not in key


def test_a_day_digest_match_lifts_its_memories_and_is_not_shown_itself(engine: Engine) -> None:
    write_all(engine, ANA)
    engine.write("Bo's favourite band is Radiohead.", ["user:bo"])
    engine.consolidate()
    digest = only_day_digest(engine)
    hits = engine.recall("Lisbon sister Ines peanuts", ["user:ana"])
    assert hits
    assert digest not in {h.memory.id for h in hits}
    assert all(h.memory.kind != "summary" for h in hits)
    sources = engine.read(digest).memory.metadata["sources"]
    assert [h.memory.id for h in hits if h.digest == digest]  # the digest's match lifted its memories
    assert all(h.memory.id in sources for h in hits if h.digest == digest)
    # Asked for summaries, the digest itself comes too, after the memories it summarises.
    shown = engine.recall("Lisbon sister Ines peanuts", ["user:ana"], kinds=["summary", "note"])
    kinds = [h.memory.kind.value for h in shown]
    assert "summary" in kinds
    assert kinds.index("summary") > kinds.index("note")


def test_amending_or_retiring_a_memory_withdraws_the_day_digest_and_rebuilds_it(engine: Engine) -> None:
    ids = write_all(engine, ANA)
    engine.consolidate()
    old = only_day_digest(engine)
    peanuts = next(i for i in ids if "peanuts" in engine.read(i).memory.content)
    new = engine.amend(peanuts, "Ana is allergic to shellfish.", reason="wrong allergen").id
    # at once, before any rebuild: no digest says the old words any more
    assert old not in digests_of(engine)
    hits = engine.recall("peanuts allergy", ["user:ana"], kinds=["summary"])
    assert all("peanuts" not in h.memory.content for h in hits)
    assert engine.consolidate() >= 1
    rebuilt = engine.read(only_day_digest(engine)).memory
    assert "peanuts" not in rebuilt.content
    assert "shellfish" in rebuilt.content
    assert new in rebuilt.metadata["sources"]
    assert peanuts not in rebuilt.metadata["sources"]
    retired = next(i for i in ids if "window seats" in engine.read(i).memory.content)
    engine.retire(retired, reason="no longer true")
    engine.consolidate()
    assert "window" not in engine.read(only_day_digest(engine)).memory.content


def test_erasing_a_memory_erases_the_day_digest_bytes_and_rebuilds_it_without_it(
    engine: Engine, data_dir: Path
) -> None:
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    ids = write_all(engine, [*ANA, f"Ana's door code is {canary}."])
    engine.consolidate()
    old = only_day_digest(engine)
    assert canary in engine.read(old).memory.content
    secret = ids[-1]
    erased = engine.erase(secret, confirm=secret)
    assert set(erased.erased) == {secret, old}  # the digest went in the same erasure
    assert files_containing(data_dir, canary.encode()) == []
    engine.consolidate()
    new = engine.read(only_day_digest(engine)).memory
    assert canary not in new.content
    assert "Lisbon" in new.content
    assert files_containing(data_dir, canary.encode()) == []


def test_a_source_erased_while_its_day_digest_is_built_never_comes_back_in_it(
    engine: Engine, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The erasure commits after the digest read the day's memories and before the digest is swapped in (it is
    being embedded): the digest built from the erased words must not be stored."""
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    ids = write_all(engine, [*ANA, f"Ana's door code is {canary}."])
    secret, erased = ids[-1], []
    real = engine.embedder.embed

    def erase_first(texts: list[str]) -> object:
        if not erased and any(canary in t for t in texts):
            erased.append(engine.erase(secret, confirm=secret))
        return real(texts)

    monkeypatch.setattr(engine.embedder, "embed", erase_first)
    engine.consolidate()
    assert erased, "the digest was never built"
    monkeypatch.undo()
    engine.consolidate()  # built again, from what is left
    assert canary not in engine.read(only_day_digest(engine)).memory.content
    assert files_containing(data_dir, canary.encode()) == []


def test_erasing_down_to_too_few_memories_leaves_no_day_digest(engine: Engine) -> None:
    ids = write_all(engine, ANA[:3])
    engine.consolidate()
    digest = only_day_digest(engine)
    assert digest in engine.erase(ids[0], confirm=ids[0]).erased
    engine.consolidate()
    assert day_digests(engine) == []


def test_another_principal_never_reads_a_day_digest_of_a_scope_it_cannot_read(engine: Engine) -> None:
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    write_all(engine, [*ANA, f"Ana's bank PIN is {canary}."])
    write_all(engine, ["The website launch is on Friday.", "The website uses Django 5.", "Rui owns the DNS."],
              scope="project:web")  # fmt: skip
    engine.consolidate()
    by_scope = {engine.read(d).memory.metadata["scope"]: d for d in day_digests(engine)}
    assert set(by_scope) == {"user:ana", "project:web"}
    colleague = Principal("rui", client="t", grants=(Grant.parse("project:web=r"),))
    hits = engine.recall(
        "bank PIN Lisbon website", ["project:web"], kinds=["summary", "fact"], principal=colleague
    )
    assert hits
    assert all(canary not in h.memory.content and "Lisbon" not in h.memory.content for h in hits)
    assert by_scope["project:web"] in {h.memory.id for h in hits}
    try:
        engine.read(by_scope["user:ana"], principal=colleague)
    except NotFound:
        pass
    else:
        raise AssertionError("a day digest of user:ana was readable by a principal who cannot read user:ana")


def test_queued_day_digests_are_not_lost_when_the_process_stops(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        write_all(engine, ANA)
        assert day_digests(engine) == []  # the day is still running and the scope not quiet for an hour
        assert engine.wait_digested(5)  # nothing held back counts as waiting
    # Nothing was kept in memory: the store says which day waits, and the next start digests it.
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        engine.day_digest_quiet = 0
        assert engine.wait_digested(30)
        assert "Lisbon" in engine.read(only_day_digest(engine)).memory.content


def test_rebuild_rebuilds_day_digests_too(engine: Engine) -> None:
    write_all(engine, ANA)
    engine.consolidate()
    digest = only_day_digest(engine)
    engine.erase(digest, confirm=digest)  # erased on its own: rebuilt from its memories
    try:
        engine.read(digest)
    except NotFound:
        pass
    else:
        raise AssertionError("the erased digest is still readable")
    assert engine.rebuild_digests() >= 1
    rebuilt = engine.read(only_day_digest(engine)).memory
    assert rebuilt.content.startswith("Digest of the memories recorded in user:ana")
    assert "Lisbon" in rebuilt.content


def test_a_conversation_digest_erased_on_its_own_is_rebuilt(engine: Engine) -> None:
    """Its words are the same, so is its id: the rebuild must store it again, not take it as already there."""
    engine.write_conversation("chat-r", [MessageIn("user", line) for line in ANA], ["user:ana"])
    engine.consolidate()
    (digest,) = digests_of(engine)
    engine.erase(digest, confirm=digest)
    engine.rebuild_digests()
    (again,) = digests_of(engine)
    assert "Lisbon" in engine.read(again).memory.content


def test_unlinking_a_memory_takes_its_words_out_of_the_day_digest_read_in_that_scope(engine: Engine) -> None:
    ids = [engine.write(line, ["user:ana", "team:family"]).id for line in ANA]
    engine.consolidate()
    family = Principal("sis", client="t", grants=(Grant.parse("team:family=r"),))
    peanuts = next(i for i in ids if "peanuts" in engine.read(i).memory.content)

    def said_in_family() -> str:
        hits = engine.recall("peanuts allergy Lisbon", ["team:family"], kinds=["summary"], principal=family)
        return " ".join(h.memory.content for h in hits)

    assert "peanuts" in said_in_family()
    engine.unlink(peanuts, "team:family")
    assert "peanuts" not in said_in_family()  # at once, before any rebuild
    engine.consolidate()
    assert "Lisbon" in said_in_family()
    assert "peanuts" not in said_in_family()
    hits = engine.recall("Lisbon sister Ines peanuts", ["team:family"], principal=family)
    assert hits
    assert peanuts not in {h.memory.id for h in hits}  # not lifted by a digest into a scope it left
    ana = {engine.read(d).memory.metadata["scope"]: engine.read(d).memory for d in day_digests(engine)}
    assert "peanuts" in ana["user:ana"].content  # still in every scope it is in


def test_purging_the_scope_leaves_no_day_digest_bytes(engine: Engine, data_dir: Path) -> None:
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    write_all(engine, [*ANA, f"Ana's locker code is {canary}."])
    write_all(engine, ["The office is on Rua Augusta.", "The office opens at 8.", "Rui has the office keys."],
              scope="user:other")  # fmt: skip
    engine.consolidate()
    assert len(day_digests(engine)) == 2
    engine.purge("user:ana", confirm="user:ana")
    assert [engine.read(d).memory.metadata["scope"] for d in day_digests(engine)] == ["user:other"]
    assert engine.consolidate() == 0
    assert files_containing(data_dir, canary.encode()) == []
    assert files_containing(data_dir, b"Ines") == []


def test_a_bulk_write_joins_the_day_like_single_writes(engine: Engine) -> None:
    receipts = engine.write_many([WriteItem(line, ["user:ana"]) for line in ANA])
    engine.consolidate()
    d = engine.read(only_day_digest(engine)).memory
    assert d.metadata["sources"] == sorted(r.id for r in receipts)  # type: ignore[union-attr]


def test_with_the_consolidator_off_a_running_day_is_not_reported_as_waiting(engine: Engine) -> None:
    engine.stop_consolidation()
    write_all(engine, ANA)
    assert engine.wait_digested(0)  # held until the day is over or the scope is quiet: nothing is due yet
    engine.day_digest_quiet = 0
    assert not engine.wait_digested(0)  # due now, and the consolidator is off: it waits in the store
    assert engine.consolidate() == 1  # `mnemograph digests` builds it
    assert engine.wait_digested(0)


DAY = [
    "Ana moved to Lisbon in March for a job at Acme Corp.",
    "Ana's sister Ines visits her on June 3.",
    "Ana is allergic to peanuts.",
    "Ana prefers window seats on long flights.",
    "Ana's dentist is Dr. Sousa on Rua Augusta.",
    "Ana runs 10 km every Sunday morning.",
    "Ana's laptop is a ThinkPad X1 bought in 2023.",
    "Ana is learning Japanese on Duolingo.",
    "Ana's cat is called Miso.",
    "Ana's manager at Acme Corp is Pedro.",
    "Ana drinks oat milk flat whites.",
    "Ana wants to visit Kyoto next spring.",
]


def test_a_day_digest_brings_no_memory_the_query_did_not_find_itself(engine: Engine) -> None:
    # A day is no topic: a question matching only the digest's own framing ("memories recorded ... between
    # local") or the blend of a day's unrelated memories got two arbitrary memories of that day, and a precise
    # question got an unrelated memory beside its answer (recall without the digest left both out).
    write_all(engine, DAY)

    def ask(q: str) -> list[str]:
        return [h.memory.content for h in engine.recall(q, ["user:ana"], k=5)]

    framing = "memories recorded between local"
    assert ask(framing) == []
    alone = ask("computer")
    assert alone == ["Ana's laptop is a ThinkPad X1 bought in 2023."]
    engine.consolidate()
    digest = engine.read(only_day_digest(engine)).memory
    assert "memories recorded" in digest.content
    assert "between local" in digest.content
    assert ask(framing) == []
    assert ask("computer") == alone
    # Its sources the lanes did find are still lifted by it.
    hits = engine.recall("Lisbon sister Ines peanuts", ["user:ana"])
    assert [h for h in hits if h.digest == digest.id]


def zed_export(tmp_path: Path) -> list[dict[str, object]]:
    src = Engine.open(tmp_path / "src", warm=False)
    try:
        write_all(src, ["Zed keeps bees in Sintra.", "Zed sells honey on Saturdays.", "Zed's hives are blue."],
                  scope="user:zed")  # fmt: skip
        buf = io.StringIO()
        src.export(buf)
    finally:
        src.close()
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_an_import_saying_a_memory_was_recorded_in_the_future_is_refused_whole(
    engine: Engine, tmp_path: Path
) -> None:
    # An export (hostile or from a broken clock) may say a memory was recorded on 9999-12-31: its day never
    # ends, and once it stopped every digest. A store cannot have learnt something tomorrow: refused, with the
    # line, the field and what to do; nothing imported. Valid times may lie ahead, as memory_write allows.
    lines = zed_export(tmp_path)
    for rec in lines:
        if rec.get("type") == "memory":
            rec["recorded_at"] = "9999-12-31T12:00:00+00:00"
            rec["valid_from"] = "2999-01-01T00:00:00+00:00"
    with pytest.raises(InvalidInput) as refused:
        engine.merge_export(io.StringIO("".join(json.dumps(r) + "\n" for r in lines)))
    assert refused.value.message.startswith("line ")
    assert "recorded_at 9999-12-31" in refused.value.message
    assert "future" in refused.value.message
    assert "nothing was imported" in (refused.value.hint or "")
    assert "fix that time" in (refused.value.hint or "")
    assert engine.list_scopes() == [] or "user:zed" not in {s.id for s in engine.list_scopes()}
    # A clock a few hours ahead is within the skew; a valid time far ahead is a valid time.
    ahead = (datetime.now(UTC) + timedelta(hours=3)).isoformat()
    for rec in lines:
        if rec.get("type") == "memory":
            rec["recorded_at"] = ahead
    engine.merge_export(io.StringIO("".join(json.dumps(r) + "\n" for r in lines)))
    ids = [str(r["id"]) for r in lines if r.get("type") == "memory"]
    assert [engine.read(i).memory.valid_from.year for i in ids] == [2999] * 3


def test_one_poisoned_digest_key_does_not_stop_the_other_scopes_digests(engine: Engine) -> None:
    # A corrupt day node (left by a hostile import an older version accepted, or a damaged store) whose day
    # cannot be read: working out when it was due raised, the consolidator's round stopped there every time,
    # and no other scope's day digest or conversation's digest was built again; wait_digested raised.
    zed = write_all(engine, ["Zed keeps bees in Sintra.", "Zed sells honey on Saturdays.", "Zed's hives are blue."],
                    scope="user:zed")  # fmt: skip
    poisoned = f"{days.DAY_PREFIX}not-a-date:{days.scope_tag('user:zed')}"
    engine.reconciler.submit(lambda tx: engine.graph.join_conversation(tx.conn, poisoned, zed, tx.now))
    write_all(engine, ANA)
    write_all(
        engine, ["Bo plays the cello.", "Bo lives in Braga.", "Bo's cello teacher is Marta."], scope="user:bo"
    )
    engine.write_conversation("chat-p", [MessageIn("user", "I booked the flight to Porto.")], ["user:ana"])
    engine.digest_quiet = 0
    engine.day_digest_quiet = 0
    assert engine.wait_digested(30)
    scopes = sorted(engine.read(d).memory.metadata["scope"] for d in day_digests(engine))
    assert scopes == ["user:ana", "user:bo", "user:zed"]
    assert any(not days.is_day_key(k) for k in digests_of(engine).values())  # the conversation's too
    hits = engine.recall("cello teacher", ["user:bo"])
    assert hits
    assert "Marta" in hits[0].memory.content
    # `mnemograph digests` (a flush) builds the rest as well and reports the poisoned key as not built.
    assert engine.rebuild_digests() >= 3


def test_a_day_digest_amended_by_hand_goes_when_it_is_rebuilt_so_erasing_a_source_leaves_no_word(
    engine: Engine, data_dir: Path
) -> None:
    # A hand-made version of a digest quotes its sources. The rebuild after the next memory of the day deleted
    # the digest it amended, so nothing tied it to them any more: erasing a source left the source's words in
    # it (recall showed them, and they stayed on disk).
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    ids = write_all(engine, [*ANA[:3], f"Ana's door code is {canary}."])
    engine.consolidate()
    digest = engine.read(only_day_digest(engine)).memory
    mine = engine.amend(digest.id, digest.content + "\nChecked by Ana.", reason="checked").id
    write_all(engine, [ANA[3]])
    engine.consolidate()
    rebuilt = only_day_digest(engine)
    secret = ids[-1]
    engine.erase(secret, confirm=secret)
    engine.consolidate()
    hits = engine.recall("door code", ["user:ana"], kinds=["summary", "fact"], include_history=True)
    assert all(canary not in h.memory.content for h in hits)
    for gone in (digest.id, mine, rebuilt):
        try:
            engine.read(gone)
        except NotFound:
            pass
        else:
            raise AssertionError(f"{gone} still reads after its source was erased")
    assert canary not in engine.read(only_day_digest(engine)).memory.content
    assert files_containing(data_dir, canary.encode()) == []
