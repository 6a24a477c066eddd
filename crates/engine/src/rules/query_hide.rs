//! `query_hide` (pre-filter): when the query meets `when`, removes every document `match`
//! names (a URL, a host, a domain and its subdomains, or attribute values). A removal, so
//! it runs before anything is reordered, and a hidden URL cannot be pinned back.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::query_match::{When, WhenIn};
use super::query_targets::{MatchIn, Targets};
use super::{Builtin, Ctx, Out, RuleResult, removing};
use crate::doc::Doc;
use crate::record::Phase;

/// When the query meets `when`: removes every document `match` names.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The condition on the query; none given: every request of the profile.
    #[serde(default)]
    pub when: WhenIn,
    /// The documents acted on: any target will do.
    #[serde(rename = "match")]
    pub targets: MatchIn,
    /// Shown in each reason as ` [label]`.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_.:-]{1,64}$"))]
    #[serde(default)]
    pub label: Option<String>,
}

/// The rule.
pub struct QueryHide {
    when: When,
    targets: Targets,
}

impl Builtin for QueryHide {
    const NAME: &'static str = "query_hide";
    const PHASES: &'static [Phase] = &[Phase::PreFilter];
    const IDLE: &'static str = "its `when` does not match this query";
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        Ok(QueryHide {
            when: When::build(p.when, &p.label)?,
            targets: Targets::build(p.targets)?,
        })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }

    fn applies(&self, ctx: &Ctx) -> bool {
        QueryHide::applies(self, ctx)
    }
}

impl QueryHide {
    /// Whether the query meets the condition.
    pub fn applies(&self, ctx: &Ctx) -> bool {
        self.when.holds(ctx)
    }

    /// Remove each document a target names.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let Some(when) = self.when.matched(ctx) else {
            return Out::unchanged();
        };
        let removals = (docs.iter().enumerate())
            .filter_map(|(i, doc)| {
                let hit = self.targets.hit(ctx.page, doc)?;
                Some((i, format!("{hit} hidden {when}")))
            })
            .collect();
        removing(ctx.page, docs, removals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::testing::{document, request, SimpleCanon};
    use crate::doc::Page;
    use crate::rules::testing::ctx;

    #[test]
    fn hides_a_domain_and_its_subdomains_only_when_the_query_says_so() {
        let mut req = request(vec![
            document("a", "http://shop.example/1", 3.0),
            document("b", "http://www.shop.example/2", 2.0),
            document("c", "http://myshop.example/3", 1.0),
        ]);
        req.query.text = "Cheap sofas".into();
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let rule = QueryHide::build(Params {
            when: WhenIn {
                query_contains: vec!["CHEAP".into()],
                ..WhenIn::default()
            },
            targets: MatchIn {
                domains: vec!["shop.example".into()],
                ..MatchIn::default()
            },
            label: None,
        })
        .unwrap();
        let c = ctx(&page);
        assert!(rule.applies(&c));
        let out = rule.apply(&docs, &c);
        assert_eq!(out.docs.unwrap().len(), 1);
        let why: Vec<_> = out.recs.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(
            why,
            [
                "domain shop.example hidden when query contains \"cheap\"",
                "domain shop.example hidden when query contains \"cheap\""
            ]
        );
        req.query.text = "cheapest sofas".into();
        let (page, _) = Page::build(&req, &SimpleCanon, false);
        assert!(!rule.applies(&ctx(&page)));
    }
}
