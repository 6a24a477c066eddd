//! The phase runner: gating, shadow, reserved step keys, the deadline, the failure policy,
//! the stable sort after rerank, the fallback and the one relax rerun.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::contract::AgeMode;
use crate::doc::Doc;
use crate::effects::{ats, effect, rescored};
use crate::fmt::push_g;
use crate::record::{same_name, Action, Delta, Mode, Phase, Reason, Rec, Record};
use crate::rules::empty_result_fallback::emptied;
use crate::rules::{Cause, Ctx, Failure, Rule};

/// The runner's own name for the stable sort that closes `rerank`.
pub const SORT_RULE: &str = "sort";
/// The runner's own name for refilling a trimmed page after a post-filter removal.
pub const BACKFILL_RULE: &str = "backfill";
/// The fallback's rule when the profile has no `empty_result_fallback`.
pub const PIPELINE_RULE: &str = "pipeline";
/// `skipped[].reason`: an optional rule not started because the deadline had passed.
pub const SKIPPED_LATE: &str = "deadline";
/// Explain's `why` for an optional rule given up when the deadline passed midway; its
/// `skipped[].reason` is the CONTRACT's `deadline`, as for one not started
/// (`SkipReason::Stopped`).
pub const STOPPED_LATE: &str = "deadline (stopped while running)";
/// `skipped[].reason`: a rule that failed under `on_error: open` (or in shadow).
pub const FAILED: &str = "error";
/// Explain's `status` of a step: it ran applied and changed the page.
pub const APPLIED: &str = "applied";
/// It ran in shadow: its records say what it would have done, the page is unchanged.
pub const SHADOW: &str = "shadow";
/// It ran and found nothing to do.
pub const NO_MATCH: &str = "no_match";
/// `enabled: false`.
pub const DISABLED: &str = "disabled";
/// Outside its `valid_from`/`valid_until` window.
pub const OUTSIDE_WINDOW: &str = "outside_window";
/// Not for this request (`Rule::idle_because` says why).
pub const NOT_APPLICABLE: &str = "not_applicable";
/// Listed in `skipped` (the deadline, or a failure under `on_error: open` or in shadow).
pub const SKIPPED: &str = "skipped";

/// The experiment variant that runs gated rules in shadow.
pub const CONTROL: &str = "control";

const DISPLACED: &str = "stable sort by score after rerank: displaced by rescored documents";

/// What a failing step does to the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnError {
    /// The page continues as the rule received it; the rule is listed in `skipped`.
    Open,
    /// The request is answered 503.
    Closed,
}

/// A configured rule in a phase with its reserved keys and experiment gate.
pub struct Step {
    pub rule: Rule,
    pub phase: Phase,
    pub on_error: OnError,
    pub enabled: bool,
    /// Epoch seconds; outside [valid_from, valid_until) the step does not run.
    pub valid_from: Option<f64>,
    pub valid_until: Option<f64>,
    /// The window as the config wrote it, for explain (None without one).
    pub window: Option<String>,
    pub experiment: Option<String>,
    /// The rule built with a treatment variant's parameters; other variants run `rule`.
    pub variants: Vec<(String, Rule)>,
}

impl Step {
    fn in_window(&self, now: f64) -> bool {
        self.enabled
            && self.valid_from.map_or(true, |f| now >= f)
            && self.valid_until.map_or(true, |u| now < u)
    }

    /// Why the step does not run now (`in_window` false), as explain says it.
    fn idle(&self) -> (&'static str, String) {
        if !self.enabled {
            (DISABLED, "enabled: false".into())
        } else {
            (
                OUTSIDE_WINDOW,
                self.window
                    .clone()
                    .unwrap_or_else(|| "outside its window".into()),
            )
        }
    }

    fn gated(&self, ctx: &Ctx) -> (Mode, &Rule) {
        let Some(exp) = &self.experiment else {
            return (Mode::Applied, &self.rule);
        };
        match ctx.variants.iter().rev().find(|(e, _)| e == exp) {
            None => (Mode::Shadow, &self.rule),
            Some((_, v)) if v == CONTROL => (Mode::Shadow, &self.rule),
            Some((_, v)) => {
                let rule = self
                    .variants
                    .iter()
                    .find(|(n, _)| n == v)
                    .map_or(&self.rule, |(_, r)| r);
                (Mode::Applied, rule)
            }
        }
    }
}

