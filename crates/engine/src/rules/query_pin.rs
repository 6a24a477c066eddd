//! `query_pin` (diversify): when the query meets `when`, puts each pinned URL that is on the
//! page at its position (1-based); the other documents keep their order around them.
//!
//! It runs first in diversify: after the rerank sort, which would undo it, and before
//! host crowding and depth, so a pinned document leads its host's group and survives a
//! depth at or past its position. A pinned URL the page does not hold (the ranker did not
//! return it, or a filter removed it) is ignored: pins never add documents, and never bring
//! back one that the banlist, a hide or safe-search took out. A position past the end of
//! the page puts the document last.

use foldhash::{HashMap, HashMapExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::query_match::{When, WhenIn};
use super::query_targets::{configured_url, url_key};
use super::{Builtin, Ctx, Out, RuleResult};
use crate::doc::Doc;
use crate::record::{Action, Delta, Phase, Rec};

/// One pin: a URL and the position it takes.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PinIn {
    /// The URL pinned (http and https alike).
    pub url: String,
    /// Its 1-based position on the page.
    #[schemars(range(min = 1, max = 1000))]
    pub position: u64,
}

/// When the query meets `when`: each pinned URL on the page takes its position. A pinned
/// URL not on the page is ignored: a pin never adds a document.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The condition on the query; none given: every request of the profile.
    #[serde(default)]
    pub when: WhenIn,
    /// 1 to 100 pins, of distinct URLs and positions.
    #[schemars(length(min = 1, max = 100))]
    pub pin: Vec<PinIn>,
    /// Shown in each reason as ` [label]`.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_.:-]{1,64}$"))]
    #[serde(default)]
    pub label: Option<String>,
}

/// The most pins one step may hold, and the furthest position (the page's own limit).
pub const MAX_PINS: usize = 100;
pub const MAX_POSITION: u64 = 1000;

/// The rule.
pub struct QueryPin {
    when: When,
    /// (URL key, position), by position.
    pins: Vec<(String, usize)>,
}

impl Builtin for QueryPin {
    const NAME: &'static str = "query_pin";
    const PHASES: &'static [Phase] = &[Phase::Diversify];
    const IDLE: &'static str = "its `when` does not match this query";
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        if p.pin.is_empty() || p.pin.len() > MAX_PINS {
            return Err(format!("pin: 1 to {MAX_PINS} pins"));
        }
        let mut pins: Vec<(String, usize)> = Vec::with_capacity(p.pin.len());
        for (i, pin) in p.pin.iter().enumerate() {
            if !(1..=MAX_POSITION).contains(&pin.position) {
                return Err(format!("pin[{i}].position: 1 to {MAX_POSITION}"));
            }
            let key = configured_url(&format!("pin[{i}].url"), &pin.url)?;
            let position = pin.position as usize;
            if let Some(j) = pins.iter().position(|(_, at)| *at == position) {
                return Err(format!(
                    "pin[{i}].position: position {position} is pin[{j}]'s already"
                ));
            }
            if let Some(j) = pins.iter().position(|(k, _)| *k == key) {
                return Err(format!("pin[{i}].url: the same URL as pin[{j}]"));
            }
            pins.push((key, position));
        }
        pins.sort_by_key(|(_, at)| *at);
        Ok(QueryPin {
            when: When::build(p.when, &p.label)?,
            pins,
        })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }

    fn applies(&self, ctx: &Ctx) -> bool {
        QueryPin::applies(self, ctx)
    }
}

impl QueryPin {
    /// Whether the query meets the condition.
    pub fn applies(&self, ctx: &Ctx) -> bool {
        self.when.holds(ctx)
    }

