//! `safe_search`: removes a document with adult_score ≥ the threshold of the age mode;
//! `off` filters nothing.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Out, RuleResult, removing};
use crate::contract::AgeMode;
use crate::doc::Doc;
use crate::record::Phase;
use crate::fmt::push_g;

/// One threshold per filtering age mode.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    /// `strict` removes a document from this adult_score.
    #[schemars(range(min = 0.0, max = 1.0))]
    #[serde(default = "strict")]
    pub strict: f64,
    /// `moderate` removes a document from this adult_score.
    #[schemars(range(min = 0.0, max = 1.0))]
    #[serde(default = "moderate")]
    pub moderate: f64,
}

fn strict() -> f64 {
    0.5
}
fn moderate() -> f64 {
    0.8
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            strict: strict(),
            moderate: moderate(),
        }
    }
}

/// Removes a document with adult_score >= the threshold of the age mode; `off` keeps all.
#[derive(Deserialize, Serialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The adult_score at which each filtering age mode removes a document.
    #[serde(default)]
    pub thresholds: Thresholds,
}

/// The rule (applies unless the age mode is `off`).
pub struct SafeSearch {
    thresholds: Thresholds,
}

impl Builtin for SafeSearch {
    const NAME: &'static str = "safe_search";
    const PHASES: &'static [Phase] = &[Phase::PreFilter, Phase::PostFilter];
    const IDLE: &'static str = "age_mode is off";
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        for (name, t) in [
            ("strict", p.thresholds.strict),
            ("moderate", p.thresholds.moderate),
        ] {
            if !(0.0..=1.0).contains(&t) {
                return Err(format!("thresholds.{name}: {t} is outside [0, 1]"));
            }
        }
        Ok(SafeSearch {
            thresholds: p.thresholds,
        })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }

    fn applies(&self, ctx: &Ctx) -> bool {
        ctx.age_mode != AgeMode::Off
    }
}

impl SafeSearch {
    /// Remove what the age mode does not allow.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let threshold = match ctx.age_mode {
            AgeMode::Strict => self.thresholds.strict,
            AgeMode::Moderate => self.thresholds.moderate,
            AgeMode::Off => return Out::unchanged(),
        };
        let mode = ctx.age_mode.as_str();
        let removals = docs
            .iter()
            .enumerate()
            .filter_map(|(i, d)| {
                let a = ctx.page.src(d).adult_score;
                (a >= threshold).then(|| {
                    // `adult_score {a:g} >= {threshold:g} (age_mode {mode})`, in one
                    // allocation.
                    let mut reason = String::with_capacity(80);
                    reason.push_str("adult_score ");
                    push_g(&mut reason, a);
                    reason.push_str(" >= ");
                    push_g(&mut reason, threshold);
                    reason.push_str(" (age_mode ");
                    reason.push_str(mode);
                    reason.push(')');
                    (i, reason)
                })
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

    #[test]
    fn threshold_of_the_age_mode_inclusive() {
        let mut d = docs(3);
        d[0].adult_score = 0.5;
        d[1].adult_score = 0.8;
        d[2].adult_score = 0.49;
        let req = request(d);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let rule = SafeSearch::build(Params::default()).unwrap();
        let mut c = ctx(&page);
        let out = rule.apply(&docs, &c);
        assert_eq!(out.recs.len(), 1);
        assert_eq!(
            out.recs[0].reason,
            "adult_score 0.8 >= 0.8 (age_mode moderate)"
        );
        c.age_mode = AgeMode::Strict;
        let out = rule.apply(&docs, &c);
        assert_eq!(out.recs.len(), 2);
        assert_eq!(
            out.recs[0].reason,
            "adult_score 0.5 >= 0.5 (age_mode strict)"
        );
        c.age_mode = AgeMode::Off;
        assert!(rule.apply(&docs, &c).docs.is_none());
    }
}
