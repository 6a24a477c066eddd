//! `regional_removals`: removes a document whose `blocked_regions` holds `query.region`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Out, RuleResult, removing};
use crate::doc::Doc;
use crate::record::Phase;

/// Removes a document whose `blocked_regions` holds the query's region. No parameters.
#[derive(Deserialize, Serialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Params {}

/// The rule (applies only when the query has a region).
pub struct RegionalRemovals;

impl Builtin for RegionalRemovals {
    const NAME: &'static str = "regional_removals";
    const PHASES: &'static [Phase] = &[Phase::PreFilter];
    const IDLE: &'static str = "the query has no region";
    type Params = Params;

    fn build(_: Params) -> Result<Self, String> {
        Ok(RegionalRemovals)
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }

    fn applies(&self, ctx: &Ctx) -> bool {
        ctx.region.is_some()
    }
}

impl RegionalRemovals {
    /// Remove the documents blocked in the query's region.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let Some(region) = ctx.region else {
            return Out::unchanged();
        };
        let reason = format!("blocked in region {region}");
        let removals = docs
            .iter()
            .enumerate()
            .filter(|(_, d)| ctx.page.meta(d).blocked_regions.iter().any(|r| r == region))
            .map(|(i, _)| (i, reason.clone()))
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
    fn removes_documents_blocked_in_the_region_case_blind() {
        let mut d = docs(3);
        d[1].blocked_regions = vec!["de".into(), "FR".into()].into();
        let req = request(d);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let mut c = ctx(&page);
        c.region = Some("DE");
        let out = RegionalRemovals.apply(&docs, &c);
        assert_eq!(out.docs.unwrap().len(), 2);
        assert_eq!(out.recs[0].doc_id, Some("d2"));
        assert_eq!(out.recs[0].reason, "blocked in region DE");
        c.region = Some("RU");
        assert!(RegionalRemovals.apply(&docs, &c).docs.is_none());
    }
}