/// One profile: its steps in phase order.
pub struct Pipeline {
    pub profile: String,
    pub steps: Vec<Step>,
    /// A step (or a variant of one) is a Python rule.
    pub python: bool,
}

/// What the runner observed of one rule call, for the metrics.
#[derive(Debug, Clone)]
pub struct Timing<'a> {
    pub rule: &'a str,
    pub phase: Phase,
    pub mode: Mode,
    pub seconds: f64,
    /// Position changes of the documents in the top 10 after it.
    pub moves: Vec<i64>,
    /// Documents in the top 10 after it that were not before.
    pub churn: usize,
    /// Its non-zero rescore deltas (rerank only).
    pub deltas: Vec<f64>,
}

impl<'a> Timing<'a> {
    /// A call that gave up: its time, no effect.
    fn spent(rule: &'a str, phase: Phase, mode: Mode, seconds: f64) -> Self {
        Timing {
            rule,
            phase,
            mode,
            seconds,
            moves: vec![],
            churn: 0,
            deltas: vec![],
        }
    }
}

/// A rule that did not run to completion (`skipped` of the response).
#[derive(Debug, Clone, PartialEq)]
pub struct Skip<'a> {
    pub rule: &'a str,
    pub phase: Phase,
    pub reason: SkipReason,
}

/// Why a rule did not run to completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Optional, and the deadline had passed before it started.
    Late,
    /// Optional, and the deadline passed while it ran: it gave up.
    Stopped,
    /// It failed under `on_error: open` (or in shadow).
    Failed,
}

impl SkipReason {
    /// `skipped[].reason`, the CONTRACT's: `deadline` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Late | SkipReason::Stopped => SKIPPED_LATE,
            SkipReason::Failed => FAILED,
        }
    }

    /// The `reason` label of rearrange_rule_skipped_total, which tells a rule stopped
    /// midway (`deadline_stopped`) from one never started.
    pub fn label(self) -> &'static str {
        match self {
            SkipReason::Stopped => "deadline_stopped",
            other => other.as_str(),
        }
    }
}

/// `fallback` of the response.
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback<'a> {
    pub rule: &'a str,
    pub action: &'static str,
    pub reason: Reason,
}

/// One step of one run as explain reports it: what it did or why it did not run, and the
/// page after it (the documents' input positions; None when it did not run).
#[derive(Debug, Clone, PartialEq)]
pub struct Trace<'a> {
    pub rule: &'a str,
    pub phase: Phase,
    /// 1, or 2 for the rerun after a relax.
    pub attempt: u8,
    pub status: &'static str,
    /// None for a step that did not run.
    pub mode: Option<Mode>,
    pub why: Option<String>,
    pub records: usize,
    pub page: Option<Vec<u32>>,
}

impl<'a> Trace<'a> {
    fn idle(rule: &'a str, phase: Phase, status: &'static str, why: String) -> Self {
        Trace {
            rule,
            phase,
            attempt: 1,
            status,
            mode: None,
            why: Some(why),
            records: 0,
            page: None,
        }
    }
}

fn page_of(docs: &[Doc]) -> Option<Vec<u32>> {
    Some(docs.iter().map(|d| d.at).collect())
}

/// (rule, phase, action, mode) of audit records, and how many.
pub type ActionCount<'a> = ((&'a str, Phase, Action, Mode), u64);

/// One failure of a rule on one request: rearrange_rule_errors_total and the log line.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleError<'a> {
    pub rule: &'a str,
    pub phase: Phase,
    /// As the 503 body and the log say it.
    pub problem: String,
    /// The Python exception, when a Python rule raised (its traceback is logged).
    pub cause: Option<Cause>,
}

/// The result of a run.
#[derive(Debug)]
pub struct Outcome<'a> {
    pub docs: Vec<Doc>,
    pub audit: Vec<Record<'a>>,
    pub fallback: Option<Fallback<'a>>,
    pub timings: Vec<Timing<'a>>,
    pub skipped: Vec<Skip<'a>>,
    pub actions: Vec<ActionCount<'a>>,
    /// Every failure, open or in shadow.
    pub errors: Vec<RuleError<'a>>,
    /// Every step, when the request asked to explain (`Ctx::explain`); else empty.
    pub trace: Vec<Trace<'a>>,
    /// An interleaved page's team of each document (crate::interleave); else empty.
    pub teams: Vec<crate::interleave::Team>,
}

