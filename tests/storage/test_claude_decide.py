"""Claude's reconcile decision (``storage.enrich.decide``) through the real ``anthropic`` SDK, the HTTP API faked
by an ``httpx2.MockTransport``: updates, contradictions and repeats applied through the one writer and shown by
``memory_read`` and ``recall``; malformed answers, 429/529 retried, timeouts; another principal's memory never
sent nor changed; the write acknowledged before the model answers; the rules still decide functional
predicates. Real stores and model otherwise."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from scopes import Grant, Principal
from storage import Engine, NotFound, RelationIn
from storage.enrich.claude import ClaudeExtractor
from storage.enrich.decide_claude import ClaudeDecider

MODEL = "claude-sonnet-4-6"
SCOPE = ["user:sam"]


def tool_answer(name: str, arguments: Any) -> httpx2.Response:
    body = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "tool_use", "id": "tu_1", "name": name, "input": arguments}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 200,
            "output_tokens": 40,
            "cache_read_input_tokens": 150,
            "cache_creation_input_tokens": 0,
        },
    }
    return httpx2.Response(200, json=body)


def decision(*items: dict[str, Any]) -> httpx2.Response:
    return tool_answer("record_decision", {"decisions": list(items)})


def error(status: int, headers: dict[str, str] | None = None) -> httpx2.Response:
    kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
    return httpx2.Response(
        status, headers=headers or {}, json={"type": "error", "error": {"type": kind, "message": kind}}
    )


class Api:
    """The Messages API: extraction requests get no statements; decision requests are answered in turn from
    ``script`` (the last answer repeats). Keeps every request body."""

    def __init__(self, *script: httpx2.Response | type[Exception]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.sleeps: list[float] = []
        self.release = threading.Event()
        self.release.set()
        self.asked = threading.Event()  # a decision request has arrived
        self.statements: list[dict[str, Any]] = []  # what the extraction pass reads in every memory
        self.hold_statements = False  # extraction requests wait for ``release`` too (and set ``asked``)

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        if body["tool_choice"]["name"] == "record_statements":
            if self.hold_statements:
                self.asked.set()
                assert self.release.wait(30)
            return tool_answer("record_statements", {"statements": self.statements})
        self.asked.set()
        assert self.release.wait(30)
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, type):
            raise step("timed out", request=request)  # type: ignore[call-arg]
        return step

    @property
    def decisions(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["tool_choice"]["name"] == "record_decision"]

    def switch_on(self, engine: Engine, *, real_sleep: bool = False) -> None:
        client = anthropic.Anthropic(
            api_key="sk-test", http_client=httpx2.Client(transport=httpx2.MockTransport(self))
        )
        claude = ClaudeExtractor(client, MODEL, sleep=None if real_sleep else self.sleeps.append)
        engine.use_llm(claude)
        engine.use_llm_decisions(ClaudeDecider(claude))


def likes(obj: str) -> list[RelationIn]:
    return [RelationIn("Ana", "likes", obj)]


def stored(engine: Engine) -> tuple[str, str]:
    """Written before Claude is switched on: two memories the rules cannot settle against the new one."""
    since = datetime(2023, 1, 1, tzinfo=UTC)
    jazz = engine.write("Ana likes jazz.", SCOPE, relations=likes("jazz"), valid_from=since).id
    green = engine.write(
        "Ana's favourite colour is green.", SCOPE, relations=[RelationIn("Ana", "favourite_colour", "green")]
    ).id
    return jazz, green


def write_new(engine: Engine) -> str:
    return engine.write(
        "These days Ana is all about rock; and she says blue is her favourite colour.",
        SCOPE,
        relations=[RelationIn("Ana", "likes", "rock"), RelationIn("Ana", "favourite_colour", "blue")],
    ).id


def test_updates_and_contradictions_are_applied_and_shown(engine: Engine) -> None:
    jazz, green = stored(engine)
    api = Api(
        decision(
            {
                "id": jazz[:12],
                "relation": "updates",
                "reason": "her taste moved on",
                "effective": "2024-05-01",
            },
            {"id": green[:12], "relation": "contradicts", "reason": "one favourite colour"},
        )
    )
    api.switch_on(engine)
    new = write_new(engine)
    assert engine.wait_enriched()

    sent = api.decisions[0]
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}  # the fixed instructions are cached
    assert sent["tools"][0]["name"] == "record_decision"
    shown = sent["messages"][0]["content"]
    assert "Ana likes jazz." in shown
    assert "favourite colour is green" in shown
    assert jazz[:12] in shown

    old = engine.read(jazz)
    assert old.memory.status == "superseded"
    assert old.memory.superseded_by == new
    assert old.memory.valid_to == datetime(2024, 5, 1, tzinfo=UTC)
    assert old.relations == (f"Ana —likes→ jazz [? → 2024-05-01, ended by {new}]",)
    assert [m.id for m in old.versions] == [jazz, new]
    record = engine.read(new)
    assert record.contradicts == (green,)
    assert engine.read(green).contradicts == (new,)
    assert engine.read(green).memory.status == "current"
    assert record.enrichment is not None
    assert "decided by claude: " in record.enrichment
    assert "decided by claude: contradicts 1, updates 1" in record.enrichment or (
        "decided by claude: updates 1, contradicts 1" in record.enrichment
    )
    assert "tokens in 400 (cache read 300, cache write 0), out 80" in record.enrichment  # both requests

    hits = {h.memory.id: h for h in engine.recall("What music does Ana like? favourite colour", SCOPE)}
    assert jazz not in hits  # superseded: history only
    assert hits[green].conflicts == (new,)
    assert hits[new].conflicts == (green,)
    history = {h.memory.id for h in engine.recall("Ana likes jazz", SCOPE, include_history=True)}
    assert jazz in history


def test_an_update_that_starts_later_leaves_the_stored_memory_current_until_then(engine: Engine) -> None:
    """A new memory valid from a later date (a planned change, issue #14) that Claude says updates a stored one
    ends it at that date, as the rules do: current, and recalled, until then (it used to be superseded now)."""
    jazz, _ = stored(engine)
    api = Api(decision({"id": jazz[:12], "relation": "updates", "reason": "her taste will move on"}))
    api.switch_on(engine)
    starts = datetime(datetime.now(UTC).year + 2, 1, 1, tzinfo=UTC)
    new = engine.write(
        "From then on Ana is all about rock.",
        SCOPE,
        relations=[RelationIn("Ana", "likes", "rock")],
        valid_from=starts,
    ).id
    assert engine.wait_enriched()
    old = engine.read(jazz)
    assert old.memory.status == "current"
    assert old.memory.valid_to == starts
    assert old.relations == (f"Ana —likes→ jazz [? → {starts.date().isoformat()}, ended by {new}]",)
    record = engine.read(new)
    assert record.enrichment is not None
    assert "decided by claude: updates from a later date 1" in record.enrichment
    assert jazz in {h.memory.id for h in engine.recall("What music does Ana like?", SCOPE)}
    later = {
        h.memory.id for h in engine.recall("What music does Ana like?", SCOPE, as_of=starts.replace(month=2))
    }
    assert (jazz in later, new in later) == (False, True)


def test_the_models_reason_and_the_other_memorys_id_are_gone_with_an_erase_of_that_memory(
    engine: Engine, data_dir: Path
) -> None:
    # The model may quote what it compared, whatever it is told: nothing it wrote about a memory may outlive
    # that memory's erasure in what the surviving memory shows, nor on disk. (An updated memory is a version of
    # the new one, and an erase takes every version.)
    jazz, green = stored(engine)
    api = Api(
        decision(
            {"id": jazz[:12], "relation": "repeats", "reason": "quixotic zebrafinch jazz again"},
            {"id": green[:12], "relation": "contradicts", "reason": "quixotic marmoset green or blue"},
        )
    )
    api.switch_on(engine)
    new = write_new(engine)
    assert engine.wait_enriched()
    for gone in (jazz, green):
        engine.erase(gone, confirm=gone)
    record = engine.read(new)
    shown = json.dumps(
        [record.enrichment, record.relations, record.contradicts, [m.id for m in record.versions]]
    )
    for word in ("zebrafinch", "marmoset", jazz[:12], green[:12]):
        assert word not in shown
    engine.close()
    for path in data_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for word in (b"zebrafinch", b"marmoset", jazz.encode(), green.encode()):
                assert word not in data, (path, word)


def test_a_repeat_is_noted_and_changes_nothing(engine: Engine) -> None:
    dog = engine.write("Ana has a dog named Rex.", SCOPE).id
    api = Api(decision({"id": dog, "relation": "repeats", "reason": "same dog"}))
    api.switch_on(engine)
    new = engine.write("Ana has a dog called Rex.", SCOPE).id
    assert engine.wait_enriched()
    assert "Ana has a dog named Rex." in api.decisions[0]["messages"][0]["content"]
    record = engine.read(new)
    assert record.enrichment is not None
    assert "decided by claude: repeats 1" in record.enrichment
    assert engine.read(dog).memory.status == "current"
    assert record.memory.status == "current"
    assert record.contradicts == ()


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (
            decision({"id": "0123456789ab", "relation": "updates", "reason": "x"}),
            "names a memory it was not shown",
        ),
        (decision({"id": "x", "relation": "replaces", "reason": "x"}), "decision 0 is not a valid decision"),
        (tool_answer("record_decision", {"decisions": "updates"}), "'decisions' is not a list"),
        (tool_answer("record_statements", {"statements": []}), "did not call record_decision"),
    ],
)
def test_a_malformed_answer_changes_nothing_and_is_visible(
    engine: Engine, answer: httpx2.Response, why: str
) -> None:
    jazz, green = stored(engine)
    Api(answer).switch_on(engine)
    new = write_new(engine)
    assert engine.wait_enriched()
    record = engine.read(new)
    assert record.enrichment is not None
    assert "reconcile decision failed (malformed answer: " in record.enrichment
    assert why in record.enrichment
    assert "nothing changed" in record.enrichment
    assert record.contradicts == ()
    for mid in (jazz, green):
        assert engine.read(mid).memory.status == "current"
        assert engine.read(mid).contradicts == ()


def test_an_update_with_a_bad_date_applies_nothing(engine: Engine) -> None:
    jazz, green = stored(engine)
    Api(
        decision(
            {"id": green[:12], "relation": "contradicts", "reason": "r"},
            {"id": jazz[:12], "relation": "updates", "reason": "r", "effective": "last spring"},
        )
    ).switch_on(engine)
    new = write_new(engine)
    assert engine.wait_enriched()
    assert "invalid effective date" in (engine.read(new).enrichment or "")
    assert engine.read(green).contradicts == ()
    assert engine.read(jazz).memory.status == "current"


@pytest.mark.parametrize(("status", "headers"), [(429, {"retry-after-ms": "5"}), (529, {})])
def test_rate_limits_and_overload_are_retried(engine: Engine, status: int, headers: dict[str, str]) -> None:
    jazz, green = stored(engine)
    api = Api(
        error(status, headers),
        error(status, headers),
        decision({"id": green[:12], "relation": "contradicts", "reason": "one favourite colour"}),
    )
    api.switch_on(engine)
    new = write_new(engine)
    assert engine.wait_enriched()
    assert len(api.decisions) == 3
    if headers:
        assert api.sleeps == [0.005, 0.005]  # the server's retry-after is honoured
    else:
        assert 0.375 <= api.sleeps[0] <= 0.5 < api.sleeps[1] <= 1.0  # exponential, with jitter
    assert engine.read(new).contradicts == (green,)
    assert engine.read(jazz).memory.status == "current"  # not named: adds


def test_timeouts_are_retried_then_recorded_as_a_failure(engine: Engine) -> None:
    jazz, green = stored(engine)
    api = Api(httpx2.ReadTimeout)
    api.switch_on(engine)
    new = write_new(engine)
    assert engine.wait_enriched()
    assert len(api.decisions) == 4
    assert len(api.sleeps) == 3
    record = engine.read(new)
    assert record.enrichment is not None
    assert "reconcile decision failed (timed out after 4 attempts); nothing changed" in record.enrichment
    assert record.enrichment.startswith(f"llm {MODEL}: done (0 relation(s) added")  # extraction went through
    assert engine.read(jazz).memory.status == "current"
    assert engine.read(green).contradicts == ()


def principal(name: str, *grants: str) -> Principal:
    return Principal(name, client="tests", grants=tuple(Grant.parse(g) for g in grants))


def test_another_principals_memory_is_never_sent_nor_changed(engine: Engine) -> None:
    a, b = principal("A", "agent:a=w"), principal("B", "agent:b=w")
    theirs = engine.write("Ana likes jazz.", ["agent:a"], relations=likes("jazz"), principal=a).id
    own = engine.write("Ana likes the blues.", ["agent:b"], relations=likes("blues"), principal=b).id
    # A model that names the memory B may not read (it cannot know its id from the request: a guess, or a
    # prompt injection) is refused as a whole.
    api = Api(
        decision(
            {"id": own[:12], "relation": "updates", "reason": "r"},
            {"id": theirs[:12], "relation": "updates", "reason": "r"},
        )
    )
    api.switch_on(engine)
    new = engine.write("Ana likes jazz, truly.", ["agent:b"], relations=likes("rock"), principal=b).id
    assert engine.wait_enriched()
    body = json.dumps(api.decisions)
    assert "Ana likes the blues." in body  # B's own memory is asked about
    assert theirs[:12] not in body
    assert "Ana likes jazz." not in body
    as_a = engine.read(theirs, principal=a)
    assert as_a.memory.status == "current"
    assert as_a.contradicts == ()
    assert as_a.memory.valid_to is None
    assert as_a.relations == ("Ana —likes→ jazz [? → open]",)
    assert engine.read(own, principal=b).memory.status == "current"  # nothing applied
    assert "names a memory it was not shown" in (engine.read(new, principal=b).enrichment or "")
    with pytest.raises(NotFound):
        engine.read(theirs, principal=b)


def test_a_memory_moved_out_of_the_writers_sight_meanwhile_is_not_changed(engine: Engine) -> None:
    b = principal("B", "agent:b=w")
    blues = engine.write("Ana likes the blues.", ["agent:b", "team:z"], relations=likes("blues")).id
    api = Api(decision({"id": blues[:12], "relation": "updates", "reason": "r"}))
    api.release.clear()
    api.switch_on(engine)
    new = engine.write("Ana likes rock.", ["agent:b"], relations=likes("rock"), principal=b).id
    assert api.asked.wait(30)
    engine.unlink(blues, "agent:b")  # while the model thinks: now only where B may not read
    api.release.set()
    assert engine.wait_enriched()
    kept = engine.read(blues)
    assert kept.memory.status == "current"
    assert kept.memory.valid_to is None
    assert kept.relations == ("Ana —likes→ blues [? → open]",)
    enrichment = engine.read(new, principal=b).enrichment or ""
    assert (
        "reconcile decision failed (it named a memory not in the new memory's readable scopes)" in enrichment
    )
    assert blues[:12] in api.decisions[0]["messages"][0]["content"]


def test_the_write_is_acknowledged_before_the_decision(engine: Engine) -> None:
    jazz, _green = stored(engine)
    api = Api(decision({"id": jazz[:12], "relation": "updates", "reason": "moved on"}))
    api.release.clear()
    api.switch_on(engine)
    new = write_new(engine)  # returns while the decision is still being "thought"
    assert engine.read(new).enrichment == "llm: pending"
    assert engine.read(jazz).memory.status == "current"
    api.release.set()
    assert engine.wait_enriched()
    assert engine.read(jazz).memory.superseded_by == new


def test_the_rules_decide_functional_predicates_without_asking(engine: Engine) -> None:
    porto = engine.write("Ana lives in Porto.", SCOPE, relations=[RelationIn("Ana", "lives_in", "Porto")]).id
    api = Api(decision({"id": porto[:12], "relation": "contradicts", "reason": "r"}))
    api.switch_on(engine)
    new = engine.write("Ana lives in Lisbon.", SCOPE, relations=[RelationIn("Ana", "lives_in", "Lisbon")]).id
    assert engine.wait_enriched()
    assert api.decisions == []  # superseded by the rule: nothing left to ask
    assert engine.read(porto).memory.superseded_by == new
    assert engine.read(new).contradicts == ()
