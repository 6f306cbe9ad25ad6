"""Derived relations and the contradiction sweep attacked from another team's seat (attack 18): what one team
writes must not decide what another team's memories derive."""

from __future__ import annotations

from scopes import Grant, Principal
from storage import Engine, RelationIn
from storage.enrich import transitive as tr
from tests.storage.test_derived import derived


def test_another_teams_statements_about_a_shared_place_never_crowd_out_a_teams_own_chain(
    engine: Engine,
) -> None:
    # Entities are shared between scopes: team:b saying where Udaipur is, more than the fan-out bound, must not
    # hide team:a's own "Udaipur is in Rajasthan" from the chain team:a's next statement starts.
    alice = Principal("alice", client="t", grants=(Grant.parse("team:a=w"),))
    bob = Principal("bob", client="t", grants=(Grant.parse("team:b=w"),))
    engine.write("Udaipur is in Rajasthan.", ["team:a"], kind="fact", principal=alice,
                 relations=[RelationIn("Udaipur", "located_in", "Rajasthan")])  # fmt: skip
    for n in range(tr.FANOUT + 2):
        engine.write(f"Udaipur is in sales zone {n}.", ["team:b"], kind="fact", principal=bob,
                     relations=[RelationIn("Udaipur", "located_in", f"Zone {n}")])  # fmt: skip
    engine.write("The Grand Palm is in Udaipur.", ["team:a"], kind="fact", principal=alice,
                 relations=[RelationIn("Grand Palm", "located_in", "Udaipur")])  # fmt: skip
    engine.consolidate()
    assert "Grand Palm located in Rajasthan" in " ".join(derived(engine).values())
