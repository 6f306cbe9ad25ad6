"""Kùzu statements a recall issues, by kind: an entity's mentions, its relations, the visibility of a relation's
memory, the record reads (and the rest), on a copy of a store that bench/ab_commits.py built.

    PYTHONPATH=<checkout> python bench/recall_statements.py <ab-commits dir>/<variant> [--recalls 100]

Run once per checkout (``PYTHONPATH`` picks which code reads the store); the recalls are ab_commits's: the same
questions (seed 12), recipe default, k=10, in the 20 user scopes in turn, after 20 warm-up ones. No write runs in
between, so what the graph lane keeps between recalls stays valid: this shows the reads a recall needs, not the
latency (ab_commits.py compares that)."""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import kuzu

KINDS = ("relations", "mentioning", "visible_among", "fetch")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--recalls", type=int, default=100)
    a = ap.parse_args()
    counts: collections.Counter[str] = collections.Counter()
    lock, kind = threading.Lock(), threading.local()
    execute = kuzu.Connection.execute

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        with lock:
            counts[getattr(kind, "name", "other")] += 1
        return execute(self, *args, **kwargs)

    kuzu.Connection.execute = counted  # type: ignore[method-assign]
    import storage.adapters.kuzu.reads as reads
    from storage import CachedEmbedder, Engine, MiniLMEmbedder

    for name in KINDS:
        fn = getattr(reads._Reads, name)

        def wrapped(*args, _fn=fn, _name=name, **kwargs):  # type: ignore[no-untyped-def]
            before = getattr(kind, "name", "other")
            kind.name = _name
            try:
                return _fn(*args, **kwargs)
            finally:
                kind.name = before

        setattr(reads._Reads, name, wrapped)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import Sentences

    questions = Sentences(12).questions(a.recalls + 20)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "store"
        shutil.copytree(a.store, copy)
        engine = Engine.open(copy, embedder=CachedEmbedder(MiniLMEmbedder()), warm=False)
        try:
            for i, q in enumerate(questions[:20]):
                engine.recall(q, [f"user:u{i % 20:02d}"], k=10)
            counts.clear()
            for i, q in enumerate(questions[20:]):
                engine.recall(q, [f"user:u{i % 20:02d}"], k=10)
        finally:
            engine.close()
    print("| statement | per recall |\n|---|---:|")
    for name in (*KINDS, "other"):
        print(f"| {name} | {counts[name] / a.recalls:.2f} |")
    print(f"| **all** | **{sum(counts.values()) / a.recalls:.2f}** |")


if __name__ == "__main__":
    main()
