"""A/B bucketing by MurmurHash3, layers, holdout and variant assignment.

The CONTRACT's formula is kept exactly for an experiment without a salt:
bucket = floor(h · 10000 / 2^32), h = MurmurHash3 x86 32-bit, seed 1, unsigned, of the
UTF-8 bytes of "<experiment>:<NFC unit value>". A salt goes between the two
("<experiment>:<salt>:<unit>"). Layers follow Tang et al. (KDD 2010): the layer's own
hash ("<layer>:<unit>") picks a slot, each experiment of the layer owns a disjoint range
of slots, and the experiment's hash (a different key, so never the same hash) picks the
variant. The holdout hashes "holdout[:<salt>]:<unit>".

These are the experiments a config declares, checked at load and behind the SRM check; a
request's assignment is the engine's (crates/engine/src/experiments.rs).
"""
from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mmh3

BUCKETS = 10_000
CONTROL = "control"
INTERLEAVED = "interleaved"  # an interleaving experiment's one variant (every bucket)
HOLDOUT = "holdout"      # the holdout's name in assignments, metrics and the exposure log
HOLDOUT_REST = "rest"    # the holdout's other side, counted so the split can be SRM-checked


def bucket(experiment: str, unit_value: str, salt: str = "") -> int:
    """floor(h · 10000 / 2^32), h = MurmurHash3 x86 32-bit, seed 1, of "<experiment>:<unit>"."""
    unit_value = unicodedata.normalize("NFC", unit_value)
    key = f"{experiment}:{salt}:{unit_value}" if salt else f"{experiment}:{unit_value}"
    return (mmh3.hash(key.encode("utf-8"), 1, signed=False) * BUCKETS) >> 32


@dataclass(frozen=True, slots=True)
class Experiment:
    """An experiment: its unit field, variants as consecutive bucket ranges, gated rules.

    With a `layer`, the experiment sees only units whose layer slot lies in `slots`
    ([lo, hi) of the layer's 10000 slots); the variant is then chosen by its own hash.
    """

    name: str
    unit: str
    variants: tuple[tuple[str, int], ...]  # (variant, upper bound exclusive), in listed order
    rules: tuple[str, ...]
    salt: str = ""
    layer: str | None = None
    slots: tuple[int, int] = (0, BUCKETS)
    params: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    # params: variant → rule → parameter overrides (validated by the config loader)
    interleave: tuple[str, str] | None = None  # (control, treatment) profiles: interleaving

    @classmethod
    def from_weights(cls, name: str, unit: str, weights: Mapping[str, float],
                     rules: tuple[str, ...], **extra: Any) -> Experiment:
        """Build from percentage weights; each variant takes weight·100 consecutive buckets."""
        bounds, upper = [], 0
        for variant, weight in weights.items():
            upper += round(weight * 100)
            bounds.append((variant, upper))
        return cls(name, unit, tuple(bounds), rules, **extra)

    def ranges(self) -> dict[str, tuple[int, int]]:
        """Each variant's bucket range [lo, hi)."""
        out, lower = {}, 0
        for variant, upper in self.variants:
            out[variant] = (lower, upper)
            lower = upper
        return out

    def in_slots(self, value: str) -> bool:
        """True when the unit value falls in this experiment's share of its layer."""
        if self.layer is None:
            return True
        lo, hi = self.slots
        return lo <= bucket(self.layer, value) < hi

    def variant_of(self, value: str) -> tuple[str | None, int]:
        """(variant or None past the ranges, bucket) by the experiment's own hash."""
        b = bucket(self.name, value, self.salt)
        for variant, upper in self.variants:
            if b < upper:
                return variant, b
        return None, b

    def assign(self, unit: Mapping[str, str]) -> tuple[str, int] | None:
        """(variant, bucket), or None outside (no unit value, outside its slots or ranges)."""
        value = unit.get(self.unit)
        if not value or not self.in_slots(value):
            return None
        variant, b = self.variant_of(value)
        return None if variant is None else (variant, b)


@dataclass(frozen=True, slots=True)
class Holdout:
    """A global holdout: units in [0, upper) of its hash get no experiment; gated rules shadow."""

    unit: str
    upper: int
    salt: str = ""


def rebucketing(old: Experiment, new: Experiment) -> str | None:
    """Why `new` would move units of the running `old` to another variant, or None.

    Allowed without a new salt: widening variant ranges or the layer's slots, appending
    variants, changing rules and parameters. Anything else needs a new `salt`.
    """
    if new.salt != old.salt:
        return None
    if new.unit != old.unit:
        return f"unit changed from {old.unit} to {new.unit}"
    if new.layer != old.layer:
        return f"layer changed from {old.layer} to {new.layer}"
    if not (new.slots[0] <= old.slots[0] and new.slots[1] >= old.slots[1]):
        return f"layer slots {list(old.slots)} -> {list(new.slots)} is not a widening"
    old_order = [v for v, _ in old.variants]
    new_order = [v for v, _ in new.variants]
    if new_order[:len(old_order)] != old_order:
        return (f"variants {old_order} -> {new_order}: a running experiment keeps its "
                "variants in order (new ones may only be appended)")
    new_ranges = new.ranges()
    for variant, (lo, hi) in old.ranges().items():
        nlo, nhi = new_ranges[variant]
        if nlo > lo or nhi < hi:
            return (f"variant {variant} buckets [{lo}, {hi}) -> [{nlo}, {nhi}) "
                    "is not a widening")
    return None


def holdout_rebucketing(old: Holdout | None, new: Holdout | None) -> str | None:
    """Why the holdout change would move units out of (or into another) holdout, or None."""
    if old is None or new is None or new.salt != old.salt:
        return None
    if new.unit != old.unit:
        return f"unit changed from {old.unit} to {new.unit}"
    if new.upper < old.upper:
        return f"percent {old.upper / 100:g} -> {new.upper / 100:g} releases held-out units"
    return None
