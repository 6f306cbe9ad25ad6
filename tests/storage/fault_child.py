"""Child for the full-disk test: writes until the data directory's file system is full.

Prints ``SEND id`` before each write and ``ACK id content`` after it was acknowledged; on the first refused
write ``REFUSED code message``, then checks that the store stays closed to reads and writes (``AFTER code`` lines), and
exits without closing the stores, as the owner process does after a failed commit.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from storage import Engine, MnemographError, WriteItem, content_id


def main(data_dir: str, batch: int = 1) -> None:
    """Writes ``batch`` memories a call (one commit each) until a call is refused."""
    rng = np.random.default_rng(7)
    engine = Engine.open(data_dir, warm=False)  # vectors are supplied: the model never loads
    n = 0
    last = ""
    while True:
        items = []
        for _ in range(batch):
            n += 1
            text = f"disk filler {n} " + "lorem ipsum dolor sit amet " * 40
            vec = rng.standard_normal(384).astype(np.float32)
            items.append(WriteItem(text, ["user:full"], vector=vec / np.linalg.norm(vec)))
            print(f"SEND {content_id(text)}", flush=True)
        try:
            receipts = engine.write_many(items)
        except MnemographError as exc:
            print(f"REFUSED {exc.code} {exc.message[:300]} {exc.hint or ''}".replace("\n", " "), flush=True)
            break
        for item, receipt in zip(items, receipts, strict=True):
            last = receipt.id
            print(f"ACK {receipt.id} {item.content}", flush=True)
    for name, call in (
        ("write", lambda: engine.write("one more", ["user:full"])),
        ("read", lambda: engine.read(last)),
    ):
        try:
            call()
            print(f"AFTER {name} ok", flush=True)
        except MnemographError as exc:
            print(f"AFTER {name} {exc.code}", flush=True)
    print(f"FAILED {engine.failed}", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
