//! `host_crowding`: documents past `max_per_host` per host (or registrable domain) fold
//! under the first document of their host.

use foldhash::{HashMap, HashMapExt};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Out, RuleResult, collapse};
use crate::doc::Doc;
use crate::record::{Action, Phase, Reason, Rec};

/// Documents past `max_per_host` per host (or registrable domain) fold under the first.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Documents a host keeps on the page unfolded.
    #[schemars(range(min = 1))]
    #[serde(default = "two")]
    pub max_per_host: u64,
    /// `host` or `domain` (registrable domain).
    #[schemars(regex(pattern = r"^(host|domain)$"))]
    #[serde(default = "host")]
    pub key: String,
}

fn two() -> u64 {
    2
}
fn host() -> String {
    "host".into()
}

impl Default for Params {
    fn default() -> Self {
        Params {
            max_per_host: two(),
            key: host(),
        }
    }
}

/// The rule.
pub struct HostCrowding {
    limit: usize,
    by_domain: bool,
}

impl Builtin for HostCrowding {
    const NAME: &'static str = "host_crowding";
    const PHASES: &'static [Phase] = &[Phase::Diversify];
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        if p.max_per_host < 1 {
            return Err(format!("max_per_host: {} is below 1", p.max_per_host));
        }
        let by_domain = match p.key.as_str() {
            "host" => false,
            "domain" => true,
            other => return Err(format!("key: must be host or domain, not {other:?}")),
        };
        Ok(HostCrowding {
            limit: p.max_per_host as usize,
            by_domain,
        })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }

    fn needs_domain(&self) -> bool {
        self.by_domain()
    }
}

impl HostCrowding {
    /// True when keyed on registrable domains.
    pub fn by_domain(&self) -> bool {
        self.by_domain
    }

    /// Fold each document past the limit of its key under the key's first document.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let page = ctx.page;
        let what = if self.by_domain { "domain" } else { "host" };
        let key = |d: &Doc| -> &str {
            if self.by_domain {
                page.domain(d)
            } else {
                page.host(d)
            }
        };
        // key → (first index, count, the reason every fold under it gives)
        let mut seen: HashMap<&str, (usize, usize, Option<Reason>)> = HashMap::new();
        let mut folded = Vec::new();
        let mut recs = Vec::new();
        for (i, doc) in docs.iter().enumerate() {
            let k = key(doc);
            let entry = seen.entry(k).or_insert((i, 0, None));
            entry.1 += 1;
            if entry.1 > self.limit {
                let leader = entry.0;
                let reason = entry.2.get_or_insert_with(|| {
                    let leader = page.id(&docs[leader]);
                    let mut s = String::with_capacity(64 + k.len() + leader.len());
                    s.push_str(what);
                    s.push(' ');
                    s.push_str(k);
                    s.push_str(" already has ");
                    s.push_str(itoa::Buffer::new().format(self.limit));
                    s.push_str(" result(s) above; collapsed under ");
                    s.push_str(leader);
                    Reason::shared(s)
                });
                if folded.is_empty() {
                    // Room for every document left: the lists grow once, not a doubling
                    // at a time through a crowded page.
                    folded.reserve(docs.len() - i);
                    recs.reserve(docs.len() - i);
                }
                folded.push((i, leader));
                recs.push(Rec::on(page, doc.at, Action::Collapse, reason.clone()));
            }
        }
        if folded.is_empty() {
            return Out::unchanged();
        }
        Out {
            docs: Some(collapse(docs, &folded, "host_crowding")),
            recs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::testing::{document, request, SimpleCanon};
    use crate::doc::{Folded, Page};
    use crate::rules::testing::ctx;

    #[test]
    fn folds_past_the_limit_under_the_first_of_the_host() {
        let req = request(vec![
            document("a", "http://x.example/1", 5.0),
            document("b", "http://x.example/2", 4.0),
            document("c", "http://y.example/", 3.0),
            document("d", "http://x.example/3", 2.0),
            document("e", "http://x.example/4", 1.0),
        ]);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let out = HostCrowding::build(Params::default())
            .unwrap()
            .apply(&docs, &ctx(&page));
        let docs = out.docs.unwrap();
        assert_eq!(docs.iter().map(|d| d.at).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(
            docs[0].collapsed,
            vec![
                Folded {
                    at: 3,
                    rule: "host_crowding"
                },
                Folded {
                    at: 4,
                    rule: "host_crowding"
                }
            ]
        );
        assert_eq!(out.recs.len(), 2);
        assert_eq!(
            out.recs[0].reason,
            "host x.example already has 2 result(s) above; collapsed under a"
        );
    }

    #[test]
    fn by_domain_and_folds_carry_their_own() {
        let req = request(vec![
            document("a", "http://a.x.example/", 3.0),
            document("b", "http://b.x.example/", 2.0),
        ]);
        let (page, mut docs) = Page::build(&req, &SimpleCanon, true);
        docs[1].collapsed.push(Folded {
            at: 0,
            rule: "near_duplicates",
        });
        let rule = HostCrowding::build(Params {
            max_per_host: 1,
            key: "domain".into(),
        })
        .unwrap();
        let out = rule.apply(&docs, &ctx(&page));
        assert_eq!(
            out.recs[0].reason,
            "domain x.example already has 1 result(s) above; collapsed under a"
        );
        assert_eq!(out.docs.unwrap()[0].collapsed.len(), 2);
    }
}
