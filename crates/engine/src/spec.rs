//! The compiled config the Python loader hands the engine (JSON), and the pipelines built
//! from it once per config load. Python has validated it; this checks it cheaply again
//! (unknown keys, phases a rule cannot run in, parameters a rule refuses).

use std::collections::{BTreeMap, HashMap};

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
}

impl Config {
    /// The profile of the first class that has a route, else `default`.
    pub fn route(&self, classes: &[crate::contract::Text<'_>]) -> &str {
        classes
            .iter()
            .find_map(|c| self.routing.get(&**c))
            .map_or(DEFAULT_PROFILE, String::as_str)
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

fn python_rule(py: Python<'_>, name: &str, i: usize, rules: &[Py<PyAny>]) -> Result<Rule, String> {
    let callable = rules
        .get(i)
        .ok_or_else(|| format!("python rule {i} not among the {} given", rules.len()))?;
    Ok(Rule::Python(PyRule {
        name: name.to_string(),
        callable: callable.clone_ref(py),
    }))
}

fn build_step(py: Python<'_>, s: StepIn, python: &[Py<PyAny>]) -> Result<Step, String> {
    let phase = Phase::parse(&s.phase).ok_or_else(|| format!("unknown phase {:?}", s.phase))?;
    let rule = match s.python {
        Some(i) => python_rule(py, &s.rule, i, python)?,
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
            variants.push((v.clone(), python_rule(py, &s.rule, *i, python)?));
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
    for (name, steps_in) in spec.profiles {
        let mut steps = Vec::with_capacity(steps_in.len());
        for (i, s) in steps_in.into_iter().enumerate() {
            let place = format!("profiles.{name}[{i}] {}", s.rule);
            steps.push(build_step(py, s, python).map_err(|e| format!("{place}: {e}"))?);
        }
        // Phases run in their fixed order; within a phase, in the order given.
        steps.sort_by_key(|s| s.phase.index());
        let domain = steps
            .iter()
            .any(|s| s.rule.needs_domain() || s.variants.iter().any(|(_, r)| r.needs_domain()));
        needs_domain.insert(name.clone(), domain);
        profiles.insert(
            name.clone(),
            Pipeline {
                profile: name,
                steps,
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
    Ok(Config {
        version: spec.version,
        profiles,
        routing: spec.routing,
        experiments: spec.experiments,
        holdout: spec.holdout,
        needs_domain,
    })
}
