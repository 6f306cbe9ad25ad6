"""The trigger phrases relation patterns start from: phrase -> (predicate, the kind of its object).

Adding a phrase is one ``_add`` line; ``_BY_FIRST`` indexes them by first word, longest first."""

from __future__ import annotations

from typing import Literal

Kind = Literal["place", "org", "person", "thing"]

# phrase -> (predicate, object kind). Past forms get their own predicates: "worked at" is history, never
# a new current value of works_at.
_PHRASES: dict[tuple[str, ...], tuple[str, Kind]] = {}


def _add(pred: str, kind: Kind, *phrases: str) -> None:
    for p in phrases:
        _PHRASES[tuple(p.split())] = (pred, kind)


_add(
    "lives_in",
    "place",
    "live in",
    "lives in",
    "living in",
    "reside in",
    "resides in",
    "residing in",
    "based in",
    "settled in",
    "moved to",
    "move to",
    "moves to",
    "moving to",
    "relocated to",
    "relocate to",
    "relocating to",
    "moved back to",
    "moved into",
    "relocated back to",
    "live near",
    "lives near",
)
_add("lived_in", "place", "lived in", "used to live in", "grew up in")
_add(
    "works_at",
    "org",
    "work at",
    "works at",
    "working at",
    "work for",
    "works for",
    "working for",
    "employed by",
    "employed at",
    "joined",
    "joins",
    "got a job at",
    "started at",
    "started working at",
    "started working for",
    "hired by",
    "hired at",
    "job at",
    "new job at",
    "switched to",
    "work in",
)
_add("worked_at", "org", "worked at", "worked for", "used to work at", "used to work for", "left")
_add(
    "studies_at",
    "org",
    "study at",
    "studies at",
    "studying at",
    "student at",
    "enrolled at",
    "enrolled in",
    "attend",
    "attends",
    "attending",
    "go to school at",
    "goes to school at",
)
_add("studied_at", "org", "studied at", "graduated from", "attended")
_add(
    "married_to",
    "person",
    "married to",
    "married",
    "marry",
    "marries",
    "wedded to",
    "husband is",
    "wife is",
    "spouse is",
)
_add("engaged_to", "person", "engaged to")
_add("dating", "person", "dating", "going out with", "seeing")
_add(
    "likes",
    "thing",
    "like",
    "likes",
    "love",
    "loves",
    "enjoy",
    "enjoys",
    "adore",
    "adores",
    "prefer",
    "prefers",
    "fan of",
    "big fan of",
    "huge fan of",
    "crazy about",
    "passionate about",
    "into",
)
_add(
    "dislikes",
    "thing",
    "dislike",
    "dislikes",
    "hate",
    "hates",
    "detest",
    "detests",
    "loathe",
    "loathes",
    "can not stand",
    "cannot stand",
    "averse to",
)
_add("allergic_to", "thing", "allergic to", "allergy to", "allergies to", "intolerant to", "intolerance to")
_add("owns", "thing", "own", "owns", "bought", "purchased", "drive", "drives")
_add(
    "visited",
    "place",
    "visited",
    "went to",
    "travelled to",
    "traveled to",
    "been to",
    "flew to",
    "trip to",
    "holiday in",
    "vacation in",
    "vacationed in",
    "stayed in",
)
_add("born_in", "place", "born in")
_add(
    "from",
    "place",
    "am from",
    "'m from",
    "is from",
    "'s from",
    "are from",
    "comes from",
    "come from",
    "hails from",
    "originally from",
)
_add("speaks", "thing", "speak", "speaks", "fluent in")
# Containment, which the consolidator chains (located_in then located_in: storage.enrich.transitive). Only
# phrases that say containment and nothing else: "is in" (where someone is today) and "belongs to" (who owns
# what) say too many other things to be read offline. "based in" is lives_in for a person, based_in for an
# organisation (storage.enrich._statements.read).
_add("located_in", "place", "located in", "located within", "situated in", "lies in")
_add("based_in", "place", "headquartered in")
_add("part_of", "org", "part of")
_add("member_of", "org", "member of")
_add("has_pet", "thing", "have a dog", "has a dog", "have a cat", "has a cat", "adopted")
_BY_FIRST: dict[str, list[tuple[tuple[str, ...], str, Kind]]] = {}
for _p, (_pred, _kind) in _PHRASES.items():
    _BY_FIRST.setdefault(_p[0], []).append((_p, _pred, _kind))
for _v in _BY_FIRST.values():
    _v.sort(key=lambda e: -len(e[0]))
