//! The built-in rules, one file each, dispatched through one enum; the registry is the
//! literal `match` in `Rule::build`.
//!
//! A rule reads the page it is given and returns the page it would make (`Out::docs`,
//! `None` when nothing changes) with its records; it never mutates its input, so the
//! runner can apply the result, keep it in shadow, or drop it when the rule fails.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use pyo3::{Py, PyAny};

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::clock::Clock;
use crate::contract::AgeMode;
use crate::doc::{Doc, Folded, Lookup, Page};
use crate::record::{Action, Delta, Phase, Reason, Rec};

pub mod ad_label;
pub mod age_label;
pub mod anti_seo_reset;
pub mod banlist;
pub mod depth;
pub mod empty_result_fallback;
pub mod host_crowding;
pub mod host_quota;
pub mod near_duplicates;
pub mod python;
pub mod python_output;
pub mod quarantine_demotion;
pub mod query_boost;
pub mod query_hide;
pub mod query_match;
pub mod query_pin;
pub mod query_targets;
pub mod regional_removals;
pub mod safe_search;
pub mod sandbox_damping;
pub mod spam_ban;
pub mod spam_demotion;
#[cfg(test)]
pub mod testing;
pub mod topic_filter;

/// What a rule may know about the request; fixed for the whole run.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub page: &'a Page<'a>,
    /// `query.region`, upper-cased.
    pub region: Option<&'a str>,
    pub age_mode: AgeMode,
    pub depth: Option<u32>,
    pub input_count: usize,
    /// Epoch seconds (ban expiry).
    pub now: f64,
    pub banlist: Option<&'a dyn Lookup>,
    pub quarantine: Option<&'a dyn Lookup>,
    /// Experiment → variant of this request.
    pub variants: &'a [(String, String)],
    pub relaxed_from: Option<AgeMode>,
    /// Past it, optional rules are not started and may stop midway.
    pub deadline: Option<Instant>,
    /// What `deadline` is read on.
    pub clock: &'a dyn Clock,
    pub profile: &'a str,
    /// Explain asked (QA): the runner traces every step (`Outcome::trace`).
    pub explain: bool,
    /// Where Python rules run (`rules::python`): None calls them on this thread.
    pub executor: Option<&'a Py<PyAny>>,
}

impl Ctx<'_> {
    /// `Err(Failure::Stopped)` once the deadline has passed: optional rules call it as
    /// they work (one clock read).
    pub fn check_deadline(&self) -> Result<(), Failure> {
        if self.deadline_passed() {
            Err(Failure::Stopped)
        } else {
            Ok(())
        }
    }

    /// True once the deadline has passed (one clock read).
    pub fn deadline_passed(&self) -> bool {
        self.deadline.is_some_and(|at| self.clock.now() > at)
    }
}

/// A rule's result: the new page (None: unchanged) and what it did.
#[derive(Debug, Default)]
pub struct Out<'a> {
    pub docs: Option<Vec<Doc>>,
    pub recs: Vec<Rec<'a>>,
}

impl<'a> Out<'a> {
    /// Nothing to do.
    pub fn unchanged() -> Self {
        Out::default()
    }
}

/// The Python exception behind a failure: the service logs it with its traceback.
#[derive(Clone)]
pub struct Cause(pub Arc<Py<PyAny>>);

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Cause(<exception>)")
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Why a rule did not finish.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The request's deadline passed while an optional rule ran.
    Stopped,
    /// The rule failed; the problem as the 503 and the log say it.
    Failed(String),
    /// A Python rule raised: the problem (`raised <type>: <message>`) and the exception.
    Raised(String, Cause),
    /// The rule found bad input the decoder could not see (a signature it cannot
    /// compare): the request is answered 4xx, as any bad input; not a rule failure.
    Refused(crate::contract::FieldError),
}

/// A rule's result or why it did not finish.
pub type RuleResult<'a> = Result<Out<'a>, Failure>;

/// A configured rule: its parameters checked and precomputed at config load.
pub enum Rule {
    Banlist(banlist::Banlist),
    RegionalRemovals(regional_removals::RegionalRemovals),
    TopicFilter(topic_filter::TopicFilter),
    SafeSearch(safe_search::SafeSearch),
    SpamBan(spam_ban::SpamBan),
    AntiSeoReset(anti_seo_reset::AntiSeoReset),
    SpamDemotion(spam_demotion::SpamDemotion),
    SandboxDamping(sandbox_damping::SandboxDamping),
    QuarantineDemotion(quarantine_demotion::QuarantineDemotion),
    QueryHide(query_hide::QueryHide),
    QueryBoost(query_boost::QueryBoost),
    QueryPin(query_pin::QueryPin),
    HostCrowding(host_crowding::HostCrowding),
    NearDuplicates(Box<near_duplicates::NearDuplicates>),
    Depth(depth::Depth),
    HostQuota(host_quota::HostQuota),
    AdLabel(ad_label::AdLabel),
    AgeLabel(age_label::AgeLabel),
    EmptyResultFallback(empty_result_fallback::EmptyResultFallback),
    Python(python::PyRule),
    #[cfg(test)]
    Test(testing::TestRule),
}