    /// Place each pinned document, with a `move` record for every document that moved.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        let Some(when) = self.when.matched(ctx) else {
            return Out::unchanged();
        };
        let wanted: HashMap<&str, usize> = self
            .pins
            .iter()
            .map(|(key, at)| (key.as_str(), *at))
            .collect();
        // (position, index on the page) of the first document with each pinned URL
        let mut found: Vec<(usize, usize)> = Vec::with_capacity(self.pins.len());
        let mut taken = HashMap::with_capacity(self.pins.len());
        for (i, doc) in docs.iter().enumerate() {
            if let Some(&at) = wanted.get(url_key(ctx.page.canonical(doc))) {
                if taken.insert(at, i).is_none() {
                    found.push((at, i));
                }
            }
        }
        if found.is_empty() {
            return Out::unchanged();
        }
        found.sort_unstable();
        let mut pinned = vec![false; docs.len()];
        for &(_, i) in &found {
            pinned[i] = true;
        }
        let mut rest = (0..docs.len()).filter(|&i| !pinned[i]).peekable();
        let mut pins = found.iter().peekable();
        let mut order: Vec<(usize, Option<usize>)> = Vec::with_capacity(docs.len());
        while order.len() < docs.len() {
            let slot = order.len() + 1;
            let pin_now = pins.peek().is_some_and(|(at, _)| *at <= slot) || rest.peek().is_none();
            match pins.next_if(|_| pin_now) {
                Some(&(at, i)) => order.push((i, Some(at))),
                None => order.push((rest.next().expect("a document is left"), None)),
            }
        }
        if order.iter().enumerate().all(|(j, &(i, _))| i == j) {
            return Out::unchanged();
        }
        let mut recs = Vec::new();
        for (j, &(i, at)) in order.iter().enumerate() {
            if i == j {
                continue;
            }
            let reason = match at {
                Some(at) if at == j + 1 => format!("pinned at position {at} {when}"),
                Some(at) => format!(
                    "pinned at position {at} (the page ends at {}) {when}",
                    j + 1
                ),
                None => format!("moved by pinned results {when}"),
            };
            recs.push(Rec {
                delta: Delta::Int(j as i64 - i as i64),
                ..Rec::on(ctx.page, docs[i].at, Action::Move, reason)
            });
        }
        Out {
            docs: Some(order.iter().map(|&(i, _)| docs[i].clone()).collect()),
            recs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::testing::{docs, request, SimpleCanon};
    use crate::doc::Page;
    use crate::rules::testing::ctx;

    fn pin(pins: &[(&str, u64)]) -> Result<QueryPin, String> {
        QueryPin::build(Params {
            when: WhenIn::default(),
            pin: pins
                .iter()
                .map(|&(url, position)| PinIn {
                    url: url.into(),
                    position,
                })
                .collect(),
            label: Some("launch".into()),
        })
    }

    #[test]
    fn places_pins_and_moves_the_rest_around_them() {
        let req = request(docs(5));
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let rule = pin(&[("https://h4.example/", 1), ("http://h1.example/", 3)]).unwrap();
        let out = rule.apply(&docs, &ctx(&page));
        let ids: Vec<_> = out.docs.unwrap().iter().map(|d| page.id(d)).collect();
        assert_eq!(ids, ["d4", "d2", "d1", "d3", "d5"]);
        let recs: Vec<_> = out
            .recs
            .iter()
            .map(|r| (r.doc_id.unwrap(), r.delta, r.reason.as_str()))
            .collect();
        assert_eq!(
            recs,
            [
                (
                    "d4",
                    Delta::Int(-3),
                    "pinned at position 1 on every query [launch]"
                ),
                (
                    "d1",
                    Delta::Int(2),
                    "pinned at position 3 on every query [launch]"
                ),
                (
                    "d3",
                    Delta::Int(1),
                    "moved by pinned results on every query [launch]"
                ),
            ]
        );
    }

    #[test]
    fn a_position_past_the_page_is_last_and_absent_urls_are_ignored() {
        let req = request(docs(3));
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let rule = pin(&[("http://h1.example/", 9), ("http://nowhere.example/", 1)]).unwrap();
        let out = rule.apply(&docs, &ctx(&page));
        let ids: Vec<_> = out.docs.unwrap().iter().map(|d| page.id(d)).collect();
        assert_eq!(ids, ["d2", "d3", "d1"]);
        assert_eq!(
            out.recs[2].reason,
            "pinned at position 9 (the page ends at 3) on every query [launch]"
        );
        let placed = rule.apply(
            &[docs[1].clone(), docs[2].clone(), docs[0].clone()],
            &ctx(&page),
        );
        assert!(placed.docs.is_none() && placed.recs.is_empty()); // idempotent
    }

    #[test]
    fn refuses_conflicting_pins() {
        let twice = pin(&[("http://a.example/", 2), ("http://b.example/", 2)]);
        assert_eq!(
            twice.err().unwrap(),
            "pin[1].position: position 2 is pin[0]'s already"
        );
        let same = pin(&[("http://a.example/x", 1), ("https://A.example/x#top", 2)]);
        assert_eq!(same.err().unwrap(), "pin[1].url: the same URL as pin[0]");
        assert!(pin(&[("http://a.example/", 0)]).is_err());
        assert!(pin(&[]).is_err());
    }
}
