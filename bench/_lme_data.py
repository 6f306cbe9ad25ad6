"""LongMemEval_S: loading, the development/reporting splits, and the units a haystack is indexed in.

The data stays outside the repository (``../shared/bench-data/`` by default); see that folder's README for
the format. Splits: development = even 0-based positions (tune here), reporting = odd positions (report here).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from storage.domain.models import MAX_CONTENT_CHARS

FILE = "longmemeval_s_cleaned_499of500.json.gz"
SPLITS = ("dev", "report", "all")


@dataclass(frozen=True, slots=True)
class Turn:
    session: int  # index into the question's haystack
    index: int  # 0-based turn index within the session
    role: str
    content: str
    has_answer: bool


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    type: str
    text: str
    date: datetime
    session_ids: tuple[str, ...]
    session_dates: tuple[datetime, ...]
    sessions: tuple[tuple[Turn, ...], ...]
    answer_sessions: frozenset[str]

    @property
    def abstention(self) -> bool:
        return self.id.endswith("_abs")

    def turns(self) -> Iterator[Turn]:
        for s in self.sessions:
            yield from s


def parse_date(text: str) -> datetime:
    """``"2023/05/30 (Tue) 23:40"`` -> an aware UTC datetime (the dataset has no zones)."""
    day, _, clock = text.partition(" (")
    return datetime.strptime(f"{day} {clock.split(') ')[-1]}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def _question(raw: dict[str, Any]) -> Question:
    sessions = tuple(
        tuple(
            Turn(si, ti, t["role"], t["content"], bool(t.get("has_answer", False)))
            for ti, t in enumerate(turns)
        )
        for si, turns in enumerate(raw["haystack_sessions"])
    )
    return Question(
        id=raw["question_id"],
        type=raw["question_type"],
        text=raw["question"],
        date=parse_date(raw["question_date"]),
        session_ids=tuple(raw["haystack_session_ids"]),
        session_dates=tuple(parse_date(d) for d in raw["haystack_dates"]),
        sessions=sessions,
        answer_sessions=frozenset(raw["answer_session_ids"]),
    )


def checksum(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load(data_dir: Path) -> list[Question]:
    with gzip.open(data_dir / FILE, "rt", encoding="utf-8") as f:
        return [_question(r) for r in json.load(f)]


def split(questions: Sequence[Question], name: str) -> list[Question]:
    """``dev``: even positions; ``report``: odd positions; ``all``: everything."""
    if name == "dev":
        return list(questions[0::2])
    if name == "report":
        return list(questions[1::2])
    return list(questions)


def spaced(questions: Sequence[Question], limit: int | None) -> list[Question]:
    """``limit`` questions evenly spaced over the split (every question type shows up), or all of them."""
    if limit is None or limit >= len(questions):
        return list(questions)
    step = len(questions) / limit
    return [questions[int(i * step)] for i in range(limit)]


def embed_texts(questions: Sequence[Question]) -> list[str]:
    """Every text the engine will embed: each turn that says something (the engine embeds every memory
    written through the tools), cut to the content limit as the benchmark writes it, and the questions."""
    out: dict[str, None] = {}
    for q in questions:
        out.setdefault(q.text, None)
        for session in q.sessions:
            for t in session:
                if t.content.strip():
                    out.setdefault(t.content[:MAX_CONTENT_CHARS], None)
    return list(out)
