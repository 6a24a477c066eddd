//! `topic_filter`: removes a document with a blocked topic.

use foldhash::HashSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Out, RuleResult, removing};
use crate::doc::Doc;
use crate::record::Phase;

/// Removes a document with a blocked topic.
#[derive(Deserialize, Serialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The topics removed (a document with any of them goes).
    #[serde(default)]
    pub blocked_topics: Vec<String>,
}

/// The rule (applies only with some blocked topic).
pub struct TopicFilter {
    blocked: HashSet<String>,
}

impl Builtin for TopicFilter {
    const NAME: &'static str = "topic_filter";
    const PHASES: &'static [Phase] = &[Phase::PreFilter];
    const IDLE: &'static str = "no blocked topic is configured";
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        Ok(TopicFilter {
            blocked: p.blocked_topics.into_iter().collect(),
        })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }

    fn applies(&self, _: &Ctx) -> bool {
        TopicFilter::applies(self)
    }
}

impl TopicFilter {
    /// False when no topic is blocked.
    pub fn applies(&self) -> bool {
        !self.blocked.is_empty()
    }

    /// Remove each document with a blocked topic, naming its first one.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let removals = docs
            .iter()
            .enumerate()
            .filter_map(|(i, d)| {
                let hit = ctx
                    .page
                    .src(d)
                    .topics
                    .iter()
                    .find(|t| self.blocked.contains(&***t))?;
                Some((i, format!("topic {hit} is blocked")))
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
    fn names_the_first_blocked_topic_of_the_document() {
        let mut d = docs(2);
        d[0].topics = vec!["sofa".into(), "casino".into(), "drugs".into()].into();
        let req = request(d);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let rule = TopicFilter::build(Params {
            blocked_topics: vec!["drugs".into(), "casino".into()],
        })
        .unwrap();
        let out = rule.apply(&docs, &ctx(&page));
        assert_eq!(out.recs.len(), 1);
        assert_eq!(out.recs[0].reason, "topic casino is blocked");
        assert!(!TopicFilter::build(Params::default()).unwrap().applies());
    }
}
