//! `depth`: keeps the top k; the request's `depth` overrides k.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Out, RuleResult, dropped};
use crate::doc::Doc;
use crate::record::{Action, Phase, Reason};

/// Keeps the top k; the request's `depth` overrides k.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Documents kept.
    #[schemars(range(min = 1))]
    #[serde(default = "ten")]
    pub k: u64,
}

fn ten() -> u64 {
    10
}

impl Default for Params {
    fn default() -> Self {
        Params { k: ten() }
    }
}

/// The rule.
pub struct Depth {
    k: usize,
}

impl Builtin for Depth {
    const NAME: &'static str = "depth";
    const PHASES: &'static [Phase] = &[Phase::Trim];
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        if p.k < 1 {
            return Err(format!("k: {} is below 1", p.k));
        }
        Ok(Depth { k: p.k as usize })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }
}

impl Depth {
    /// Trim below k, with a record for each document trimmed and each folded under it.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let k = ctx.depth.map_or(self.k, |d| d as usize);
        if docs.len() <= k {
            return Out::unchanged();
        }
        let mut reason = String::with_capacity(32);
        reason.push_str("below depth ");
        reason.push_str(itoa::Buffer::new().format(k));
        let reason = Reason::shared(reason);
        // A record for each document trimmed and each folded under it.
        let trimmed = &docs[k..];
        let mut recs =
            Vec::with_capacity(trimmed.len() + trimmed.iter().map(|d| d.collapsed.len()).sum::<usize>());
        for doc in trimmed {
            dropped(ctx.page, &mut recs, doc, Action::Trim, reason.clone());
        }
        Out {
            docs: Some(docs[..k].to_vec()),
            recs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::testing::{docs, request, SimpleCanon};
    use crate::doc::{Folded, Page};
    use crate::rules::testing::ctx;

    #[test]
    fn keeps_k_and_trims_the_folds_of_what_goes() {
        let req = request(docs(4));
        let (page, mut docs) = Page::build(&req, &SimpleCanon, false);
        docs[3].collapsed.push(Folded {
            at: 1,
            rule: "host_crowding",
        });
        let mut c = ctx(&page);
        let rule = Depth::build(Params { k: 2 }).unwrap();
        let out = rule.apply(&docs, &c);
        assert_eq!(out.docs.unwrap().len(), 2);
        let reasons: Vec<_> = out
            .recs
            .iter()
            .map(|r| (r.doc_id.unwrap(), r.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            vec![
                ("d3", "below depth 2"),
                ("d4", "below depth 2"),
                ("d2", "collapsed under d4, trimmed with it: below depth 2")
            ]
        );
        c.depth = Some(4);
        assert!(rule.apply(&docs, &c).docs.is_none());
    }
}
