//! `Engine`: one loaded config as a Python object; `rerank()` is the one call a request
//! makes across the boundary (body bytes in; status, body bytes and audit line out).

use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict};

use std::sync::Arc;

use crate::banlist::{spread, BanIndex, IndexData};
use crate::clock::{Clock, Monotonic, PyClock};
use crate::contract::{check_page, decode_body, FieldError, Limits};
use crate::doc::{Canon, Canonical, Hit, Lookup, Page};
use crate::experiments::{assign, check_forced, Exposure, FORCE_HEADER, HOLDOUT};
use crate::explain::{not_in_profile, write_explain};
use crate::fmt::quoted;
use crate::interleave::{self, Coins, Impression, ImpressionTuple, Merged};
use crate::json::write_str;
use crate::metrics::EngineMetrics;
use crate::out::{PyOut, Sink};
use crate::response::{write_audit_line, write_response, Head};
use crate::rules::Ctx;
use crate::runner::{Outcome, RuleError};
use crate::spec::{self, Config};

/// One loaded config, rebuilt on each reload and swapped whole by the Python side.
#[pyclass(frozen, module = "app._engine")]
pub struct Engine {
    config: Config,
    metrics: Py<EngineMetrics>,
}

/// URL canonicalization and registrable domains as `crate::url` and `crate::domain` do them
/// (the banlist stores its values through the same functions).
struct UrlCanon;

impl Canon for UrlCanon {
    fn canonical_parts<'u>(&self, url: &'u str) -> Result<Canonical<'u>, String> {
        crate::url::canonical_parts(url).map_err(|e| e.to_string())
    }

    fn registrable_domain<'h>(&self, host: &'h str) -> &'h str {
        crate::domain::registrable_domain(host)
    }
}

/// A banlist (or quarantine) snapshot as the rules see it: the index the request started
/// with, whatever batches are applied meanwhile.
struct Snapshot(Arc<IndexData>);

/// The snapshot of a BanIndex (or None) given from Python.
fn snapshot(index: Option<Bound<'_, PyAny>>) -> PyResult<Option<Arc<IndexData>>> {
    match index {
        None => Ok(None),
        Some(i) if i.is_none() => Ok(None),
        Some(i) => Ok(Some(i.cast::<BanIndex>()?.get().snapshot())),
    }
}

fn owned(hit: crate::banlist::Hit<'_>) -> Hit {
    Hit {
        id: hit.id_text(),
        scope: hit.scope.to_string(),
        value: hit.value.to_string(),
        reason: hit.reason().to_string(),
    }
}

impl Lookup for Snapshot {
    fn lookup(&self, canonical: &str, host: &str, region: Option<&str>, now: f64) -> Option<Hit> {
        self.0.lookup(canonical, host, region, now).map(owned)
    }

    fn lookup_page(
        &self,
        urls: &[(&str, &str)],
        region: Option<&str>,
        now: f64,
    ) -> Vec<Option<Hit>> {
        let hits = self
            .0
            .lookup_page(urls, |&(canonical, host)| (canonical, host), region, now);
        spread(hits.into_iter().map(|(i, hit)| (i, owned(hit))), urls.len())
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

/// The API's error body, byte for byte what app/api/rerank.py `_error` writes.
pub fn error_body(status: u16, field: Option<&str>, problem: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + problem.len());
    out.extend_from_slice(b"{\"error\":");
    write_str(
        &mut out,
        if status < 500 {
            "invalid_request"
        } else {
            "error"
        },
    );
    out.extend_from_slice(b",\"field\":");
    match field {
        Some(f) => write_str(&mut out, f),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"problem\":");
    write_str(&mut out, problem);
    out.push(b'}');
    out
}

fn rule_failed_body(rule: &str, phase: &str, problem: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + problem.len());
    out.extend_from_slice(b"{\"error\":\"rule_failed\",\"rule\":");
    write_str(&mut out, rule);
    out.extend_from_slice(b",\"phase\":");
    write_str(&mut out, phase);
    out.extend_from_slice(b",\"problem\":");
    write_str(&mut out, problem);
    out.push(b'}');
    out
}

