//! The per-request series, kept in the engine (one lock per request) and read at scrape
//! time by app/observability/metrics.py's EngineCollector: the same names, labels and buckets the
//! Python service exported. They live in a slab (metrics/slab.rs): anonymous memory for one
//! process, or this worker's file in a directory that every worker's scrape sums.

mod slab;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::effects::TOP;
use crate::experiments::Exposure;
use crate::record::Phase;
use crate::runner::{Outcome, RuleError, Timing};
use slab::{Slab, FAMILY_SEP};

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

/// Label values joined by this separator make one series key (split at scrape time).
const SEP: char = '\u{1f}';

/// Series keys are hashed on every request: foldhash (SipHash was ~3% of one), in
/// hashbrown's map, whose `entry_ref` finds or inserts a series by a borrowed key in one
/// probe.
type HashMap<K, V> = hashbrown::HashMap<K, V, foldhash::fast::FixedState>;

/// The families, by the index a call site names one with (a request touches some sixty
/// series: an index, not a hashed name, picks each one's map). Counters first.
const FAMILIES: [&str; 12] = [
    "rearrange_requests_total",
    "rearrange_rule_actions",
    "rearrange_fallbacks_total",
    "rearrange_experiment_assignments_total",
    "rearrange_rule_skipped_total",
    "rearrange_rule_errors_total",
    "rearrange_experiment_exposures_total",
    "rearrange_request_duration_seconds",
    "rearrange_rule_duration_seconds",
    "rearrange_rule_position_change",
    "rearrange_rule_score_change",
    "rearrange_rule_top10_churn",
];
const REQUESTS: usize = 0;
const ACTIONS: usize = 1;
const FALLBACKS: usize = 2;
const ASSIGNMENTS: usize = 3;
const SKIPPED: usize = 4;
const ERRORS: usize = 5;
const EXPOSURES: usize = 6;
/// Families from this index on are histograms (a count per bound, +Inf, and the sum);
/// those before, counters (one f64 cell).
const FIRST_HISTOGRAM: usize = 7;
const REQUEST_DURATION: usize = 7;
const RULE_DURATION: usize = 8;
const POSITION_CHANGE: usize = 9;
const SCORE_CHANGE: usize = 10;
const CHURN: usize = 11;

fn bounds_of(family: usize) -> &'static [f64] {
    match family {
        REQUEST_DURATION => LATENCY_BUCKETS,
        RULE_DURATION => RULE_BUCKETS,
        POSITION_CHANGE => POSITION_BUCKETS,
        SCORE_CHANGE => SCORE_BUCKETS,
        _ => CHURN_BUCKETS,
    }
}

