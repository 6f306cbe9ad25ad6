# ruff: noqa  (attack harness scripts: throwaway probes, not product code)
"""Erasure byte scan: erase a chain, erase a conversation message (digest source), purge a scope; then scan every
byte under the data dir (and backups taken before/after) for content, vectors, ids, aliases, types, hashes."""

from __future__ import annotations

import hashlib
import json
import struct
import sys

import anyio

from attack.harness import as_token, call, cli, fresh_store, http_server, log, scan, token

BASE = sys.argv[1] if len(sys.argv) > 1 else None


def needles_for(mem: dict, vec: list[float] | None, label: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    mid = mem["id"]
    out[f"{label}:id"] = mid.encode()
    out[f"{label}:ID"] = mid.upper().encode()
    out[f"{label}:idraw"] = bytes.fromhex(mid)
    c = mem["content"]
    out[f"{label}:content"] = c.encode()
    out[f"{label}:content-utf16"] = c.encode("utf-16-le")
    out[f"{label}:sha256"] = hashlib.sha256(c.encode()).hexdigest().encode()
    out[f"{label}:sha256raw"] = hashlib.sha256(c.encode()).digest()
    if vec:
        out[f"{label}:vecf32le"] = struct.pack("<8f", *vec[:8])
        out[f"{label}:vecf32be"] = struct.pack(">8f", *vec[:8])
        out[f"{label}:vecf32mid"] = struct.pack("<4f", *vec[100:104])
        out[f"{label}:vecf16"] = struct.pack("<8e", *vec[:8])
    return out


async def main() -> None:
    async with fresh_store(BASE) as store:
        adm = token(store, "adm", "team:e=admin", "team:p=admin", "team:k=admin")
        env = {"MNEMOGRAPH_DIGEST_QUIET": "1"}
        async with http_server(store, auth=True, env=env) as srv, as_token(srv.url, adm) as c:
            for i in range(30):
                await call(
                    c,
                    "memory_write",
                    {"content": f"Filler memory number {i} about gardens.", "scopes": ["team:k"]},
                )
            ok, m1 = await call(
                c,
                "memory_write",
                {
                    "content": "Xantippe Quorlax keeps the spare key under the blue flowerpot.",
                    "scopes": ["team:e"],
                    "entities": [
                        {"name": "Xantippe Quorlax", "type": "zzsecrettype", "aliases": ["Xqalias"]}
                    ],
                    "metadata": {"tag": "zzmetavalue"},
                },
            )
            assert ok, m1
            ok, m2 = await call(
                c,
                "amend",
                {"id": m1["id"], "content": "Xantippe Quorlax moved the spare key to the mailbox."},
            )
            assert ok, m2
            ok, conv = await call(
                c,
                "conversation_write",
                {
                    "conversation": "zzconv-erase",
                    "scopes": ["team:e"],
                    "messages": [
                        {
                            "role": "user",
                            "content": "My bank PIN is 90210 and I bank at Plovdiv Credit.",
                            "time": "2024-05-01T10:00:00Z",
                            "speaker": "Ana",
                            "id": "zzmsgid1",
                        },
                        {
                            "role": "assistant",
                            "content": "I will remember you bank at Plovdiv Credit.",
                            "time": "2024-05-01T10:01:00Z",
                        },
                    ],
                },
            )
            assert ok, conv
            ok, conv2 = await call(
                c,
                "conversation_write",
                {
                    "conversation": "zzconv-whole",
                    "scopes": ["team:e"],
                    "messages": [
                        {
                            "role": "user",
                            "content": "Grunthos the Flatulent recited poetry on Tuesday.",
                            "time": "2024-06-01T10:00:00Z",
                            "id": "zzmsgid2",
                        },
                    ],
                },
            )
            ok, p1 = await call(
                c,
                "memory_write",
                {"content": "Purgeable secret: the llama is named Ozymandias-77.", "scopes": ["team:p"]},
            )
            await anyio.sleep(6)  # digests
            ok, r = await call(
                c, "recall", {"query": "Plovdiv Credit PIN", "kinds": ["summary"], "scopes": ["team:e"]}
            )
            log("digest before", r)
            digest = r["results"][0] if r["results"] else None
            cli(store, "backup", str(store.data_dir.parent / "backup-before"))
            cli(store, "export", "--vectors", "-o", str(store.data_dir.parent / "export-before.jsonl"))
            rows = [
                json.loads(line)
                for line in (store.data_dir.parent / "export-before.jsonl").read_text().splitlines()
            ]
            vecs = {}
            for row in rows:
                if isinstance(row, dict):
                    for k in ("vector", "embedding"):
                        if k in row and "id" in row:
                            vecs[row["id"]] = row[k]
            log("export row keys", sorted({k for r in rows for k in r}) if rows else None, len(vecs))
            ok, mr1 = await call(c, "memory_read", {"id": m2["id"]})
            old = mr1["versions"]
            msgs = {}
            for m in conv["messages"] + conv2["messages"]:
                ok, mm = await call(c, "memory_read", {"id": m["id"]})
                msgs[m["id"]] = mm["memory"]
            ok, mp = await call(c, "memory_read", {"id": p1["id"]})
            needles: dict[str, bytes] = {}
            for v in old:
                needles |= needles_for(v, vecs.get(v["id"]), "chain-" + v["id"][:6])
            m0 = conv["messages"][0]["id"]
            needles |= needles_for(msgs[m0], vecs.get(m0), "msg0")
            m2id = conv2["messages"][0]["id"]
            needles |= needles_for(msgs[m2id], vecs.get(m2id), "whole")
            needles |= needles_for(mp["memory"], vecs.get(p1["id"]), "purged")
            if digest:
                needles |= needles_for(digest, vecs.get(digest["id"]), "digest")
            needles |= {
                "alias": b"Xqalias",
                "type": b"zzsecrettype",
                "meta": b"zzmetavalue",
                "pin": b"90210",
                "msgid1": b"zzmsgid1",
                "msgid2": b"zzmsgid2",
                "convwhole": b"zzconv-whole",
                "Grunthos": b"Grunthos",
                "Ozymandias": b"Ozymandias-77",
                "Xantippe": b"Xantippe",
                "Plovdiv": b"Plovdiv",
            }
            pre = scan(store.data_dir, needles)
            log("present before:", sorted({n for n, _ in pre}))
            ok, e1 = await call(c, "erase", {"id": m2["id"], "confirm": m2["id"]})
            log("erase chain", ok, e1)
            ok, e2 = await call(c, "erase", {"id": m0, "confirm": m0})
            log("erase msg", ok, e2)
            ok, e3 = await call(c, "erase", {"id": m2id, "confirm": m2id})
            log("erase whole conv", ok, e3)
            ok, e4 = await call(c, "purge", {"scope": "team:p", "confirm": "team:p"})
            log("purge", ok, e4)
            await anyio.sleep(6)
            ok, r = await call(
                c, "recall", {"query": "Plovdiv Credit", "scopes": ["team:e"], "explain": True}
            )
            log("after recall", json.dumps(r)[:1500])
            for res in r["results"]:
                ok, mm = await call(c, "memory_read", {"id": res["id"]})
                log("after read", json.dumps(mm["memory"]["metadata"])[:800])
            cli(store, "backup", str(store.data_dir.parent / "backup-after"))
            cli(store, "export", "--vectors", "-o", str(store.data_dir.parent / "export-after.jsonl"))
            hits = scan(store.data_dir, needles)
            for h in hits:
                log("HIT data", h)
            for h in scan(store.data_dir.parent / "backup-after", needles):
                log("HIT backup-after", h)
            for h in scan(store.data_dir.parent, {k: v for k, v in needles.items()}):
                if "export-after" in h[1]:
                    log("HIT export-after", h)
            for h in scan(store.paths.root, needles):
                log("HIT runtime", h)
        # restart and scan again (erasure finishing at start)
        async with http_server(store, auth=True, env=env) as srv, as_token(srv.url, adm) as c:
            ok, r = await call(c, "recall", {"query": "Plovdiv Credit PIN", "scopes": ["team:e"]})
            log("restart recall", json.dumps(r)[:600])
        hits = scan(store.data_dir, needles)
        for h in hits:
            log("HIT after restart", h)
        log("done; data dir", store.data_dir)


if __name__ == "__main__":
    anyio.run(main)
