//! `query_boost` (rerank): when the query meets `when`, score += by for every document
//! `match` names: `by` > 0 boosts, `by` < 0 buries (seed 002's "boost verified sources",
//! with a `verified` attribute). Additive, as the demotions are: a factor on the score
//! would bury a negative score when it means to boost it. The rerank sort then moves it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::query_match::{When, WhenIn};
use super::query_targets::{MatchIn, Targets};
use super::{Builtin, Ctx, Out, RuleResult, rescoring};
use crate::doc::Doc;
use crate::record::Phase;
use crate::fmt::push_g;

/// When the query meets `when`: score += by for every document `match` names; by < 0 buries.
/// Additive like the demotions: a factor would bury a negative score.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The condition on the query; none given: every request of the profile.
    #[serde(default)]
    pub when: WhenIn,
    /// The documents acted on: any target will do.
    #[serde(rename = "match")]
    pub targets: MatchIn,
    /// Added to the score: non-zero, within +-1e9.
    #[schemars(range(min = -1e9, max = 1e9))]
    pub by: f64,
    /// Shown in each reason as ` [label]`.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_.:-]{1,64}$"))]
    #[serde(default)]
    pub label: Option<String>,
}

/// The largest |by|: far past any ranker's scale, and never near a score's ±1e15 bound.
pub const MAX_BY: f64 = 1e9;

/// The rule.
pub struct QueryBoost {
    when: When,
    targets: Targets,
    by: f64,
    /// `boost +2` / `bury -3`.
    said: String,
}

impl Builtin for QueryBoost {
    const NAME: &'static str = "query_boost";
    const PHASES: &'static [Phase] = &[Phase::Rerank];
    const IDLE: &'static str = "its `when` does not match this query";
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        if p.by == 0.0 {
            return Err("by: 0 changes nothing (boost with by > 0, bury with by < 0)".into());
        }
        if !(-MAX_BY..=MAX_BY).contains(&p.by) {
            return Err(format!("by: {} is outside [-1e9, 1e9]", p.by));
        }
        let mut said = String::from(if p.by > 0.0 { "boost +" } else { "bury " });
        push_g(&mut said, p.by);
        Ok(QueryBoost {
            when: When::build(p.when, &p.label)?,
            targets: Targets::build(p.targets)?,
            by: p.by,
            said,
        })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }

    fn applies(&self, ctx: &Ctx) -> bool {
        QueryBoost::applies(self, ctx)
    }
}

impl QueryBoost {
    /// Whether the query meets the condition.
    pub fn applies(&self, ctx: &Ctx) -> bool {
        self.when.holds(ctx)
    }

    /// Rescore each document a target names.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let Some(when) = self.when.matched(ctx) else {
            return Out::unchanged();
        };
        let changes = (docs.iter().enumerate())
            .filter_map(|(i, doc)| {
                let hit = self.targets.hit(ctx.page, doc)?;
                let reason = format!("{} for {hit} {when}", self.said);
                Some((i, doc.score + self.by, self.by, reason))
            })
            .collect();
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

    fn boost(by: f64, classes: &[&str]) -> Result<QueryBoost, String> {
        QueryBoost::build(Params {
            when: WhenIn {
                classes: classes.iter().map(|c| c.to_string()).collect(),
                ..WhenIn::default()
            },
            targets: MatchIn {
                hosts: vec!["h2.example".into()],
                ..MatchIn::default()
            },
            by,
            label: Some("trusted".into()),
        })
    }

    #[test]
    fn adds_by_to_the_named_hosts_for_the_named_classes() {
        let mut req = request(docs(3));
        req.query.classes = vec!["news".into(), "ymyl".into()];
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let out = boost(2.5, &["ymyl"]).unwrap().apply(&docs, &ctx(&page));
        assert_eq!(out.docs.unwrap()[1].score, 4.5);
        assert_eq!(out.recs[0].delta, Delta::Float(2.5));
        assert_eq!(
            out.recs[0].reason,
            "boost +2.5 for host h2.example when class ymyl [trusted]"
        );
        let bury = boost(-1.0, &[]).unwrap().apply(&docs, &ctx(&page));
        assert_eq!(
            bury.recs[0].reason,
            "bury -1 for host h2.example on every query [trusted]"
        );
        assert!(!boost(1.0, &["commercial"]).unwrap().applies(&ctx(&page)));
        assert!(boost(0.0, &[]).is_err() && boost(f64::INFINITY, &[]).is_err());
    }
}
