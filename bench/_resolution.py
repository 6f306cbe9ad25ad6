"""Entity resolution in the extraction benchmark: precision and recall on hand-written cases, and its cost.

Cases (``tests/storage/data/resolution_cases.jsonl``, written by hand): each writes a known name, then another
spelling of it or a different entity with a similar name; ``pairs`` says which (new, known) pairs truly are
one entity. Each case is written by its own principal, granted only its own scope, so the other cases'
entities are never candidates (resolution only compares names the writer may read). Scored:

- **linked**: names resolution linked to a known entity at write time (a wrong one is a silent false merge);
- **proposed**: pending SAME_AS proposals;
- **found**: linked or proposed, i.e. every true pair a user gets to see.

Cost: ``EntityLexicon.similar`` + ``judge`` for new names against a lexicon of 100,000 synthetic person names,
and the write acknowledgement with resolution on and off, interleaved in one store.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scopes import Grant, Level, Principal, ScopeId
from storage import Engine, EntityIn
from storage.engine.resolution import Resolution
from storage.language.extraction import EntityLexicon, name_key
from storage.language.resolve import judge


@dataclass
class Tally:
    """True and false positives and misses of one measure (also bench/extraction.py's)."""

    tp: int = 0
    fp: int = 0
    fn: int = 0

    def add(self, got: set[Any], want: set[Any]) -> None:
        self.tp += len(got & want)
        self.fp += len(got - want)
        self.fn += len(want - got)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0


@dataclass
class ResolutionScores:
    tallies: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    by_tag: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    false_merges: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    cases: int = 0
    # Pairs written with the outcome a person expects ("link", "propose" or "none"): how many got it, and which
    # did not (``case: new ~ known: expected X, got Y``).
    expected: int = 0
    as_expected: int = 0
    unexpected: list[str] = field(default_factory=list)


def _add(t: Tally, got: set[Any], want: set[Any]) -> None:
    t.tp += len(got & want)
    t.fp += len(got - want)
    t.fn += len(want - got)


def evaluate(data_dir: Path, path: Path) -> ResolutionScores:
    scores = ResolutionScores()
    with Engine.open(data_dir, warm=False) as engine:
        for line in path.read_text().splitlines():
            if line.strip():
                _case(engine, json.loads(line), scores)
    return scores


# Titles a mention may carry ("Dr. Okafor"): a case names the person, and the extractor may keep the title.
_TITLES = frozenset(("dr", "mr", "mrs", "ms", "miss", "prof"))


def _key(name: str) -> str:
    words = name_key(name.replace(".", " ")).split()
    while len(words) > 1 and words[0] in _TITLES:
        words = words[1:]
    return " ".join(words)


def _case(engine: Engine, case: dict[str, Any], scores: ResolutionScores) -> None:
    scope = f"project:res-{case['id']}"
    who = Principal(f"bench-{case['id']}", grants=(Grant(ScopeId.parse(scope), Level.WRITE),))
    linked: set[tuple[str, str]] = set()
    raised: set[str] = set()
    for w in case["writes"]:
        # A write is its text, or {"text", "entities"} when the caller names entities (and their aliases).
        text, given = (w, []) if isinstance(w, str) else (w["text"], w.get("entities", []))
        entities = [EntityIn(e["name"], aliases=tuple(e.get("aliases", ()))) for e in given]
        r = engine.write(text, [scope], entities=entities or None, principal=who)
        for said_known in r.resolved:
            said, rest = said_known.split(" -> ", 1)
            linked.add((_key(said), _key(rest.rsplit(" (", 1)[0])))
        raised.update(r.proposals)
    proposed = {
        (_key(p.a), _key(p.b)) for p in engine.entity_proposals("all", principal=who) if p.id in raised
    }
    same = {(_key(a), _key(b)) for a, b, truth, *_ in case["pairs"] if truth}
    for a, b, _truth, *expect in case["pairs"]:
        if expect:
            pair = (_key(a), _key(b))
            got = "link" if pair in linked else "propose" if pair in proposed else "none"
            scores.expected += 1
            scores.as_expected += got == expect[0]
            if got != expect[0]:
                scores.unexpected.append(f"{case['id']}: {a} ~ {b}: expected {expect[0]}, got {got}")
    for key, got in (("linked", linked), ("proposed", proposed), ("found", linked | proposed)):
        _add(scores.tallies[key], got, same)
    for tag in case.get("tags", []):
        _add(scores.by_tag[tag], linked | proposed, same)
    scores.false_merges += [f"{case['id']}: {a} -> {b}" for a, b in sorted(linked - same)]
    scores.misses += [f"{case['id']}: {a} ~ {b}" for a, b in sorted(same - linked - proposed)]
    scores.cases += 1


_FIRST = [
    "james",
    "mary",
    "john",
    "patricia",
    "robert",
    "jennifer",
    "michael",
    "linda",
    "william",
    "elizabeth",
    "david",
    "barbara",
    "richard",
    "susan",
    "joseph",
    "jessica",
    "thomas",
    "sarah",
    "charles",
    "karen",
    "daniel",
    "nancy",
    "matthew",
    "lisa",
    "anthony",
    "betty",
    "mark",
    "margaret",
    "donald",
    "sandra",
    "steven",
    "ashley",
    "paul",
    "kimberly",
    "andrew",
    "emily",
    "joshua",
    "donna",
    "kenneth",
    "michelle",
    "kevin",
    "carol",
    "brian",
    "amanda",
    "george",
    "melissa",
    "timothy",
    "deborah",
    "ana",
    "maria",
    "jose",
    "luis",
    "carlos",
    "sofia",
    "lucia",
    "pedro",
    "ines",
    "joao",
    "priya",
    "arjun",
    "wei",
    "mei",
    "yuki",
    "hiroshi",
    "olga",
    "ivan",
    "fatima",
    "omar",
    "ahmed",
    "leila",
    "noah",
    "emma",
    "liam",
    "olivia",
    "lucas",
    "mia",
    "hugo",
    "chloe",
]
_SYLLABLES = ["ka", "ro", "mi", "ne", "sa", "to", "li", "ver", "an", "del", "mor", "ban", "tis", "wen", "gar", "lo", "pe", "shi", "ru", "ton", "ber", "ham", "ford", "sen", "wick", "ley", "dal", "mon", "rich", "stein", "berg", "man", "son", "field", "hart", "ow", "el", "ur", "ik"]  # fmt: skip


def _surname(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3)))


