"""Conversation digests, as a user meets them: built by the product after the commit (debounced), recallable
through the messages they summarise, rebuilt after a restart, erased with their sources, never wider than them."""

from __future__ import annotations

import hashlib
import io
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scopes import Grant, Level, Principal, ScopeId
from storage import CachedEmbedder, Engine, NotFound
from storage.domain.models import MessageIn
from storage.engine.conversations import conversation_key
from storage.engine.state import content_id
from storage.enrich.digest import MAX_DIGEST_CHARS
from storage.ports.embedder import Vectors
from tests.conftest import files_containing

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def chat(*lines: tuple[str, str]) -> list[MessageIn]:
    return [MessageIn(role, text, T0 + timedelta(minutes=n)) for n, (role, text) in enumerate(lines)]


MOVE = chat(
    ("user", "I just moved to Lisbon for a job at Acme Corp."),
    ("assistant", "Congratulations! How is the new flat?"),
    ("user", "Small but sunny. My sister Ines visits on June 3."),
    ("user", "I'm allergic to peanuts, so the welcome dinner needs care."),
)


def digests_of(engine: Engine) -> dict[str, str]:
    with engine.graph.read() as conn:
        return engine.graph.all_digests(conn)


def only_digest(engine: Engine) -> str:
    (digest,) = digests_of(engine)
    return digest


def test_a_digest_is_built_after_the_commit_and_names_its_sources(engine: Engine) -> None:
    engine.digest_quiet = 0
    receipt = engine.write_conversation("chat-1", MOVE, ["user:ana"])
    assert receipt.digest == "scheduled"
    assert engine.wait_digested(30)
    d = engine.read(only_digest(engine)).memory
    assert d.kind == "summary"
    assert d.scopes == ("user:ana",)
    assert d.provenance.principal == "mnemograph"
    assert d.provenance.source == "digest"
    assert d.metadata["sources"] == sorted(r.id for r in receipt.messages)
    assert d.metadata["messages"] == 4
    assert d.metadata["conversation"] == "chat-1"
    # Extractive: the main statements with who said them, the names and the dates; small talk left out.
    assert "user: I just moved to Lisbon for a job at Acme Corp." in d.content
    assert "Ines" in d.content
    assert "2024-06-03" in d.content
    assert "peanuts" in d.content
    assert "Congratulations" not in d.content
    assert len(d.content) <= MAX_DIGEST_CHARS


def test_a_long_conversation_gets_a_bounded_digest(engine: Engine) -> None:
    lines = [
        ("user", f"I visited Porto on day {n} and met Rui Costa at the Ribeira market stall {n}.")
        for n in range(150)
    ]
    engine.write_conversation("long", chat(*lines), ["user:ana"])
    assert engine.consolidate() == 1
    d = engine.read(only_digest(engine)).memory
    assert len(d.content) <= MAX_DIGEST_CHARS
    assert d.metadata["messages"] == 150
    assert len(d.metadata["sources"]) == 100


def test_a_conversation_still_receiving_messages_is_digested_once_after_the_burst(engine: Engine) -> None:
    engine.digest_quiet = 3600  # nothing is quiet for an hour during this test
    for m in MOVE:
        engine.write_conversation("chat-2", [m], ["user:ana"])
    assert digests_of(engine) == {}  # not one digest per message
    assert engine.consolidate() == 1  # one build, of all four messages
    assert engine.read(only_digest(engine)).memory.metadata["messages"] == 4
    engine.write_conversation(
        "chat-2", chat(("user", "Rui Costa is my new manager at Acme Corp.")), ["user:ana"]
    )
    assert engine.consolidate() == 1
    d = engine.read(only_digest(engine)).memory  # replaced, not added beside the old one
    assert d.metadata["messages"] == 5
    assert "Rui Costa" in d.content
    assert engine.consolidate() == 0  # nothing pending: re-sending nothing rebuilds nothing


