//! The compiled config the Python loader hands the engine (JSON), and the pipelines built
//! from it once per config load. Python has validated it; this checks it cheaply again
//! (unknown keys, phases a rule cannot run in, parameters a rule refuses).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use pyo3::prelude::*;
use serde::Deserialize;
use serde_json::Value;

use crate::experiments::{Experiment, Holdout};
use crate::record::Phase;
use crate::rules::python::PyRule;
use crate::rules::{phases_of, Rule};
use crate::runner::{OnError, Pipeline, Step};

/// The profile of requests whose classes have no route.
pub const DEFAULT_PROFILE: &str = "default";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecIn {
    version: String,
    profiles: BTreeMap<String, Vec<StepIn>>,
    #[serde(default)]
    routing: HashMap<String, String>,
    #[serde(default)]
    experiments: Vec<Experiment>,
    #[serde(default)]
    holdout: Option<Holdout>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepIn {
    phase: String,
    rule: String,
    #[serde(default)]
    params: Value,
    #[serde(default)]
    on_error: Option<String>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    valid_from: Option<f64>,
    #[serde(default)]
    valid_until: Option<f64>,
    #[serde(default)]
    window: Option<String>,
    #[serde(default)]
    experiment: Option<String>,
    #[serde(default)]
    variants: BTreeMap<String, Value>,
    #[serde(default)]
    python: Option<usize>,
    #[serde(default)]
    variant_python: BTreeMap<String, usize>,
    /// A Python rule's own time limit (`timeout_ms`), when shorter than the request's.
    #[serde(default)]
    timeout_ms: Option<f64>,
}

/// A loaded config: one pipeline per profile, routing, experiments.
pub struct Config {
    pub version: String,
    pub profiles: HashMap<String, Pipeline>,
    pub routing: HashMap<String, String>,
    pub experiments: Vec<Experiment>,
    pub holdout: Option<Holdout>,
    /// Profiles with a rule keyed on registrable domains (their pages compute them).
    pub needs_domain: HashMap<String, bool>,
    /// (rule name, experiment) of every gated step: whose records trigger an exposure.
    pub gates: Vec<(String, String)>,
}

impl Config {
    /// The profile of the first class that has a route, else `default`.
    pub fn route(&self, classes: &[crate::contract::Text<'_>]) -> &str {
        classes
            .iter()
            .find_map(|c| self.routing.get(&**c))
            .map_or(DEFAULT_PROFILE, String::as_str)
    }

    /// The experiment that gates the rule named `rule`, if one does (a rule is gated by
    /// one experiment at most: the loader refuses two).
    pub fn gate_of(&self, rule: &str) -> Option<&str> {
        self.gates
            .iter()
            .find(|(r, _)| r == rule)
            .map(|(_, e)| e.as_str())
    }

    /// The interleaving experiment named `name`, if it is one.
    pub fn interleaving(&self, name: &str) -> Option<&Experiment> {
        self.experiments
            .iter()
            .find(|e| e.name == name && e.interleave.is_some())
    }
}

fn merged(base: &Value, overrides: &Value) -> Value {
    let mut out = base.as_object().cloned().unwrap_or_default();
    if let Some(o) = overrides.as_object() {
        for (k, v) in o {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

/// The Python rules of a config: the instances its steps index, and a step's time limit.
struct PythonRules<'r> {
    rules: &'r [Py<PyAny>],
}

impl PythonRules<'_> {
    fn rule(
        &self,
        py: Python<'_>,
        name: &str,
        i: usize,
        timeout: Option<Duration>,
    ) -> Result<Rule, String> {
        let callable = self
            .rules
            .get(i)
            .ok_or_else(|| format!("python rule {i} not among the {} given", self.rules.len()))?;
        Ok(Rule::Python(PyRule {
            name: name.to_string(),
            callable: callable.clone_ref(py),
            timeout,
        }))
    }
}

/// `timeout_ms` as a duration: a positive, finite number of milliseconds.
fn timeout_of(ms: Option<f64>) -> Result<Option<Duration>, String> {
    match ms {
        None => Ok(None),
        Some(ms) if ms.is_finite() && ms > 0.0 => Ok(Some(Duration::from_secs_f64(ms / 1000.0))),
        Some(ms) => Err(format!("timeout_ms must be a positive number, not {ms}")),
    }
}

fn build_step(py: Python<'_>, s: StepIn, python: &PythonRules) -> Result<Step, String> {
    let phase = Phase::parse(&s.phase).ok_or_else(|| format!("unknown phase {:?}", s.phase))?;
    let timeout = timeout_of(s.timeout_ms)?;
    if timeout.is_some() && s.python.is_none() {
        return Err("timeout_ms is for Python rules only".into());
    }
    let rule = match s.python {
        Some(i) => python.rule(py, &s.rule, i, timeout)?,
        None => {
            let phases = phases_of(&s.rule).ok_or_else(|| format!("unknown rule {:?}", s.rule))?;
            if !phases.contains(&phase) {
                return Err(format!("{} cannot run in {}", s.rule, s.phase));
            }
            Rule::build(&s.rule, &s.params)?
        }
    };
    let mut variants = Vec::new();
    if s.python.is_some() {
        for (v, i) in &s.variant_python {
            variants.push((v.clone(), python.rule(py, &s.rule, *i, timeout)?));
        }
    } else {
        for (v, params) in &s.variants {
            let rule = Rule::build(&s.rule, &merged(&s.params, params))
                .map_err(|e| format!("variant {v}: {e}"))?;
            variants.push((v.clone(), rule));
        }
    }
    let on_error = match s.on_error.as_deref() {
        Some("open") => OnError::Open,
        Some("closed") => OnError::Closed,
        None if matches!(phase, Phase::PreFilter | Phase::PostFilter) => OnError::Closed,
        None => OnError::Open,
        Some(other) => return Err(format!("on_error must be open or closed, not {other:?}")),
    };
    Ok(Step {
        rule,
        phase,
        on_error,
        enabled: s.enabled,
        valid_from: s.valid_from,
        valid_until: s.valid_until,
        window: s.window,
        experiment: s.experiment,
        variants,
    })
}

/// Parse and build a compiled config; Err names the place of the problem.
pub fn build(py: Python<'_>, json: &str, python: &[Py<PyAny>]) -> Result<Config, String> {
    let spec: SpecIn = serde_json::from_str(json).map_err(|e| format!("compiled config: {e}"))?;
    if !spec.profiles.contains_key(DEFAULT_PROFILE) {
        return Err("profiles: a `default` profile is required".into());
    }
    let mut profiles = HashMap::new();
    let mut needs_domain = HashMap::new();
    let mut gates: Vec<(String, String)> = Vec::new();
    let python = PythonRules { rules: python };
    for (name, steps_in) in spec.profiles {
        let mut steps = Vec::with_capacity(steps_in.len());
        for (i, s) in steps_in.into_iter().enumerate() {
            let place = format!("profiles.{name}[{i}] {}", s.rule);
            steps.push(build_step(py, s, &python).map_err(|e| format!("{place}: {e}"))?);
        }
        // Phases run in their fixed order; within a phase, in the order given.
        steps.sort_by_key(|s| s.phase.index());
        for s in &steps {
            if let Some(e) = &s.experiment {
                let rule = s.rule.name();
                if !gates.iter().any(|(r, _)| r == rule) {
                    gates.push((rule.to_string(), e.clone()));
                }
            }
        }
        let domain = steps
            .iter()
            .any(|s| s.rule.needs_domain() || s.variants.iter().any(|(_, r)| r.needs_domain()));
        needs_domain.insert(name.clone(), domain);
        let python = steps.iter().any(|s| {
            std::iter::once(&s.rule)
                .chain(s.variants.iter().map(|(_, r)| r))
                .any(|r| matches!(r, Rule::Python(_)))
        });
        profiles.insert(
            name.clone(),
            Pipeline {
                profile: name,
                steps,
                python,
            },
        );
    }
    for (class, profile) in &spec.routing {
        if !profiles.contains_key(profile) {
            return Err(format!(
                "routing.{class}: routes to a missing profile {profile:?}"
            ));
        }
    }
    for e in &spec.experiments {
        if let Some(i) = &e.interleave {
            for p in [&i.control, &i.treatment] {
                if !profiles.contains_key(p) {
                    return Err(format!(
                        "experiments {}: interleaves a missing profile {p:?}",
                        e.name
                    ));
                }
            }
        }
    }
    Ok(Config {
        version: spec.version,
        profiles,
        routing: spec.routing,
        experiments: spec.experiments,
        holdout: spec.holdout,
        needs_domain,
        gates,
    })
}
