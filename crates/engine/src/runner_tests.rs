use std::time::Duration;

use serde_json::json;

use super::*;
use crate::clock::{Clock, FakeClock};
use crate::doc::testing::{docs, request, SimpleCanon};
use crate::doc::Page;
use crate::rules::testing::{ctx, Behaviour, TestRule};

fn step(name: &str, params: serde_json::Value, phase: Phase) -> Step {
    Step {
        rule: Rule::build(name, &params).unwrap(),
        phase,
        on_error: OnError::Open,
        enabled: true,
        valid_from: None,
        valid_until: None,
        window: None,
        experiment: None,
        variants: vec![],
    }
}

fn test_step(behaviour: Behaviour, optional: bool, on_error: OnError, phase: Phase) -> Step {
    Step {
        rule: Rule::Test(TestRule {
            name: "test_rule",
            optional,
            behaviour,
        }),
        on_error,
        ..step("ad_label", json!({}), phase)
    }
}

fn pipeline(steps: Vec<Step>) -> Pipeline {
    Pipeline {
        profile: "default".into(),
        steps,
        python: false,
    }
}

#[test]
fn sort_after_rerank_records_each_move() {
    let mut d = docs(3); // scores 3, 2, 1
    d[0].spam_score = 0.9; // 3 - 5 = -2
    let req = request(d);
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let p = pipeline(vec![step("spam_demotion", json!({}), Phase::Rerank)]);
    let out = p.run(&docs, &ctx(&page)).unwrap();
    assert_eq!(
        out.docs.iter().map(|d| d.at).collect::<Vec<_>>(),
        vec![1, 2, 0]
    );
    let moves: Vec<_> = out
        .audit
        .iter()
        .filter(|r| r.rule == SORT_RULE)
        .map(|r| (r.rec.doc_id.unwrap(), r.rec.delta, r.rec.reason.as_str()))
        .collect();
    assert_eq!(
        moves,
        vec![
            ("d2", Delta::Int(-1), DISPLACED),
            ("d3", Delta::Int(-1), DISPLACED),
            (
                "d1",
                Delta::Int(2),
                "stable sort by score after rerank: score 3 -> -2"
            ),
        ]
    );
    assert_eq!(out.timings[0].deltas, vec![-5.0]);
    assert_eq!(out.timings[0].moves, vec![-1, -1, 2]);
}

#[test]
fn gated_steps_shadow_outside_treatment_and_take_variant_params() {
    let req = request(docs(12));
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let mut s = step("depth", json!({"k": 10}), Phase::Trim);
    s.experiment = Some("exp".into());
    s.variants = vec![(
        "wide".into(),
        Rule::build("depth", &json!({"k": 11})).unwrap(),
    )];
    let p = pipeline(vec![s]);
    let mut c = ctx(&page);
    let out = p.run(&docs, &c).unwrap();
    assert_eq!(out.docs.len(), 12);
    assert!(out.audit.iter().all(|r| r.mode == Mode::Shadow));
    let control = vec![("exp".to_string(), "control".to_string())];
    c.variants = &control;
    assert_eq!(p.run(&docs, &c).unwrap().docs.len(), 12);
    let treatment = vec![("exp".to_string(), "treatment".to_string())];
    c.variants = &treatment;
    assert_eq!(p.run(&docs, &c).unwrap().docs.len(), 10);
    let wide = vec![("exp".to_string(), "wide".to_string())];
    c.variants = &wide;
    let out = p.run(&docs, &c).unwrap();
    assert_eq!(out.docs.len(), 11);
    assert_eq!(
        out.actions,
        vec![(("depth", Phase::Trim, Action::Trim, Mode::Applied), 1)]
    );
}