/// The phases each built-in may run in; None for a name that is not a built-in.
pub fn phases_of(name: &str) -> Option<&'static [Phase]> {
    use Phase::*;
    Some(match name {
        "banlist" | "regional_removals" | "topic_filter" | "spam_ban" | "query_hide" => {
            &[PreFilter]
        }
        "safe_search" => &[PreFilter, PostFilter],
        "anti_seo_reset"
        | "spam_demotion"
        | "sandbox_damping"
        | "quarantine_demotion"
        | "query_boost" => &[Rerank],
        "query_pin" | "host_crowding" | "near_duplicates" => &[Diversify],
        "depth" | "host_quota" => &[Trim],
        "ad_label" | "age_label" => &[Annotate],
        "empty_result_fallback" => &[PostFilter],
        _ => return None,
    })
}

fn params<T: DeserializeOwned>(raw: &Value) -> Result<T, String> {
    let raw = if raw.is_null() {
        Value::Object(Default::default())
    } else {
        raw.clone()
    };
    serde_json::from_value(raw).map_err(|e| e.to_string())
}

impl Rule {
    /// Build a built-in from its name and parameters (JSON, as the Python loader checked
    /// them); Err names the problem.
    pub fn build(name: &str, raw: &Value) -> Result<Rule, String> {
        Ok(match name {
            "banlist" => Rule::Banlist(banlist::Banlist::build(params(raw)?)?),
            "regional_removals" => {
                Rule::RegionalRemovals(regional_removals::RegionalRemovals::build(params(raw)?)?)
            }
            "topic_filter" => Rule::TopicFilter(topic_filter::TopicFilter::build(params(raw)?)?),
            "safe_search" => Rule::SafeSearch(safe_search::SafeSearch::build(params(raw)?)?),
            "spam_ban" => Rule::SpamBan(spam_ban::SpamBan::build(params(raw)?)?),
            "anti_seo_reset" => {
                Rule::AntiSeoReset(anti_seo_reset::AntiSeoReset::build(params(raw)?)?)
            }
            "spam_demotion" => {
                Rule::SpamDemotion(spam_demotion::SpamDemotion::build(params(raw)?)?)
            }
            "sandbox_damping" => {
                Rule::SandboxDamping(sandbox_damping::SandboxDamping::build(params(raw)?)?)
            }
            "quarantine_demotion" => Rule::QuarantineDemotion(
                quarantine_demotion::QuarantineDemotion::build(params(raw)?)?,
            ),
            "query_hide" => Rule::QueryHide(query_hide::QueryHide::build(params(raw)?)?),
            "query_boost" => Rule::QueryBoost(query_boost::QueryBoost::build(params(raw)?)?),
            "query_pin" => Rule::QueryPin(query_pin::QueryPin::build(params(raw)?)?),
            "host_crowding" => {
                Rule::HostCrowding(host_crowding::HostCrowding::build(params(raw)?)?)
            }
            "near_duplicates" => Rule::NearDuplicates(Box::new(
                near_duplicates::NearDuplicates::build(params(raw)?)?,
            )),
            "depth" => Rule::Depth(depth::Depth::build(params(raw)?)?),
            "host_quota" => Rule::HostQuota(host_quota::HostQuota::build(params(raw)?)?),
            "ad_label" => Rule::AdLabel(ad_label::AdLabel::build(params(raw)?)?),
            "age_label" => Rule::AgeLabel(age_label::AgeLabel::build(params(raw)?)?),
            "empty_result_fallback" => Rule::EmptyResultFallback(
                empty_result_fallback::EmptyResultFallback::build(params(raw)?)?,
            ),
            _ => return Err(format!("unknown rule {name:?}")),
        })
    }

