//! `sandbox_damping` (seed 002 §16.3): score ·= 1 − β·(1 − trust(age)), trust =
//! min(1, age / T): young domains are muted, not punished.
//!
//! Documents with no `domain_age_days` are left alone (no history is not a new domain),
//! and so are non-positive scores: damping a negative score would raise it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{within, Builtin, Ctx, Out, RuleResult, rescoring};
use crate::doc::Doc;
use crate::record::Phase;
use crate::fmt::{push_fixed, push_g};

/// score *= 1 - beta * (1 - trust), trust = min(1, age / t_sandbox_days): young domains are
/// muted, not punished. Documents with no `domain_age_days` are left alone (no history is
/// not a new domain), and so are non-positive scores (damping would raise them).
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The domain age (days) past which a domain is trusted in full (> 0).
    #[schemars(extend("exclusiveMinimum" = 0))]
    #[serde(default = "t")]
    pub t_sandbox_days: f64,
    /// The share of the score a brand-new domain loses.
    #[schemars(range(min = 0.0, max = 1.0))]
    #[serde(default = "beta")]
    pub beta: f64,
}

fn t() -> f64 {
    120.0
}
fn beta() -> f64 {
    0.5
}

impl Default for Params {
    fn default() -> Self {
        Params {
            t_sandbox_days: t(),
            beta: beta(),
        }
    }
}

/// trust = min(1, age / T_sandbox).
pub fn sandbox_trust(age_days: f64, t: f64) -> f64 {
    (age_days / t).min(1.0)
}

/// The rule.
pub struct SandboxDamping {
    p: Params,
}

impl Builtin for SandboxDamping {
    const NAME: &'static str = "sandbox_damping";
    const PHASES: &'static [Phase] = &[Phase::Rerank];
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        if p.t_sandbox_days <= 0.0 {
            return Err(format!("t_sandbox_days: {} is not above 0", p.t_sandbox_days));
        }
        within("beta", p.beta, 0.0, 1.0)?;
        Ok(SandboxDamping { p })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }
}

impl SandboxDamping {
    /// Damp each young domain's positive score.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let (t, beta) = (self.p.t_sandbox_days, self.p.beta);
        if beta == 0.0 {
            return Out::unchanged();
        }
        let mut changes = Vec::new();
        for (i, doc) in docs.iter().enumerate() {
            let Some(age) = ctx.page.src(doc).domain_age_days else {
                continue;
            };
            if age >= t || doc.score <= 0.0 {
                continue;
            }
            let trust = sandbox_trust(age, t);
            let new = doc.score * (1.0 - beta * (1.0 - trust));
            // `domain age {age:g} days: trust {trust:.3f}, beta {beta:g}`, in one allocation.
            let mut reason = String::with_capacity(80);
            reason.push_str("domain age ");
            push_g(&mut reason, age);
            reason.push_str(" days: trust ");
            push_fixed(&mut reason, trust, 3);
            reason.push_str(", beta ");
            push_g(&mut reason, beta);
            changes.push((i, new, new - doc.score, reason));
        }
        rescoring(ctx.page, docs, changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::testing::{docs, request, SimpleCanon};
    use crate::doc::Page;
    use crate::record::Delta;
    use crate::rules::testing::ctx;

    #[test]
    fn damps_young_positive_scores() {
        let mut d = docs(4);
        d[0].domain_age_days = Some(30.0); // score 4
        d[1].domain_age_days = Some(120.0);
        d[2].domain_age_days = None;
        d[3].domain_age_days = Some(10.0);
        d[3].score = -1.0;
        let req = request(d);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let out = SandboxDamping::build(Params::default())
            .unwrap()
            .apply(&docs, &ctx(&page));
        assert_eq!(out.recs.len(), 1);
        let new = 4.0 * (1.0 - 0.5 * (1.0 - 0.25));
        assert_eq!(out.docs.unwrap()[0].score, new);
        assert_eq!(out.recs[0].delta, Delta::Float(new - 4.0));
        assert_eq!(
            out.recs[0].reason,
            "domain age 30 days: trust 0.250, beta 0.5"
        );
    }

    /// Seed 002, 16.3: trust(age) = min(1, age / T_sandbox), score * (1 - beta (1 - trust))
    /// with T_sandbox 120, beta 0.5: 8.0 at 0 days is 4.0, at 60 days 6.0, at 120 and 240
    /// days 8.0 (trusted).
    #[test]
    fn the_seeds_curve() {
        let mut d = docs(4);
        for (doc, age) in d.iter_mut().zip([0.0, 60.0, 120.0, 240.0]) {
            doc.score = 8.0;
            doc.domain_age_days = Some(age);
        }
        let req = request(d);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let out = SandboxDamping::build(Params::default())
            .unwrap()
            .apply(&docs, &ctx(&page));
        let scores: Vec<f64> = out.docs.unwrap().iter().map(|d| d.score).collect();
        assert_eq!(scores, vec![4.0, 6.0, 8.0, 8.0]);
        assert_eq!(out.recs.len(), 2);
        assert_eq!(
            out.recs[1].reason,
            "domain age 60 days: trust 0.500, beta 0.5"
        );
    }
}