/// The index of the family named `name`.
fn family_of(name: &str) -> Option<usize> {
    FAMILIES.iter().position(|f| *f == name)
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

/// Where one rule's histogram series are, for one phase and mode: a request runs about a
/// dozen rules, each with up to six series, so `served` looks a rule up once (its time was
/// ~5 % of a small commercial page's CPU on the data port with a lookup per series). Each
/// offset is found the first time the series gets a value, as `observe_all` finds it (a
/// series with no value yet is not made).
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
struct RuleSeries {
    duration: Option<usize>,
    churn: Option<usize>,
    /// `direction` down, up.
    position: [Option<usize>; 2],
    /// `direction` up, down.
    score: [Option<usize>; 2],
}

/// The slab the series live in and where each one's cells are.
struct State {
    slab: Slab,
    /// Per family: joined label values → offset of the series' cells in the slab.
    series: [HashMap<String, usize>; FAMILIES.len()],
    /// (rule, phase, mode) joined → where that rule's series are: a shortcut into `series`.
    rules: HashMap<String, RuleSeries>,
    /// The key being looked up: reused, so a known series costs no allocation.
    key: String,
    /// The rule being looked up in `rules` (`key` is taken by `series` meanwhile).
    rule_key: String,
    /// Updates not counted because the slab could not grow (a full disk), and why.
    lost: u64,
    problem: Option<String>,
}

impl State {
    fn new(slab: Slab, adopted: Vec<(String, usize)>) -> Self {
        let mut series: [HashMap<String, usize>; FAMILIES.len()] =
            std::array::from_fn(|_| HashMap::default());
        for (key, offset) in adopted {
            let Some((family, labels)) = key.split_once(FAMILY_SEP) else {
                continue;
            };
            if let Some(family) = family_of(family) {
                series[family].insert(labels.to_owned(), offset);
            }
        }
        State {
            slab,
            series,
            rules: HashMap::default(),
            key: String::new(),
            rule_key: String::new(),
            lost: 0,
            problem: None,
        }
    }

    /// The offset of the cells of (family, labels): found, or appended to the slab.
    fn series(&mut self, family: usize, labels: &[&str], cells: usize) -> Option<usize> {
        join(&mut self.key, labels);
        let series = &mut self.series[family];
        if let Some(at) = series.get(self.key.as_str()) {
            return Some(*at);
        }
        let full = format!("{}{FAMILY_SEP}{}", FAMILIES[family], self.key);
        match self.slab.add(&full, cells) {
            Ok(at) => {
                series.insert(self.key.clone(), at);
                Some(at)
            }
            Err(e) => {
                self.lost += 1;
                self.problem = Some(e.to_string());
                None
            }
        }
    }

    fn inc(&mut self, family: usize, key: &[&str], n: f64) {
        if let Some(at) = self.series(family, key, 1) {
            slab::add_f64(&self.slab.cells(at, 1)[0], n);
        }
    }

    fn observe(&mut self, family: usize, key: &[&str], v: f64) {
        self.observe_all(family, key, std::iter::once(v));
    }

    /// Observe each of `values` in one series: its key is joined and looked up once.
    fn observe_all(&mut self, family: usize, key: &[&str], values: impl Iterator<Item = f64>) {
        let mut slot = None;
        self.observe_at(&mut slot, family, key, values);
    }

    /// `observe_all` into the series at `slot`, found by its key and kept there first.
    fn observe_at(
        &mut self,
        slot: &mut Option<usize>,
        family: usize,
        key: &[&str],
        values: impl Iterator<Item = f64>,
    ) {
        let mut values = values.peekable();
        if values.peek().is_none() {
            return;
        }
        let bounds = bounds_of(family);
        let at = match *slot {
            Some(at) => at,
            None => {
                let Some(at) = self.series(family, key, bounds.len() + 2) else {
                    return;
                };
                *slot = Some(at);
                at
            }
        };
        let (counts, sum) = self
            .slab
            .cells(at, bounds.len() + 2)
            .split_at(bounds.len() + 1);
        // The sum is added to in order, as one f64 would be, and stored once.
        let mut total = f64::from_bits(sum[0].load(Ordering::Relaxed));
        for v in values {
            // The first bound >= v: Prometheus's `le`.
            slab::add_one(&counts[bounds.partition_point(|b| *b < v)]);
            total += v;
        }
        sum[0].store(total.to_bits(), Ordering::Relaxed);
    }

    /// One rule's run: its time, top-10 churn, position changes and (rerank) score
    /// changes, each into its series, the rule looked up once (`RuleSeries`).
    fn observe_rule(&mut self, t: &Timing) {
        let (phase, mode) = (t.phase.as_str(), t.mode.as_str());
        join(&mut self.rule_key, &[t.rule, phase, mode]);
        let known = self.rules.get(self.rule_key.as_str()).copied();
        let mut slots = known.unwrap_or_default();
        self.observe_at(
            &mut slots.duration,
            RULE_DURATION,
            &[t.rule, phase, mode],
            std::iter::once(t.seconds),
        );
        self.observe_at(
            &mut slots.churn,
            CHURN,
            &[t.rule, mode],
            std::iter::once(t.churn.min(TOP + 1) as f64),
        );
        // One lookup per direction, not per move: a rerank moves most of the page.
        for (i, (dir, down)) in [("down", true), ("up", false)].into_iter().enumerate() {
            let moved = t.moves.iter().filter(|m| (**m > 0) == down);
            self.observe_at(
                &mut slots.position[i],
                POSITION_CHANGE,
                &[t.rule, mode, dir],
                moved.map(|m| m.unsigned_abs() as f64),
            );
        }
        if t.phase == Phase::Rerank {
            for (i, (dir, up)) in [("up", true), ("down", false)].into_iter().enumerate() {
                let changed = t.deltas.iter().filter(|d| (**d > 0.0) == up);
                self.observe_at(
                    &mut slots.score[i],
                    SCORE_CHANGE,
                    &[t.rule, mode, dir],
                    changed.map(|d| d.abs()),
                );
            }
        }
        if known != Some(slots) {
            self.rules.insert(self.rule_key.clone(), slots);
        }
    }
}

/// Every series summed over slabs, by (family, joined label values).
type Sums = HashMap<(String, String), Summed>;

/// One series summed over slabs.
enum Summed {
    Counter(f64),
    Histogram(Vec<u64>, f64),
}

/// Sum the series read from one slab into `into`, keyed by (family, labels).
fn sum_into(into: &mut Sums, read: Vec<(String, Vec<u64>)>) {
    for (key, cells) in read {
        let Some((family, labels)) = key.split_once(FAMILY_SEP) else {
            continue;
        };
        let Some(index) = family_of(family) else {
            continue; // a family another version kept
        };
        let counter = index < FIRST_HISTOGRAM;
        let series = (family.to_owned(), labels.to_owned());
        if counter {
            let v = f64::from_bits(cells[0]);
            match into.entry(series).or_insert(Summed::Counter(0.0)) {
                Summed::Counter(total) => *total += v,
                Summed::Histogram(..) => {}
            }
            continue;
        }
        let n = bounds_of(index).len() + 1;
        if cells.len() != n + 1 {
            continue; // other buckets: another version's
        }
        let entry = into
            .entry(series)
            .or_insert_with(|| Summed::Histogram(vec![0; n], 0.0));
        if let Summed::Histogram(counts, sum) = entry {
            for (total, c) in counts.iter_mut().zip(&cells[..n]) {
                *total += c;
            }
            *sum += f64::from_bits(cells[n]);
        }
    }
}

/// Slab files this process has open: two EngineMetrics writing one file would race.
static OPEN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The engine's metrics; outlives config reloads (each Engine is handed the same one).
#[pyclass(frozen, module = "app._engine")]
pub struct EngineMetrics {
    state: Mutex<State>,
    /// The directory every worker's slab file is in; None: this process only.
    directory: Option<PathBuf>,
    /// This process's file in it.
    path: Option<PathBuf>,
    /// The hosts and domains of the pages this process served lately (crate::traffic).
    pub traffic: crate::traffic::Traffic,
}

impl Drop for EngineMetrics {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
            open.retain(|p| p != path);
        }
    }
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
    /// skipped rules, rule errors, assignments, exposures (forced ones not counted, as
    /// assignments) and latency, under one lock.
    pub fn served(
        &self,
        profile: &str,
        outcome: &Outcome,
        counted: &[(String, String)],
        exposures: &[Exposure],
        seconds: f64,
    ) {
        self.with(|s| {
            for ((rule, phase, action, mode), n) in &outcome.actions {
                s.inc(
                    ACTIONS,
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
                s.observe_rule(t);
            }
            if let Some(f) = &outcome.fallback {
                s.inc(FALLBACKS, &[f.rule, f.action], 1.0);
            }
            for k in &outcome.skipped {
                s.inc(SKIPPED, &[k.rule, k.phase.as_str(), k.reason.label()], 1.0);
            }
            for e in &outcome.errors {
                s.inc(ERRORS, &[e.rule, e.phase.as_str()], 1.0);
            }
            for (e, v) in counted {
                s.inc(ASSIGNMENTS, &[e, v], 1.0);
            }
            for e in exposures.iter().filter(|e| !e.forced) {
                let triggered = if e.triggered { "true" } else { "false" };
                s.inc(EXPOSURES, &[&e.experiment, &e.variant, triggered], 1.0);
            }
            s.inc(REQUESTS, &[profile, "ok"], 1.0);
            s.observe(REQUEST_DURATION, &[profile], seconds);
        });
    }

    /// Record a request refused by a rule under `on_error: closed`.
    pub fn refused_by_rule(&self, profile: &str, errors: &[RuleError]) {
        self.with(|s| {
            for e in errors {
                s.inc(ERRORS, &[e.rule, e.phase.as_str()], 1.0);
            }
            s.inc(REQUESTS, &[profile, "rule_failed"], 1.0);
        });
    }

    /// Count one request by profile and outcome (`invalid`, `timeout`, ...).
    pub fn request(&self, profile: &str, outcome: &str) {
        self.with(|s| s.inc(REQUESTS, &[profile, outcome], 1.0));
    }
}

