"""A hostile write costs the process at most a few MB of memory, when it is written and again at every start
(the entity lexicon is rebuilt from the store). Measured from outside the engine: the peak resident memory of a
child process that opens the store, as the owner process does (docs/limits.md, "Memory budget")."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

from storage import Engine, RelationIn, WriteItem
from storage.domain.models import MAX_ENTITIES, MAX_NAME_CHARS
from storage.domain.records import entity_key
from storage.language.extraction import FUZZY_MAX_CHARS, EntityLexicon, _after_sentence_end, capitalised_spans

CHILD = Path(__file__).with_name("memory_child.py")
ROOT = Path(__file__).resolve().parents[2]
BUDGET_KIB = 8 * 1024  # "a few MB" per hostile write beyond what ordinary prose of the same length costs
# One conversation_write of 40 maximal messages (1.3 MB of text) beyond one such message: it held every message's
# embedding activations at once (about 1.6 GB for 120 messages, attack8 F4), now one long message's at a time.
CONVERSATION_BUDGET_KIB = 64 * 1024


def _run(data: Path, what: str) -> dict[str, int]:
    proc = subprocess.run(
        [sys.executable, str(CHILD), str(data), what],
        env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {step: int(kib) for step, kib in (line.split() for line in proc.stdout.splitlines())}


def test_a_hostile_write_grows_the_process_by_a_few_mb_now_and_at_every_start(tmp_path: Path) -> None:
    hostile, plain = tmp_path / "hostile", tmp_path / "plain"
    grown = _run(hostile, "hostile")
    for step in ("one_long_word", "many_names", "long_query"):
        over = grown[step] - max(grown["prose"], 0)
        assert over <= BUDGET_KIB, (
            f"{step} grew the peak resident memory {over:,} KiB more than prose: {grown}"
        )
    over = grown["long_conversation"] - max(grown["prose"], 0)
    assert over <= CONVERSATION_BUDGET_KIB, (
        f"a long conversation_write grew the peak by {over:,} KiB: {grown}"
    )
    _run(plain, "plain")
    # At start the entity lexicon is rebuilt from the store: the hostile store may cost only a few MB more.
    at_start, plain_start = _run(hostile, "open")["open"], _run(plain, "open")["open"]
    assert at_start - plain_start <= BUDGET_KIB, (at_start, plain_start)


def test_a_very_long_word_still_matches_exactly_but_gets_no_fuzzy_variants() -> None:
    lexicon = EntityLexicon()
    long_name = "Q" + "x" * 30_999
    lexicon.add(long_name)
    lexicon.add("Portugal")
    assert lexicon.find(f"about {long_name} today") == [long_name]
    assert [m.name for m in lexicon.match("trip to Portgual")] == ["Portugal"]  # fuzzy still works for names
    assert lexicon.match("Q" + "x" * 30_998 + "y") == []  # no one-edit match for a 31,000-character word
    assert capitalised_spans("Hello there. Ana Lima met NASA staff.\n  Bob came, then met Bob.") == [
        "Ana Lima",
        "NASA",
        "Bob",
    ]


def test_the_sentence_start_check_looks_back_only_over_white_space_and_agrees_with_the_old_regex() -> None:
    old = re.compile(r"(?:^|[.!?:;\n]\s*|[\"“(]\s*)$")  # the check before, over the whole prefix
    rng = random.Random(12)
    for _ in range(20_000):
        text = "".join(rng.choice(' .\n\t"(“:;!?aB,') for _ in range(rng.randint(0, 8)))
        assert _after_sentence_end(text, len(text)) == bool(old.search(text)), repr(text)


def test_the_limits_page_states_the_lexicon_bounds() -> None:
    page = (ROOT / "docs" / "limits.md").read_text()
    assert f"5 to {FUZZY_MAX_CHARS} characters (`FUZZY_MAX_CHARS`)" in page
    assert f"at most {MAX_ENTITIES} (`MAX_ENTITIES`), each name at most {MAX_NAME_CHARS} characters" in page


def _deep_size(rows: list[object], fields: tuple[str, ...]) -> int:
    """Bytes of ``rows`` and of every object they hold (each counted once: a shared string costs once)."""
    seen: set[int] = set()
    total = 0
    stack: list[object] = []
    for row in rows:
        stack += [row, *(getattr(row, f) for f in fields)]
    while stack:
        o = stack.pop()
        if o is None or isinstance(o, bool) or id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, (tuple, frozenset)):
            stack.extend(o)
    return total


def test_an_entitys_kept_relations_cost_at_most_400_bytes_each(engine: Engine) -> None:
    """The Kùzu adapter keeps every relation of an entity the graph lane walks from until the next commit, up to
    65,536 in all (``storage.adapters.kuzu._kept``: "180-400 bytes each, 26 MB at most"). Each row held its own
    copies of the predicate, the entity's name and its memory's scope list: 526 bytes a relation (34 MB at
    the bound), measured here before the rows shared them (attack21)."""
    vector = [0.05] * engine.embedder.dim
    engine.write_many(
        [
            WriteItem(
                f"Ana knows Person{i} from the club.",
                ["team:x", "user:ana"] if i % 2 else ["team:x"],
                relations=[RelationIn("Ana", "knows", f"Person{i}")],
                vector=vector,
            )
            for i in range(300)
        ]
    )
    graph, ana = engine.graph, entity_key("Ana")
    with graph.read() as conn:
        for _ in range(3):  # read whole (and kept) at the third ask
            assert len(graph.relations(conn, ana, limit=1000)) == 300
    kept = graph._relations.get(ana, graph._data_version)  # type: ignore[attr-defined]
    assert kept
    assert len(kept) == 300
    fields = ("predicate", "memory_id", "other_id", "other_name", "scopes", "own_name")
    assert _deep_size(list(kept), fields) / len(kept) <= 400