    /// The rule's name in records and metrics.
    pub fn name(&self) -> &str {
        match self {
            Rule::Banlist(_) => "banlist",
            Rule::RegionalRemovals(_) => "regional_removals",
            Rule::TopicFilter(_) => "topic_filter",
            Rule::SafeSearch(_) => "safe_search",
            Rule::SpamBan(_) => "spam_ban",
            Rule::AntiSeoReset(_) => "anti_seo_reset",
            Rule::SpamDemotion(_) => "spam_demotion",
            Rule::SandboxDamping(_) => "sandbox_damping",
            Rule::QuarantineDemotion(_) => "quarantine_demotion",
            Rule::QueryHide(_) => "query_hide",
            Rule::QueryBoost(_) => "query_boost",
            Rule::QueryPin(_) => "query_pin",
            Rule::HostCrowding(_) => "host_crowding",
            Rule::NearDuplicates(_) => "near_duplicates",
            Rule::Depth(_) => "depth",
            Rule::HostQuota(_) => "host_quota",
            Rule::AdLabel(_) => "ad_label",
            Rule::AgeLabel(_) => "age_label",
            Rule::EmptyResultFallback(_) => "empty_result_fallback",
            Rule::Python(r) => &r.name,
            #[cfg(test)]
            Rule::Test(r) => r.name,
        }
    }

    /// Optional rules are not started past the deadline and may stop when it passes.
    pub fn optional(&self) -> bool {
        match self {
            // A page with near-duplicates beats a late page: skipped past the deadline.
            Rule::NearDuplicates(_) => true,
            #[cfg(test)]
            Rule::Test(r) => r.optional,
            _ => false,
        }
    }

    /// Whether the rule has anything to do for this request at all.
    pub fn applies(&self, ctx: &Ctx) -> bool {
        match self {
            Rule::RegionalRemovals(_) => ctx.region.is_some(),
            Rule::TopicFilter(r) => r.applies(),
            Rule::SafeSearch(_) => ctx.age_mode != AgeMode::Off,
            Rule::QuarantineDemotion(r) => r.applies(ctx),
            Rule::QueryHide(r) => r.applies(ctx),
            Rule::QueryBoost(r) => r.applies(ctx),
            Rule::QueryPin(r) => r.applies(ctx),
            Rule::EmptyResultFallback(_) => ctx.input_count > 0,
            _ => true,
        }
    }

    /// Why `applies` is false for this request, as explain says it.
    pub fn idle_because(&self) -> &'static str {
        match self {
            Rule::RegionalRemovals(_) => "the query has no region",
            Rule::TopicFilter(_) => "no blocked topic is configured",
            Rule::SafeSearch(_) => "age_mode is off",
            Rule::QuarantineDemotion(_) => "the quarantine is empty or the penalty is 0",
            Rule::QueryHide(_) | Rule::QueryBoost(_) | Rule::QueryPin(_) => {
                "its `when` does not match this query"
            }
            Rule::EmptyResultFallback(_) => "the request had no documents",
            _ => "nothing to do for this request",
        }
    }

    /// True for a rule keyed on registrable domains (the page then computes them).
    pub fn needs_domain(&self) -> bool {
        matches!(self, Rule::HostCrowding(r) if r.by_domain())
    }

    /// Run the rule on `docs` (the page as it stands in `phase`).
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>, phase: Phase) -> RuleResult<'a> {
        match self {
            Rule::Banlist(r) => Ok(r.apply(docs, ctx)),
            Rule::RegionalRemovals(r) => Ok(r.apply(docs, ctx)),
            Rule::TopicFilter(r) => Ok(r.apply(docs, ctx)),
            Rule::SafeSearch(r) => Ok(r.apply(docs, ctx)),
            Rule::SpamBan(r) => Ok(r.apply(docs, ctx)),
            Rule::AntiSeoReset(r) => Ok(r.apply(docs, ctx)),
            Rule::SpamDemotion(r) => Ok(r.apply(docs, ctx)),
            Rule::SandboxDamping(r) => Ok(r.apply(docs, ctx)),
            Rule::QuarantineDemotion(r) => Ok(r.apply(docs, ctx)),
            Rule::QueryHide(r) => Ok(r.apply(docs, ctx)),
            Rule::QueryBoost(r) => Ok(r.apply(docs, ctx)),
            Rule::QueryPin(r) => Ok(r.apply(docs, ctx)),
            Rule::HostCrowding(r) => Ok(r.apply(docs, ctx)),
            Rule::NearDuplicates(r) => r.apply(docs, ctx),
            Rule::Depth(r) => Ok(r.apply(docs, ctx)),
            Rule::HostQuota(r) => Ok(r.apply(docs, ctx)),
            Rule::AdLabel(r) => Ok(r.apply(docs, ctx)),
            Rule::AgeLabel(r) => Ok(r.apply(docs, ctx)),
            Rule::EmptyResultFallback(r) => Ok(r.apply(docs, ctx)),
            Rule::Python(r) => r.apply(docs, ctx, phase),
            #[cfg(test)]
            Rule::Test(r) => r.apply(docs, ctx),
        }
    }
}

