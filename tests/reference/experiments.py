"""The reference assignment of one request to experiments (the engine's is
crates/engine/src/experiments.rs): the holdout, layers, variants and QA-forced ones, on
app/experiments/bucketing.py's bucketing."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.experiments.bucketing import HOLDOUT, HOLDOUT_REST, Experiment, Holdout, bucket


@dataclass(slots=True)
class Assignment:
    """One request's exposure: what each experiment served, for the response and the log."""

    exposures: list[dict[str, Any]]  # {experiment, variant, bucket, layer, salt[, forced]}
    variants: dict[str, str]         # experiment → variant, for the pipeline
    counted: list[tuple[str, str]]   # (experiment, variant) pairs for the assignment metric


def holdout_bucket(holdout: Holdout, unit: Mapping[str, str]) -> int | None:
    """The unit's holdout bucket, or None without a unit value."""
    value = unit.get(holdout.unit)
    return bucket(HOLDOUT, value, holdout.salt) if value else None


def assign(experiments: tuple[Experiment, ...], holdout: Holdout | None,
           unit: Mapping[str, str], forced: Mapping[str, str] | None = None) -> Assignment:
    """Assign one request; `forced` (experiment → variant, already validated) wins for QA.

    A forced experiment takes its layer: no other experiment of that layer is assigned.
    Forced assignments are marked and not counted (they would skew the SRM check).
    """
    out = Assignment([], {}, [])
    forced = forced or {}
    held = False
    if holdout is not None:
        hb = holdout_bucket(holdout, unit)
        if hb is not None:
            held = hb < holdout.upper
            out.counted.append((HOLDOUT, HOLDOUT if held else HOLDOUT_REST))
            if held:
                out.exposures.append({"experiment": HOLDOUT, "variant": HOLDOUT, "bucket": hb,
                                      "layer": None, "salt": holdout.salt or None})
    forced_layers = {e.layer for e in experiments if e.name in forced and e.layer is not None}
    for exp in experiments:
        value = unit.get(exp.unit)
        variant = forced.get(exp.name)
        if variant is not None:
            b = exp.variant_of(value)[1] if value else None
            out.variants[exp.name] = variant
            out.exposures.append({"experiment": exp.name, "variant": variant, "bucket": b,
                                  "layer": exp.layer, "salt": exp.salt or None, "forced": True})
            continue
        if held or not value or exp.layer in forced_layers or not exp.in_slots(value):
            continue
        variant, b = exp.variant_of(value)
        if variant is None:
            continue
        out.variants[exp.name] = variant
        out.counted.append((exp.name, variant))
        out.exposures.append({"experiment": exp.name, "variant": variant, "bucket": b,
                              "layer": exp.layer, "salt": exp.salt or None})
    return out
