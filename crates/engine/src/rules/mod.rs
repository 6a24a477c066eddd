//! The built-in rules, one file each, dispatched through one enum; the registry is the
//! `builtins!` list below, each rule named once (its file says everything else about it:
//! name, phases, parameters with their defaults and checks, its doc).
//!
//! A rule reads the page it is given and returns the page it would make (`Out::docs`,
//! `None` when nothing changes) with its records; it never mutates its input, so the
//! runner can apply the result, keep it in shadow, or drop it when the rule fails.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use pyo3::{Py, PyAny};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::clock::Clock;
use crate::contract::AgeMode;
use crate::doc::{Doc, Folded, Lookup, Page};
use crate::record::{Action, Delta, Phase, Reason, Rec};

pub mod catalog;
pub mod python;
pub mod python_output;
pub mod query_match;
pub mod query_targets;
#[cfg(test)]
pub mod testing;

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

/// A built-in rule: everything about it is declared in its file, here.
///
/// `Params` is what the config's step gives (serde: unknown keys refused, defaults
/// filled; `JsonSchema`: its doc comment is the rule's description in the catalog, the
/// fields' doc comments theirs); `build` checks what serde cannot (ranges, cross-field
/// rules) and precomputes; `apply` runs per request.
pub trait Builtin: Sized {
    /// The rule's name in the config, records and metrics.
    const NAME: &'static str;
    /// The phases it may run in.
    const PHASES: &'static [Phase];
    /// Optional rules are not started past the deadline and may stop when it passes.
    const OPTIONAL: bool = false;
    /// Why `applies` is false for a request, as explain says it.
    const IDLE: &'static str = "nothing to do for this request";
    /// Its parameters as the config spells them.
    type Params: DeserializeOwned + Serialize + JsonSchema;
    /// Check the parameters and precompute; Err names the parameter and the problem.
    fn build(p: Self::Params) -> Result<Self, String>;
    /// Run the rule on `docs` (the page as it stands in its phase).
    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a>;
    /// Whether the rule has anything to do for this request at all.
    fn applies(&self, _ctx: &Ctx) -> bool {
        true
    }
    /// True for a rule keyed on registrable domains (the page then computes them).
    fn needs_domain(&self) -> bool {
        false
    }
}

/// `Err(problem)` unless `lo <= x <= hi`, the problem naming `field`.
pub fn within(field: &str, x: f64, lo: f64, hi: f64) -> Result<(), String> {
    if (lo..=hi).contains(&x) {
        Ok(())
    } else {
        Err(format!("{field}: {x} is outside [{lo}, {hi}]"))
    }
}

/// Parse a rule's parameters (null: none given); Err names the parameter.
pub fn params<T: DeserializeOwned>(raw: &Value) -> Result<T, String> {
    let raw = if raw.is_null() {
        Value::Object(Default::default())
    } else {
        raw.clone()
    };
    serde_path_to_error::deserialize(raw).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." {
            inner
        } else {
            format!("{path}: {inner}")
        }
    })
}

