//! `spam_demotion` (seed 002 §16.2): score −= λ·penalty(spam_score), the rheostat.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{within, Builtin, Ctx, Out, RuleResult, rescoring};
use crate::doc::Doc;
use crate::record::Phase;
use crate::fmt::push_g;

/// score -= lambda * penalty(spam_score), the penalty 0 below theta_low, 1 above theta_high and
/// linear between: the rheostat.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// spam_score below which nothing is taken (below theta_high).
    #[schemars(range(min = 0.0, max = 1.0))]
    #[serde(default = "low")]
    pub theta_low: f64,
    /// spam_score above which the whole lambda is taken.
    #[schemars(range(min = 0.0, max = 1.0))]
    #[serde(default = "high")]
    pub theta_high: f64,
    /// The most taken off a score.
    #[schemars(range(min = 0.0))]
    #[serde(default = "lambda", rename = "lambda")]
    pub lambda: f64,
}

fn low() -> f64 {
    0.3
}
fn high() -> f64 {
    0.8
}
fn lambda() -> f64 {
    5.0
}

impl Default for Params {
    fn default() -> Self {
        Params {
            theta_low: low(),
            theta_high: high(),
            lambda: lambda(),
        }
    }
}

/// 0 below θ_low, 1 above θ_high, linear between.
pub fn spam_penalty(s: f64, low: f64, high: f64) -> f64 {
    if s < low {
        0.0
    } else if s > high {
        1.0
    } else {
        (s - low) / (high - low)
    }
}

/// The rule.
pub struct SpamDemotion {
    p: Params,
}

impl Builtin for SpamDemotion {
    const NAME: &'static str = "spam_demotion";
    const PHASES: &'static [Phase] = &[Phase::Rerank];
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        within("theta_low", p.theta_low, 0.0, 1.0)?;
        within("theta_high", p.theta_high, 0.0, 1.0)?;
        if p.theta_low >= p.theta_high {
            return Err(format!(
                "theta_low ({}) must be below theta_high ({})",
                p.theta_low, p.theta_high
            ));
        }
        if p.lambda < 0.0 {
            return Err(format!("lambda: {} is below 0", p.lambda));
        }
        Ok(SpamDemotion { p })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }
}

impl SpamDemotion {
    /// Demote each document above θ_low.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let Params {
            theta_low: low,
            theta_high: high,
            lambda,
        } = self.p;
        if lambda == 0.0 {
            return Out::unchanged();
        }
        let mut changes = Vec::with_capacity(docs.len());
        for (i, doc) in docs.iter().enumerate() {
            let s = ctx.page.src(doc).spam_score;
            if s <= low {
                continue;
            }
            let penalty = spam_penalty(s, low, high);
            let delta = -lambda * penalty;
            if delta != 0.0 {
                let mut reason = String::with_capacity(96);
                reason.push_str("spam_score ");
                push_g(&mut reason, s);
                reason.push_str(": penalty ");
                push_g(&mut reason, penalty);
                reason.push_str(" x lambda ");
                push_g(&mut reason, lambda);
                changes.push((i, doc.score + delta, delta, reason));
            }
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
    fn penalty_is_a_ramp() {
        assert_eq!(spam_penalty(0.2, 0.3, 0.8), 0.0);
        assert_eq!(spam_penalty(0.9, 0.3, 0.8), 1.0);
        assert_eq!(spam_penalty(0.55, 0.3, 0.8), (0.55 - 0.3) / (0.8 - 0.3));
    }

    #[test]
    fn demotes_above_theta_low_only() {
        let mut d = docs(3);
        d[0].spam_score = 0.3;
        d[1].spam_score = 0.55;
        d[2].spam_score = 0.9;
        let req = request(d);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let out = SpamDemotion::build(Params::default())
            .unwrap()
            .apply(&docs, &ctx(&page));
        assert_eq!(out.recs.len(), 2);
        let p = (0.55 - 0.3) / (0.8 - 0.3);
        assert_eq!(out.recs[0].delta, Delta::Float(-5.0 * p));
        assert_eq!(
            out.recs[0].reason,
            "spam_score 0.55: penalty 0.5 x lambda 5"
        );
        assert_eq!(out.recs[1].reason, "spam_score 0.9: penalty 1 x lambda 5");
        assert_eq!(out.docs.unwrap()[2].score, 1.0 - 5.0);
        let off = SpamDemotion::build(Params {
            lambda: 0.0,
            ..Params::default()
        })
        .unwrap();
        assert!(off.apply(&docs, &ctx(&page)).docs.is_none());
    }

    /// Seed 002, 16.2: rank_rel 8.0, theta_low 0.3, theta_high 0.8, lambda 5; spam_score
    /// 0.9 gives penalty 1 and 8.0 - 5 = 3.0; 0.4 gives (0.4 - 0.3) / 0.5 = 0.2 and 7.0.
    #[test]
    fn the_seeds_example() {
        let mut d = docs(3);
        for (doc, spam) in d.iter_mut().zip([0.9, 0.4, 0.2]) {
            doc.score = 8.0;
            doc.spam_score = spam;
        }
        let req = request(d);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let out = SpamDemotion::build(Params::default())
            .unwrap()
            .apply(&docs, &ctx(&page));
        let scores: Vec<f64> = out.docs.unwrap().iter().map(|d| d.score).collect();
        assert_eq!(scores[0], 3.0);
        assert!((scores[1] - 7.0).abs() < 1e-12, "{}", scores[1]);
        assert_eq!(scores[2], 8.0); // below theta_low: trusted
        assert_eq!(out.recs.len(), 2);
        assert_eq!(out.recs[1].reason, "spam_score 0.4: penalty 0.2 x lambda 5");
    }
}
