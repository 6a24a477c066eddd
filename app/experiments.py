"""A/B bucketing by MurmurHash3 and variant assignment, exactly as the CONTRACT states."""
from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

import mmh3

BUCKETS = 10_000


def bucket(experiment: str, unit_value: str) -> int:
    """floor(h · 10000 / 2^32), h = MurmurHash3 x86 32-bit, seed 1, of "<experiment>:<unit>"."""
    key = f"{experiment}:{unicodedata.normalize('NFC', unit_value)}"
    return (mmh3.hash(key.encode("utf-8"), 1, signed=False) * BUCKETS) >> 32


@dataclass(frozen=True, slots=True)
class Experiment:
    """An experiment: its unit field, variants as consecutive bucket ranges, gated rules."""

    name: str
    unit: str
    variants: tuple[tuple[str, int], ...]  # (variant, upper bound exclusive), in listed order
    rules: tuple[str, ...]

    @classmethod
    def from_weights(cls, name: str, unit: str, weights: Mapping[str, float],
                     rules: tuple[str, ...]) -> Experiment:
        """Build from percentage weights; each variant takes weight·100 consecutive buckets."""
        bounds, upper = [], 0
        for variant, weight in weights.items():
            upper += round(weight * 100)
            bounds.append((variant, upper))
        return cls(name, unit, tuple(bounds), rules)

    def assign(self, unit: Mapping[str, str]) -> tuple[str, int] | None:
        """(variant, bucket), or None outside the experiment (no unit value, or past the ranges)."""
        value = unit.get(self.unit)
        if not value:
            return None
        b = bucket(self.name, value)
        for variant, upper in self.variants:
            if b < upper:
                return variant, b
        return None