/// One line per built-in rule: `module::Type`. Generates the modules, the `Rule` enum,
/// building by name, and the dispatch of every trait method.
macro_rules! builtins {
    ($($module:ident::$rule:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// A configured rule: its parameters checked and precomputed at config load.
        pub enum Rule {
            $($rule(Box<$module::$rule>),)*
            Python(python::PyRule),
            #[cfg(test)]
            Test(testing::TestRule),
        }

        /// The phases each built-in may run in; None for a name that is not a built-in.
        pub fn phases_of(name: &str) -> Option<&'static [Phase]> {
            match name {
                $(<$module::$rule as Builtin>::NAME => Some(<$module::$rule as Builtin>::PHASES),)*
                _ => None,
            }
        }

        /// Every built-in, as the catalog lists it.
        pub fn catalog() -> Vec<catalog::Entry> {
            vec![$(catalog::Entry::of::<$module::$rule>(),)*]
        }

        impl Rule {
            /// Build a built-in from its name and parameters (JSON); Err names the problem.
            pub fn build(name: &str, raw: &Value) -> Result<Rule, String> {
                match name {
                    $(<$module::$rule as Builtin>::NAME => Ok(Rule::$rule(Box::new(
                        <$module::$rule as Builtin>::build(params(raw)?)?,
                    ))),)*
                    _ => Err(format!("unknown rule {name:?}")),
                }
            }

            /// A built-in's parameters checked as `build` checks them, returned with every
            /// default filled (as JSON); Err names the parameter and the problem.
            pub fn check(name: &str, raw: &Value) -> Result<Value, String> {
                match name {
                    $(<$module::$rule as Builtin>::NAME => {
                        let p: <$module::$rule as Builtin>::Params = params(raw)?;
                        let normal = serde_json::to_value(&p).map_err(|e| e.to_string())?;
                        <$module::$rule as Builtin>::build(p)?;
                        Ok(normal)
                    })*
                    _ => Err(format!("unknown rule {name:?}")),
                }
            }

            /// The rule's name in records and metrics.
            pub fn name(&self) -> &str {
                match self {
                    $(Rule::$rule(_) => <$module::$rule as Builtin>::NAME,)*
                    Rule::Python(r) => &r.name,
                    #[cfg(test)]
                    Rule::Test(r) => r.name,
                }
            }

            /// Optional rules are not started past the deadline and may stop when it passes.
            pub fn optional(&self) -> bool {
                match self {
                    $(Rule::$rule(_) => <$module::$rule as Builtin>::OPTIONAL,)*
                    Rule::Python(_) => false,
                    #[cfg(test)]
                    Rule::Test(r) => r.optional,
                }
            }

            /// Whether the rule has anything to do for this request at all.
            pub fn applies(&self, ctx: &Ctx) -> bool {
                match self {
                    $(Rule::$rule(r) => Builtin::applies(r.as_ref(), ctx),)*
                    _ => true,
                }
            }

            /// Why `applies` is false for this request, as explain says it.
            pub fn idle_because(&self) -> &'static str {
                match self {
                    $(Rule::$rule(_) => <$module::$rule as Builtin>::IDLE,)*
                    _ => "nothing to do for this request",
                }
            }

            /// True for a rule keyed on registrable domains (the page then computes them).
            pub fn needs_domain(&self) -> bool {
                match self {
                    $(Rule::$rule(r) => Builtin::needs_domain(r.as_ref()),)*
                    _ => false,
                }
            }

            /// Run the rule on `docs` (the page as it stands in `phase`).
            pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>, phase: Phase) -> RuleResult<'a> {
                match self {
                    $(Rule::$rule(r) => Builtin::run(r.as_ref(), docs, ctx),)*
                    Rule::Python(r) => r.apply(docs, ctx, phase),
                    #[cfg(test)]
                    Rule::Test(r) => r.apply(docs, ctx),
                }
            }
        }
    };
}

builtins! {
    banlist::Banlist,
    regional_removals::RegionalRemovals,
    topic_filter::TopicFilter,
    safe_search::SafeSearch,
    spam_ban::SpamBan,
    query_hide::QueryHide,
    anti_seo_reset::AntiSeoReset,
    spam_demotion::SpamDemotion,
    sandbox_damping::SandboxDamping,
    quarantine_demotion::QuarantineDemotion,
    query_boost::QueryBoost,
    query_pin::QueryPin,
    host_crowding::HostCrowding,
    near_duplicates::NearDuplicates,
    depth::Depth,
    host_quota::HostQuota,
    ad_label::AdLabel,
    age_label::AgeLabel,
    empty_result_fallback::EmptyResultFallback,
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
    // The documents between two removals are copied as one run.
    let mut from = 0;
    for (at, reason) in removals {
        debug_assert!(at >= from, "removals in ascending order, each once");
        kept.extend_from_slice(&docs[from..at]);
        dropped(page, &mut recs, &docs[at], Action::Remove, reason);
        from = at + 1;
    }
    kept.extend_from_slice(&docs[from..]);
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
    // What each leader gains, counted first, so that its list grows once; then each fold
    // appended to its leader's list in turn (a leader's folds in the order of `folded`).
    let mut gains = vec![0u32; docs.len()];
    for &(i, leader) in folded {
        gains[leader] += 1 + docs[i].collapsed.len() as u32;
    }
    for (doc, &n) in out.iter_mut().zip(&gains) {
        if n > 0 {
            doc.collapsed.reserve(n as usize);
        }
    }
    for &(i, leader) in folded {
        let under = &mut out[leader].collapsed;
        under.push(Folded {
            at: docs[i].at,
            rule,
        });
        under.extend_from_slice(&docs[i].collapsed);
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
