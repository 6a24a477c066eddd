//! Backfill: when a post-filter removes documents from a trimmed page, the runner refills
//! it from the documents the trim cut, in their order and within the trim rules.
//!
//! A candidate is put back only if every applied post-filter step that has run so far
//! keeps it, and if the applied trim steps, run again on the page plus the candidates in
//! their order before the trim, keep it (so `depth` still caps the page and a host past
//! its `host_quota` stays out). A refilled document replaces its trim records with a
//! `backfill` record and then goes through the annotate steps like any other.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::{counted, panic_message, Pipeline, RuleError, RuleFailed, Step, Tally, BACKFILL_RULE};
use crate::doc::Doc;
use crate::record::{Action, Mode, Phase, Reason, Rec, Record};
use crate::rules::{Ctx, Failure};

/// What the trim cut, kept for a refill.
#[derive(Default)]
pub struct Cut {
    /// The documents the trim cut and no refill has put back or ruled out, in order.
    pub docs: Vec<Doc>,
    /// Each request document's place in the page that entered the trim (u32::MAX: not there).
    rank: Vec<u32>,
}

impl Cut {
    /// Keep what an applied trim step cut: in `before`, not in `after`.
    pub fn keep(&mut self, before: Vec<Doc>, after: &[Doc], requested: usize) {
        if self.rank.is_empty() {
            self.rank = vec![u32::MAX; requested];
            for (i, d) in before.iter().enumerate() {
                self.rank[d.at as usize] = i as u32;
            }
        }
        let mut stays = vec![false; requested];
        for d in after {
            stays[d.at as usize] = true;
        }
        self.docs
            .extend(before.into_iter().filter(|d| !stays[d.at as usize]));
        let rank = &self.rank;
        self.docs.sort_by_key(|d| rank[d.at as usize]);
    }

    fn rank(&self, doc: &Doc) -> u32 {
        self.rank[doc.at as usize]
    }
}

/// How a failure while checking candidates is told: the rule's own problem (as the log
/// and the error metric know it), then why nothing was refilled.
const CHECKING: &str = " (while checking documents to backfill: none refilled)";

/// A step run only for its selection: applied steps only, records dropped. None when it
/// does not run on this request (outside its window, in shadow, nothing to do).
fn select<'a>(
    step: &'a Step,
    docs: &[Doc],
    ctx: &Ctx<'a>,
) -> Option<Result<Vec<Doc>, RuleError<'a>>> {
    if !step.in_window(ctx.now) {
        return None;
    }
    let (mode, rule) = step.gated(ctx);
    if mode != Mode::Applied || !rule.applies(ctx) {
        return None;
    }
    let result = catch_unwind(AssertUnwindSafe(|| rule.apply(docs, ctx, step.phase)))
        .unwrap_or_else(|payload| Err(Failure::Failed(panic_message(payload.as_ref()))));
    let (problem, cause) = match result {
        Ok(out) => return Some(Ok(out.docs.unwrap_or_else(|| docs.to_vec()))),
        Err(Failure::Failed(problem)) => (problem, None),
        Err(Failure::Raised(problem, cause)) => (problem, Some(cause)),
        Err(Failure::Stopped) => ("stopped by the deadline".to_string(), None),
        Err(Failure::Refused(bad)) => (bad.problem, None),
    };
    Some(Err(RuleError {
        rule: rule.name(),
        phase: step.phase,
        problem: problem + CHECKING,
        cause,
    }))
}

/// The candidates every step of `steps` keeps, or the first failure.
fn kept_by<'a>(
    steps: impl Iterator<Item = &'a Step>,
    mut docs: Vec<Doc>,
    ctx: &Ctx<'a>,
) -> Result<Vec<Doc>, RuleError<'a>> {
    for step in steps {
        match select(step, &docs, ctx) {
            None => {}
            Some(Ok(out)) => docs = out,
            Some(Err(failed)) => return Err(failed),
        }
    }
    Ok(docs)
}

