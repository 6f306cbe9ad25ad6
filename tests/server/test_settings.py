"""Settings: read once from MNEMOGRAPH_* variables, flags win, bad values are refused with the variable named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from server._engine import WriteTimeOptions, store_options, write_time
from server.settings import SettingsError, load_settings, login_scope, owner_settings
from storage import Engine, RelationIn
from storage.domain.models import MessageIn
from storage.enrich import transitive


def test_defaults(tmp_path: Path) -> None:
    s = load_settings({"USER": "ana", "MNEMOGRAPH_DATA_DIR": str(tmp_path)})
    assert s.data_dir == tmp_path.resolve()
    assert s.default_scopes == ("user:ana",)
    assert (s.host, s.port) == ("127.0.0.1", 8765)
    assert s.allowed_hosts == ("127.0.0.1:*", "localhost:*", "[::1]:*")
    assert s.allowed_origins == ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
    assert s.runtime_dir.is_absolute()


def test_flags_override_the_environment(tmp_path: Path) -> None:
    env = {
        "MNEMOGRAPH_DATA_DIR": "/nonexistent",
        "MNEMOGRAPH_PORT": "9000",
        "MNEMOGRAPH_DEFAULT_SCOPE": "team:a",
    }
    s = load_settings(env, data_dir=str(tmp_path), port=9100, default_scopes="project:site, user:bo")
    assert (s.data_dir, s.port) == (tmp_path.resolve(), 9100)
    assert s.default_scopes == ("project:site", "user:bo")
    assert load_settings(env, data_dir=str(tmp_path), port=None).port == 9000  # None means "flag not given"


def test_a_specific_bind_address_is_allowed_as_host_header() -> None:
    s = load_settings({"MNEMOGRAPH_HOST": "192.168.1.20"})
    assert "192.168.1.20:*" in s.allowed_hosts
    assert "http://192.168.1.20:*" in s.allowed_origins
    wildcard = load_settings({"MNEMOGRAPH_HOST": "0.0.0.0", "MNEMOGRAPH_ALLOWED_HOSTS": "mem.example.com:*"})
    # The variable adds to the loopback names: local clients keep working when the server is opened up.
    assert wildcard.allowed_hosts == (
        "127.0.0.1:*",
        "localhost:*",
        "[::1]:*",
        "mem.example.com:*",
        "mem.example.com",
    )


@pytest.mark.parametrize(
    ("login", "scope"),
    [("ana", "user:ana"), ("Ana Lima", "user:Ana-Lima"), ("CORP\\bo", "user:CORP-bo"), ("..", "user:local")],
)
def test_login_names_are_sanitised_into_scope_ids(login: str, scope: str) -> None:
    assert login_scope({"LOGNAME": login}) == scope


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MNEMOGRAPH_PORT": "http"}, "MNEMOGRAPH_PORT must be a number"),
        ({"MNEMOGRAPH_PORT": "70000"}, "MNEMOGRAPH_PORT must be from 0 to 65535"),
        ({"MNEMOGRAPH_DEFAULT_SCOPE": "ana"}, "MNEMOGRAPH_DEFAULT_SCOPE: scope id 'ana' has no ':'"),
        ({"MNEMOGRAPH_DEFAULT_SCOPE": " , "}, "MNEMOGRAPH_DEFAULT_SCOPE is empty"),
        ({"MNEMOGRAPH_LOG_LEVEL": "LOUD"}, "MNEMOGRAPH_LOG_LEVEL must be one of"),
        ({"MNEMOGRAPH_IDLE_TIMEOUT": "0"}, "MNEMOGRAPH_IDLE_TIMEOUT must be from 1"),
        ({"MNEMOGRAPH_EMBEDDER": "onnx"}, "MNEMOGRAPH_EMBEDDER must be one of numpy, torch, got 'onnx'"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(env)


def test_the_embedding_runtime_is_numpy_unless_torch_is_asked_for() -> None:
    assert load_settings({}).embedder == "numpy"
    assert load_settings({"MNEMOGRAPH_EMBEDDER": "Torch"}).embedder == "torch"


def test_write_time_settings(tmp_path: Path) -> None:
    s = load_settings(
        {
            "MNEMOGRAPH_DATA_DIR": str(tmp_path),
            "MNEMOGRAPH_FUNCTIONAL_PREDICATES": "lives_in, works_at,team_of",
            "MNEMOGRAPH_ANTHROPIC_API_KEY": "sk-ant-secret",
            "MNEMOGRAPH_TRANSITIVE_PREDICATES": "located_in,within",
        }
    )
    assert s.functional_predicates == ("lives_in", "works_at", "team_of")
    assert s.transitive_predicates == ("located_in", "within")
    assert load_settings({"MNEMOGRAPH_DATA_DIR": str(tmp_path)}).transitive_predicates is None  # the default
    assert (s.anthropic_model, s.llm_min_interval) == ("claude-sonnet-4-6", 0.5)
    assert s.anthropic_api_key == "sk-ant-secret"
    assert "sk-ant-secret" not in repr(s)  # a secret never reaches a log line through a repr
    assert load_settings({"MNEMOGRAPH_DATA_DIR": str(tmp_path)}).anthropic_api_key == ""  # off by default
    # a key blanked out with spaces is no key (it showed as set and turned Claude on, every call refused); one
    # pasted with its line break is the key
    blank = load_settings({"MNEMOGRAPH_ANTHROPIC_API_KEY": "  "})
    assert (blank.anthropic_api_key, owner_settings(blank)["MNEMOGRAPH_ANTHROPIC_API_KEY"]) == ("", "unset")
    assert (
        load_settings({"MNEMOGRAPH_ANTHROPIC_API_KEY": "sk-ant-secret\n"}).anthropic_api_key
        == "sk-ant-secret"
    )
    with pytest.raises(SettingsError, match="MNEMOGRAPH_FUNCTIONAL_PREDICATES takes comma-separated"):
        load_settings({"MNEMOGRAPH_FUNCTIONAL_PREDICATES": "lives in"})
    with pytest.raises(SettingsError, match="MNEMOGRAPH_TRANSITIVE_PREDICATES takes comma-separated"):
        load_settings({"MNEMOGRAPH_TRANSITIVE_PREDICATES": "part of"})


def test_the_canonical_store_is_embedded_kuzu_unless_configured(tmp_path: Path) -> None:
    base = {"USER": "ana", "MNEMOGRAPH_DATA_DIR": str(tmp_path)}
    assert load_settings(base).canonical == ""
    assert load_settings({**base, "MNEMOGRAPH_CANONICAL": "kuzu"}).canonical == ""
    url = "falkordb://db.internal:6380/memory"
    assert load_settings({**base, "MNEMOGRAPH_CANONICAL": url}).canonical == url
    assert (
        load_settings(base, canonical="falkordb://127.0.0.1:6379/g").canonical
        == "falkordb://127.0.0.1:6379/g"
    )
    with pytest.raises(SettingsError, match=r"kuzu or falkordb://host:port/graph, got 'redis://x'"):
        load_settings(base, canonical="redis://x")


def test_digest_settings_reach_the_engine(engine: Engine) -> None:
    assert (load_settings({}).digests, load_settings({}).digest_quiet) == (True, 10.0)
    assert load_settings({}).day_digest_quiet == 3600.0
    s = load_settings(
        {"MNEMOGRAPH_DIGESTS": "off", "MNEMOGRAPH_DIGEST_QUIET": "2.5", "MNEMOGRAPH_DAY_DIGEST_QUIET": "60"}
    )
    with pytest.raises(SettingsError, match="MNEMOGRAPH_DIGESTS must be on or off, got 'maybe'"):
        load_settings({"MNEMOGRAPH_DIGESTS": "maybe"})
    options = WriteTimeOptions(
        digest_quiet=s.digest_quiet, digests=s.digests, day_digest_quiet=s.day_digest_quiet
    )
    write_time(options)(engine)
    assert engine.digest_quiet == 2.5
    assert engine.day_digest_quiet == 60.0
    receipt = engine.write_conversation("c", [MessageIn("user", "I live in Porto.")], ["user:ana"])
    assert receipt.digest == "off"
    assert engine.wait_digested(0) is False  # off: the conversation waits, recorded in the store
    assert engine.consolidate() == 1  # and is digested on request (what `mnemograph digests` runs)


def test_sampling_is_off_unless_turned_on(engine: Engine) -> None:
    assert (load_settings({}).sampling, load_settings({}).sampling_timeout) == (False, 60.0)
    s = load_settings({"MNEMOGRAPH_SAMPLING": "on", "MNEMOGRAPH_SAMPLING_TIMEOUT": "5"})
    assert (s.sampling, s.sampling_timeout) == (True, 5.0)
    with pytest.raises(SettingsError, match="MNEMOGRAPH_SAMPLING must be on or off"):
        load_settings({"MNEMOGRAPH_SAMPLING": "maybe"})
    write_time(WriteTimeOptions(sampling=False))(engine)
    assert engine.sampler is None  # off: no worker, and writes that bring a model are not sent to it
    write_time(WriteTimeOptions(sampling=s.sampling))(engine)
    assert engine.sampler is not None


def test_the_claude_reconcile_decision_comes_with_the_key_unless_turned_off(
    data_dir: Path, embedder: Any
) -> None:
    assert load_settings({}).llm_reconcile is True
    assert load_settings({"MNEMOGRAPH_LLM_RECONCILE": "off"}).llm_reconcile is False
    with pytest.raises(SettingsError, match="MNEMOGRAPH_LLM_RECONCILE must be on or off"):
        load_settings({"MNEMOGRAPH_LLM_RECONCILE": "maybe"})
    for key, reconcile, on in (("", True, False), ("sk-test", False, False), ("sk-test", True, True)):
        engine = Engine.open(data_dir, embedder=embedder, warm=False)
        try:
            write_time(WriteTimeOptions(anthropic_api_key=key, llm_reconcile=reconcile))(engine)
            assert (engine._decider is not None) is on  # no request is made: nothing is written
        finally:
            engine.close()


def test_salience_settings_reach_the_engine(engine: Engine) -> None:
    s = load_settings({})
    assert (s.recall_salience, s.salience_half_life, s.access_counts) == (False, 30.0, True)
    s = load_settings(
        {
            "MNEMOGRAPH_RECALL_SALIENCE": "on",
            "MNEMOGRAPH_SALIENCE_HALF_LIFE": "7",
            "MNEMOGRAPH_ACCESS_COUNTS": "off",
        }
    )
    write_time(
        WriteTimeOptions(
            recall_salience=s.recall_salience,
            salience_half_life=s.salience_half_life,
            access_counts=s.access_counts,
        )
    )(engine)
    assert (engine.salience_default, engine.salience_half_life, engine.count_accesses) == (True, 7.0, False)
    engine.write("The garage door code is 7731.", ["user:ana"])
    hits = engine.recall("garage door code", ["user:ana"])
    assert hits[0].salience is not None  # on by default now, and said so in the result
    assert engine.recall("garage door code", ["user:ana"], salience=False)[0].salience is None
    assert engine.accesses.total() == 0  # counting off: no record of what was recalled


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("RECALL_SALIENCE", "sometimes", "MNEMOGRAPH_RECALL_SALIENCE must be on or off"),
        ("ACCESS_COUNTS", "2", "MNEMOGRAPH_ACCESS_COUNTS must be on or off"),
        ("SALIENCE_HALF_LIFE", "0", "MNEMOGRAPH_SALIENCE_HALF_LIFE must be from 0.01 to 36500"),
        ("SALIENCE_HALF_LIFE", "a month", "MNEMOGRAPH_SALIENCE_HALF_LIFE must be a number"),
    ],
)
def test_bad_salience_settings_are_refused(variable: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings({f"MNEMOGRAPH_{variable}": value})


def test_none_turns_each_predicate_list_off_and_empty_keeps_the_default(engine: Engine) -> None:
    """``none`` is how a user says "no such predicate": before, it was refused as a predicate name, and an
    empty value (the only other way to write "nothing") silently meant the default list."""
    default = load_settings({"MNEMOGRAPH_FUNCTIONAL_PREDICATES": "", "MNEMOGRAPH_TRANSITIVE_PREDICATES": " "})
    assert (default.functional_predicates, default.transitive_predicates) == (None, None)
    s = load_settings(
        {"MNEMOGRAPH_FUNCTIONAL_PREDICATES": "none", "MNEMOGRAPH_TRANSITIVE_PREDICATES": "None"}
    )
    assert (s.functional_predicates, s.transitive_predicates) == ((), ())
    write_time(WriteTimeOptions(functional=s.functional_predicates, transitive=s.transitive_predicates))(
        engine
    )
    lisbon = engine.write("Ana lives in Lisbon.", ["user:ana"])
    assert engine.write("Ana lives in Porto.", ["user:ana"]).supersedes == ()  # no functional predicate
    assert engine.read(lisbon.id).memory.status == "current"
    engine.write("The Grand Palm is located in Udaipur.", ["user:ana"], kind="fact",
                 relations=[RelationIn("Grand Palm", "located_in", "Udaipur")])  # fmt: skip
    engine.write("Udaipur belongs to Rajasthan.", ["user:ana"], kind="fact",
                 relations=[RelationIn("Udaipur", "located_in", "Rajasthan")])  # fmt: skip
    engine.consolidate()
    with engine.graph.read() as conn:  # no derived relation (with the default list: Grand Palm in Rajasthan)
        assert not [key for key in engine.graph.all_digests(conn).values() if transitive.is_derived_key(key)]
    # none with other predicates, or only commas, is not a list anyone means: refused, naming the variable
    # (before, "none,works_at" made a predicate named none, and "," meant no predicate at all)
    for value in ("none,works_at", "works_at, NONE", ",", " , ,"):
        with pytest.raises(SettingsError, match=r"MNEMOGRAPH_TRANSITIVE_PREDICATES takes .* or none alone"):
            load_settings({"MNEMOGRAPH_TRANSITIVE_PREDICATES": value})
    # store_options (a command opening the directory itself) follows the same rule
    store_options(None, None)(engine)
    assert engine.transitive == frozenset()  # None leaves what is set
    store_options(("lives_in",), ())(engine)
    assert (engine.functional, engine.transitive) == (frozenset({"lives_in"}), frozenset())


def test_the_same_predicates_in_another_order_are_the_same_owner_setting() -> None:
    """A client is told which of its settings the running owner does not apply, by comparing these values: the
    same predicates listed in another order (or one twice) were told as a difference, though the engine takes
    them as a set."""
    one = owner_settings(load_settings({"MNEMOGRAPH_FUNCTIONAL_PREDICATES": "works_at,lives_in"}))
    other = owner_settings(load_settings({"MNEMOGRAPH_FUNCTIONAL_PREDICATES": "lives_in, works_at,lives_in"}))
    assert (
        one["MNEMOGRAPH_FUNCTIONAL_PREDICATES"]
        == other["MNEMOGRAPH_FUNCTIONAL_PREDICATES"]
        == "lives_in,works_at"
    )
    fewer = owner_settings(load_settings({"MNEMOGRAPH_FUNCTIONAL_PREDICATES": "lives_in"}))
    assert fewer["MNEMOGRAPH_FUNCTIONAL_PREDICATES"] != one["MNEMOGRAPH_FUNCTIONAL_PREDICATES"]
