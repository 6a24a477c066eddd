//! `quarantine_demotion`: score −= penalty for a host (or a parent domain) in spam
//! quarantine, the yellow card; the sanctions machine keeps the quarantine list.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Out, RuleResult, rescoring};
use crate::doc::Doc;
use crate::record::Phase;

/// score -= penalty for a host (or a parent domain) in spam quarantine: the yellow card.
/// The sanctions state machine keeps the quarantine list.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Taken off the score of a quarantined document.
    #[schemars(range(min = 0.0))]
    #[serde(default = "penalty")]
    pub penalty: f64,
}

fn penalty() -> f64 {
    3.0
}

impl Default for Params {
    fn default() -> Self {
        Params { penalty: penalty() }
    }
}

/// The rule (applies with a non-empty quarantine and a positive penalty).
pub struct QuarantineDemotion {
    penalty: f64,
}

impl Builtin for QuarantineDemotion {
    const NAME: &'static str = "quarantine_demotion";
    const PHASES: &'static [Phase] = &[Phase::Rerank];
    const IDLE: &'static str = "the quarantine is empty or the penalty is 0";
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        if p.penalty < 0.0 {
            return Err(format!("penalty: {} is below 0", p.penalty));
        }
        Ok(QuarantineDemotion { penalty: p.penalty })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }

    fn applies(&self, ctx: &Ctx) -> bool {
        QuarantineDemotion::applies(self, ctx)
    }
}

impl QuarantineDemotion {
    /// Whether there is anything to match.
    pub fn applies(&self, ctx: &Ctx) -> bool {
        ctx.quarantine.is_some_and(|q| !q.is_empty()) && self.penalty > 0.0
    }

    /// Demote each document the quarantine matches.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let Some(index) = ctx.quarantine else {
            return Out::unchanged();
        };
        // the page's openable URLs, looked up together
        let open: Vec<(usize, &Doc)> = (docs.iter().enumerate())
            .filter(|(_, doc)| ctx.page.meta(doc).url_problem.is_none())
            .collect();
        let urls: Vec<(&str, &str)> = open
            .iter()
            .map(|(_, doc)| (ctx.page.canonical(doc), ctx.page.host(doc)))
            .collect();
        let hits = index.lookup_page(&urls, ctx.region, ctx.now);
        let mut changes = Vec::new();
        for ((i, doc), hit) in open.into_iter().zip(hits) {
            if let Some(hit) = hit {
                let reason = format!(
                    "{} {} is in spam quarantine [entry {}]",
                    hit.scope, hit.value, hit.id
                );
                changes.push((i, doc.score - self.penalty, -self.penalty, reason));
            }
        }
        rescoring(ctx.page, docs, changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::testing::{docs, request, SimpleCanon};
    use crate::doc::{Hit, Lookup, Page};
    use crate::rules::testing::ctx;

    struct Q;
    impl Lookup for Q {
        fn lookup(&self, _: &str, host: &str, _: Option<&str>, _: f64) -> Option<Hit> {
            (host == "h2.example").then(|| Hit {
                id: "3".into(),
                scope: "host".into(),
                value: "h2.example".into(),
                reason: "spam".into(),
            })
        }
        fn len(&self) -> usize {
            1
        }
    }

    #[test]
    fn subtracts_the_penalty_from_quarantined_hosts() {
        let req = request(docs(2));
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let mut c = ctx(&page);
        let rule = QuarantineDemotion::build(Params::default()).unwrap();
        assert!(!rule.applies(&c));
        c.quarantine = Some(&Q);
        assert!(rule.applies(&c));
        let out = rule.apply(&docs, &c);
        assert_eq!(
            out.recs[0].reason,
            "host h2.example is in spam quarantine [entry 3]"
        );
        assert_eq!(out.docs.unwrap()[1].score, 1.0 - 3.0);
    }
}