/// The records of a document dropped from the page (`remove`, `trim`) and of each one
/// collapsed under it, which goes with it: without its own record it would vanish from the
/// response unexplained (a post-filter or a trim runs after diversify).
pub fn dropped<'a>(
    page: &Page<'a>,
    recs: &mut Vec<Rec<'a>>,
    doc: &Doc,
    action: Action,
    reason: impl Into<Reason>,
) {
    let reason = reason.into();
    if doc.collapsed.is_empty() {
        recs.push(Rec::on(page, doc.at, action, reason));
    } else {
        let verb = if action == Action::Trim {
            "trimmed"
        } else {
            "removed"
        };
        let id = page.id(doc);
        let mut why = String::with_capacity(40 + id.len() + reason.len());
        why.push_str("collapsed under ");
        why.push_str(id);
        why.push_str(", ");
        why.push_str(verb);
        why.push_str(" with it: ");
        why.push_str(&reason);
        let why = Reason::shared(why);
        recs.push(Rec::on(page, doc.at, action, reason));
        for c in &doc.collapsed {
            recs.push(Rec::on(page, c.at, action, why.clone()));
        }
    }
}

/// The page without `docs[i]` for each (i, reason), i ascending; one record each, and one
/// for each document collapsed under it.
pub fn removing<'a>(page: &Page<'a>, docs: &[Doc], removals: Vec<(usize, String)>) -> Out<'a> {
    if removals.is_empty() {
        return Out::unchanged();
    }
    let mut recs = Vec::with_capacity(removals.len());
    let mut kept = Vec::with_capacity(docs.len() - removals.len());
    let mut next = removals.into_iter().peekable();
    for (i, doc) in docs.iter().enumerate() {
        if next.peek().is_some_and(|(at, _)| *at == i) {
            let (_, reason) = next.next().expect("peeked");
            dropped(page, &mut recs, doc, Action::Remove, reason);
        } else {
            kept.push(doc.clone());
        }
    }
    Out {
        docs: Some(kept),
        recs,
    }
}

/// The page with `docs[i]` rescored for each (i, new score, delta, reason).
pub fn rescoring<'a>(
    page: &Page<'a>,
    docs: &[Doc],
    changes: Vec<(usize, f64, f64, String)>,
) -> Out<'a> {
    if changes.is_empty() {
        return Out::unchanged();
    }
    let mut out = docs.to_vec();
    let mut recs = Vec::with_capacity(changes.len());
    for (i, score, delta, reason) in changes {
        out[i].score = score;
        recs.push(Rec {
            delta: Delta::Float(delta),
            ..Rec::on(page, docs[i].at, Action::Rescore, reason)
        });
    }
    Out {
        docs: Some(out),
        recs,
    }
}

/// Fold `docs[i]` under `docs[leader]` for each (i, leader), i ascending; folded documents
/// bring their own folds along.
pub fn collapse(docs: &[Doc], folded: &[(usize, usize)], rule: &'static str) -> Vec<Doc> {
    let mut out = docs.to_vec();
    let mut leaders: Vec<usize> = Vec::new();
    let mut extra: Vec<Vec<Folded>> = Vec::new();
    for &(i, leader) in folded {
        let slot = match leaders.iter().position(|&l| l == leader) {
            Some(s) => s,
            None => {
                leaders.push(leader);
                extra.push(Vec::new());
                leaders.len() - 1
            }
        };
        extra[slot].push(Folded {
            at: docs[i].at,
            rule,
        });
        extra[slot].extend_from_slice(&docs[i].collapsed);
    }
    for (leader, under) in leaders.into_iter().zip(extra) {
        out[leader].collapsed.extend(under);
    }
    let mut gone = vec![false; docs.len()];
    for &(i, _) in folded {
        gone[i] = true;
    }
    let mut n = 0;
    out.retain(|_| {
        n += 1;
        !gone[n - 1]
    });
    out
}

/// Add `tag` to `docs[i]` for each i in `hits` (ascending; the caller leaves out documents
/// that already carry it), one `annotate` record each.
pub fn label<'a>(
    page: &Page<'a>,
    docs: &[Doc],
    tag: &'static str,
    hits: Vec<usize>,
    reason: &str,
) -> Out<'a> {
    if hits.is_empty() {
        return Out::unchanged();
    }
    let reason = Reason::shared(reason.to_string());
    let mut out = docs.to_vec();
    let mut recs = Vec::with_capacity(hits.len());
    for i in hits {
        out[i].annotations.push(tag);
        recs.push(Rec::on(page, docs[i].at, Action::Annotate, reason.clone()));
    }
    Out {
        docs: Some(out),
        recs,
    }
}
