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
        out, records = [], []
        for doc in docs:
            factors = doc.factors
            delta = -sum(w * factors[b] for b, w in self.weighted if b in factors)
            if delta:
                out.append(doc.replace(score=doc.score + delta))
                parts = ", ".join(f"{b}={factors[b]:g}" for b, _ in self.weighted if b in factors)
                records.append(
                    self.record(doc.id, "rescore", f"reset factor blocks {parts}", delta))
            else:
                out.append(doc)
        return out, records


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
        out, records = [], []
        for doc in docs:
            penalty = spam_penalty(doc.spam_score, p.theta_low, p.theta_high)
            delta = -p.lambda_ * penalty
            if delta:
                out.append(doc.replace(score=doc.score + delta))
                records.append(self.record(
                    doc.id, "rescore",
                    f"spam_score {doc.spam_score:g}: penalty {penalty:g} x lambda {p.lambda_:g}",
                    delta))
            else:
                out.append(doc)
        return out, records


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
        out, records = [], []
        for doc in docs:
            age = doc.domain_age_days
            if age is None or age >= t or doc.score <= 0.0 or beta == 0.0:
                out.append(doc)
                continue
            trust = sandbox_trust(age, t)
            new = doc.score * (1.0 - beta * (1.0 - trust))
            out.append(doc.replace(score=new))
            records.append(self.record(
                doc.id, "rescore", f"domain age {age:g} days: trust {trust:.3f}, beta {beta:g}",
                new - doc.score))
        return out, records


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
        index, penalty = ctx.quarantine, self.params.penalty
        out, records = [], []
        for doc in docs:
            entry = index.match(doc.canonical, doc.host, ctx.region, ctx.now)
            if entry is None:
                out.append(doc)
                continue
            out.append(doc.replace(score=doc.score - penalty))
            records.append(self.record(
                doc.id, "rescore",
                f"{entry.scope} {entry.value} is in spam quarantine [entry {entry.id}]",
                -penalty))
        return out, records
