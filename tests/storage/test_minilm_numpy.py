"""The numpy runtime of all-MiniLM-L6-v2 against the torch one (sentence-transformers), on real texts.

The two must be interchangeable: a data directory built by one is served by the other, so their vectors must
agree to float rounding and recall must rank the same.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from storage import CachedEmbedder, Engine, MiniLMEmbedder, WriteItem
from storage.recall.recipes import RECIPES

ROOT = Path(__file__).resolve().parents[2]


def _real_texts() -> list[str]:
    """Sentences and whole paragraphs of this repository's docs: short and long (past the 256-token cut),
    code, tables, punctuation and non-ASCII, as agents write them."""
    texts: list[str] = []
    for path in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]):
        for para in path.read_text(encoding="utf-8").split("\n\n"):
            para = para.strip()
            if not para:
                continue
            texts.append(para)
            texts.extend(s for s in re.split(r"(?<=[.!?])\s+", para) if len(s) > 20)
    unique = list(dict.fromkeys(texts))
    return [
        *unique[:: max(1, len(unique) // 300)][:300],
        "",
        "   ",
        "Ünïcödé café, 日本語のテキスト, emoji 🦉",
    ]


@pytest.fixture(scope="module")
def runtimes() -> tuple[MiniLMEmbedder, MiniLMEmbedder]:
    fast, torch = MiniLMEmbedder(), MiniLMEmbedder(runtime="torch")
    fast.warm()
    torch.warm()
    return fast, torch


def test_numpy_vectors_match_torch_on_real_texts(runtimes: tuple[MiniLMEmbedder, MiniLMEmbedder]) -> None:
    fast, torch = runtimes
    texts = _real_texts()
    assert len(texts) >= 300
    assert max(len(t) for t in texts) > 2_000  # some are truncated at 256 tokens
    a, b = fast.embed(texts), torch.embed(texts)
    assert a.dtype == np.float32
    assert a.shape == b.shape == (len(texts), 384)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cosine = (a * b).sum(axis=1)
    assert cosine.min() > 1 - 1e-5, texts[int(cosine.argmin())][:80]
    assert np.abs(a - b).max() < 1e-4
    # Batching and order do not change a text's vector (padding is masked out).
    single = np.stack([fast.embed([t])[0] for t in texts[:20]])
    np.testing.assert_allclose(single, a[:20], atol=1e-5)


# The default recipe without its relevance rule, so every query returns ten results to compare.
ALL_TEN = RECIPES["default"].with_(relevance_floor=0.0, min_similarity=None)  # every one of the k results


def test_a_store_built_with_torch_recalls_the_same_with_numpy(
    tmp_path: Path, runtimes: tuple[MiniLMEmbedder, MiniLMEmbedder]
) -> None:
    fast, torch = runtimes
    texts = [t for t in _real_texts() if 30 < len(t) < 600][:150]
    queries = [
        "how long does a cold start take",
        "who may purge a scope",
        "what happens when the owner process is killed",
        "bearer token for HTTP clients",
        "how are memories erased from disk",
        "recall latency at 100,000 memories",
        "which embedding model is used",
        "default scope of a stdio session",
        "LongMemEval retrieval results",
        "how do I back up my memories",
    ]
    data_dir = tmp_path / "data"
    with Engine.open(data_dir, embedder=CachedEmbedder(torch), warm=False) as engine:
        engine.write_many([WriteItem(content=t, scopes=["user:a"]) for t in texts])
        before = [[h.memory.id for h in engine.recall(q, ["user:a"], k=10, recipe=ALL_TEN)] for q in queries]
    # The same directory (its vectors from torch) served by the numpy runtime: it is the same model.
    with Engine.open(data_dir, embedder=CachedEmbedder(fast), warm=False) as engine:
        after = [[h.memory.id for h in engine.recall(q, ["user:a"], k=10, recipe=ALL_TEN)] for q in queries]
    assert all(len(ids) == 10 for ids in before)
    assert after == before


def test_the_numpy_runtime_never_imports_torch() -> None:
    code = (
        "import sys; from storage import MiniLMEmbedder; v = MiniLMEmbedder().embed(['otters hold hands']); "
        "print(v.shape, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["(1,", "384)", "False", "False"]


def test_an_unknown_runtime_is_refused() -> None:
    with pytest.raises(ValueError, match="use one of numpy, torch"):
        MiniLMEmbedder(runtime="onnx")  # type: ignore[arg-type]