def _typo(word: str, rng: random.Random) -> str:
    i = rng.randrange(len(word))
    op = rng.choice(("del", "sub", "swap"))
    if op == "del" and len(word) > 3:
        return word[:i] + word[i + 1 :]
    if op == "swap" and i + 1 < len(word):
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    return word[:i] + rng.choice("aeioulnrst") + word[i + 1 :]


def lookup_cost(n_names: int = 100_000, probes: int = 1_000, seed: int = 15) -> dict[str, float]:
    """Median and 99th-percentile microseconds to find and judge the candidates of one new name, in a lexicon
    of ``n_names`` person names; and how many candidates the blocking returned."""
    rng = random.Random(seed)
    lex = EntityLexicon()
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < n_names:
        name = f"{rng.choice(_FIRST).title()} {_surname(rng).title()}"
        if name not in seen:
            seen.add(name)
            names.append(name)
            lex.add(name)
    probe_names = [
        " ".join(_typo(w, rng) if j == 1 else w for j, w in enumerate(rng.choice(names).split()))
        for _ in range(probes // 2)
    ] + [f"{rng.choice(_FIRST).title()} {_surname(rng).title()}x" for _ in range(probes - probes // 2)]
    micros: list[float] = []
    candidates: list[int] = []
    for name in probe_names:
        t0 = time.perf_counter()
        found = lex.similar(name)
        key = name_key(name)
        _ = [judge(key, k) for _, k in found]
        micros.append((time.perf_counter() - t0) * 1e6)
        candidates.append(len(found))
    micros.sort()
    return {
        "names": float(n_names),
        "probes": float(probes),
        "median_us": statistics.median(micros),
        "p99_us": micros[int(len(micros) * 0.99) - 1],
        "median_candidates": statistics.median(candidates),
        "max_candidates": float(max(candidates)),
    }


def write_cost(data_dir: Path, texts: list[str]) -> dict[str, float]:
    """Median write acknowledgement (ms) with resolution and without it, alternating in one store."""
    times: dict[str, list[float]] = {"on": [], "off": []}
    step: list[float] = []  # the resolution step alone, inside the writes with it on
    with Engine.open(data_dir, warm=False) as engine:
        engine.embedder.embed(texts)  # cached: the comparison is the write path, not the model
        resolve = engine._resolve

        def real(principal: Any, entities: Any, given: Any, targets: Any) -> Resolution:
            t0 = time.perf_counter()
            try:
                return resolve(principal, entities, given, targets)
            finally:
                step.append((time.perf_counter() - t0) * 1000)

        def off(principal: Any, entities: Any, given: Any, targets: Any) -> Resolution:
            return Resolution(list(entities), [], [])

        for i, text in enumerate(texts):
            variant = "on" if i % 2 else "off"
            engine._resolve = real if variant == "on" else off  # type: ignore[method-assign]
            t0 = time.perf_counter()
            engine.write(text, ["user:sam"])
            times[variant].append((time.perf_counter() - t0) * 1000)
        engine._resolve = resolve  # type: ignore[method-assign]
    return {
        "on_ms": statistics.median(times["on"]),
        "off_ms": statistics.median(times["off"]),
        "step_ms": statistics.median(step),
        "step_max_ms": max(step),
        "n": len(texts) / 2,
    }


def report(
    sets: dict[str, ResolutionScores], lookup: dict[str, float] | None, writes: dict[str, float] | None
) -> list[str]:
    dev, held = sets["development"], sets["held-out"]
    lines = [
        "",
        "## Entity resolution",
        "",
        f"{dev.cases} hand-written cases in `tests/storage/data/resolution_cases.jsonl` (the development set) and "
        f"{held.cases} in `resolution_heldout.jsonl` (held out): people, places and organisations; misspellings, "
        'keyboard slips, sound-alikes, nicknames, aliases, titles, names with fewer words ("Dr. Okafor" after '
        '"Ngozi Okafor"), the other sex\'s form of a name, two people with the same first or last name. Each '
        "is written by a principal that reads only its own scope. A pair counts as true when both names are one "
        "entity. `auto-link` is what resolution merged on its own (a false positive there is a silent false "
        "merge); `proposed` the pending SAME_AS proposals; `link-or-propose` either, i.e. every true pair a user "
        "gets to see. Tuning: the slip, vowel, digit and other-sex rules of `storage/language/resolve.py` were "
        "set after running the first 33 development cases; the other 30 development cases and the 20 held-out "
        "ones were written with their expected outcome before the resolver was run on them, and nothing was "
        "tuned on the held-out set.",
        "",
        "| what | set | precision | recall | tp | fp | fn |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, label in (("linked", "auto-link"), ("proposed", "proposed"), ("found", "link-or-propose")):
        for name, scores in sets.items():
            t = scores.tallies[key]
            lines.append(
                f"| {label} | {name} | {t.precision:.3f} | {t.recall:.3f} | {t.tp} | {t.fp} | {t.fn} |"
            )
    lines += [
        "",
        "Outcome as written down before running (link, propose or none; the 50 cases added with issue 15's "
        "second pass carry one per pair): "
        + "; ".join(f"{name} {s.as_expected}/{s.expected}" for name, s in sets.items())
        + ".",
    ]
    lines += [
        "",
        "| tag (link-or-propose, development) | precision | recall | tp | fp | fn |",
        "|---|---|---|---|---|---|",
    ]
    for tag, t in sorted(dev.by_tag.items()):
        lines.append(f"| {tag} | {t.precision:.3f} | {t.recall:.3f} | {t.tp} | {t.fp} | {t.fn} |")
    for name, scores in sets.items():
        lines += [
            "",
            f"**{name}.** False merges (linked, not the same entity): "
            + ("; ".join(scores.false_merges) or "none")
            + ". True pairs neither linked nor proposed: "
            + ("; ".join(scores.misses) or "none")
            + ". Outcomes other than expected: "
            + ("; ".join(scores.unexpected) or "none")
            + ".",
        ]
    if lookup:
        lines += [
            "",
            f"Cost of resolving one new name against {int(lookup['names']):,} known person names "
            f"({int(lookup['probes'])} probes, half misspellings of known names, half new names): median "
            f"{lookup['median_us']:.0f} µs, p99 {lookup['p99_us']:.0f} µs; the blocking returned a median of "
            f"{lookup['median_candidates']:.0f} candidates (at most {int(lookup['max_candidates'])}).",
        ]
    if writes:
        lines += [
            "",
            f"Write acknowledgement with resolution on and off ({int(writes['n'])} memories each, alternating in "
            f"one store, embeddings cached): median {writes['on_ms']:.2f} ms on, {writes['off_ms']:.2f} ms off "
            f"(ratio {writes['on_ms'] / writes['off_ms']:.3f}; the machine is shared and loaded, so this ratio moves "
            f"by more than the step costs). The resolution step itself, timed inside those writes: median "
            f"{writes['step_ms']:.3f} ms, at most {writes['step_max_ms']:.2f} ms.",
        ]
    return lines
