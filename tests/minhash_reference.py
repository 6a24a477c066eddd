"""A plain-Python MinHash of the published family, independent of app/neardup/minhash.py's numpy.

`python -m tests.minhash_reference > tests/data/minhash_vectors.json` writes the test
vectors an upstream implementation can check itself against (docs/near-duplicates.md,
"Computing a signature"). Only the shingle hashes come from app.neardup.shingles
(MurmurHash3 x64 128, first 64 bits, seed 0, of the UTF-8 of the space-joined lowercased
words).
"""
from __future__ import annotations

import json
import sys

from app.neardup.shingles import shingles

MASK = 2**64 - 1


def splitmix64(state: int) -> tuple[int, int]:
    """SplitMix64: the next state and its output word."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def coefficients(k: int, seed: int) -> list[tuple[int, int]]:
    """(a_i, b_i) for i < k: a_i = word 2i | 1, b_i = word 2i + 1 of SplitMix64 from seed."""
    state, out = seed, []
    for _ in range(k):
        state, a = splitmix64(state)
        state, b = splitmix64(state)
        out.append((a | 1, b))
    return out


def signature(text: str, k: int = 128, seed: int = 1, width: int = 10) -> dict:
    """{shingles, values} of a text, as the request's `minhash` field carries them."""
    hashes = shingles(text, width)
    values = [min(((a * x + b) & MASK for x in hashes), default=MASK)
              for a, b in coefficients(k, seed)]
    return {"values": values, "shingles": len(hashes), "width": width, "seed": seed}


TEXTS = [
    "",
    "Одно слово",
    "Доставка по городу Казань занимает от одного до трёх рабочих дней, курьер звонит заранее.",
    "The quick brown fox jumps over the lazy dog while the cat sleeps on the warm windowsill "
    "and nobody in the house notices anything at all.",
]


def vectors() -> dict:
    """Every case of the vector file."""
    cases = []
    for k, seed in ((128, 1), (16, 42)):
        for text in TEXTS:
            cases.append({"text": text, "k": k, **signature(text, k, seed)})
    return {"family": "h_i(x) = (a_i * x + b_i) mod 2**64; (a_i, b_i) from SplitMix64(seed)",
            "coefficients_k4_seed1": [list(c) for c in coefficients(4, 1)],
            "cases": cases}


if __name__ == "__main__":
    json.dump(vectors(), sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")
