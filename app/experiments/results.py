"""An experiment's results as `GET /v1/experiments/{name}/results` and `rearrange experiments
results NAME` give them: an interleaved one's tallies read by the always-valid test
(sequential.py), an A/B one's exposures beside its triggered exposures."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from app.experiments.attribution import Counts
from app.experiments.sequential import read

EXPOSURES = "rearrange_experiment_exposures"  # {experiment, variant, triggered}
_TRUE = ("true", "1", "yes")


def interleaving(experiment: str, counts: Counts, scope: str) -> dict[str, Any]:
    """The interleaved experiment's results: impressions, wins, ties, the test's decision
    and its fields (sequential.Reading); `scope` says whose tallies (fleet: Redis's, or
    this replica's)."""
    treatment, control = counts.outcomes["treatment"], counts.outcomes["control"]
    ties = counts.outcomes["tie"]
    return {"experiment": experiment, "method": "team_draft",
            "impressions": counts.impressions,
            "wins": {"control": control, "treatment": treatment}, "ties": ties,
            **read(treatment, control).as_dict(),
            "without_clicks": max(0, counts.impressions - treatment - control - ties),
            "feedback": counts.feedback, "scope": scope}


def exposure_counts(families: Iterable[Any]) -> dict[tuple[str, str, bool], float]:
    """(experiment, variant, triggered) → exposures, from the metric families of a registry
    (prometheus_client `Metric`s: `collect()`), summed over every series."""
    out: dict[tuple[str, str, bool], float] = {}
    for family in families:
        if family.name not in (EXPOSURES, EXPOSURES + "_total"):
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue  # _created
            labels = sample.labels
            key = (labels.get("experiment", ""), labels.get("variant", ""),
                   str(labels.get("triggered", "")).lower() in _TRUE)
            out[key] = out.get(key, 0.0) + sample.value
    return out


def ab(experiment: str, variants: Iterable[str],
       exposures: Mapping[tuple[str, str, bool], float]) -> dict[str, Any]:
    """An A/B experiment's exposures per variant: every request assigned to it (`exposures`)
    and those whose page its gated rules changed, or would have in shadow (`triggered`),
    as this replica counted them."""
    per: dict[str, dict[str, float]] = {}
    for variant in variants:
        hit = exposures.get((experiment, variant, True), 0.0)
        missed = exposures.get((experiment, variant, False), 0.0)
        per[variant] = {"exposures": hit + missed, "triggered": hit}
    return {"experiment": experiment, "method": "ab", "variants": per, "scope": "replica"}
