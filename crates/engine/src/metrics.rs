//! The per-request series, kept in the engine (one lock per request) and read at scrape
//! time by app/metrics.py's EngineCollector: the same names, labels and buckets the
//! Python service exported.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::effects::TOP;
use crate::record::Phase;
use crate::runner::{Outcome, RuleError};

/// rearrange_request_duration_seconds.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0,
];
/// rearrange_rule_duration_seconds.
pub const RULE_BUCKETS: &[f64] = &[0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05];
/// rearrange_rule_position_change (magnitudes; the sign is the `direction` label).
pub const POSITION_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0];
/// rearrange_rule_score_change.
pub const SCORE_BUCKETS: &[f64] = &[0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 50.0];
/// rearrange_rule_top10_churn: a call's churn n is counted at index n.
pub const CHURN_BUCKETS: &[f64] = &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];

/// One histogram series: a count per bound, +Inf, and the sum.
#[derive(Clone, Debug)]
struct Hist {
    counts: Vec<u64>,
    sum: f64,
}

impl Hist {
    fn new(bounds: &[f64]) -> Self {
        Hist {
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
        }
    }

    fn observe(&mut self, bounds: &[f64], v: f64) {
        // The first bound >= v: Prometheus's `le`.
        self.counts[bounds.partition_point(|b| *b < v)] += 1;
        self.sum += v;
    }
}

/// Label values joined by this separator make one series key (split at scrape time).
const SEP: char = '\u{1f}';

/// Series keys are hashed on every request: foldhash (SipHash was ~3% of one), in
/// hashbrown's map, whose `entry_ref` finds or inserts a series by a borrowed key in one
/// probe.
type HashMap<K, V> = hashbrown::HashMap<K, V, foldhash::fast::FixedState>;

/// Counters and histograms keyed by their joined label values.
#[derive(Default)]
struct State {
    counters: HashMap<&'static str, HashMap<String, f64>>,
    hists: HashMap<&'static str, HashMap<String, Hist>>,
    /// The key being looked up: reused, so a known series costs no allocation.
    key: String,
}

fn bounds_of(family: &str) -> &'static [f64] {
    match family {
        "rearrange_request_duration_seconds" => LATENCY_BUCKETS,
        "rearrange_rule_duration_seconds" => RULE_BUCKETS,
        "rearrange_rule_position_change" => POSITION_BUCKETS,
        "rearrange_rule_score_change" => SCORE_BUCKETS,
        _ => CHURN_BUCKETS,
    }
}

fn join(buf: &mut String, values: &[&str]) {
    buf.clear();
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            buf.push(SEP);
        }
        buf.push_str(v);
    }
}

impl State {
    fn inc(&mut self, family: &'static str, key: &[&str], n: f64) {
        join(&mut self.key, key);
        let series = self.counters.entry(family).or_default();
        *series.entry_ref(self.key.as_str()).or_insert(0.0) += n;
    }

    fn observe(&mut self, family: &'static str, key: &[&str], v: f64) {
        let (hist, bounds) = self.hist(family, key);
        hist.observe(bounds, v);
    }

    /// Observe each of `values` in one series: its key is joined and looked up once.
    fn observe_all(
        &mut self,
        family: &'static str,
        key: &[&str],
        values: impl Iterator<Item = f64>,
    ) {
        let mut values = values.peekable();
        if values.peek().is_none() {
            return;
        }
        let (hist, bounds) = self.hist(family, key);
        for v in values {
            hist.observe(bounds, v);
        }
    }

    /// The series of `key` in a histogram family (created empty) and the family's bounds.
    fn hist(&mut self, family: &'static str, key: &[&str]) -> (&mut Hist, &'static [f64]) {
        join(&mut self.key, key);
        let bounds = bounds_of(family);
        let series = self.hists.entry(family).or_default();
        let hist = series
            .entry_ref(self.key.as_str())
            .or_insert_with(|| Hist::new(bounds));
        (hist, bounds)
    }
}

/// The engine's metrics; outlives config reloads (each Engine is handed the same one).
#[pyclass(frozen, module = "app._engine")]
pub struct EngineMetrics {
    state: Mutex<State>,
}