def test_queued_digests_are_not_lost_when_the_process_stops(data_dir: Path, embedder: CachedEmbedder) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        engine.digest_quiet = 3600
        engine.write_conversation("chat-3", MOVE, ["user:ana"])
        assert digests_of(engine) == {}
    # Nothing was kept in memory: the store says which conversation waits, and the next start digests it.
    with Engine.open(data_dir, embedder=embedder, warm=False) as engine:
        engine.digest_quiet = 0
        assert engine.wait_digested(30)
        assert "Lisbon" in engine.read(only_digest(engine)).memory.content


def test_a_digest_match_lifts_its_conversations_messages_and_is_not_shown_itself(engine: Engine) -> None:
    engine.write_conversation("chat-4", MOVE, ["user:ana"])
    engine.write("Bo's favourite band is Radiohead.", ["user:ana"])
    engine.consolidate()
    digest = only_digest(engine)
    hits = engine.recall("Lisbon sister Ines peanuts", ["user:ana"])
    assert hits
    assert all(h.memory.kind == "message" for h in hits)
    assert digest not in {h.memory.id for h in hits}
    lifted = [h for h in hits if h.digest == digest]
    assert lifted
    assert all(h.memory.metadata["conversation"] == "chat-4" for h in lifted)
    # Asked for summaries, the digest itself comes too, after the messages it lifted.
    shown = engine.recall("Lisbon sister Ines peanuts", ["user:ana"], kinds=["summary", "message"])
    kinds = [h.memory.kind.value for h in shown]
    assert "summary" in kinds
    assert kinds.index("summary") > kinds.index("message")


def test_a_digest_is_only_in_the_scopes_every_message_is_in(engine: Engine) -> None:
    engine.write_conversation("chat-5", MOVE, ["user:ana", "team:family"])
    engine.consolidate()
    assert engine.read(only_digest(engine)).memory.scopes == ("team:family", "user:ana")
    bob = Principal("bob", grants=(Grant(ScopeId.parse("user:bob"), Level.WRITE),))
    assert engine.recall("Lisbon Ines", None, principal=bob) == []
    with pytest.raises(NotFound):
        engine.read(only_digest(engine), principal=bob)


def test_erasing_a_message_erases_the_digest_and_rebuilds_it_without_it(
    engine: Engine, data_dir: Path
) -> None:
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    msgs = [*MOVE, MessageIn("user", f"My passport number is {canary}.", T0 + timedelta(minutes=9))]
    receipt = engine.write_conversation("chat-6", msgs, ["user:ana"])
    engine.consolidate()
    old = only_digest(engine)
    assert canary in engine.read(old).memory.content
    secret = receipt.messages[-1].id
    erased = engine.erase(secret, confirm=secret)
    assert set(erased.erased) == {secret, old}  # the digest went in the same erasure
    assert files_containing(data_dir, canary.encode()) == []
    assert engine.consolidate() == 1
    new = only_digest(engine)
    assert new != old
    assert canary not in engine.read(new).memory.content
    assert "Lisbon" in engine.read(new).memory.content
    assert files_containing(data_dir, canary.encode()) == []


def test_purging_the_scope_leaves_no_digest_bytes(engine: Engine, data_dir: Path) -> None:
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    msgs = [*MOVE, MessageIn("user", f"The door code is {canary}.", T0 + timedelta(minutes=9))]
    engine.write_conversation(f"conv-{canary}", msgs, ["user:ana"])
    engine.write("Keep this one: the office is on Rua Augusta.", ["user:other"])
    engine.consolidate()
    assert len(digests_of(engine)) == 1
    receipt = engine.purge("user:ana", confirm="user:ana")
    assert receipt.memories_deleted == 6  # five messages and their digest
    assert digests_of(engine) == {}
    assert engine.consolidate() == 0  # no conversation left to digest
    assert files_containing(data_dir, canary.encode()) == []
    assert files_containing(data_dir, b"Ines") == []
    assert engine.recall("Rua Augusta office", ["user:other"])


