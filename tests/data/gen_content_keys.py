"""Regenerate content_keys.json: MurmurHash3 x64 128 (seed 0) of texts' UTF-8 by mmh3, the
independent reference the engine's near-duplicate cache keys are held to (a Rust unit test
in crates/engine/src/neardup/cache.rs reads the file; tests/neardup/test_neardup_engine.py
checks the file is what mmh3 computes).

    python -m tests.data.gen_content_keys
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import mmh3

OUT = Path(__file__).with_name("content_keys.json")


def texts() -> list[str]:
    """Tail lengths 0..33 (every remainder mod 16, twice), scripts of 1 to 4 UTF-8 bytes."""
    rng = random.Random(46)
    alphabet = "aZ 9_.доставкаΣσςİß\u0301नमस्ते٣😀\x00\n"
    out = ["", "a", "Курьер доставит заказ", "x" * 16, "y" * 17]
    out += ["".join(rng.choice(alphabet) for _ in range(n)) for n in range(34)]
    return out


def document() -> str:
    cases = [{"text": t, "key": str(mmh3.hash128(t.encode(), seed=0, signed=False))}
             for t in texts()]
    return json.dumps({"hash": "MurmurHash3 x64 128, seed 0, of the UTF-8 (mmh3); key as "
                       "a decimal u128", "cases": cases}, ensure_ascii=False, indent=1) + "\n"


if __name__ == "__main__":
    OUT.write_text(document(), encoding="utf-8")
