//! `age_label`: annotates `adult` on documents with adult_score ≥ threshold.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Out, RuleResult, label};
use crate::doc::Doc;
use crate::record::Phase;
use crate::fmt::g;

/// Annotates `adult` on documents with adult_score >= threshold.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// adult_score from which a document is labelled.
    #[schemars(range(min = 0.0, max = 1.0))]
    #[serde(default = "half")]
    pub threshold: f64,
}

fn half() -> f64 {
    0.5
}

impl Default for Params {
    fn default() -> Self {
        Params { threshold: half() }
    }
}

/// The rule.
pub struct AgeLabel {
    threshold: f64,
    reason: String,
}

impl Builtin for AgeLabel {
    const NAME: &'static str = "age_label";
    const PHASES: &'static [Phase] = &[Phase::Annotate];
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        if !(0.0..=1.0).contains(&p.threshold) {
            return Err(format!("threshold: {} is outside [0, 1]", p.threshold));
        }
        Ok(AgeLabel {
            threshold: p.threshold,
            reason: format!("adult_score >= {}", g(p.threshold)),
        })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }
}

impl AgeLabel {
    /// Label each adult document once.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let hits = docs
            .iter()
            .enumerate()
            .filter(|(_, d)| {
                ctx.page.src(d).adult_score >= self.threshold && !d.annotations.contains(&"adult")
            })
            .map(|(i, _)| i)
            .collect();
        label(ctx.page, docs, "adult", hits, &self.reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::testing::{docs, request, SimpleCanon};
    use crate::doc::Page;
    use crate::rules::testing::ctx;

    #[test]
    fn labels_at_or_above_the_threshold() {
        let mut d = docs(3);
        d[0].adult_score = 0.5;
        d[1].adult_score = 0.49;
        let req = request(d);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let out = AgeLabel::build(Params::default())
            .unwrap()
            .apply(&docs, &ctx(&page));
        assert_eq!(out.recs.len(), 1);
        assert_eq!(out.recs[0].reason, "adult_score >= 0.5");
        assert_eq!(out.docs.unwrap()[0].annotations, vec!["adult"]);
    }
}
