"""Child process for the crash test: writes and retires forever, reporting each step on stdout.

``SEND id`` is printed before an operation is submitted, ``ACK id content`` / ``RET id`` after it
returned (acknowledged). The parent kills this process with SIGKILL at random moments.
"""

from __future__ import annotations

import random
import sys

import numpy as np

from storage import Engine, WriteItem, content_id


def main(data_dir: str, seed: int) -> None:
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    engine = Engine.open(data_dir, warm=False)  # vectors are supplied: the model never loads
    acked: list[str] = []
    print("READY", flush=True)
    n = 0
    while True:
        if acked and rng.random() < 0.2:
            victim = rng.choice(acked)
            acked.remove(victim)
            print(f"SEND {victim}", flush=True)
            engine.retire(victim, reason="crash test")
            print(f"RET {victim}", flush=True)
            continue
        items = []
        for _ in range(rng.randint(1, 4)):
            n += 1
            text = f"seed {seed} memory {n} token{rng.randint(0, 10**9)}"
            vec = nprng.standard_normal(384).astype(np.float32)
            items.append(WriteItem(text, [f"user:u{n % 3}"], vector=vec / np.linalg.norm(vec)))
            print(f"SEND {content_id(text)}", flush=True)
        for item, receipt in zip(items, engine.write_many(items), strict=True):
            acked.append(receipt.id)
            print(f"ACK {receipt.id} {item.content}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