/// A rule failure for the service's log, owned so that it can leave the request (the
/// native listener hands it to the Python thread that logs): the rule, its phase, the
/// problem, whether it closed the page, the profile, the Python exception if one raised.
pub struct Failure {
    pub rule: String,
    pub phase: &'static str,
    pub problem: String,
    pub closed: bool,
    pub profile: String,
    pub cause: Option<crate::rules::Cause>,
}

impl Failure {
    /// As the Python log takes it: (rule, phase, problem, closed, profile, exception|None).
    pub fn into_py(self, py: Python<'_>) -> Failed {
        (
            self.rule,
            self.phase,
            self.problem,
            self.closed,
            self.profile,
            self.cause.map(|c| c.0.clone_ref(py)),
        )
    }
}

/// A rule failure as `Engine.rerank` returns it to Python.
pub type Failed = (
    String,
    &'static str,
    String,
    bool,
    String,
    Option<Py<PyAny>>,
);

type Answer = (
    u16,
    Py<PyBytes>,
    Option<Py<PyBytes>>,
    Vec<Failed>,
    Option<ImpressionTuple>,
);

/// The failures of a request as the log takes them; the last one closed the page if
/// `closed`.
fn failures(errors: Vec<RuleError<'_>>, closed: bool, profile: &str) -> Vec<Failure> {
    let last = errors.len().saturating_sub(1);
    errors
        .into_iter()
        .enumerate()
        .map(|(i, e)| Failure {
            rule: e.rule.to_string(),
            phase: e.phase.as_str(),
            problem: e.problem,
            closed: closed && i == last,
            profile: profile.to_string(),
            cause: e.cause,
        })
        .collect()
}

/// What one request is answered with, besides its body: the snapshots matched, the time,
/// the QA override and what the caller wants written. `Engine.rerank` (Python) and the
/// native listener (crate::serve) each fill one.
pub struct Call<'a> {
    /// The banlist and quarantine snapshots the request matches (None: no list).
    pub banlist: Option<Arc<IndexData>>,
    pub quarantine: Option<Arc<IndexData>>,
    /// Epoch seconds: ban expiry and the audit line's ts.
    pub now: f64,
    /// What is left of the request's time budget (None: no deadline), on `clock`.
    pub budget_seconds: Option<f64>,
    /// Experiment → variant from the QA header; `forced_by` its checked actor.
    pub forced: &'a [(String, String)],
    pub forced_by: Option<&'a str>,
    pub limits: Limits,
    /// Seconds spent before the call (reading the body), added to the request duration.
    pub elapsed: f64,
    pub clock: &'a dyn Clock,
    /// Write the audit line (there is a log to write it to).
    pub audit_line: bool,
    /// QA, the caller having checked the token: add the response's `explain`.
    pub explain: bool,
    /// app.engine.executor.RuleExecutor, which runs the Python rules in its processes (None:
    /// on this thread).
    pub executor: Option<&'a Py<PyAny>>,
    /// Answer `Served::Deferred` instead of running a profile with a Python rule.
    pub defer_python: bool,
}

/// A request's answer: the status, the JSON body, the audit line if one is due, and the
/// rule failures to log; `O` is where the text is written (a Vec, or Python bytes).
pub struct Reply<O> {
    pub status: u16,
    pub body: O,
    pub line: Option<O>,
    pub failures: Vec<Failure>,
    /// An interleaved page served (not QA-forced), for the feedback store.
    pub impression: Option<Impression>,
}

/// `Engine::serve`'s answer: a reply, or the profile has a Python rule and the caller
/// asked to run such a profile elsewhere (`Call::defer_python`).
pub enum Served<O> {
    Reply(Reply<O>),
    Deferred,
}

