"""Bucketing exactly as the CONTRACT states, checked against an independent MurmurHash3."""
from __future__ import annotations

import unicodedata

import pytest

from app.experiments import Experiment, bucket


def murmur3_32(data: bytes, seed: int) -> int:
    """Reference MurmurHash3 x86 32-bit, written from the algorithm, not from mmh3."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed & mask
    n = len(data) // 4 * 4
    for i in range(0, n, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    k = 0
    tail = data[n:]
    for i in reversed(range(len(tail))):
        k = (k << 8) | tail[i]
    if tail:
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h


UNITS = ["u-1", "s-9", "пользователь-42", "😀-emoji", "x" * 300, "0"]


@pytest.mark.parametrize("unit", UNITS)
def test_bucket_matches_the_contract_formula(unit):
    h = murmur3_32(f"antispam_v7:{unit}".encode(), 1)
    assert bucket("antispam_v7", unit) == h * 10000 // 2**32


def test_unit_values_are_nfc_normalised():
    decomposed = unicodedata.normalize("NFD", "йога")
    assert decomposed != "йога"
    assert bucket("e", decomposed) == bucket("e", "йога")


def test_variants_take_consecutive_ranges_in_listed_order():
    exp = Experiment.from_weights("e", "user_id", {"control": 10, "treatment": 20.5}, ("x",))
    assert exp.variants == (("control", 1000), ("treatment", 3050))
    seen = {}
    for i in range(3000):
        got = exp.assign({"user_id": f"user-{i}"})
        b = bucket("e", f"user-{i}")
        expected = "control" if b < 1000 else "treatment" if b < 3050 else None
        assert (got[0] if got else None) == expected
        seen[expected] = seen.get(expected, 0) + 1
    assert 200 < seen["control"] < 400 and 500 < seen["treatment"] < 730


def test_missing_or_empty_unit_is_outside():
    exp = Experiment.from_weights("e", "user_id", {"control": 50, "treatment": 50}, ())
    assert exp.assign({}) is None and exp.assign({"user_id": ""}) is None
    assert exp.assign({"session_id": "s"}) is None
