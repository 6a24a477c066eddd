//! `host_quota`: drops documents past the quota per host.

use foldhash::{HashMap, HashMapExt};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Out, RuleResult, dropped};
use crate::doc::Doc;
use crate::record::{Action, Phase};

/// Drops documents past the quota per host.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Documents a host keeps.
    #[schemars(range(min = 1))]
    #[serde(default = "one")]
    pub max_per_host: u64,
}

fn one() -> u64 {
    1
}

impl Default for Params {
    fn default() -> Self {
        Params {
            max_per_host: one(),
        }
    }
}

/// The rule.
pub struct HostQuota {
    limit: usize,
}

impl Builtin for HostQuota {
    const NAME: &'static str = "host_quota";
    const PHASES: &'static [Phase] = &[Phase::Trim];
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        if p.max_per_host < 1 {
            return Err(format!("max_per_host: {} is below 1", p.max_per_host));
        }
        Ok(HostQuota {
            limit: p.max_per_host as usize,
        })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }
}

impl HostQuota {
    /// Trim each document past its host's quota.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut kept = Vec::with_capacity(docs.len());
        let mut recs = Vec::new();
        for doc in docs {
            let host = ctx.page.host(doc);
            let n = seen.entry(host).or_insert(0);
            *n += 1;
            if *n > self.limit {
                let reason = format!("host {host} is past its quota of {}", self.limit);
                dropped(ctx.page, &mut recs, doc, Action::Trim, reason);
            } else {
                kept.push(doc.clone());
            }
        }
        if recs.is_empty() {
            return Out::unchanged();
        }
        Out {
            docs: Some(kept),
            recs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::testing::{document, request, SimpleCanon};
    use crate::doc::Page;
    use crate::rules::testing::ctx;

    #[test]
    fn drops_past_the_quota() {
        let req = request(vec![
            document("a", "http://x.example/1", 3.0),
            document("b", "http://y.example/", 2.0),
            document("c", "http://x.example/2", 1.0),
        ]);
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let out = HostQuota::build(Params::default())
            .unwrap()
            .apply(&docs, &ctx(&page));
        assert_eq!(out.docs.unwrap().len(), 2);
        assert_eq!(out.recs[0].doc_id, Some("c"));
        assert_eq!(out.recs[0].reason, "host x.example is past its quota of 1");
    }
}