impl EngineMetrics {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut guard = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }

    /// Record one served request: per-rule actions, times and deltas, the fallback, the
    /// skipped rules, rule errors, assignments and latency, under one lock.
    pub fn served(
        &self,
        profile: &str,
        outcome: &Outcome,
        counted: &[(String, String)],
        seconds: f64,
    ) {
        self.with(|s| {
            for ((rule, phase, action, mode), n) in &outcome.actions {
                s.inc(
                    "rearrange_rule_actions",
                    &[
                        rule,
                        phase.as_str(),
                        action.as_str(),
                        mode.as_str(),
                        profile,
                    ],
                    *n as f64,
                );
            }
            for t in &outcome.timings {
                let mode = t.mode.as_str();
                s.observe(
                    "rearrange_rule_duration_seconds",
                    &[t.rule, t.phase.as_str(), mode],
                    t.seconds,
                );
                s.observe(
                    "rearrange_rule_top10_churn",
                    &[t.rule, mode],
                    t.churn.min(TOP + 1) as f64,
                );
                // One lookup per direction, not per move: a rerank moves most of the page.
                for (dir, down) in [("down", true), ("up", false)] {
                    s.observe_all(
                        "rearrange_rule_position_change",
                        &[t.rule, mode, dir],
                        t.moves
                            .iter()
                            .filter(|m| (**m > 0) == down)
                            .map(|m| m.unsigned_abs() as f64),
                    );
                }
                if t.phase == Phase::Rerank {
                    for (dir, up) in [("up", true), ("down", false)] {
                        s.observe_all(
                            "rearrange_rule_score_change",
                            &[t.rule, mode, dir],
                            t.deltas
                                .iter()
                                .filter(|d| (**d > 0.0) == up)
                                .map(|d| d.abs()),
                        );
                    }
                }
            }
            if let Some(f) = &outcome.fallback {
                s.inc("rearrange_fallbacks_total", &[f.rule, f.action], 1.0);
            }
            for k in &outcome.skipped {
                s.inc(
                    "rearrange_rule_skipped_total",
                    &[k.rule, k.phase.as_str(), k.reason],
                    1.0,
                );
            }
            for e in &outcome.errors {
                s.inc(
                    "rearrange_rule_errors_total",
                    &[e.rule, e.phase.as_str()],
                    1.0,
                );
            }
            for (e, v) in counted {
                s.inc("rearrange_experiment_assignments_total", &[e, v], 1.0);
            }
            s.inc("rearrange_requests_total", &[profile, "ok"], 1.0);
            s.observe("rearrange_request_duration_seconds", &[profile], seconds);
        });
    }

    /// Record a request refused by a rule under `on_error: closed`.
    pub fn refused_by_rule(&self, profile: &str, errors: &[RuleError]) {
        self.with(|s| {
            for e in errors {
                s.inc(
                    "rearrange_rule_errors_total",
                    &[e.rule, e.phase.as_str()],
                    1.0,
                );
            }
            s.inc("rearrange_requests_total", &[profile, "rule_failed"], 1.0);
        });
    }

    /// Count one request by profile and outcome (`invalid`, `timeout`, ...).
    pub fn request(&self, profile: &str, outcome: &str) {
        self.with(|s| s.inc("rearrange_requests_total", &[profile, outcome], 1.0));
    }
}

#[pymethods]
impl EngineMetrics {
    /// Empty metrics.
    #[new]
    fn py_new() -> Self {
        EngineMetrics {
            state: Mutex::new(State::default()),
        }
    }

    /// Count one request by profile and outcome, for the outcomes decided in Python
    /// (a body too slow to arrive, a refused QA header).
    #[pyo3(name = "count_request")]
    fn py_count_request(&self, profile: &str, outcome: &str) {
        self.request(profile, outcome);
    }

    /// Count (experiment, variant) assignments made in Python.
    fn count_assignments(&self, pairs: Vec<(String, String)>) {
        self.with(|s| {
            for (e, v) in &pairs {
                s.inc("rearrange_experiment_assignments_total", &[e, v], 1.0);
            }
        });
    }

    /// `{"counters": {family: [(labels, value)]}, "histograms": {family: [(labels,
    /// [count per bucket incl. +Inf], sum)]}, "bounds": {family: [bounds]}}`.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (counters, hists) = self.with(|s| (s.counters.clone(), s.hists.clone()));
        let out = PyDict::new(py);
        let c = PyDict::new(py);
        for (family, series) in counters {
            let list = PyList::empty(py);
            for (labels, v) in series {
                list.append((PyTuple::new(py, labels.split(SEP).collect::<Vec<_>>())?, v))?;
            }
            c.set_item(family, list)?;
        }
        let h = PyDict::new(py);
        let b = PyDict::new(py);
        for (family, series) in hists {
            let list = PyList::empty(py);
            for (labels, hist) in series {
                list.append((
                    PyTuple::new(py, labels.split(SEP).collect::<Vec<_>>())?,
                    hist.counts,
                    hist.sum,
                ))?;
            }
            h.set_item(family, list)?;
            b.set_item(family, bounds_of(family))?;
        }
        out.set_item("counters", c)?;
        out.set_item("histograms", h)?;
        out.set_item("bounds", b)?;
        Ok(out)
    }

    /// The bucket bounds of each histogram family (for the collector and its tests).
    #[staticmethod]
    fn buckets<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for family in [
            "rearrange_request_duration_seconds",
            "rearrange_rule_duration_seconds",
            "rearrange_rule_position_change",
            "rearrange_rule_score_change",
            "rearrange_rule_top10_churn",
        ] {
            out.set_item(family, bounds_of(family))?;
        }
        Ok(out)
    }
}