#[test]
fn failures_open_closed_shadow_and_panics() {
    let req = request(docs(3));
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let c = ctx(&page);
    for behaviour in [Behaviour::Fail, Behaviour::Panic] {
        let open = pipeline(vec![test_step(
            behaviour,
            false,
            OnError::Open,
            Phase::Trim,
        )]);
        let out = open.run(&docs, &c).unwrap();
        assert_eq!(out.docs.len(), 3);
        assert_eq!(
            out.skipped,
            vec![Skip {
                rule: "test_rule",
                phase: Phase::Trim,
                reason: SkipReason::Failed,
            }]
        );
        let errors: Vec<_> = out.errors.iter().map(|e| (e.rule, e.phase)).collect();
        assert_eq!(errors, vec![("test_rule", Phase::Trim)]);
        assert!(
            !out.errors[0].problem.is_empty(),
            "the problem is kept for the log"
        );
        let closed = pipeline(vec![test_step(
            behaviour,
            false,
            OnError::Closed,
            Phase::PreFilter,
        )]);
        let failed = closed.run(&docs, &c).unwrap_err();
        assert_eq!(failed.rule, "test_rule");
        assert_eq!(failed.phase, Phase::PreFilter);
        let expected = if matches!(behaviour, Behaviour::Fail) {
            "it broke"
        } else {
            "panicked: test rule panicked"
        };
        assert_eq!(failed.problem, expected);
        let mut shadow = test_step(behaviour, false, OnError::Closed, Phase::PreFilter);
        shadow.experiment = Some("exp".into());
        let shadowed = pipeline(vec![shadow]);
        let out = shadowed.run(&docs, &c).unwrap();
        assert_eq!(out.docs.len(), 3);
        assert_eq!(out.errors.len(), 1);
    }
}

#[test]
fn optional_rules_and_the_deadline() {
    let req = request(docs(3));
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let clock = FakeClock::new();
    let mut c = ctx(&page);
    c.clock = &clock;
    let p = pipeline(vec![test_step(
        Behaviour::CheckDeadline,
        true,
        OnError::Open,
        Phase::Diversify,
    )]);
    assert_eq!(p.run(&docs, &c).unwrap().docs.len(), 2);
    // Up to the deadline the rule runs; past it, it is not started.
    c.deadline = Some(clock.now() + Duration::from_millis(1));
    clock.advance(Duration::from_millis(1));
    assert_eq!(p.run(&docs, &c).unwrap().docs.len(), 2);
    clock.advance(Duration::from_nanos(1));
    let out = p.run(&docs, &c).unwrap();
    assert_eq!(out.docs.len(), 3);
    assert_eq!(out.skipped[0].reason, SkipReason::Late);
    assert_eq!(out.skipped[0].reason.as_str(), "deadline");
    assert!(out.timings.is_empty());
    // A deadline that passes while the rule runs (between the runner's reading and the
    // rule's): stopped, page unchanged, its time counted.
    let ticking = FakeClock::ticking(Duration::from_millis(2));
    let late = Ctx {
        deadline: Some(ticking.now() + Duration::from_millis(3)),
        clock: &ticking,
        ..c
    };
    let out = p.run(&docs, &late).unwrap();
    assert_eq!(out.docs.len(), 3);
    // the CONTRACT's reason either way (`deadline`); the metrics tell the two apart
    assert_eq!(out.skipped[0].reason, SkipReason::Stopped);
    assert_eq!(out.skipped[0].reason.as_str(), "deadline");
    assert_eq!(out.timings.len(), 1);
}

#[test]
fn disabled_and_out_of_window_steps_never_run() {
    let req = request(docs(12));
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let c = ctx(&page); // now = 1000
    let mut off = step("depth", json!({}), Phase::Trim);
    off.enabled = false;
    let p = pipeline(vec![off]);
    assert_eq!(p.run(&docs, &c).unwrap().docs.len(), 12);
    let mut later = step("depth", json!({}), Phase::Trim);
    later.valid_from = Some(1000.5);
    let p = pipeline(vec![later]);
    assert_eq!(p.run(&docs, &c).unwrap().docs.len(), 12);
    let mut over = step("depth", json!({}), Phase::Trim);
    over.valid_until = Some(1000.0);
    let p = pipeline(vec![over]);
    assert_eq!(p.run(&docs, &c).unwrap().docs.len(), 12);
    let mut inside = step("depth", json!({}), Phase::Trim);
    inside.valid_from = Some(999.0);
    inside.valid_until = Some(1001.0);
    let p = pipeline(vec![inside]);
    assert_eq!(p.run(&docs, &c).unwrap().docs.len(), 10);
}

