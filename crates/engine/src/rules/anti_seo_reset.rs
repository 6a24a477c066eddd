//! `anti_seo_reset` (seed 002 §16.4): score −= Σ weight·factor over the reset blocks, so
//! those blocks count for nothing.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Out, RuleResult, rescoring};
use crate::doc::Doc;
use crate::record::Phase;
use crate::fmt::push_g;

/// score -= sum of weight * factor over the reset blocks: those blocks count for nothing.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The factor blocks whose contribution is taken out (at least one).
    #[schemars(length(min = 1))]
    #[serde(default = "blocks")]
    pub blocks: Vec<String>,
    /// A weight in [0, 1] per block of `blocks` (1 for a block not given).
    #[serde(default)]
    pub weights: BTreeMap<String, f64>,
}

fn blocks() -> Vec<String> {
    vec!["link".into(), "behav".into()]
}

impl Default for Params {
    fn default() -> Self {
        Params {
            blocks: blocks(),
            weights: BTreeMap::new(),
        }
    }
}

/// The rule: (block, weight) in the order of `blocks`.
pub struct AntiSeoReset {
    weighted: Vec<(String, f64)>,
}

impl Builtin for AntiSeoReset {
    const NAME: &'static str = "anti_seo_reset";
    const PHASES: &'static [Phase] = &[Phase::Rerank];
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        if p.blocks.is_empty() {
            return Err("blocks: at least one factor block is needed".into());
        }
        for (block, w) in &p.weights {
            if !p.blocks.contains(block) {
                return Err(format!("weights.{block}: not one of blocks"));
            }
            if !(0.0..=1.0).contains(w) {
                return Err(format!("weights.{block}: {w} is outside [0, 1]"));
            }
        }
        let weighted = p
            .blocks
            .iter()
            .map(|b| (b.clone(), p.weights.get(b).copied().unwrap_or(1.0)))
            .collect();
        Ok(AntiSeoReset { weighted })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }
}

impl AntiSeoReset {
    /// Take the weighted reset blocks out of each score.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let mut changes = Vec::with_capacity(docs.len());
        for (i, doc) in docs.iter().enumerate() {
            let factors = &ctx.page.src(doc).factors;
            if factors.is_empty() {
                continue;
            }
            // The last value of a repeated key, as a JSON object decoded into a dict keeps.
            let factor = |b: &str| factors.iter().rev().find(|(k, _)| k == b).map(|(_, v)| *v);
            let mut sum = 0.0;
            for (b, w) in &self.weighted {
                if let Some(f) = factor(b) {
                    sum += w * f;
                }
            }
            let delta = -sum;
            if delta != 0.0 {
                let mut reason = String::with_capacity(24 + 32 * self.weighted.len());
                reason.push_str("reset factor blocks ");
                let mut first = true;
                for (b, _) in &self.weighted {
                    if let Some(f) = factor(b) {
                        if !first {
                            reason.push_str(", ");
                        }
                        first = false;
                        reason.push_str(b);
                        reason.push('=');
                        push_g(&mut reason, f);
                    }
                }
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
    fn subtracts_the_weighted_blocks() {
        let mut d = docs(3);
        d[0].score = 8.0;
        d[0].factors = vec![
            ("text".into(), 2.1),
            ("link".into(), 3.0),
            ("behav".into(), 1.2),
        ]
        .into();
        d[1].factors = vec![("text".into(), 2.0)].into();
        d[2].factors = vec![("link".into(), 0.0)].into();
        let req = request(d);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let mut p = Params::default();
        p.weights.insert("behav".into(), 0.5);
        let out = AntiSeoReset::build(p).unwrap().apply(&docs, &ctx(&page));
        assert_eq!(out.recs.len(), 1);
        assert_eq!(out.recs[0].reason, "reset factor blocks link=3, behav=1.2");
        assert_eq!(out.recs[0].delta, Delta::Float(-(3.0 + 0.5 * 1.2)));
        assert_eq!(out.docs.unwrap()[0].score, 8.0 - (3.0 + 0.5 * 1.2));
        assert!(AntiSeoReset::build(Params {
            blocks: vec![],
            weights: BTreeMap::new()
        })
        .is_err());
    }

    /// Seed 002, 16.4: for commercial and YMYL queries w_link := 0 and w_behav := 0, the
    /// text and quality blocks stay: 7.5 = text 1.0 + link 3.0 + behav 1.25 + 2.25 of the
    /// rest becomes 7.5 - 3.0 - 1.25 = 3.25 under the default blocks.
    #[test]
    fn the_seeds_reset_of_link_and_behav() {
        let mut d = docs(1);
        d[0].score = 7.5;
        d[0].factors = vec![
            ("text".into(), 1.0),
            ("link".into(), 3.0),
            ("behav".into(), 1.25),
            ("quality".into(), 0.5),
        ]
        .into();
        let req = request(d);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let out = AntiSeoReset::build(Params::default())
            .unwrap()
            .apply(&docs, &ctx(&page));
        assert_eq!(out.docs.unwrap()[0].score, 3.25);
        assert_eq!(out.recs[0].delta, Delta::Float(-4.25));
    }
}
