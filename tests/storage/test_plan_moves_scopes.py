"""Moving a planned change (issue #14: the same words written again with another valid_from) by a principal who
may write the plan's scopes but not those of the value the plan ends. Found by attack22a.

The move cancels the plan (what it ended holds again) and reconciles the new date as this writer's plan, which
never ends a memory in a scope the writer may not write. So a writer of project:b alone, moving a plan of
project:b that ended Acme (in project:a and project:b), left Acme never ending: project:a's value changed by a
principal with no grant there, and project:b answered two employers after the date.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scopes import Grant, Principal
from storage import Engine
from storage.domain.errors import ScopeDenied

A, B = "project:a", "project:b"
B_WRITER = Principal("b-writer", client="tests", grants=(Grant.parse(f"{B}=w"),))


def _employers(engine: Engine, scopes: list[str], at: datetime) -> list[str]:
    hits = engine.recall("where does Ana work", scopes, as_of=at)
    return sorted(h.memory.content for h in hits if "works at" in h.memory.content)


def test_a_plan_that_ends_a_value_in_a_scope_the_mover_may_not_write_is_not_moved(engine: Engine) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    acme = engine.write("Ana works at Acme.", [A, B], kind="fact")
    plan = engine.write("Ana works at Initech.", [B], kind="fact", valid_from=now + timedelta(days=300))
    assert plan.supersedes_later == (acme.id,)
    with pytest.raises(ScopeDenied) as denied:
        engine.write(
            "Ana works at Initech.",
            [B],
            kind="fact",
            valid_from=now + timedelta(days=200),
            principal=B_WRITER,
        )
    # Nothing about what it may not read.
    assert A not in str(denied.value)
    assert acme.id not in str(denied.value)
    assert denied.value.hint
    # Nothing changed: Acme still ends at the plan's date, in both scopes.
    assert engine.read(acme.id).memory.valid_to == now + timedelta(days=300)
    assert engine.read(plan.id).memory.status.value == "current"
    assert _employers(engine, [A], now + timedelta(days=350)) == []
    assert _employers(engine, [B], now + timedelta(days=350)) == ["Ana works at Initech."]
    assert engine.verify().ok


def test_the_writer_of_every_scope_involved_still_moves_the_plan(engine: Engine) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    both = Principal("ab-writer", client="tests", grants=(Grant.parse(f"{A}=w"), Grant.parse(f"{B}=w")))
    acme = engine.write("Ana works at Acme.", [A, B], kind="fact")
    engine.write("Ana works at Initech.", [B], kind="fact", valid_from=now + timedelta(days=300))
    moved = engine.write(
        "Ana works at Initech.", [B], kind="fact", valid_from=now + timedelta(days=200), principal=both
    )
    assert moved.status == "added"
    assert engine.read(acme.id).memory.valid_to == now + timedelta(days=200)
    assert _employers(engine, [B], now + timedelta(days=250)) == ["Ana works at Initech."]
    assert engine.verify().ok