#[test]
fn relax_reruns_once_and_keeps_only_the_fallback_record() {
    let mut d = docs(2);
    d[0].adult_score = 0.6;
    d[1].adult_score = 0.7;
    let req = request(d);
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let mut c = ctx(&page);
    c.age_mode = AgeMode::Strict;
    let p = pipeline(vec![
        Step {
            on_error: OnError::Closed,
            ..step("safe_search", json!({}), Phase::PreFilter)
        },
        step("empty_result_fallback", json!({}), Phase::PostFilter),
    ]);
    let out = p.run(&docs, &c).unwrap();
    assert_eq!(out.docs.len(), 2);
    assert_eq!(out.audit.len(), 1);
    assert_eq!(out.audit[0].rec.relax_to, Some(AgeMode::Moderate));
    let fb = out.fallback.unwrap();
    assert_eq!((fb.rule, fb.action), ("empty_result_fallback", "relax"));
    assert_eq!(
        fb.reason,
        "filters removed all 2 documents under age_mode strict; reran with age_mode moderate"
    );
}

#[test]
fn an_emptied_page_without_a_fallback_rule_says_so() {
    let mut d = docs(2);
    d[0].spam_score = 1.0;
    d[1].spam_score = 1.0;
    let req = request(d);
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let p = pipeline(vec![step("spam_ban", json!({}), Phase::PreFilter)]);
    let out = p.run(&docs, &ctx(&page)).unwrap();
    let fb = out.fallback.unwrap();
    assert_eq!((fb.rule, fb.action), (PIPELINE_RULE, "empty"));
    assert_eq!(
        fb.reason,
        "filters removed all 2 documents; nothing safe was found"
    );
    assert_eq!(out.audit.last().unwrap().rule, PIPELINE_RULE);
}

#[test]
fn a_post_filter_removal_takes_the_collapsed_with_it() {
    let mut d = docs(3);
    d[0].url = "http://x.example/1".into();
    d[1].url = "http://x.example/2".into();
    d[0].adult_score = 0.9;
    let req = request(d);
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let p = pipeline(vec![
        step(
            "host_crowding",
            json!({"max_per_host": 1}),
            Phase::Diversify,
        ),
        step("safe_search", json!({}), Phase::PostFilter),
    ]);
    let out = p.run(&docs, &ctx(&page)).unwrap();
    assert_eq!(out.docs.len(), 1);
    let removed: Vec<_> = out
        .audit
        .iter()
        .filter(|r| r.rec.action == Action::Remove)
        .map(|r| (r.rec.doc_id.unwrap(), r.rec.reason.as_str()))
        .collect();
    assert_eq!(
        removed,
        vec![
            ("d1", "adult_score 0.9 >= 0.8 (age_mode moderate)"),
            (
                "d2",
                "collapsed under d1, removed with it: adult_score 0.9 >= 0.8 (age_mode moderate)"
            ),
        ]
    );
}

