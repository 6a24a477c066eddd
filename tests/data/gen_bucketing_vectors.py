"""Regenerate bucketing_vectors.json with the pure-Python MurmurHash3 (not mmh3, not app/).

Run from the repository root: `python -m tests.data.gen_bucketing_vectors`. The file is
published data: a frontend or an analytics job in another language checks itself on it.
"""
from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from tests.murmur3 import murmur3_32

UNITS = [
    ("ascii", "u-1"), ("ascii", "s-9"), ("ascii", "0"), ("ascii", "user-000123"),
    ("ascii", "a"), ("ascii", "ab"), ("ascii", "abc"), ("ascii", "abcd"),
    ("cyrillic", "пользователь-42"), ("cyrillic", "Ёлка"),
    ("cyrillic, NFD input (hashed as NFC)", unicodedata.normalize("NFD", "йога")),
    ("latin, NFD input (hashed as NFC)", unicodedata.normalize("NFD", "café")),
    ("cjk", "日本語ユーザー"), ("emoji", "😀-emoji"), ("emoji ZWJ sequence", "👩‍👩‍👧"),
    ("uuid", "3f2c7a9e-1b4d-4c8e-9f6a-0d2b5e7c1a93"), ("long", "x" * 300),
    ("long mixed", "идентификатор-" * 20 + "🙂"),
]


def bucket_of(key: str) -> tuple[int, int]:
    h = murmur3_32(key.encode("utf-8"), 1)
    return h, h * 10000 >> 32


def main() -> None:
    vectors = []
    for kind, unit in UNITS:
        nfc = unicodedata.normalize("NFC", unit)
        for name, salt in (("antispam_v7", None), ("antispam_v7", "2026-11"),
                           ("ranking", None), ("holdout", None)):
            key = f"{name}:{salt}:{nfc}" if salt else f"{name}:{nfc}"
            h, b = bucket_of(key)
            vectors.append({"kind": kind, "name": name, "salt": salt, "unit": unit,
                            "key": key, "hash": h, "bucket": b})
    layered = {"name": "antispam_v7", "layer": "ranking", "slots": [0, 5000],
               "variants": [["control", 5000], ["treatment", 10000]]}
    assignments = []
    for kind, unit in UNITS:
        nfc = unicodedata.normalize("NFC", unit)
        slot = bucket_of(f"ranking:{nfc}")[1]
        vbucket = bucket_of(f"antispam_v7:{nfc}")[1]
        inside = 0 <= slot < 5000
        variant = None
        if inside:
            variant = "control" if vbucket < 5000 else "treatment"
        assignments.append({"kind": kind, "unit": unit, "layer_bucket": slot,
                            "variant_bucket": vbucket, "variant": variant})
    doc = {
        "formula": "bucket = floor(h * 10000 / 2^32), h = MurmurHash3 x86 32-bit, seed 1, "
                   "unsigned, of the UTF-8 bytes of key; key = '<name>:<NFC unit>' or, with a "
                   "salt, '<name>:<salt>:<NFC unit>'. name is the experiment (variant hash), "
                   "the layer (slot hash) or 'holdout'.",
        "vectors": vectors,
        "layered_experiment": layered,
        "layered_assignments": assignments,
    }
    out = Path(__file__).with_name("bucketing_vectors.json")
    out.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
