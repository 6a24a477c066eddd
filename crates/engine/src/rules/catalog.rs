//! The catalog of built-in rules, the one export the control plane reads them from: each
//! rule's name, phases, description and parameters' JSON Schema, and a check of a step's
//! parameters by the code that builds the rule. The config loader, `check-config` and
//! the docs derive from it; nothing in Python declares a built-in again.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::Serialize;
use serde_json::{Map, Number, Value};

use super::{Builtin, Rule};

/// One built-in rule as the catalog lists it.
#[derive(Serialize)]
pub struct Entry {
    pub name: &'static str,
    pub phases: Vec<&'static str>,
    /// The doc comment of its `Params`: what the rule does.
    pub description: String,
    /// JSON Schema of its parameters (defaults, ranges, the fields' docs).
    pub params: Value,
}

impl Entry {
    /// The entry of rule `R`.
    pub fn of<R: Builtin>() -> Entry {
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<R::Params>();
        let mut params = serde_json::to_value(&schema).expect("a schema is JSON");
        if let Some(obj) = params.as_object_mut() {
            obj.remove("title"); // the Rust type's name (`Params`), not the rule's
        }
        let description = (params.get("description").and_then(Value::as_str))
            .unwrap_or_default()
            .to_string();
        Entry {
            name: R::NAME,
            phases: R::PHASES.iter().map(|p| p.as_str()).collect(),
            description,
            params,
        }
    }
}

/// Without arguments: the catalog as JSON text, a list of {name, phases, description,
/// params (JSON Schema)}. With a rule's `name` and `params` (the step's mapping as YAML
/// gave it): those parameters checked as the engine builds the rule, returned as JSON
/// text with every default filled; ValueError naming the parameter and the problem.
#[pyfunction]
#[pyo3(signature = (name=None, params=None))]
pub fn builtin_rules(name: Option<&str>, params: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    let Some(name) = name else {
        let all = super::catalog();
        return Ok(serde_json::to_string(&all).expect("the catalog is JSON"));
    };
    let raw = match params {
        None => Value::Null,
        Some(p) => to_json(p, "").map_err(PyValueError::new_err)?,
    };
    let normal = Rule::check(name, &raw).map_err(PyValueError::new_err)?;
    Ok(normal.to_string())
}

/// A value YAML gave as JSON; Err names the place (`weights.link: inf is not a finite
/// number`) of what JSON cannot hold.
fn to_json(v: &Bound<'_, PyAny>, at: &str) -> Result<Value, String> {
    let here = |problem: String| {
        if at.is_empty() {
            problem
        } else {
            format!("{at}: {problem}")
        }
    };
    if v.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if v.cast::<PyInt>().is_ok() {
        if let Ok(i) = v.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = v.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(here(format!("{v} is too large")));
    }
    if let Ok(f) = v.cast::<PyFloat>() {
        let x = f.value();
        return Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| here(format!("{x} is not a finite number")));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(Value::String(
            s.to_str().map_err(|e| here(e.to_string()))?.to_owned(),
        ));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        let mut out = Map::new();
        for (k, item) in d.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                return Err(here(format!("key {k} is not a string (quote it)")));
            };
            let key = key.to_str().map_err(|e| here(e.to_string()))?.to_owned();
            let path = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}.{key}")
            };
            out.insert(key, to_json(&item, &path)?);
        }
        return Ok(Value::Object(out));
    }
    let items: Vec<Bound<'_, PyAny>> = if let Ok(l) = v.cast::<PyList>() {
        l.iter().collect()
    } else if let Ok(t) = v.cast::<PyTuple>() {
        t.iter().collect()
    } else {
        let kind = v.get_type().name().map_or("?".into(), |n| n.to_string());
        return Err(here(format!("a {kind} is not a parameter value")));
    };
    (items.iter().enumerate())
        .map(|(i, item)| to_json(item, &format!("{at}[{i}]")))
        .collect::<Result<_, _>>()
        .map(Value::Array)
}

/// Add `builtin_rules` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(builtin_rules, m)?)
}
