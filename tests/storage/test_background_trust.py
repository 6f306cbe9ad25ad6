"""Work that runs after a call returns (Claude's extraction pass and reconcile decision) answers to the same rules
as the call: it stops acting for a token revoked meanwhile, what it changes is in the audit log under the
writer's name, and a shutdown does not wait for its retries. The real anthropic SDK over an
``httpx2.MockTransport``, real stores and model, the owner's real token file."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from scopes import Principal
from server._auth import FileTokenVerifier, principal_of
from server._tokens import TokenStore
from server.settings import SettingsError, load_settings
from storage import Engine, RelationIn
from tests.conftest import files_containing
from tests.storage.test_claude_decide import Api, decision, error, likes, stored, write_new


def token_principal(tokens: TokenStore, name: str, *grants: str) -> Principal:
    """A principal exactly as the owner gets one: a token created in the file, verified by the SDK's hook."""
    value, _info = tokens.create(name, list(grants))
    access = anyio.run(FileTokenVerifier(tokens).verify_token, value)
    assert access is not None
    return principal_of(access, client="tests")


def test_a_token_revoked_while_the_model_thinks_changes_nothing(engine: Engine, tmp_path: Path) -> None:
    tokens = TokenStore(tmp_path)
    engine.principal_live = tokens.stands  # as the owner wires it (server.owner)
    b = token_principal(tokens, "agent-b", "agent:b=w")
    blues = engine.write("Ana likes the blues.", ["agent:b"], relations=likes("blues"), principal=b).id
    api = Api(decision({"id": blues[:12], "relation": "updates", "reason": "r"}))
    api.release.clear()
    api.switch_on(engine)
    engine.write("Ana likes rock now.", ["agent:b"], relations=likes("rock"), principal=b)
    assert api.asked.wait(30)
    tokens.revoke("agent-b")  # the operator takes the token back while Claude thinks
    api.release.set()
    assert engine.wait_enriched()
    kept = engine.read(blues)
    assert kept.memory.status == "current"
    assert kept.memory.superseded_by is None
    assert kept.relations == ("Ana —likes→ blues [? → open]",)
    audit = (engine.data_dir / "audit.jsonl").read_text()
    assert '"op": "reconcile"' not in audit


def test_a_revoked_tokens_queued_extraction_supersedes_nothing(engine: Engine, tmp_path: Path) -> None:
    """The extraction pass reconciles what Claude read with the writer's access: none once revoked."""
    tokens = TokenStore(tmp_path)
    engine.principal_live = tokens.stands
    b = token_principal(tokens, "agent-b", "agent:b=w")
    porto = engine.write(
        "Ana lives in Porto.", ["agent:b"], relations=[RelationIn("Ana", "lives_in", "Porto")], principal=b
    ).id
    api = Api(decision())
    api.statements = [
        {"subject": "Ana", "predicate": "lives_in", "object": "Lisbon", "status": "asserted"}
    ]  # what Claude reads in the new memory, the rules having found nothing in its words
    api.hold_statements = True
    api.release.clear()
    api.switch_on(engine)
    engine.write("Big news from Ana today.", ["agent:b"], principal=b)
    assert api.asked.wait(30)
    tokens.revoke("agent-b")
    api.release.set()
    assert engine.wait_enriched()
    assert engine.read(porto).memory.status == "current"


def test_claudes_changes_are_audited_under_the_writers_name(engine: Engine) -> None:
    jazz, green = stored(engine)
    secret_reason = "zanzibar-reason-words"
    api = Api(
        decision(
            {"id": jazz[:12], "relation": "updates", "reason": secret_reason},
            {"id": green[:12], "relation": "contradicts", "reason": secret_reason},
        )
    )
    api.switch_on(engine)
    new = write_new(engine)
    assert engine.wait_enriched()
    events = [json.loads(line) for line in (engine.data_dir / "audit.jsonl").read_text().splitlines()]
    decided = [e for e in events if e["op"] == "reconcile"]
    assert len(decided) == 1
    event = decided[0]
    assert event["principal"] == "local"
    assert event["ids"] == [new, jazz, green]
    assert (event["superseded"], event["contradicted"], event["by"]) == (1, 1, "claude-sonnet-4-6")
    text = (engine.data_dir / "audit.jsonl").read_text()
    assert secret_reason not in text  # ids and counts, never the model's reason
    assert "jazz" not in text  # nor any content
    assert "rock" not in text


def test_a_shutdown_does_not_wait_for_retries(data_dir: Path, embedder: object) -> None:
    """The API asks to come back in 5 s, four times: closing the store ends the wait, and retries nothing."""
    engine = Engine.open(data_dir, embedder=embedder, warm=False)  # type: ignore[arg-type]
    jazz, _green = stored(engine)
    api = Api(error(529, {"retry-after": "5"}))
    api.switch_on(engine, real_sleep=True)
    new = write_new(engine)
    assert api.asked.wait(30)
    engine.close()
    assert len(api.decisions) == 1  # asked once; the retry was given up, not made
    with Engine.open(data_dir, embedder=embedder, warm=False) as again:  # type: ignore[arg-type]
        assert "not retried: the server is stopping" in (again.read(new).enrichment or "")
        assert again.read(jazz).memory.status == "current"


def test_the_request_timeout_is_a_setting(tmp_path: Path) -> None:
    base = {"MNEMOGRAPH_DATA_DIR": str(tmp_path)}
    assert load_settings(base).llm_timeout == 60.0  # not the SDK's 600 s
    assert load_settings({**base, "MNEMOGRAPH_LLM_TIMEOUT": "15"}).llm_timeout == 15.0
    with pytest.raises(SettingsError, match="MNEMOGRAPH_LLM_TIMEOUT must be from 1 to 600"):
        load_settings({**base, "MNEMOGRAPH_LLM_TIMEOUT": "0"})


def test_erasing_a_memory_claude_changed_takes_its_id_out_of_the_audit_log(engine: Engine) -> None:
    """The ``reconcile`` event names the memories Claude's decision changed: erasing one of them replaces its
    id there too, and no file under the data directory keeps it."""
    jazz, green = stored(engine)
    api = Api(
        decision(
            {"id": jazz[:12], "relation": "updates", "reason": "r"},
            {"id": green[:12], "relation": "contradicts", "reason": "r"},
        )
    )
    api.switch_on(engine)
    new = write_new(engine)
    assert engine.wait_enriched()
    assert engine.data_dir / "audit.jsonl" in files_containing(engine.data_dir, green.encode())
    engine.erase(green, confirm=green)
    assert files_containing(engine.data_dir, green.encode()) == []
    (event,) = [e for e in engine.audit.events() if e["op"] == "reconcile"]
    assert event["ids"][:2] == [new, jazz]
    assert event["ids"][2].startswith("erased-")
