//! `spam_ban`: removes a document with spam_score above the threshold (the switch, not
//! the rheostat).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Out, RuleResult, removing};
use crate::doc::Doc;
use crate::record::Phase;
use crate::fmt::g;

/// Removes a document with spam_score above the threshold (the switch, not the rheostat).
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// spam_score above which a document is removed.
    #[schemars(range(min = 0.0, max = 1.0))]
    #[serde(default = "threshold")]
    pub threshold: f64,
}

fn threshold() -> f64 {
    0.95
}

impl Default for Params {
    fn default() -> Self {
        Params {
            threshold: threshold(),
        }
    }
}

/// The rule.
pub struct SpamBan {
    threshold: f64,
}

impl Builtin for SpamBan {
    const NAME: &'static str = "spam_ban";
    const PHASES: &'static [Phase] = &[Phase::PreFilter];
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        if !(0.0..=1.0).contains(&p.threshold) {
            return Err(format!("threshold: {} is outside [0, 1]", p.threshold));
        }
        Ok(SpamBan {
            threshold: p.threshold,
        })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }
}

impl SpamBan {
    /// Remove the documents strictly above the threshold.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let t = self.threshold;
        let removals = docs
            .iter()
            .enumerate()
            .filter_map(|(i, d)| {
                let s = ctx.page.src(d).spam_score;
                (s > t).then(|| (i, format!("spam_score {} > {}", g(s), g(t))))
            })
            .collect();
        removing(ctx.page, docs, removals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::testing::{docs, request, SimpleCanon};
    use crate::doc::Page;
    use crate::rules::testing::ctx;
    use crate::rules::Rule;

    #[test]
    fn a_threshold_one_ulp_below_one_is_parsed_as_written() {
        // The compiled spec is JSON: 0.9999999999999999 must not round to 1.0 on the way,
        // or a spam_score of 1 would pass (found by the property test).
        let raw: serde_json::Value =
            serde_json::from_str(r#"{"threshold":0.9999999999999999}"#).expect("valid JSON");
        let Rule::SpamBan(rule) = Rule::build("spam_ban", &raw).expect("valid params") else {
            panic!("not spam_ban");
        };
        let mut d = docs(1);
        d[0].spam_score = 1.0;
        let req = request(d);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        assert_eq!(rule.apply(&docs, &ctx(&page)).recs.len(), 1);
    }

    #[test]
    fn strictly_above_the_threshold() {
        let mut d = docs(2);
        d[0].spam_score = 0.95;
        d[1].spam_score = 0.96;
        let req = request(d);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let out = SpamBan::build(Params::default())
            .unwrap()
            .apply(&docs, &ctx(&page));
        assert_eq!(out.recs.len(), 1);
        assert_eq!(out.recs[0].doc_id, Some("d2"));
        assert_eq!(out.recs[0].reason, "spam_score 0.96 > 0.95");
    }
}
