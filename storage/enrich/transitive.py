"""Transitive relations the consolidator can justify: A —located_in→ B and B —located_in→ C give A —located_in→ C.

Pure rules; ``storage.engine.derived`` stores what they find. A derivation takes exactly two stored statements
(one step: derived relations are never the source of another, so a chain is at most two edges long and a
hostile graph cannot make them multiply), of the same transitive predicate, both still open and recorded by
current memories that share a scope. It is kept as a group of its two sources, like a conversation, whose
"digest" is a derived memory of kind ``summary`` in the scopes common to both sources: so it is rebuildable,
withdrawn in the transaction that amends, retires or unlinks a source, and erased with them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from storage.domain.records import RelationState, entity_key

DERIVED_PREFIX = "derived:"
DEFAULT_TRANSITIVE = ("located_in", "part_of", "belongs_to", "based_in", "member_of")
"""Containment predicates: each is its own transitive closure. ``lives_in``/``works_at`` are not (a person who
lives in Porto does not contain anything), and two different predicates are never chained."""
FANOUT = 16  # relations read on each side of a new statement when looking for chains
MAX_PER_WRITE = 32  # derivations one memory may start


def derived_key(first: str, second: str) -> str:
    """The group of the derivation from these two source memories (in this order: A→B, then B→C)."""
    return DERIVED_PREFIX + hashlib.sha256(f"transitive\x00{first}\x00{second}".encode()).hexdigest()[:32]


def is_derived_key(key: str) -> bool:
    return key.startswith(DERIVED_PREFIX)


@dataclass(frozen=True, slots=True)
class Derivation:
    subject: str  # as the first source spelt it
    predicate: str
    via: str
    object: str  # as the second source spelt it
    first: str  # the memory that said subject → via
    second: str  # the memory that said via → object

    @property
    def statement(self) -> str:
        return f"{self.subject} —{self.predicate}→ {self.object}"

    def text(self) -> str:
        """The derived memory's words: what follows, and from what (never more than its sources say)."""
        p = self.predicate.replace("_", " ")
        return (
            f"{self.subject} {p} {self.object} (derived: {self.subject} {p} {self.via}; "
            f"{self.via} {p} {self.object})"
        )


def chain(states: Iterable[RelationState], transitive: Sequence[str]) -> Derivation | None:
    """The first derivation the open relations of two memories justify, or None: one memory's relation ends
    where the other's begins, with the same transitive predicate, and the chain does not loop back."""
    open_ = [r for r in states if r.valid_to is None and r.predicate in transitive]
    for a in open_:
        for b in open_:
            if (
                a.memory_id != b.memory_id
                and a.predicate == b.predicate
                and entity_key(a.object) == entity_key(b.subject)
                and entity_key(a.subject) != entity_key(b.object)
            ):
                return Derivation(a.subject, a.predicate, a.object, b.object, a.memory_id, b.memory_id)
    return None


def common_scopes(first: Sequence[str], second: Sequence[str]) -> list[str]:
    """Where a derivation may be read: only scopes both sources are in, so a reader sees it only if it could
    read each source there."""
    return sorted(set(first) & set(second))