#[test]
fn explain_traces_every_step_with_why_and_the_page_after_it() {
    let mut d = docs(12); // scores 12 .. 1
    d[0].spam_score = 0.9; // 12 - 5 = 7: sorted below d2 .. d5
    let req = request(d);
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let mut c = ctx(&page); // now = 1000, no region, age_mode moderate
    c.explain = true;
    let mut off = step("ad_label", json!({}), Phase::Annotate);
    off.enabled = false;
    let mut later = step("depth", json!({"k": 5}), Phase::Trim);
    later.valid_from = Some(2000.0);
    later.window = Some("valid from 1970-01-01T00:33:20Z".into());
    let mut gated = step("depth", json!({"k": 3}), Phase::Trim);
    gated.experiment = Some("exp".into());
    let p = pipeline(vec![
        step("regional_removals", json!({}), Phase::PreFilter),
        step("spam_demotion", json!({}), Phase::Rerank),
        step("host_crowding", json!({}), Phase::Diversify),
        later,
        gated,
        step("depth", json!({}), Phase::Trim),
        off,
        test_step(Behaviour::Fail, false, OnError::Open, Phase::PostFilter),
    ]);
    let out = p.run(&docs, &c).unwrap();
    let seen: Vec<_> = out
        .trace
        .iter()
        .map(|t| (t.rule, t.status, t.mode, t.why.as_deref(), t.records))
        .collect();
    let shadow = "experiment exp: this request is not in it";
    assert_eq!(
        seen,
        vec![
            (
                "regional_removals",
                NOT_APPLICABLE,
                None,
                Some("the query has no region"),
                0
            ),
            ("spam_demotion", APPLIED, Some(Mode::Applied), None, 1),
            ("sort", APPLIED, Some(Mode::Applied), None, 5),
            (
                "host_crowding",
                NO_MATCH,
                Some(Mode::Applied),
                Some("no document matched"),
                0
            ),
            (
                "depth",
                OUTSIDE_WINDOW,
                None,
                Some("valid from 1970-01-01T00:33:20Z"),
                0
            ),
            ("depth", SHADOW, Some(Mode::Shadow), Some(shadow), 9),
            ("depth", APPLIED, Some(Mode::Applied), None, 2),
            ("ad_label", DISABLED, None, Some("enabled: false"), 0),
            (
                "test_rule",
                SKIPPED,
                Some(Mode::Applied),
                Some("error: it broke"),
                0
            ),
        ]
    );
    let ats = |i: usize| out.trace[i].page.clone();
    assert_eq!(ats(0), None, "a step that did not run has no page");
    assert_eq!(ats(1), Some((0..12).collect()), "rescored, not yet sorted");
    let sorted = vec![1, 2, 3, 4, 0, 5, 6, 7, 8, 9, 10, 11];
    assert_eq!(ats(2), Some(sorted.clone()));
    assert_eq!(
        ats(5),
        Some(sorted.clone()),
        "a shadow step leaves the page"
    );
    assert_eq!(ats(6), Some(sorted[..10].to_vec()));
    assert!(out.trace.iter().all(|t| t.attempt == 1));
    // Without explain the runner traces nothing.
    c.explain = false;
    assert!(p.run(&docs, &c).unwrap().trace.is_empty());
}

#[test]
fn explain_marks_the_relaxed_rerun_as_attempt_two() {
    let mut d = docs(2);
    d[0].adult_score = 0.6;
    d[1].adult_score = 0.7;
    let req = request(d);
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let mut c = ctx(&page);
    c.age_mode = AgeMode::Strict;
    c.explain = true;
    let p = pipeline(vec![
        step("safe_search", json!({}), Phase::PreFilter),
        step("empty_result_fallback", json!({}), Phase::PostFilter),
    ]);
    let out = p.run(&docs, &c).unwrap();
    let seen: Vec<_> = out
        .trace
        .iter()
        .map(|t| (t.rule, t.attempt, t.status, t.page.as_ref().map(Vec::len)))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("safe_search", 1, APPLIED, Some(0)),
            ("sort", 1, NO_MATCH, Some(0)),
            ("empty_result_fallback", 1, APPLIED, Some(0)),
            ("safe_search", 2, NO_MATCH, Some(2)),
            ("sort", 2, NO_MATCH, Some(2)),
            ("empty_result_fallback", 2, NO_MATCH, Some(2)),
        ]
    );
}

fn ids<'a>(page: &Page<'a>, docs: &[Doc]) -> Vec<&'a str> {
    docs.iter().map(|d| page.id(d)).collect()
}

fn of<'a, 'b>(out: &'b Outcome<'a>, action: Action) -> Vec<(&'a str, &'b str)> {
    out.audit
        .iter()
        .filter(|r| r.rec.action == action)
        .map(|r| (r.rec.doc_id.unwrap(), r.rec.reason.as_str()))
        .collect()
}

