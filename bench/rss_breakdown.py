"""Resident memory of a process that holds a store, broken down: ``/proc/self/smaps_rollup`` (anonymous vs file
backed) stamped after the open, recalls, writes, and the largest mappings by kind at the end.

    STORE=/tmp/copy-of-a-store RECALLS=200 WRITES=20 [POOL=MiB] [KEPT=0] [LANCE_CACHE=MiB] python bench/rss_breakdown.py

``SCALE=1`` runs instead the sequence of ``bench/scale.py``'s process (recalls, maintenance, recalls, 60 writes,
close, reopen, 51 recalls: it changes the store). ``POOL`` caps Kùzu's buffer pool, ``KEPT=0`` turns the adapter's kept rows off, ``LANCE_CACHE`` sets LanceDB's
index and metadata caches: one thing varied at a time, each run in its own process on a copy of a store.
"""

# ruff: noqa
import ctypes
import json
import os
import re
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]
from _common import Sentences
import lancedb
import storage.adapters.kuzu.store as ks
from storage import CachedEmbedder, Engine, MiniLMEmbedder

if os.environ.get("POOL"):
    ks.BUFFER_POOL_CAP = int(os.environ["POOL"]) << 20
SESSIONS = []
_connect = lancedb.connect


def _connect_with_session(*args, **kwargs):
    mib = os.environ.get("LANCE_CACHE")
    if mib is not None:  # else the adapter's own session (or LanceDB's default one)
        kwargs["session"] = lancedb.Session(
            index_cache_size_bytes=int(mib) << 20, metadata_cache_size_bytes=int(mib) << 20
        )
    kwargs.setdefault("session", lancedb.Session())
    SESSIONS.append(
        kwargs["session"]
    )  # kept alive here: after a close its cache still counts (and stays resident)
    return _connect(*args, **kwargs)


lancedb.connect = _connect_with_session
if os.environ.get("KEPT") == "0":
    ks.MENTIONS_KEPT = ks.RELATIONS_KEPT = 0


def rollup():
    d = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
        k, v = line.split(":", 1)
        if v.strip().endswith("kB"):
            d[k] = int(v.split()[0]) // 1024
    return {k: d[k] for k in ("Rss", "Anonymous", "Shared_Clean", "Private_Clean", "Private_Dirty")}


def per_mapping(top=12):
    out = {}
    name = None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            parts = line.split(None, 5)
            name = parts[5] if len(parts) > 5 else "[anon]"
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if name == "[anon]":
                mib = (hi - lo) >> 20
                name = (
                    "[anon vm>=1GiB]"
                    if mib >= 1024
                    else "[anon vm 64-1024MiB]"
                    if mib >= 64
                    else "[anon vm 60-64MiB arena]"
                    if mib >= 60
                    else "[anon small]"
                )
            if "/tmp/rss17" in name:
                name = "store:" + name.split("/")[-2] + "/" + name.split("/")[-1]
            elif ".so" in name:
                name = "[libs .so]"
            elif "site-packages" in name or "hf" in name or "huggingface" in name:
                name = "file:" + name.split("/")[-1]
        elif line.startswith("Rss:"):
            out[name] = out.get(name, 0) + int(line.split()[1])
    return {k: v // 1024 for k, v in sorted(out.items(), key=lambda x: -x[1])[:top]}


def stamp(tag):
    r = rollup()
    lance = sum(x.size_bytes for x in SESSIONS) >> 20
    print(json.dumps({"at": tag, **r, "lance_cache": lance, "sessions": len(SESSIONS)}), flush=True)


def scale_sequence(store: Path, model: MiniLMEmbedder) -> None:
    """What bench/scale.py's process does before its RSS column: 200 recalls, maintenance, 200 recalls, 60 writes,
    close, reopen, 51 recalls; stamped at each step, then after malloc_trim."""
    import gc

    import scale

    eng = Engine.open(store, embedder=CachedEmbedder(model), warm=False)
    stamp("open")
    qs = Sentences(99).questions(400)
    for i in range(200):
        eng.recall(qs[i], [f"user:u{i % 20:02d}"], k=10)
    stamp("200 recalls")
    t = time.perf_counter()
    scale.maintain(eng)
    stamp(f"maintain {time.perf_counter() - t:.0f}s")
    for i in range(200):
        eng.recall(qs[-1 - i], [f"user:u{i % 20:02d}"], k=10)
    stamp("200 recalls")
    scale.single_writes(eng, Sentences(100007).memories(60))
    stamp("60 writes")
    eng.close()
    del eng
    gc.collect()
    stamp("closed")
    eng = Engine.open(store, embedder=CachedEmbedder(model), warm=False)
    stamp("reopened")
    for i, q in enumerate(qs[:51]):
        eng.recall(q, [f"user:u{i % 20:02d}"], k=10)
    stamp("51 recalls")
    print(json.dumps(per_mapping()), flush=True)
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    stamp("malloc_trim")
    eng.close()


model = MiniLMEmbedder()
model.embed(["warm"])
stamp("model loaded")
if os.environ.get("SCALE") == "1":
    scale_sequence(Path(os.environ["STORE"]), model)
    sys.exit(0)
t = time.perf_counter()
eng = Engine.open(Path(os.environ["STORE"]), embedder=CachedEmbedder(model), warm=False)
stamp(f"opened {time.perf_counter() - t:.1f}s")
qs = Sentences(99).questions(int(os.environ.get("RECALLS", 200)) + 1)
n = int(os.environ.get("RECALLS", 200))
times = []
for i, q in enumerate(qs[:n]):
    t = time.perf_counter()
    eng.recall(q, [f"user:u{i % 20:02d}"], k=10)
    times.append(time.perf_counter() - t)
    if i + 1 in (1, 10, 50, 100, 200, 400):
        stamp(f"{i + 1} recalls")
w = int(os.environ.get("WRITES", 20))
for i, text in enumerate(Sentences(123457).memories(w)):
    eng.write(text, [f"user:u{i % 20:02d}"])
eng.reconciler.wait_projected(60)
stamp(f"{w} writes")
for i, q in enumerate(qs[:20]):
    eng.recall(q + " again", [f"user:u{i % 20:02d}"], k=10)
stamp("20 more recalls")
times.sort()
print("recall p50 %.1f ms p95 %.1f ms" % (times[len(times) // 2] * 1e3, times[int(len(times) * 0.95)] * 1e3))
print(json.dumps(per_mapping()))
graph = eng.graph
kept = {k: getattr(getattr(graph, k, None), "_total", None) for k in ("_mentions", "_relations")}
print(json.dumps({"kept rows": kept, "python blocks": sys.getallocatedblocks()}))
ctypes.CDLL("libc.so.6").malloc_trim(0)
stamp("malloc_trim")
eng.close()