/// A rule failed under `on_error: closed`: the request gets a 503.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleFailed<'a> {
    pub rule: &'a str,
    pub phase: Phase,
    pub problem: String,
    /// Every failure of the request, this one included.
    pub errors: Vec<RuleError<'a>>,
    /// Set when the rule refused the request's input: a 4xx, not a 503.
    pub refused: Option<Box<crate::contract::FieldError>>,
}

/// The count kept for `key`, its rule's name compared by address first.
fn counted<'s>(
    actions: &'s mut [ActionCount<'_>],
    key: (&str, Phase, Action, Mode),
) -> Option<&'s mut u64> {
    let (rule, phase, action, mode) = key;
    actions
        .iter_mut()
        .find(|((r, p, a, m), _)| *p == phase && *a == action && *m == mode && same_name(r, rule))
        .map(|(_, n)| n)
}

fn count<'a>(actions: &mut Vec<ActionCount<'a>>, key: (&'a str, Phase, Action, Mode), n: u64) {
    match counted(actions, key) {
        Some(c) => *c += n,
        None => actions.push((key, n)),
    }
}

/// Count a rule call's records once per run of one action (a rule gives most of its
/// records one action), not once per record.
fn count_runs<'a>(actions: &mut Vec<ActionCount<'a>>, key: (&'a str, Phase, Mode), recs: &[Rec]) {
    let (rule, phase, mode) = key;
    let mut rest = recs;
    while let Some(first) = rest.first() {
        let action = first.action;
        let n = rest.iter().take_while(|r| r.action == action).count();
        count(actions, (rule, phase, action, mode), n as u64);
        rest = &rest[n..];
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    format!("panicked: {text}")
}

/// Why a step ran in shadow: the experiment that gates it and this request's variant.
fn shadow_why(step: &Step, ctx: &Ctx) -> String {
    let exp = step.experiment.as_deref().unwrap_or("");
    match ctx.variants.iter().rev().find(|(e, _)| e == exp) {
        Some((_, v)) => format!("experiment {exp}: variant {v} runs it in shadow"),
        None => format!("experiment {exp}: this request is not in it"),
    }
}

/// Stable sort by score, best first, with a `move` record for every document that moved.
pub fn sort_by_score<'a>(ctx: &Ctx<'a>, docs: Vec<Doc>) -> (Vec<Doc>, Vec<Rec<'a>>) {
    let mut order: Vec<usize> = (0..docs.len()).collect();
    order.sort_by(|&a, &b| {
        docs[b]
            .score
            .partial_cmp(&docs[a].score)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    if order.iter().enumerate().all(|(i, &j)| i == j) {
        return (docs, Vec::new());
    }
    let mut recs = Vec::with_capacity(docs.len());
    for (after, &before) in order.iter().enumerate() {
        let delta = after as i64 - before as i64;
        if delta != 0 {
            let doc = &docs[before];
            let original = ctx.page.src(doc).score;
            let reason = if doc.score == original {
                Reason::from(DISPLACED)
            } else {
                // Sized for both scores (push_g wants 16 bytes of room each): one allocation.
                let mut r = String::with_capacity(96);
                r.push_str("stable sort by score after rerank: score ");
                push_g(&mut r, original);
                r.push_str(" -> ");
                push_g(&mut r, doc.score);
                r.into()
            };
            recs.push(Rec {
                delta: Delta::Int(delta),
                ..Rec::on(ctx.page, doc.at, Action::Move, reason)
            });
        }
    }
    // Moved out, not cloned: a placeholder with empty vectors allocates nothing.
    let mut docs = docs;
    let sorted = order
        .into_iter()
        .map(|i| std::mem::replace(&mut docs[i], Doc::placeholder()))
        .collect();
    (sorted, recs)
}

impl Pipeline {
    /// Run every phase in order; relax and rerun once if the fallback asks to.
    pub fn run<'a>(&'a self, docs: &[Doc], ctx: &Ctx<'a>) -> Result<Outcome<'a>, RuleFailed<'a>> {
        let outcome = self.run_once(docs.to_vec(), ctx)?;
        let relax = outcome
            .audit
            .iter()
            .find(|r| r.rec.relax_to.is_some() && r.mode == Mode::Applied)
            .cloned();
        let Some(relax) = relax else {
            return Ok(outcome);
        };
        let milder: AgeMode = relax.rec.relax_to.unwrap_or(ctx.age_mode);
        let again = Ctx {
            age_mode: milder,
            relaxed_from: Some(ctx.age_mode),
            ..*ctx
        };
        let mut rerun = match self.run(docs, &again) {
            Ok(r) => r,
            Err(mut failed) => {
                failed.errors.splice(0..0, outcome.errors);
                return Err(failed);
            }
        };
        let fallback = rerun.fallback.take().unwrap_or_else(|| Fallback {
            rule: relax.rule,
            action: "relax",
            reason: relax.rec.reason.clone(),
        });
        // The first attempt's records describe a page nobody is shown: keep the fallback.
        let mut actions = rerun.actions;
        count(
            &mut actions,
            (relax.rule, relax.phase, relax.rec.action, relax.mode),
            1,
        );
        let mut audit = Vec::with_capacity(rerun.audit.len() + 1);
        audit.push(relax);
        audit.extend(rerun.audit);
        let mut timings = outcome.timings;
        timings.extend(rerun.timings);
        let mut skipped = outcome.skipped;
        skipped.extend(rerun.skipped);
        let mut errors = outcome.errors;
        errors.extend(rerun.errors);
        let mut trace = outcome.trace;
        trace.extend(rerun.trace.into_iter().map(|t| Trace { attempt: 2, ..t }));
        Ok(Outcome {
            docs: rerun.docs,
            audit,
            fallback: Some(fallback),
            timings,
            skipped,
            actions,
            errors,
            trace,
            teams: Vec::new(),
        })
    }

    fn run_once<'a>(
        &'a self,
        mut docs: Vec<Doc>,
        ctx: &Ctx<'a>,
    ) -> Result<Outcome<'a>, RuleFailed<'a>> {
        let mut t = Tally::sized(docs.len(), self.steps.len());
        let mut cut = Cut::default();
        let mut phase_at = 0;
        for phase in Phase::ALL {
            while phase_at < self.steps.len() && self.steps[phase_at].phase == phase {
                let at = phase_at;
                phase_at += 1;
                let Some(before) = self.run_step(&self.steps[at], &mut docs, ctx, &mut t)? else {
                    continue;
                };
                match phase {
                    Phase::Trim => cut.keep(before, &docs, ctx.page.req.documents.len()),
                    Phase::PostFilter if docs.len() < before.len() && !cut.docs.is_empty() => {
                        let removed = before.len() - docs.len();
                        let had = docs.len();
                        backfill::refill(self, at, removed, &mut docs, &mut cut, ctx, &mut t)?;
                        if ctx.explain && docs.len() > had {
                            let records = t.audit.iter().filter(|r| r.rule == BACKFILL_RULE);
                            t.trace.push(Trace {
                                rule: BACKFILL_RULE,
                                phase,
                                attempt: 1,
                                status: APPLIED,
                                mode: Some(Mode::Applied),
                                why: None,
                                records: records.count(),
                                page: page_of(&docs),
                            });
                        }
                    }
                    _ => {}
                }
            }
            if phase == Phase::Rerank {
                let (sorted, moves) = sort_by_score(ctx, docs);
                docs = sorted;
                if ctx.explain {
                    t.trace.push(Trace {
                        rule: SORT_RULE,
                        phase,
                        attempt: 1,
                        status: if moves.is_empty() { NO_MATCH } else { APPLIED },
                        mode: Some(Mode::Applied),
                        why: moves
                            .is_empty()
                            .then(|| "the order by score is unchanged".into()),
                        records: moves.len(),
                        page: page_of(&docs),
                    });
                }
                if !moves.is_empty() {
                    count(
                        &mut t.actions,
                        (SORT_RULE, Phase::Rerank, Action::Move, Mode::Applied),
                        moves.len() as u64,
                    );
                    t.audit.extend(moves.into_iter().map(|rec| Record {
                        rule: SORT_RULE,
                        phase,
                        mode: Mode::Applied,
                        rec,
                    }));
                }
            }
        }
        let Tally {
            mut audit,
            timings,
            mut actions,
            skipped,
            errors,
            trace,
        } = t;
        let mut fallback = None;
        for r in &audit {
            if r.rec.action == Action::Fallback
                && r.mode == Mode::Applied
                && r.rec.relax_to.is_none()
            {
                fallback = Some(Fallback {
                    rule: r.rule,
                    action: "empty",
                    reason: r.rec.reason.clone(),
                });
            }
        }
        let asks_relax = audit
            .iter()
            .any(|r| r.rec.relax_to.is_some() && r.mode == Mode::Applied);
        if docs.is_empty() && ctx.input_count > 0 && fallback.is_none() && !asks_relax {
            // A profile without empty_result_fallback must still never return a silent empty page.
            let reason = Reason::shared(format!(
                "{}; nothing safe was found",
                emptied(ctx.input_count)
            ));
            audit.push(Record {
                rule: PIPELINE_RULE,
                phase: Phase::PostFilter,
                mode: Mode::Applied,
                rec: Rec::of_page(Action::Fallback, reason.clone()),
            });
            count(
                &mut actions,
                (
                    PIPELINE_RULE,
                    Phase::PostFilter,
                    Action::Fallback,
                    Mode::Applied,
                ),
                1,
            );
            fallback = Some(Fallback {
                rule: PIPELINE_RULE,
                action: "empty",
                reason,
            });
        }
        Ok(Outcome {
            docs,
            audit,
            fallback,
            timings,
            skipped,
            actions,
            errors,
            trace,
            teams: Vec::new(),
        })
    }

    /// Run one step on the page: gating, the deadline, the failure policy, its records and
    /// timing. Returns the page it replaced when an applied result changed `docs`.
    fn run_step<'a>(
        &'a self,
        step: &'a Step,
        docs: &mut Vec<Doc>,
        ctx: &Ctx<'a>,
        t: &mut Tally<'a>,
    ) -> Result<Option<Vec<Doc>>, RuleFailed<'a>> {
        let phase = step.phase;
        if !step.in_window(ctx.now) {
            if ctx.explain {
                let (status, why) = step.idle();
                t.trace
                    .push(Trace::idle(step.rule.name(), phase, status, why));
            }
            return Ok(None);
        }
        let (mode, rule) = step.gated(ctx);
        if !rule.applies(ctx) {
            if ctx.explain {
                let why = rule.idle_because().to_string();
                t.trace
                    .push(Trace::idle(rule.name(), phase, NOT_APPLICABLE, why));
            }
            return Ok(None);
        }
        let name = rule.name();
        let started = quanta::Instant::now();
        if rule.optional() && ctx.deadline_passed() {
            t.skipped.push(Skip {
                rule: name,
                phase,
                reason: SkipReason::Late,
            });
            if ctx.explain {
                t.trace
                    .push(Trace::idle(name, phase, SKIPPED, SKIPPED_LATE.into()));
            }
            return Ok(None);
        }
        let result = catch_unwind(AssertUnwindSafe(|| rule.apply(docs, ctx, phase)))
            .unwrap_or_else(|payload| Err(Failure::Failed(panic_message(payload.as_ref()))));
        // saturating: quanta says a later version may panic on a reading that went back
        let seconds = quanta::Instant::now()
            .saturating_duration_since(started)
            .as_secs_f64();
        let out = match result {
            Ok(out) => out,
            Err(failure) => {
                let (problem, cause) = match failure {
                    Failure::Stopped if rule.optional() => {
                        t.skipped.push(Skip {
                            rule: name,
                            phase,
                            reason: SkipReason::Stopped,
                        });
                        if ctx.explain {
                            let why = STOPPED_LATE.into();
                            t.trace.push(Trace {
                                mode: Some(mode),
                                ..Trace::idle(name, phase, SKIPPED, why)
                            });
                        }
                        t.timings.push(Timing::spent(name, phase, mode, seconds));
                        return Ok(None);
                    }
                    Failure::Stopped => ("stopped by the deadline".to_string(), None),
                    Failure::Failed(problem) => (problem, None),
                    Failure::Raised(problem, cause) => (problem, Some(cause)),
                    Failure::Refused(bad) => {
                        return Err(RuleFailed {
                            rule: name,
                            phase,
                            problem: bad.problem.clone(),
                            errors: std::mem::take(&mut t.errors),
                            refused: Some(Box::new(bad)),
                        });
                    }
                };
                t.errors.push(RuleError {
                    rule: name,
                    phase,
                    problem: problem.clone(),
                    cause,
                });
                if mode == Mode::Applied && step.on_error == OnError::Closed {
                    return Err(RuleFailed {
                        rule: name,
                        phase,
                        problem,
                        errors: std::mem::take(&mut t.errors),
                        refused: None,
                    });
                }
                // Given up: the page goes on as it came, with none of its records;
                // its time still counts in the rule's duration (it was spent).
                t.skipped.push(Skip {
                    rule: name,
                    phase,
                    reason: SkipReason::Failed,
                });
                if ctx.explain {
                    let why = format!("{FAILED}: {problem}");
                    t.trace.push(Trace {
                        mode: Some(mode),
                        ..Trace::idle(name, phase, SKIPPED, why)
                    });
                }
                t.timings.push(Timing::spent(name, phase, mode, seconds));
                return Ok(None);
            }
        };
        let mut timing = Timing::spent(name, phase, mode, seconds);
        if !out.recs.is_empty() {
            let after = out.docs.as_deref().unwrap_or(docs);
            (timing.moves, timing.churn) = if phase == Phase::Rerank {
                rescored(docs, after)
            } else {
                effect(&ats(docs), &ats(after))
            };
            if phase == Phase::Rerank {
                timing.deltas = out
                    .recs
                    .iter()
                    .filter(|r| r.action == Action::Rescore)
                    .filter_map(|r| match r.delta {
                        Delta::Float(x) if x != 0.0 => Some(x),
                        Delta::Int(n) if n != 0 => Some(n as f64),
                        _ => None,
                    })
                    .collect();
            }
        }
        t.timings.push(timing);
        let records = out.recs.len();
        count_runs(&mut t.actions, (name, phase, mode), &out.recs);
        t.audit.extend(out.recs.into_iter().map(|rec| Record {
            rule: name,
            phase,
            mode,
            rec,
        }));
        let replaced = match out.docs {
            Some(new) if mode == Mode::Applied => Some(std::mem::replace(docs, new)),
            _ => None,
        };
        if ctx.explain {
            let (status, why) = match (mode, records) {
                (Mode::Shadow, _) => (SHADOW, Some(shadow_why(step, ctx))),
                (_, 0) => (NO_MATCH, Some("no document matched".to_string())),
                _ => (APPLIED, None),
            };
            t.trace.push(Trace {
                rule: name,
                phase,
                attempt: 1,
                status,
                mode: Some(mode),
                why,
                records,
                page: page_of(docs),
            });
        }
        Ok(replaced)
    }
}

/// What a run gathers beside the page.
struct Tally<'a> {
    audit: Vec<Record<'a>>,
    timings: Vec<Timing<'a>>,
    actions: Vec<ActionCount<'a>>,
    skipped: Vec<Skip<'a>>,
    errors: Vec<RuleError<'a>>,
    /// Explain's steps (only when the request asked).
    trace: Vec<Trace<'a>>,
}

impl Tally<'_> {
    /// Sized for a page most of whose documents get up to four records (the commercial
    /// profile gives about three: a rescore, a sort move, a collapse or trim) and for one
    /// timing per step, so neither is regrown as the rules run: at 500 documents a regrown
    /// audit copied some 150 KB, 3 % of the call's instructions.
    fn sized(docs: usize, steps: usize) -> Self {
        Tally {
            audit: Vec::with_capacity(4 * docs + 8),
            timings: Vec::with_capacity(steps),
            actions: Vec::with_capacity(steps),
            skipped: Vec::new(),
            errors: Vec::new(),
            trace: Vec::new(),
        }
    }
}

#[path = "runner_backfill.rs"]
mod backfill;
use backfill::Cut;

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;
