"""Rerank rules of seed 002: anti-SEO reset (§16.4), spam demotion (§16.2), sandbox (§16.3),
and the spam quarantine's demotion."""
from __future__ import annotations

from pydantic import Field, model_validator

from app.phases import Phase
from app.rules.base import BuiltinRule, Params

RERANK = frozenset({Phase.RERANK})


class AntiSeoParams(Params):
    blocks: tuple[str, ...] = ("link", "behav")
    weights: dict[str, float] = {}

    @model_validator(mode="before")
    @classmethod
    def _lists_to_tuples(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("blocks"), list):
            data = {**data, "blocks": tuple(data["blocks"])}
        return data

    @model_validator(mode="after")
    def _weights_known(self) -> AntiSeoParams:
        if not self.blocks:
            raise ValueError("blocks: at least one factor block is needed")
        for block, weight in self.weights.items():
            if block not in self.blocks:
                raise ValueError(f"weights.{block}: not one of blocks {list(self.blocks)}")
            if not 0.0 <= weight <= 1.0:
                raise ValueError(f"weights.{block}: {weight} is outside [0, 1]")
        return self


class AntiSeoReset(BuiltinRule[AntiSeoParams]):
    """score −= Σ weight·factor over the reset blocks: those blocks count for nothing."""

    name = "anti_seo_reset"
    phases = RERANK
    Params = AntiSeoParams


class SpamDemotionParams(Params):
    theta_low: float = Field(0.3, ge=0.0, le=1.0)
    theta_high: float = Field(0.8, ge=0.0, le=1.0)
    lambda_: float = Field(5.0, ge=0.0, alias="lambda")

    @model_validator(mode="after")
    def _ordered(self) -> SpamDemotionParams:
        if self.theta_low >= self.theta_high:
            raise ValueError(
                f"theta_low ({self.theta_low}) must be below theta_high ({self.theta_high})")
        return self


class SpamDemotion(BuiltinRule[SpamDemotionParams]):
    """score −= λ·penalty(spam_score), the penalty 0 below θ_low, 1 above θ_high and linear
    between: the rheostat."""

    name = "spam_demotion"
    phases = RERANK
    Params = SpamDemotionParams


class SandboxParams(Params):
    t_sandbox_days: float = Field(120.0, gt=0.0)
    beta: float = Field(0.5, ge=0.0, le=1.0)


class SandboxDamping(BuiltinRule[SandboxParams]):
    """score ·= 1 − β·(1 − trust), trust = min(1, age / T_sandbox): young domains are muted,
    not punished.

    Documents with no `domain_age_days` are left alone (no history is not the same
    as a new domain), and so are non-positive scores: multiplying a negative score
    by a factor below 1 would raise it, the opposite of muting.
    """

    name = "sandbox_damping"
    phases = RERANK
    Params = SandboxParams


class QuarantineParams(Params):
    penalty: float = Field(3.0, ge=0.0)


class QuarantineDemotion(BuiltinRule[QuarantineParams]):
    """score −= penalty for a host (or a parent domain) in spam quarantine: the yellow card.

    The quarantine list is kept by the sanctions state machine in a store of the same
    kind as the banlist, so every replica holds it in memory and matches it like a ban.
    """

    name = "quarantine_demotion"
    phases = RERANK
    Params = QuarantineParams