impl EngineMetrics {
    /// Metrics in anonymous memory (`directory` None) or in this process's file of
    /// `directory`, `engine_<pid>.slab`.
    pub fn new(directory: Option<&Path>) -> std::io::Result<Self> {
        let Some(directory) = directory else {
            return Ok(EngineMetrics {
                state: Mutex::new(State::new(Slab::anonymous()?, Vec::new())),
                directory: None,
                path: None,
                traffic: Default::default(),
            });
        };
        let path = directory.join(format!("engine_{}.slab", std::process::id()));
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        if open.contains(&path) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} is written by another EngineMetrics of this process: share that one",
                    path.display()
                ),
            ));
        }
        let (slab, adopted) = Slab::open(&path)?;
        open.push(path.clone());
        Ok(EngineMetrics {
            state: Mutex::new(State::new(slab, adopted)),
            directory: Some(directory.to_owned()),
            path: Some(path),
            traffic: Default::default(),
        })
    }

    /// Every series this process's slab holds, or (with a directory) the sum over every
    /// slab file in it, and the files that could not be read: (path, problem).
    fn summed(&self) -> (Sums, Vec<(String, String)>) {
        let mut into = HashMap::default();
        let mut unreadable = Vec::new();
        let Some(directory) = &self.directory else {
            let read = self.with(|s| s.slab.read());
            sum_into(&mut into, read);
            return (into, unreadable);
        };
        let files = match std::fs::read_dir(directory) {
            Ok(files) => files,
            Err(e) => {
                unreadable.push((directory.display().to_string(), e.to_string()));
                return (into, unreadable);
            }
        };
        for file in files.flatten() {
            let path = file.path();
            let name = file.file_name();
            let name = name.to_string_lossy();
            if !(name.starts_with("engine_") && name.ends_with(".slab")) {
                continue;
            }
            match slab::read_file(&path) {
                Ok(read) => sum_into(&mut into, read),
                Err(problem) => unreadable.push((path.display().to_string(), problem)),
            }
        }
        (into, unreadable)
    }
}

