"""Rerank rules: anti-SEO reset, spam demotion, sandbox damping, quarantine demotion."""
from __future__ import annotations

from app.rules import demotion as declared
from tests.reference.pipeline import Behaviour, Context, Doc, RuleResult


class AntiSeoReset(declared.AntiSeoReset, Behaviour):
    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        weighted = [(b, self.params.weights.get(b, 1.0)) for b in self.params.blocks]
        changes = []
        for i, doc in enumerate(docs):
            factors = doc.factors
            delta = -sum(w * factors[b] for b, w in weighted if b in factors)
            if delta:
                parts = ", ".join(f"{b}={factors[b]:g}" for b, _ in weighted if b in factors)
                changes.append((i, doc.score + delta, delta, f"reset factor blocks {parts}"))
        return self.rescoring(docs, changes)


def spam_penalty(s: float, theta_low: float, theta_high: float) -> float:
    """0 below θ_low, 1 above θ_high, linear between (seed 002 §16.2)."""
    if s < theta_low:
        return 0.0
    if s > theta_high:
        return 1.0
    return (s - theta_low) / (theta_high - theta_low)


class SpamDemotion(declared.SpamDemotion, Behaviour):
    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        p = self.params
        changes = []
        for i, doc in enumerate(docs):
            penalty = spam_penalty(doc.spam_score, p.theta_low, p.theta_high)
            delta = -p.lambda_ * penalty
            if delta:  # -0.0 when lambda x penalty underflows: no change
                changes.append((i, doc.score + delta, delta, f"spam_score {doc.spam_score:g}: "
                                f"penalty {penalty:g} x lambda {p.lambda_:g}"))
        return self.rescoring(docs, changes)


class SandboxDamping(declared.SandboxDamping, Behaviour):
    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        t, beta = self.params.t_sandbox_days, self.params.beta
        if beta == 0.0:
            return docs, []
        changes = []
        for i, doc in enumerate(docs):
            age = doc.domain_age_days
            if age is None or age >= t or doc.score <= 0.0:
                continue
            trust = min(1.0, age / t)  # seed 002 §16.3
            new = doc.score * (1.0 - beta * (1.0 - trust))
            changes.append((i, new, new - doc.score,
                            f"domain age {age:g} days: trust {trust:.3f}, beta {beta:g}"))
        return self.rescoring(docs, changes)


class QuarantineDemotion(declared.QuarantineDemotion, Behaviour):
    def applies(self, ctx: Context) -> bool:
        return ctx.quarantine is not None and len(ctx.quarantine) > 0 and self.params.penalty > 0

    def __call__(self, docs: list[Doc], ctx: Context) -> RuleResult:
        index, penalty = ctx.quarantine, self.params.penalty
        return self.rescoring(docs, [
            (i, d.score - penalty, -penalty,
             f"{entry.scope} {entry.value} is in spam quarantine [entry {entry.id}]")
            for i, d in enumerate(docs)
            if (entry := index.match(d.canonical, d.host, ctx.region, ctx.now)) is not None])
