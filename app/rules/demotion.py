"""Rerank rules of seed 002: anti-SEO reset (§16.4), spam demotion (§16.2), sandbox (§16.3)."""
from __future__ import annotations

from pydantic import Field, model_validator

from app.pipeline import BaseRule, Context, Doc, Phase, RuleResult
from app.rules.base import Params

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


class AntiSeoReset(BaseRule):
    """score −= Σ weight·factor over the reset blocks: those blocks count for nothing."""

    name = "anti_seo_reset"
    phases = RERANK
    Params = AntiSeoParams

    def __init__(self, params: AntiSeoParams, phase: Phase) -> None:
        super().__init__(params, phase)
        self.weighted = tuple((b, params.weights.get(b, 1.0)) for b in params.blocks)

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        changes = []
        for i, doc in enumerate(docs):
            factors = doc.factors
            delta = -sum(w * factors[b] for b, w in self.weighted if b in factors)
            if delta:
                parts = ", ".join(f"{b}={factors[b]:g}" for b, _ in self.weighted if b in factors)
                changes.append((i, doc.score + delta, delta, f"reset factor blocks {parts}"))
        return self.rescoring(docs, changes)


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


def spam_penalty(s: float, theta_low: float, theta_high: float) -> float:
    """0 below θ_low, 1 above θ_high, linear between (seed 002 §16.2)."""
    if s < theta_low:
        return 0.0
    if s > theta_high:
        return 1.0
    return (s - theta_low) / (theta_high - theta_low)


class SpamDemotion(BaseRule):
    """score −= λ·penalty(spam_score): the rheostat."""

    name = "spam_demotion"
    phases = RERANK
    Params = SpamDemotionParams

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        p = self.params
        low, high, lambda_ = p.theta_low, p.theta_high, p.lambda_
        if not lambda_:
            return docs, []
        changes = []
        # The penalty is 0 up to θ_low inclusive: only the documents above it are looked at.
        for i, doc in [(i, d) for i, d in enumerate(docs) if d.spam_score > low]:
            penalty = spam_penalty(doc.spam_score, low, high)
            delta = -lambda_ * penalty
            if delta:  # -0.0 when lambda x penalty underflows: no change, as before
                changes.append((i, doc.score + delta, delta, f"spam_score {doc.spam_score:g}: "
                                f"penalty {penalty:g} x lambda {lambda_:g}"))
        return self.rescoring(docs, changes)


class SandboxParams(Params):
    t_sandbox_days: float = Field(120.0, gt=0.0)
    beta: float = Field(0.5, ge=0.0, le=1.0)


def sandbox_trust(age_days: float, t_sandbox_days: float) -> float:
    """trust = min(1, age / T_sandbox) (seed 002 §16.3)."""
    return min(1.0, age_days / t_sandbox_days)


class SandboxDamping(BaseRule):
    """score ·= 1 − β·(1 − trust(age)): young domains are muted, not punished.

    Documents with no `domain_age_days` are left alone (no history is not the same
    as a new domain), and so are non-positive scores: multiplying a negative score
    by a factor below 1 would raise it, the opposite of muting.
    """

    name = "sandbox_damping"
    phases = RERANK
    Params = SandboxParams

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        t, beta = self.params.t_sandbox_days, self.params.beta
        if beta == 0.0:
            return docs, []
        changes = []
        for i, doc in [(i, d) for i, d in enumerate(docs) if d.domain_age_days is not None
                       and d.domain_age_days < t and d.score > 0.0]:
            age = doc.domain_age_days
            trust = sandbox_trust(age, t)
            new = doc.score * (1.0 - beta * (1.0 - trust))
            changes.append((i, new, new - doc.score,
                            f"domain age {age:g} days: trust {trust:.3f}, beta {beta:g}"))
        return self.rescoring(docs, changes)


class QuarantineParams(Params):
    penalty: float = Field(3.0, ge=0.0)


class QuarantineDemotion(BaseRule):
    """score −= penalty for a host (or a parent domain) in spam quarantine: the yellow card.

    The quarantine list is kept by the sanctions state machine in a store of the same
    kind as the banlist, so every replica holds it in memory and matches it like a ban.
    """

    name = "quarantine_demotion"
    phases = RERANK
    Params = QuarantineParams

    def applies(self, ctx: Context) -> bool:
        return ctx.quarantine is not None and len(ctx.quarantine) > 0 and self.params.penalty > 0

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        index, penalty, region, now = ctx.quarantine, self.params.penalty, ctx.region, ctx.now
        return self.rescoring(docs, [
            (i, d.score - penalty, -penalty,
             f"{entry.scope} {entry.value} is in spam quarantine [entry {entry.id}]")
            for i, d in enumerate(docs)
            if (entry := index.match(d.canonical, d.host, region, now)) is not None])