#[pymethods]
impl EngineMetrics {
    /// Empty metrics: this process's alone, or with `directory` this worker's share of the
    /// service's (every worker's file there is summed by `snapshot`).
    #[new]
    #[pyo3(signature = (directory=None))]
    fn py_new(directory: Option<PathBuf>) -> PyResult<Self> {
        EngineMetrics::new(directory.as_deref()).map_err(|e| PyOSError::new_err(e.to_string()))
    }

    /// (requests whose served page held `key`, at most; requests) over the hour or so
    /// before `now` (epoch seconds): `key` a host or domain, as the banlist normalizes it
    /// (crate::traffic). This process's traffic alone, with a directory too.
    fn traffic_share(&self, key: &str, now: f64) -> (u64, u64) {
        self.traffic.share(now, key)
    }

    /// Bytes the traffic counts hold (fixed: they do not grow with the hosts seen).
    fn traffic_nbytes(&self) -> usize {
        self.traffic.nbytes()
    }

    /// Count one request by profile and outcome, for the outcomes decided in Python
    /// (a body too slow to arrive, a refused QA header).
    #[pyo3(name = "count_request")]
    fn py_count_request(&self, profile: &str, outcome: &str) {
        self.request(profile, outcome);
    }

    /// `{"counters": {family: [(labels, value)]}, "histograms": {family: [(labels,
    /// [count per bucket incl. +Inf], sum)]}, "bounds": {family: [bounds]}, "unreadable":
    /// [(path, problem)], "lost": (updates not counted, why or None)}`: summed over every
    /// worker's file with a directory.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (summed, unreadable) = self.summed();
        let lost = self.with(|s| (s.lost, s.problem.clone()));
        let out = PyDict::new(py);
        let c = PyDict::new(py);
        let h = PyDict::new(py);
        let b = PyDict::new(py);
        for ((family, labels), series) in summed {
            let labels = PyTuple::new(py, labels.split(SEP).collect::<Vec<_>>())?;
            match series {
                Summed::Counter(v) => {
                    family_list(&c, &family)?.append((labels, v))?;
                }
                Summed::Histogram(counts, sum) => {
                    family_list(&h, &family)?.append((labels, counts, sum))?;
                    b.set_item(&family, family_of(&family).map(bounds_of))?;
                }
            }
        }
        out.set_item("counters", c)?;
        out.set_item("histograms", h)?;
        out.set_item("bounds", b)?;
        out.set_item("unreadable", unreadable)?;
        out.set_item("lost", lost)?;
        Ok(out)
    }

    /// This process's slab file, or None in anonymous memory.
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        self.path.clone()
    }

    /// The bucket bounds of each histogram family (for the collector and its tests).
    #[staticmethod]
    fn buckets<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (index, family) in FAMILIES.iter().enumerate().skip(FIRST_HISTOGRAM) {
            out.set_item(family, bounds_of(index))?;
        }
        Ok(out)
    }
}

