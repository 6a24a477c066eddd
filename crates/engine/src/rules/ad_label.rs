//! `ad_label`: annotates `ad` on documents the ranker marked `is_ad`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Out, RuleResult, label};
use crate::doc::Doc;
use crate::record::Phase;

/// Annotates `ad` on documents the ranker marked `is_ad`. No parameters.
#[derive(Deserialize, Serialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Params {}

/// The rule.
pub struct AdLabel;

impl Builtin for AdLabel {
    const NAME: &'static str = "ad_label";
    const PHASES: &'static [Phase] = &[Phase::Annotate];
    type Params = Params;

    fn build(_: Params) -> Result<Self, String> {
        Ok(AdLabel)
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }
}

impl AdLabel {
    /// Label each ad once.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let hits = docs
            .iter()
            .enumerate()
            .filter(|(_, d)| ctx.page.src(d).is_ad && !d.annotations.contains(&"ad"))
            .map(|(i, _)| i)
            .collect();
        label(ctx.page, docs, "ad", hits, "is_ad")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::testing::{docs, request, SimpleCanon};
    use crate::doc::Page;
    use crate::rules::testing::ctx;

    #[test]
    fn labels_ads_once() {
        let mut d = docs(2);
        d[1].is_ad = true;
        let req = request(d);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let out = AdLabel.apply(&docs, &ctx(&page));
        let docs = out.docs.unwrap();
        assert_eq!(docs[1].annotations, vec!["ad"]);
        assert_eq!(out.recs[0].reason, "is_ad");
        assert!(AdLabel.apply(&docs, &ctx(&page)).docs.is_none());
    }
}