#[test]
fn a_post_filter_removal_is_refilled_from_what_depth_cut() {
    let mut d = docs(5);
    d[1].adult_score = 0.9;
    d[3].is_ad = true;
    let req = request(d);
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let p = pipeline(vec![
        step("depth", json!({"k": 3}), Phase::Trim),
        step("ad_label", json!({}), Phase::Annotate),
        step("safe_search", json!({}), Phase::PostFilter),
        step("empty_result_fallback", json!({}), Phase::PostFilter),
    ]);
    let out = p.run(&docs, &ctx(&page)).unwrap();
    assert_eq!(ids(&page, &out.docs), vec!["d1", "d3", "d4"]);
    assert_eq!(out.docs[2].annotations, vec!["ad"]);
    assert_eq!(of(&out, Action::Trim), vec![("d5", "below depth 3")]);
    assert_eq!(
        of(&out, Action::Backfill),
        vec![("d4", "refilled after safe_search removed 1 from the page")]
    );
    let tail: Vec<_> = out.audit.iter().map(|r| (r.rule, r.rec.action)).collect();
    assert_eq!(
        tail[tail.len() - 2..],
        [
            (BACKFILL_RULE, Action::Backfill),
            ("ad_label", Action::Annotate)
        ]
    );
    let count = |rule: &str, action| {
        out.actions
            .iter()
            .find(|((r, _, a, _), _)| *r == rule && *a == action)
            .map_or(0, |(_, n)| *n)
    };
    assert_eq!(
        (
            count("depth", Action::Trim),
            count(BACKFILL_RULE, Action::Backfill)
        ),
        (1, 1)
    );
    assert!(out.fallback.is_none());
}

#[test]
fn a_refill_keeps_the_host_quota_and_skips_what_the_post_filter_refuses() {
    let mut d = docs(5);
    for (i, host) in ["x", "x", "y", "z", "w"].iter().enumerate() {
        d[i].url = format!("http://{host}.example/{i}").into();
    }
    d[2].adult_score = 0.9; // y: on the page, then removed
    d[3].adult_score = 0.95; // z: cut by depth, refused by safe_search
    let req = request(d);
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let p = pipeline(vec![
        step("host_quota", json!({}), Phase::Trim),
        step("depth", json!({"k": 2}), Phase::Trim),
        step("safe_search", json!({}), Phase::PostFilter),
    ]);
    let out = p.run(&docs, &ctx(&page)).unwrap();
    // d2 stays out (x already has d1), d4 is adult: d5 comes back below d1.
    assert_eq!(ids(&page, &out.docs), vec!["d1", "d5"]);
    let backfilled: Vec<_> = of(&out, Action::Backfill)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(backfilled, vec!["d5"]);
    let trimmed: Vec<_> = of(&out, Action::Trim)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(trimmed, vec!["d2", "d4"]);
}

#[test]
fn the_fallback_only_when_the_refill_leaves_nothing() {
    let mut d = docs(3);
    d[0].adult_score = 0.9;
    let req = request(d.clone());
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let p = pipeline(vec![
        step("depth", json!({"k": 1}), Phase::Trim),
        step("safe_search", json!({}), Phase::PostFilter),
        step(
            "empty_result_fallback",
            json!({"strategy": "message"}),
            Phase::PostFilter,
        ),
    ]);
    let out = p.run(&docs, &ctx(&page)).unwrap();
    assert_eq!(ids(&page, &out.docs), vec!["d2"]);
    assert!(out.fallback.is_none());

    for doc in &mut d {
        doc.adult_score = 0.9;
    }
    let req = request(d);
    let (page, docs) = Page::build(&req, &SimpleCanon, false);
    let out = p.run(&docs, &ctx(&page)).unwrap();
    assert!(out.docs.is_empty());
    assert!(of(&out, Action::Backfill).is_empty());
    assert_eq!(out.fallback.unwrap().rule, "empty_result_fallback");
}