/// The list of `family` in `dict`, created empty.
fn family_list<'py>(dict: &Bound<'py, PyDict>, family: &str) -> PyResult<Bound<'py, PyList>> {
    if let Some(list) = dict.get_item(family)? {
        return Ok(list.cast_into::<PyList>()?);
    }
    let list = PyList::empty(dict.py());
    dict.set_item(family, &list)?;
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Mode;

    fn timing(mode: Mode, moves: Vec<i64>, deltas: Vec<f64>) -> Timing<'static> {
        Timing {
            rule: "anti_seo_reset",
            phase: Phase::Rerank,
            mode,
            seconds: 0.00002,
            moves,
            churn: 1,
            deltas,
        }
    }

    /// (count per bucket, sum) of the histogram series `labels` of `family`.
    fn histogram(s: &State, family: usize, labels: &[&str]) -> Option<(Vec<u64>, f64)> {
        let at = *s.series[family].get(labels.join("\u{1f}").as_str())?;
        let n = bounds_of(family).len() + 2;
        let cells = s.slab.cells(at, n);
        let counts = cells[..n - 1]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        Some((counts, f64::from_bits(cells[n - 1].load(Ordering::Relaxed))))
    }

    #[test]
    fn a_rule_found_through_its_shortcut_counts_in_the_series_its_labels_name() {
        let mut s = State::new(Slab::anonymous().unwrap(), vec![]);
        // the first run moves nothing: no position series is made
        s.observe_rule(&timing(Mode::Applied, vec![], vec![-1.5]));
        let mover = ["anti_seo_reset", "applied", "down"];
        assert_eq!(histogram(&s, POSITION_CHANGE, &mover), None);
        // the second finds the rule in `rules`, makes the series it now has values for
        s.observe_rule(&timing(Mode::Applied, vec![3, -1, 2], vec![-0.4, 2.5]));
        let (down, _) = histogram(&s, POSITION_CHANGE, &mover).unwrap();
        assert_eq!(down.iter().sum::<u64>(), 2); // the moves 3 and 2
        let up = ["anti_seo_reset", "applied", "up"];
        assert_eq!(histogram(&s, POSITION_CHANGE, &up).unwrap().1, 1.0);
        let timed = ["anti_seo_reset", "rerank", "applied"];
        // the second run's time went where the shortcut kept, the series the first made
        let kept = s.rules["anti_seo_reset\u{1f}rerank\u{1f}applied"];
        assert_eq!(
            kept.duration,
            s.series[RULE_DURATION]
                .get(timed.join("\u{1f}").as_str())
                .copied()
        );
        assert_eq!(s.series[RULE_DURATION].len(), 1);
        let (counts, sum) = histogram(&s, RULE_DURATION, &timed).unwrap();
        assert_eq!((counts.iter().sum::<u64>(), sum), (2, 0.00004));
        let lowered = ["anti_seo_reset", "applied", "down"];
        let (counts, sum) = histogram(&s, SCORE_CHANGE, &lowered).unwrap();
        assert_eq!((counts.iter().sum::<u64>(), sum), (2, 1.9));
        let churn = ["anti_seo_reset", "applied"];
        assert_eq!(histogram(&s, CHURN, &churn).unwrap().0[1], 2); // churn 1, twice
                                                                   // shadow is another set of series, and the shortcut keeps the two apart
        s.observe_rule(&timing(Mode::Shadow, vec![], vec![]));
        let shadow = ["anti_seo_reset", "rerank", "shadow"];
        assert_eq!(
            histogram(&s, RULE_DURATION, &shadow)
                .unwrap()
                .0
                .iter()
                .sum::<u64>(),
            1
        );
        assert_eq!(
            histogram(&s, RULE_DURATION, &timed)
                .unwrap()
                .0
                .iter()
                .sum::<u64>(),
            2
        );
        assert_eq!(s.rules.len(), 2);
    }
}