/// Refill the page after `pipeline.steps[upto]`, a post-filter step, removed `removed`
/// documents from it. A failure while checking candidates refills nothing (it is counted
/// with the rule's errors); the annotate steps run on the refilled documents under their
/// own failure policy.
pub fn refill<'a>(
    pipeline: &'a Pipeline,
    upto: usize,
    removed: usize,
    docs: &mut Vec<Doc>,
    cut: &mut Cut,
    ctx: &Ctx<'a>,
    t: &mut Tally<'a>,
) -> Result<(), RuleFailed<'a>> {
    let steps = &pipeline.steps;
    let of = |phase: Phase| steps.iter().filter(move |s| s.phase == phase);
    let checks = steps[..=upto]
        .iter()
        .filter(|s| s.phase == Phase::PostFilter);
    let safe = match kept_by(checks, cut.docs.clone(), ctx) {
        Ok(safe) => safe,
        Err(e) => {
            t.errors.push(e);
            return Ok(());
        }
    };
    let requested = cut.rank.len();
    let mut is_safe = vec![false; requested];
    for d in &safe {
        is_safe[d.at as usize] = true;
    }
    // A candidate a post-filter refuses is refused by every later refill too.
    cut.docs.retain(|d| is_safe[d.at as usize]);
    if cut.docs.is_empty() {
        return Ok(());
    }
    let mut pool: Vec<Doc> = docs.iter().chain(&cut.docs).cloned().collect();
    pool.sort_by_key(|d| cut.rank(d));
    let kept = match kept_by(of(Phase::Trim), pool, ctx) {
        Ok(kept) => kept,
        Err(e) => {
            t.errors.push(e);
            return Ok(());
        }
    };
    let mut back = vec![false; requested];
    for d in &kept {
        back[d.at as usize] = true;
    }
    let mut refilled: Vec<Doc> = Vec::new();
    cut.docs.retain(|d| {
        if back[d.at as usize] {
            refilled.push(d.clone());
        }
        !back[d.at as usize]
    });
    if refilled.is_empty() {
        return Ok(());
    }
    record(pipeline, upto, removed, &refilled, ctx, t, &mut back);
    // Explain has traced the annotate steps already; the refilled few are not a step.
    let quiet = Ctx {
        explain: false,
        ..*ctx
    };
    for step in of(Phase::Annotate) {
        pipeline.run_step(step, &mut refilled, &quiet, t)?;
    }
    for doc in refilled {
        let rank = cut.rank(&doc);
        let at = docs
            .iter()
            .position(|d| cut.rank(d) > rank)
            .unwrap_or(docs.len());
        docs.insert(at, doc);
    }
    Ok(())
}

/// Replace the trim records of the refilled documents (and of those folded under them,
/// which come back with them) by one `backfill` record each. `back` marks the refilled.
fn record<'a>(
    pipeline: &'a Pipeline,
    upto: usize,
    removed: usize,
    refilled: &[Doc],
    ctx: &Ctx<'a>,
    t: &mut Tally<'a>,
    back: &mut [bool],
) {
    for d in refilled {
        for c in &d.collapsed {
            back[c.at as usize] = true;
        }
    }
    let mut undone: Vec<(&'a str, Action)> = Vec::new();
    t.audit.retain(|r| {
        let trim = r.phase == Phase::Trim
            && r.mode == Mode::Applied
            && matches!(r.rec.action, Action::Trim | Action::Remove)
            && r.rec.at.is_some_and(|at| back[at as usize]);
        if trim {
            undone.push((r.rule, r.rec.action));
        }
        !trim
    });
    for (rule, action) in undone {
        if let Some(n) = counted(&mut t.actions, (rule, Phase::Trim, action, Mode::Applied)) {
            *n -= 1;
        }
    }
    t.actions.retain(|(_, n)| *n > 0);
    let by = pipeline.steps[upto].gated(ctx).1.name();
    let reason = Reason::shared(format!(
        "refilled after {by} removed {removed} from the page"
    ));
    let page = ctx.page;
    let mut recs = Vec::new();
    for d in refilled {
        recs.push(Rec::on(page, d.at, Action::Backfill, reason.clone()));
        let why = Reason::shared(format!(
            "collapsed under {}, refilled with it: {reason}",
            page.id(d)
        ));
        for c in &d.collapsed {
            recs.push(Rec::on(page, c.at, Action::Backfill, why.clone()));
        }
    }
    super::count(
        &mut t.actions,
        (
            BACKFILL_RULE,
            Phase::PostFilter,
            Action::Backfill,
            Mode::Applied,
        ),
        recs.len() as u64,
    );
    t.audit.extend(recs.into_iter().map(|rec| Record {
        rule: BACKFILL_RULE,
        phase: Phase::PostFilter,
        mode: Mode::Applied,
        rec,
    }));
}