def test_an_export_leaves_digests_out_and_an_import_digests_the_conversations_again(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    engine.write_conversation("chat-7", MOVE, ["user:ana"])
    engine.consolidate()
    digest = only_digest(engine)
    buffer = io.StringIO()
    summary = engine.export(buffer)
    assert summary.memories == 4  # the messages; the digest is derived
    assert digest not in buffer.getvalue()
    buffer.seek(0)
    Engine.import_export(tmp_path / "copy", buffer, embedder=embedder)
    with Engine.open(tmp_path / "copy", embedder=embedder, warm=False) as copy:
        assert copy.consolidate() == 1  # the imported messages are a conversation again
        rebuilt = copy.read(only_digest(copy)).memory
        assert rebuilt.content == engine.read(digest).memory.content
        # and erasing one of its messages there erases the digest with it
        first = rebuilt.metadata["sources"][0]
        assert only_digest(copy) in copy.erase(first, confirm=first).erased


def test_a_digest_never_spells_a_name_the_way_another_scope_stored_it(engine: Engine) -> None:
    """A's memory in agent:a teaches the lexicon "Zorblax Corporation"; B, who cannot read agent:a, writes
    "zorblax corporation" in a conversation. B's messages carry no such entity, and neither may the digest B
    reads (the review's leak: the digest re-ran extraction with the shared lexicon)."""
    a = Principal("A", client="t", grants=(Grant.parse("agent:a=w"),))
    b = Principal("B", client="t", grants=(Grant.parse("agent:b=w"),))
    engine.write("Zorblax Corporation sent the invoice to Ana.", ["agent:a"], principal=a)
    engine.digest_quiet = 0
    receipt = engine.write_conversation(
        "c1",
        chat(
            ("user", "The zorblax corporation invoice arrived today, I paid 300 euros."),
            ("assistant", "Good, noted the zorblax corporation payment."),
        ),
        ["agent:b"],
        principal=b,
    )
    assert all("Zorblax Corporation" not in m.entities for m in receipt.messages)
    assert engine.wait_digested(30)
    digest = engine.read(only_digest(engine), principal=b).memory
    assert "Zorblax Corporation" not in digest.content
    assert "Zorblax Corporation" not in digest.entities
    assert "zorblax corporation" in digest.content.casefold()  # the words themselves are B's own


def _said_in_digests(
    engine: Engine, query: str, scopes: list[str], principal: Principal | None = None
) -> str:
    """Everything a recall asking for digests shows, as one text (what the principal reads through them)."""
    extra = {} if principal is None else {"principal": principal}
    hits = engine.recall(query, scopes, kinds=["summary", "message"], k=20, **extra)  # type: ignore[arg-type]
    return "\n".join(h.memory.content for h in hits if h.memory.kind == "summary")


def test_unlinking_a_message_from_a_scope_takes_its_words_out_of_the_digest_read_there(
    engine: Engine,
) -> None:
    """The digest of a conversation in user:ana and team:family is in both. Ana takes her peanut message out of
    team:family: a family member must no longer read it, through the digest either (it kept the scopes the
    message had when it was built, until the conversation changed again)."""
    receipt = engine.write_conversation("chat-u", MOVE, ["user:ana", "team:family"])
    engine.consolidate()
    peanuts = next(m.id for m in receipt.messages if "peanuts" in engine.read(m.id).memory.content)
    family = Principal("sis", client="t", grants=(Grant.parse("team:family=r"),))
    assert "peanuts" in _said_in_digests(engine, "peanuts allergy dinner", ["team:family"], family)
    engine.unlink(peanuts, "team:family")
    # At once, before any rebuild: the old digest is no longer readable in team:family.
    assert "peanuts" not in _said_in_digests(engine, "peanuts allergy dinner", ["team:family"], family)
    assert all(
        "peanuts" not in engine.read(d, principal=family).memory.content for d in _readable(engine, family)
    )
    assert engine.consolidate() == 1  # and the conversation is digested again, where every message still is
    assert engine.read(only_digest(engine)).memory.scopes == ("user:ana",)
    assert _readable(engine, family) == []
    assert _said_in_digests(engine, "Lisbon job peanuts allergy", ["team:family"], family) == ""
    assert "peanuts" in _said_in_digests(engine, "peanuts allergy dinner", ["user:ana"])


def _readable(engine: Engine, principal: Principal) -> list[str]:
    out = []
    for d in digests_of(engine):
        try:
            engine.read(d, principal=principal)
        except NotFound:
            continue
        out.append(d)
    return out


@pytest.mark.parametrize("change", ["amend", "retire"])
def test_an_amended_or_retired_message_leaves_the_digest(engine: Engine, change: str) -> None:
    receipt = engine.write_conversation("chat-a", MOVE, ["user:ana"])
    engine.consolidate()
    peanuts = next(m.id for m in receipt.messages if "peanuts" in engine.read(m.id).memory.content)
    assert "peanuts" in _said_in_digests(engine, "peanuts allergy dinner", ["user:ana"])
    if change == "amend":
        engine.amend(peanuts, "I'm allergic to shellfish, so the welcome dinner needs care.", reason="typo")
    else:
        engine.retire(peanuts, reason="not true")
    assert "peanuts" not in _said_in_digests(engine, "peanuts allergy dinner", ["user:ana"])
    assert engine.consolidate() == 1
    rebuilt = engine.read(only_digest(engine)).memory
    assert "peanuts" not in rebuilt.content
    assert "Lisbon" in rebuilt.content
    assert peanuts not in rebuilt.metadata["sources"]
    if change == "amend":  # the corrected words are the conversation's now
        assert "shellfish" in rebuilt.content
        assert rebuilt.metadata["messages"] == 4
    # history still finds the old words in the message itself, never through a digest
    hits = engine.recall("peanuts allergy", ["user:ana"], include_history=True, kinds=["summary", "message"])
    assert any(h.memory.id == peanuts for h in hits)
    assert all("peanuts" not in h.memory.content for h in hits if h.memory.kind == "summary")


def test_linking_a_message_to_a_new_scope_redigests_its_conversation(engine: Engine) -> None:
    receipt = engine.write_conversation("chat-l", MOVE, ["user:ana"])
    engine.consolidate()
    for m in receipt.messages:
        engine.link(m.id, "team:family")
    assert engine.consolidate() == 1  # every message is in team:family now: so is the digest
    assert engine.read(only_digest(engine)).memory.scopes == ("team:family", "user:ana")


def test_retiring_the_digest_itself_retires_it_and_leaves_its_conversation_alone(engine: Engine) -> None:
    receipt = engine.write_conversation("chat-d", MOVE, ["user:ana"])
    engine.consolidate()
    digest = only_digest(engine)
    engine.retire(digest, reason="not wanted")
    assert engine.read(digest).memory.status == "retired"
    assert engine.consolidate() == 0
    assert all(engine.read(m.id).memory.status == "current" for m in receipt.messages)


class _HeldDigestEmbedder:
    """The real model, holding the consolidator's embedding of a digest until told to go: the window between
    the consolidator reading a conversation and committing its digest, where another write can commit."""

    def __init__(self, inner: CachedEmbedder) -> None:
        self._inner = inner
        self.name, self.dim = inner.name, inner.dim
        self.reached, self.go = threading.Event(), threading.Event()

    def embed(self, texts: list[str]) -> Vectors:
        if any(t.startswith("Digest of conversation") for t in texts):
            self.reached.set()
            self.go.wait(60)
        return self._inner.embed(texts)

    def warm(self) -> None:
        self._inner.warm()


def test_a_digest_built_while_its_scope_is_purged_is_not_readable_there(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    """Ana's conversation is in user:ana and team:family. The family scope is purged (her messages just lose
    it) while the consolidator is building the digest from what it read before: that digest must not land in
    team:family, where anyone with a grant on it read the door code after the purge."""
    held = _HeldDigestEmbedder(embedder)
    family = Principal("sis", client="t", grants=(Grant.parse("team:family=r"),))
    with Engine.open(data_dir, embedder=held, warm=False) as engine:
        engine.digest_quiet = 3600
        msgs = [
            MessageIn("user", "I moved to Lisbon; the door code is 4471-ZEBRA.", T0),
            MessageIn("user", "My sister Ines visits on June 3.", T0 + timedelta(minutes=1)),
        ]
        engine.write_conversation("chat-p", msgs, ["user:ana", "team:family"])
        builder = threading.Thread(target=engine.consolidate)
        builder.start()
        try:
            assert held.reached.wait(60)
            receipt = engine.purge("team:family", confirm="team:family")
        finally:
            held.go.set()
            builder.join()
        assert receipt.memories_unlinked == 2
        engine.consolidate()
        assert _said_in_digests(engine, "door code Lisbon", ["team:family"], family) == ""
        assert _readable(engine, family) == []
        assert engine.read(only_digest(engine)).memory.scopes == ("user:ana",)


def test_erasing_a_message_erases_the_digest_a_user_amended_by_hand(engine: Engine, data_dir: Path) -> None:
    """The digest is amended by hand (a typo fixed): its new version still quotes the messages. Erasing a
    message must take that version too, as erasing the digest itself takes every version of it; it stayed on
    disk and in recall with the erased message's words."""
    canary = f"CANARY{uuid.uuid4().hex.upper()}"
    msgs = [*MOVE, MessageIn("user", f"My passport number is {canary}.", T0 + timedelta(minutes=9))]
    receipt = engine.write_conversation("chat-h", msgs, ["user:ana"])
    engine.consolidate()
    digest = engine.read(only_digest(engine)).memory
    fixed = engine.amend(digest.id, digest.content.replace("Lisbon", "Lisboa"), reason="typo")
    secret = receipt.messages[-1].id
    erased = engine.erase(secret, confirm=secret)
    assert {digest.id, fixed.id} <= set(erased.erased)
    engine.consolidate()
    assert files_containing(data_dir, canary.encode()) == []
    hits = engine.recall("passport number", ["user:ana"], include_history=True, kinds=["summary", "message"])
    assert all(canary not in h.memory.content for h in hits)
    assert "Lisbon" in engine.read(only_digest(engine)).memory.content  # rebuilt from the messages left


def test_a_digest_amended_by_hand_does_not_keep_an_unlinked_messages_words_in_the_scope_it_left(
    engine: Engine,
) -> None:
    # Withdrawing the digest takes its hand-made versions with it: they quote the messages, and once the digest
    # they amended is gone nothing ties them to the messages (an erase could no longer find them either).
    receipt = engine.write_conversation("chat-hu", MOVE, ["user:ana", "team:family"])
    engine.consolidate()
    digest = engine.read(only_digest(engine)).memory
    engine.amend(digest.id, digest.content.replace("Lisbon", "Lisboa"), reason="typo")
    peanuts = next(m.id for m in receipt.messages if "peanuts" in engine.read(m.id).memory.content)
    engine.unlink(peanuts, "team:family")
    engine.consolidate()
    family = Principal("sis", client="t", grants=(Grant.parse("team:family=r"),))
    assert "peanuts" not in _said_in_digests(engine, "peanuts allergy dinner", ["team:family"], family)


def test_a_reader_cannot_confirm_which_other_scopes_a_conversation_was_written_to(engine: Engine) -> None:
    """A message's id is salted by its conversation's key, which hashes the conversation id and every scope it
    went to, keyed by the store's secret: a reader of one scope sees the message whole, and must not be able to
    test a guess of the others (nor can one scope's export tell it: it carries no secret)."""
    writer = Principal("w", client="t", grants=(Grant.parse("team:a=w"), Grant.parse("team:legal=w")))
    reader = Principal("r", client="t", grants=(Grant.parse("team:a=r"),))
    sent = engine.write_conversation("chat-5", MOVE[:1], ["team:a", "team:legal"], principal=writer)
    seen = engine.read(sent.messages[0].id, principal=reader).memory
    assert seen.scopes == ("team:a",)
    role, conv = seen.metadata["role"], seen.metadata["conversation"]
    place = f"{role}|{seen.event_time.isoformat()}"

    def guess(scopes: list[str]) -> str:
        key = hashlib.sha256(
            b"conversation\x00" + ",".join(sorted(scopes)).encode() + b"\x00" + conv.encode()
        )
        return content_id(seen.content, salt=f"message:{key.hexdigest()[:32]}:{place}")

    assert guess(["team:a", "team:hr"]) != seen.id  # a wrong guess
    assert guess(["team:a", "team:legal"]) != seen.id  # the right one must not be told apart from it


def test_a_scope_export_carries_no_secret_and_a_whole_store_restore_keeps_re_sent_messages_duplicates(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    engine.write_conversation("chat-9", MOVE, ["team:a", "team:legal"])
    with engine.graph.read() as conn:
        secret = engine.graph.id_secret(conn)
    assert len(secret) == 64
    one = io.StringIO()
    engine.export(one, scope="team:a")
    assert secret not in one.getvalue()
    assert "id_secret" not in one.getvalue()
    whole = io.StringIO()
    engine.export(whole)
    assert secret in whole.getvalue()
    whole.seek(0)
    Engine.import_export(tmp_path / "copy", whole, embedder=embedder)
    with Engine.open(tmp_path / "copy", embedder=embedder, warm=False) as copy:
        again = copy.write_conversation("chat-9", MOVE, ["team:a", "team:legal"])
        assert [m.status for m in again.messages] == ["duplicate"] * len(MOVE)
        assert copy.consolidate() == 1  # one conversation, one digest
    # Into a new store, one scope's export keeps that store's own secret: re-sent messages are new there.
    one.seek(0)
    Engine.import_export(tmp_path / "part", one, embedder=embedder)
    with Engine.open(tmp_path / "part", embedder=embedder, warm=False) as part, part.graph.read() as conn:
        assert part.graph.id_secret(conn) not in ("", secret)


def test_a_conversation_from_before_secrets_keeps_its_key_and_its_duplicates(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    # A store made before secrets: its conversation is keyed without one (as such a store's open finds it).
    with Engine.open(data_dir, embedder=embedder, warm=False) as old:
        old.reconciler.submit(lambda tx: old.graph.set_id_secret(tx.conn, ""))
        first = old.write_conversation("chat-old", MOVE[:2], ["user:ana"])
        seen = old.read(first.messages[0].id).memory
        place = f"{seen.metadata['role']}|{seen.event_time.isoformat()}"
        unsalted = conversation_key("chat-old", ["user:ana"])
        assert seen.id == content_id(seen.content, salt=f"message:{unsalted}:{place}")
        old.reconciler.submit(lambda tx: old.graph.set_id_secret(tx.conn, "ab" * 32))
    with Engine.open(data_dir, embedder=embedder, warm=False) as store:
        again = store.write_conversation("chat-old", MOVE, ["user:ana"])
        assert [m.status for m in again.messages] == ["duplicate", "duplicate"] + ["added"] * (len(MOVE) - 2)
        assert store.consolidate() == 1
        assert len(digests_of(store)) == 1  # the old conversation went on: one digest of all its messages
        new = store.write_conversation("chat-new", MOVE[:1], ["user:ana"])
        with store.graph.read() as conn:
            assert store.graph.conversations_of(conn, [new.messages[0].id])  # keyed by the secret now


def test_the_id_secret_survives_an_erasures_rewrite_and_a_restart(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    with Engine.open(data_dir, embedder=embedder, warm=False) as store:
        store.write_conversation("chat-s", MOVE, ["user:ana"])
        other = store.write("A memory to erase.", ["user:ana"]).id
        with store.graph.read() as conn:
            secret = store.graph.id_secret(conn)
        store.erase(other, confirm=other)  # rewrites the canonical file
        with store.graph.read() as conn:
            assert store.graph.id_secret(conn) == secret
        assert [m.status for m in store.write_conversation("chat-s", MOVE, ["user:ana"]).messages] == [
            "duplicate"
        ] * len(MOVE)
    with Engine.open(data_dir, embedder=embedder, warm=False) as store:
        with store.graph.read() as conn:
            assert store.graph.id_secret(conn) == secret
        assert [m.status for m in store.write_conversation("chat-s", MOVE, ["user:ana"]).messages] == [
            "duplicate"
        ] * len(MOVE)