impl Engine {
    /// The loaded config.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Answer one /v1/rerank body (see `rerank`, the Python door, for what each part of
    /// `call` means). `out(n)` makes an empty text with room for about `n` bytes, where the
    /// body and the audit line are written. Needs no GIL: a profile with a Python rule
    /// takes it for each call of the rule (rules/python.rs).
    pub fn serve<O: Sink>(
        &self,
        bytes: &[u8],
        call: &Call<'_>,
        out: &mut dyn FnMut(usize) -> PyResult<O>,
    ) -> PyResult<Served<O>> {
        let started = Instant::now();
        let clock = call.clock;
        let deadline = call
            .budget_seconds
            .map(|b| clock.now() + Duration::from_secs_f64(b.max(0.0)));
        let metrics = self.metrics.get();
        let mut written = |status: u16, body: &[u8]| -> PyResult<Served<O>> {
            let mut o = out(body.len())?;
            o.extend_from_slice(body);
            Ok(Served::Reply(Reply {
                status,
                body: o,
                line: None,
                failures: Vec::new(),
                impression: None,
            }))
        };
        let mut refuse = |e: FieldError| {
            metrics.request("", "invalid");
            written(e.status, &error_body(e.status, Some(&e.field), &e.problem))
        };
        // Types first, then the profile, then what types cannot check (limits, repeated
        // ids): a body's shape is named before what it asks for.
        let decoded = match decode_body(bytes) {
            Ok(d) => d,
            Err(e) => return refuse(e),
        };
        let req = &decoded.request;
        let config = &self.config;
        let profile: &str = match &req.profile {
            Some(p) if config.profiles.contains_key(&**p) => p,
            Some(p) => {
                let mut known: Vec<&str> = config.profiles.keys().map(String::as_str).collect();
                known.sort_unstable();
                let problem = format!(
                    "unknown profile {} (known: {})",
                    quoted(p),
                    known.join(", ")
                );
                return refuse(FieldError {
                    status: 422,
                    field: "profile".into(),
                    problem,
                });
            }
            None => config.route(&req.query.classes),
        };
        if let Err(e) = check_page(&decoded, &call.limits, |_, _| Ok(())) {
            return refuse(e);
        }
        let pipeline_of = |name: &str| {
            config.profiles.get(name).ok_or_else(|| {
                PyValueError::new_err(format!("the config names a missing profile {name:?}"))
            })
        };
        let forced = call.forced;
        if !forced.is_empty() {
            if let Err(problem) = check_forced(&config.experiments, forced) {
                return refuse(FieldError {
                    status: 422,
                    field: FORCE_HEADER.into(),
                    problem,
                });
            }
        }
        // Only a routed request is taken over by an interleaving, never one that named its
        // profile (docs/experiments.md, "Interleaving").
        let routed = req.profile.is_none().then_some(profile);
        let mut assigned = assign(
            &config.experiments,
            config.holdout.as_ref(),
            &req.unit,
            forced,
            routed,
        );
        // The first interleaving assigned: (its exposure, experiment, treatment pipeline).
        let interleaving = assigned.exposures.iter().enumerate().find_map(|(i, e)| {
            let exp = config.interleaving(&e.experiment)?;
            Some((i, exp, exp.interleave.as_ref()?))
        });
        let (profile, arms) = match interleaving {
            None => (profile, None),
            Some((i, exp, il)) => (
                il.control.as_str(),
                Some((i, exp, pipeline_of(&il.treatment)?)),
            ),
        };
        let pipeline = pipeline_of(profile)?;
        if call.defer_python && (pipeline.python || arms.is_some_and(|(_, _, t)| t.python)) {
            return Ok(Served::Deferred);
        }
        let banlist = call.banlist.clone().map(Snapshot);
        // The version of the very snapshot matched (0 without a banlist): one load.
        let banlist_version = banlist.as_ref().map_or(0, |b| b.0.version());
        let quarantine = call.quarantine.clone().map(Snapshot);
        let domain_of = |p: &str| config.needs_domain.get(p).copied().unwrap_or(false);
        let need_domain = domain_of(profile) || arms.is_some_and(|(_, _, t)| domain_of(&t.profile));
        let (page, docs) = Page::build(req, &UrlCanon, need_domain);
        // Two ASCII letters (check_page refused anything else).
        let region = req.query.region.as_ref().map(|r| r.to_ascii_uppercase());
        let ctx = Ctx {
            page: &page,
            region: region.as_deref(),
            age_mode: req.query.age_mode,
            depth: req.depth,
            input_count: docs.len(),
            now: call.now,
            banlist: banlist.as_ref().map(|b| b as &dyn Lookup),
            quarantine: quarantine.as_ref().map(|q| q as &dyn Lookup),
            variants: &assigned.variants,
            relaxed_from: None,
            deadline,
            clock,
            profile,
            explain: call.explain,
            executor: call.executor,
        };
        let ran = pipeline.run(&docs, &ctx).and_then(|control| match arms {
            None => Ok((control, None)),
            Some((i, exp, treatment)) => {
                let tctx = Ctx {
                    profile: &treatment.profile,
                    ..ctx
                };
                let treated = treatment.run(&docs, &tctx)?;
                let unit = assigned.exposures[i].unit.as_deref().unwrap_or("");
                let mut coins = Coins::new(&exp.name, &exp.salt, unit, &req.query.text);
                let differ = !same_page(&control, &treated);
                Ok(
                    match interleave::merge(&exp.name, control, treated, &page, &mut coins) {
                        Merged::Page(merged) => (merged, Some((i, exp.name.as_str(), differ))),
                        Merged::Control(control) => (control, None),
                    },
                )
            }
        });
        let (outcome, interleaved) = match ran {
            Ok(o) => o,
            Err(crate::runner::RuleFailed {
                refused: Some(bad), ..
            }) => return refuse(*bad),
            Err(failed) => {
                metrics.refused_by_rule(profile, &failed.errors);
                let body = rule_failed_body(failed.rule, failed.phase.as_str(), &failed.problem);
                let mut o = out(body.len())?;
                o.extend_from_slice(&body);
                return Ok(Served::Reply(Reply {
                    status: 503,
                    body: o,
                    line: None,
                    failures: failures(failed.errors, true, profile),
                    impression: None,
                }));
            }
        };
        triggered(config, &outcome, &mut assigned.exposures, interleaved);
        let generated;
        let request_id = match req.request_id.as_deref() {
            Some(id) if !id.is_empty() => id,
            _ => {
                generated = uuid::Uuid::new_v4().simple().to_string();
                &generated
            }
        };
        let head = Head {
            request_id,
            profile,
            config_version: &config.version,
            banlist_version,
            exposures: &assigned.exposures,
            interleaving: interleaved.map(|(_, name, _)| name),
        };
        // Kept documents are at most the body's size; audit records ~150 bytes each.
        let mut body = out(512 + bytes.len() + 192 * outcome.audit.len())?;
        let logged = call.audit_line
            && (!outcome.audit.is_empty()
                || !assigned.exposures.is_empty()
                || !outcome.skipped.is_empty());
        let tail = write_response(&mut body, &head, &page, &outcome, logged);
        if call.explain {
            // One more member before the body's closing brace (the audit tail lies before it).
            body.unpush();
            let elsewhere = not_in_profile(config, profile);
            write_explain(&mut body, &page, &outcome.trace, &elsewhere);
            body.push(b'}');
        }
        let line = if logged {
            // Each record adds its document's URL and host (~100 bytes).
            let size = 512 + tail.range.len() + 128 * outcome.audit.len() + req.query.text.len();
            let mut line = out(size)?;
            let query = (&*req.query.text, region.as_deref());
            write_audit_line(
                &mut line,
                &head,
                call.now,
                query,
                &page,
                &outcome,
                body.as_slice(),
                &tail,
                call.forced_by,
            );
            Some(line)
        } else {
            None
        };
        metrics.served(
            profile,
            &outcome,
            &assigned.counted,
            &assigned.exposures,
            call.elapsed + started.elapsed().as_secs_f64(),
        );
        metrics
            .traffic
            .record(call.now, outcome.docs.iter().map(|d| page.host(d)));
        // QA traffic (a forced interleaving) is not handed on: it would skew the results.
        let impression = interleaved
            .filter(|(i, _, _)| !assigned.exposures[*i].forced)
            .map(|(i, name, _)| Impression {
                request_id: request_id.to_string(),
                experiment: name.to_string(),
                unit: assigned.exposures[i].unit.clone().unwrap_or_default(),
                at: call.now,
                teams: outcome
                    .docs
                    .iter()
                    .zip(&outcome.teams)
                    .map(|(d, t)| (page.id(d).to_string(), t.as_str()))
                    .collect(),
            });
        let profile = profile.to_string();
        Ok(Served::Reply(Reply {
            status: 200,
            body,
            line,
            failures: failures(outcome.errors, false, &profile),
            impression,
        }))
    }
}

