//! `banlist`: removes a document whose URL matches an active banlist entry for the
//! request's region, and one whose URL no browser could open (it cannot vouch for it).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Out, RuleResult, removing};
use crate::doc::Doc;
use crate::record::Phase;

/// Removes a document whose URL matches an active banlist entry for the request's region,
/// and one whose URL no browser could open (the banlist cannot vouch for it). No parameters.
#[derive(Deserialize, Serialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Params {}

/// The rule.
pub struct Banlist;

impl Builtin for Banlist {
    const NAME: &'static str = "banlist";
    const PHASES: &'static [Phase] = &[Phase::PreFilter];
    type Params = Params;

    fn build(_: Params) -> Result<Self, String> {
        Ok(Banlist)
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }
}

impl Banlist {
    /// Remove banned documents and those with URLs no browser could open.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let index = ctx.banlist.filter(|i| !i.is_empty());
        let metas: Vec<_> = docs.iter().map(|doc| ctx.page.meta(doc)).collect();
        // the page's openable URLs, looked up together
        let urls: Vec<(&str, &str)> = (docs.iter().zip(&metas))
            .filter(|(_, meta)| meta.url_problem.is_none())
            .map(|(doc, _)| (ctx.page.canonical(doc), ctx.page.host(doc)))
            .collect();
        let mut hits = match index {
            Some(index) => index.lookup_page(&urls, ctx.region, ctx.now),
            None => Vec::new(),
        }
        .into_iter();
        let mut removals = Vec::new();
        for (i, meta) in metas.iter().enumerate() {
            if let Some(problem) = &meta.url_problem {
                removals.push((i, format!("URL cannot be opened: {problem}")));
            } else if let Some(hit) = hits.next().flatten() {
                // `{scope} {value} banned ({reason}) [entry {id}]`, in one allocation.
                let parts = [
                    &*hit.scope,
                    " ",
                    &hit.value,
                    " banned (",
                    &hit.reason,
                    ") [entry ",
                    &hit.id,
                    "]",
                ];
                let mut reason = String::with_capacity(parts.iter().map(|p| p.len()).sum());
                parts.iter().for_each(|p| reason.push_str(p));
                removals.push((i, reason));
            }
        }
        removing(ctx.page, docs, removals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::testing::{document, request, SimpleCanon};
    use crate::doc::{Hit, Lookup, Page};
    use crate::rules::testing::ctx;

    struct Bans;
    impl Lookup for Bans {
        fn lookup(&self, _: &str, host: &str, region: Option<&str>, now: f64) -> Option<Hit> {
            (host == "evil.example" && region != Some("DE") && now < 2_000.0).then(|| Hit {
                id: "7".into(),
                scope: "domain".into(),
                value: "evil.example".into(),
                reason: "legal removal".into(),
            })
        }
        fn len(&self) -> usize {
            1
        }
    }

    #[test]
    fn removes_matches_for_the_region_and_unopenable_urls() {
        let req = request(vec![
            document("a", "http://ok.example/", 3.0),
            document("b", "http://evil.example/x", 2.0),
            document("c", "not a url", 1.0),
        ]);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let mut c = ctx(&page);
        c.banlist = Some(&Bans);
        let out = Banlist.apply(&docs, &c);
        let kept: Vec<u32> = out.docs.unwrap().iter().map(|d| d.at).collect();
        assert_eq!(kept, vec![0]);
        assert_eq!(
            out.recs[0].reason,
            "domain evil.example banned (legal removal) [entry 7]"
        );
        assert_eq!(out.recs[1].reason, "URL cannot be opened: no host");
        c.region = Some("DE");
        assert_eq!(Banlist.apply(&docs, &c).recs.len(), 1);
        c.banlist = None;
        assert_eq!(Banlist.apply(&docs, &c).recs.len(), 1);
    }
}