/// Both arms served the same documents in the same order.
fn same_page(a: &Outcome, b: &Outcome) -> bool {
    a.docs.len() == b.docs.len() && a.docs.iter().zip(&b.docs).all(|(x, y)| x.at == y.at)
}

/// Set each exposure's `triggered`: an A/B experiment's when a rule it gates left a record
/// (it changed the page, or in shadow would have), the holdout's when any gated rule did,
/// an interleaving's when it was served and its two arms' pages differed.
fn triggered(
    config: &Config,
    outcome: &Outcome,
    exposures: &mut [Exposure],
    interleaved: Option<(usize, &str, bool)>,
) {
    if exposures.is_empty() {
        return;
    }
    // The action counts name each rule that left a record once per action: a few entries.
    let gated = || {
        outcome
            .actions
            .iter()
            .filter_map(|((rule, ..), _)| config.gate_of(rule))
    };
    for (i, e) in exposures.iter_mut().enumerate() {
        e.triggered = if config.interleaving(&e.experiment).is_some() {
            interleaved.is_some_and(|(at, _, differ)| at == i && differ)
        } else if e.experiment == HOLDOUT {
            gated().next().is_some()
        } else {
            gated().any(|g| g == e.experiment)
        };
    }
}

#[pymethods]
impl Engine {
    /// Build from the compiled config (JSON text), the Python rule objects its steps
    /// index, and the metrics every Engine of the process shares.
    #[new]
    fn new(
        py: Python<'_>,
        spec_json: &str,
        python_rules: Vec<Py<PyAny>>,
        metrics: Py<EngineMetrics>,
    ) -> PyResult<Self> {
        let config = spec::build(py, spec_json, &python_rules).map_err(PyValueError::new_err)?;
        // The rules' clock calibrates itself at its first reading (up to 200 ms): here, as
        // a config loads, not in a request.
        quanta::Instant::now();
        Ok(Engine { config, metrics })
    }

    /// The near_duplicates caches of every profile (variants' rules included), for the
    /// metrics: (profile, "signature" | "shingle", hits, misses, evictions, entries, bytes).
    fn cache_stats(&self) -> Vec<(String, &'static str, u64, u64, u64, u64, u64)> {
        let mut out = Vec::new();
        let mut profiles: Vec<_> = self.config.profiles.iter().collect();
        profiles.sort_by(|a, b| a.0.cmp(b.0));
        for (name, pipeline) in profiles {
            for step in &pipeline.steps {
                let rules = std::iter::once(&step.rule).chain(step.variants.iter().map(|v| &v.1));
                for rule in rules {
                    let crate::rules::Rule::NearDuplicates(r) = rule else {
                        continue;
                    };
                    let (signature, shingle) = r.cache_stats();
                    for (kind, stats) in [("signature", signature), ("shingle", shingle)] {
                        if let Some(s) = stats {
                            out.push((
                                name.clone(),
                                kind,
                                s.hits,
                                s.misses,
                                s.evictions,
                                s.entries,
                                s.bytes,
                            ));
                        }
                    }
                }
            }
        }
        out
    }

    /// The config version (content hash) this engine serves.
    #[getter]
    fn version(&self) -> &str {
        &self.config.version
    }

    /// Answer one /v1/rerank body: (status, JSON body, audit-log line or None, the rule
    /// failures to log as (rule, phase, problem, closed, profile, exception or None), the
    /// impression of an interleaved page or None, as (request_id, experiment, unit, at,
    /// [(document id, team)])).
    ///
    /// `banlist` and `quarantine` (BanIndex) are each read once: the request matches one
    /// snapshot of each, and reports the banlist snapshot's own version.
    ///
    /// `now` is epoch seconds (ban expiry, the audit line's ts); `budget_seconds` what is
    /// left of the request's time budget (None: no deadline); `elapsed` the seconds spent
    /// before this call (reading the body), added to the request duration; `forced`
    /// experiment → variant from the QA header, `forced_by` its checked actor; `clock`
    /// (a callable returning monotonic seconds) is what the deadline is read on, the
    /// engine's own monotonic clock when None (a test gives one it sets); `audit_line=False`
    /// (no audit log to write it to) skips writing the line and returns None for it;
    /// `explain` (QA, the caller having checked the token) adds the response's `explain`.
    ///
    /// `executor` (app.engine.executor.RuleExecutor) runs the Python rules, each within
    /// the request's deadline and its step's `timeout_ms`; None calls them on this thread.
    /// `defer_python=True` (a caller on an event loop) answers None instead of running a
    /// profile that has a Python rule, for the caller to call again off its loop; a body
    /// refused before its profile is known is answered all the same.
    #[pyo3(signature = (body, *, banlist=None, quarantine=None, now=0.0,
                        budget_seconds=None, forced=None, forced_by=None, max_documents=1000,
                        max_text_chars=1_000_000, elapsed=0.0, clock=None,
                        audit_line=true, explain=false, executor=None,
                        defer_python=false))]
    #[allow(clippy::too_many_arguments)]
    fn rerank<'py>(
        &self,
        py: Python<'py>,
        body: Bound<'py, PyAny>,
        banlist: Option<Bound<'py, PyAny>>,
        quarantine: Option<Bound<'py, PyAny>>,
        now: f64,
        budget_seconds: Option<f64>,
        forced: Option<Bound<'py, PyDict>>,
        forced_by: Option<String>,
        max_documents: usize,
        max_text_chars: usize,
        elapsed: f64,
        clock: Option<Bound<'py, PyAny>>,
        audit_line: bool,
        explain: bool,
        executor: Option<Py<PyAny>>,
        defer_python: bool,
    ) -> PyResult<Option<Answer>> {
        let given = clock.map(PyClock::new);
        let clock: &dyn Clock = match &given {
            Some(c) => c,
            None => &Monotonic,
        };
        let owned;
        let bytes: &[u8] = if let Ok(b) = body.cast::<PyBytes>() {
            b.as_bytes()
        } else if let Ok(b) = body.cast::<PyByteArray>() {
            owned = b.to_vec();
            &owned
        } else {
            return Err(PyValueError::new_err("body must be bytes or bytearray"));
        };
        let forced: Vec<(String, String)> = match forced {
            Some(d) => d
                .extract::<Vec<(String, String)>>()
                .or_else(|_| d.items().extract::<Vec<(String, String)>>())?,
            None => Vec::new(),
        };
        let call = Call {
            banlist: snapshot(banlist)?,
            quarantine: snapshot(quarantine)?,
            now,
            budget_seconds,
            forced: &forced,
            forced_by: forced_by.as_deref(),
            limits: Limits {
                max_documents,
                max_text_chars,
            },
            elapsed,
            clock,
            audit_line,
            explain,
            executor: executor.as_ref(),
            defer_python,
        };
        let mut out = |n: usize| PyOut::with_capacity(py, n);
        match self.serve(bytes, &call, &mut out)? {
            Served::Deferred => Ok(None),
            Served::Reply(r) => Ok(Some((
                r.status,
                r.body.finish(py)?,
                r.line.map(|l| l.finish(py)).transpose()?,
                r.failures.into_iter().map(|f| f.into_py(py)).collect(),
                r.impression.map(Impression::into_tuple),
            ))),
        }
    }
}
