//! A Python rule (CONTRACT.md "Python rules"): called with the page as dicts in the
//! request's document format and a context dict; its output is checked before the runner
//! takes it, and anything it cannot vouch for is a failure of the rule.

use foldhash::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString};

use super::{Ctx, Failure, Out, RuleResult};
use crate::doc::Doc;
use crate::record::{Action, Delta, Phase, Rec};

/// A callable `rule(documents, context) -> (documents, records)` built by Python.
pub struct PyRule {
    pub name: String,
    pub callable: Py<PyAny>,
}

fn failed(problem: impl Into<String>) -> Failure {
    Failure::Failed(problem.into())
}

fn py_problem(py: Python<'_>, err: PyErr) -> Failure {
    let kind = err
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    failed(format!("{kind}: {}", err.value(py)))
}

impl PyRule {
    /// Call the rule on `docs` and check what it returns.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>, phase: Phase) -> RuleResult<'a> {
        Python::attach(|py| match self.call(py, docs, ctx, phase) {
            Ok(out) => out,
            Err(err) => Err(py_problem(py, err)),
        })
    }

    fn call<'a>(
        &self,
        py: Python<'_>,
        docs: &[Doc],
        ctx: &Ctx<'a>,
        phase: Phase,
    ) -> PyResult<RuleResult<'a>> {
        let loads = py.import("json")?.getattr("loads")?;
        let documents = PyList::empty(py);
        for doc in docs {
            documents.append(document_dict(py, ctx, doc, &loads)?)?;
        }
        let context = PyDict::new(py);
        let q = &ctx.page.req.query;
        let query = PyDict::new(py);
        query.set_item("text", &q.text)?;
        query.set_item("classes", &q.classes)?;
        query.set_item("region", &q.region)?;
        query.set_item("age_mode", q.age_mode.as_str())?;
        context.set_item("query", query)?;
        context.set_item("profile", ctx.profile)?;
        let variants = PyDict::new(py);
        for (e, v) in ctx.variants {
            variants.set_item(e, v)?;
        }
        context.set_item("variants", variants)?;
        context.set_item("phase", phase.as_str())?;
        let result = self.callable.bind(py).call1((documents, context))?;
        let Ok((out_docs, out_recs)) = result.extract::<(Bound<PyAny>, Bound<PyAny>)>() else {
            return Ok(Err(failed("must return a (documents, records) tuple")));
        };
        Ok(check(ctx, docs, &out_docs, &out_recs))
    }
}

fn document_dict<'py>(
    py: Python<'py>,
    ctx: &Ctx,
    doc: &Doc,
    loads: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = ctx.page.src(doc);
    let out = PyDict::new(py);
    out.set_item("id", &d.id)?;
    out.set_item("url", &d.url)?;
    out.set_item("score", doc.score)?;
    let factors = PyDict::new(py);
    for (k, v) in &d.factors {
        factors.set_item(k, v)?;
    }
    out.set_item("factors", factors)?;
    out.set_item("spam_score", d.spam_score)?;
    out.set_item("adult_score", d.adult_score)?;
    if let Some(age) = d.domain_age_days {
        out.set_item("domain_age_days", age)?;
    }
    out.set_item("is_ad", d.is_ad)?;
    out.set_item("topics", &d.topics)?;
    out.set_item("blocked_regions", &d.blocked_regions)?;
    if let Some(text) = &d.text {
        out.set_item("text", text)?;
    }
    if let Some(m) = &d.minhash {
        let mh = PyDict::new(py);
        mh.set_item("values", &m.values)?;
        mh.set_item("shingles", m.shingles)?;
        mh.set_item("width", m.width)?;
        mh.set_item("seed", m.seed)?;
        out.set_item("minhash", mh)?;
    }
    out.set_item("attributes", loads.call1((&d.attributes,))?)?;
    Ok(out)
}

fn text(item: &Bound<PyAny>, key: &str) -> Result<Option<String>, Failure> {
    let dict = item
        .cast::<PyDict>()
        .map_err(|_| failed("returned a document or record that is not a dict"))?;
    match dict.get_item(key).map_err(|e| failed(e.to_string()))? {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) if v.is_instance_of::<PyString>() => {
            Ok(Some(v.extract().map_err(|e: PyErr| failed(e.to_string()))?))
        }
        Some(_) => Err(failed(format!("{key} must be a string"))),
    }
}

fn number(v: &Bound<PyAny>) -> Option<Delta> {
    if v.is_instance_of::<PyBool>() {
        return None;
    }
    if v.is_instance_of::<PyInt>() {
        return v.extract::<i64>().ok().map(Delta::Int);
    }
    if v.is_instance_of::<PyFloat>() {
        return v
            .extract::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .map(Delta::Float);
    }
    None
}

fn check<'a>(
    ctx: &Ctx<'a>,
    docs: &[Doc],
    out_docs: &Bound<PyAny>,
    out_recs: &Bound<PyAny>,
) -> RuleResult<'a> {
    let page = ctx.page;
    let index: HashMap<&str, usize> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| (page.id(d), i))
        .collect();
    let mut taken = vec![false; docs.len()];
    let mut new_docs = Vec::new();
    let items = out_docs
        .try_iter()
        .map_err(|_| failed("documents must be a list"))?;
    for item in items {
        let item = item.map_err(|e| failed(e.to_string()))?;
        let id = text(&item, "id")?.ok_or_else(|| failed("a document without an id"))?;
        let Some(&i) = index.get(id.as_str()) else {
            return Err(failed(format!(
                "returned id {id:?} that was not in its input"
            )));
        };
        if std::mem::replace(&mut taken[i], true) {
            return Err(failed(format!("returned id {id:?} twice")));
        }
        let score = item
            .cast::<PyDict>()
            .ok()
            .and_then(|d| d.get_item("score").ok().flatten())
            .ok_or_else(|| failed(format!("document {id:?} has no score")))?;
        let score = match number(&score) {
            Some(Delta::Int(n)) => n as f64,
            Some(Delta::Float(x)) => x,
            _ => {
                return Err(failed(format!(
                    "document {id:?}: score is not a finite number"
                )))
            }
        };
        let mut doc = docs[i].clone();
        doc.score = score;
        new_docs.push((i, doc));
    }
    let mut recs = Vec::new();
    let recs_iter = out_recs
        .try_iter()
        .map_err(|_| failed("records must be a list"))?;
    for item in recs_iter {
        let item = item.map_err(|e| failed(e.to_string()))?;
        let doc_id = match text(&item, "doc_id")? {
            None => None,
            Some(id) => match index.get(id.as_str()) {
                Some(&i) => Some(page.id(&docs[i])),
                None => {
                    return Err(failed(format!(
                        "a record names id {id:?} that was not in its input"
                    )))
                }
            },
        };
        let action = text(&item, "action")?.ok_or_else(|| failed("a record without an action"))?;
        let action = match Action::parse(&action) {
            Some(a) if a != Action::Fallback && a != Action::Collapse => a,
            _ => return Err(failed(format!("a record with action {action:?} (a Python rule may remove, trim, rescore, move or annotate)"))),
        };
        let reason = text(&item, "reason")?.unwrap_or_default();
        let dict = item
            .cast::<PyDict>()
            .map_err(|_| failed("a record that is not a dict"))?;
        let delta = match dict.get_item("delta").map_err(|e| failed(e.to_string()))? {
            None => Delta::None,
            Some(v) if v.is_none() => Delta::None,
            Some(v) => {
                number(&v).ok_or_else(|| failed("a record's delta is not a finite number"))?
            }
        };
        recs.push(Rec {
            doc_id,
            action,
            reason,
            delta,
            relax_to: None,
        });
    }
    let has = |id: &str, actions: &[Action]| {
        recs.iter()
            .any(|r| r.doc_id == Some(id) && actions.contains(&r.action))
    };
    for (i, doc) in docs.iter().enumerate() {
        let id = page.id(doc);
        if !taken[i] && !has(id, &[Action::Remove, Action::Trim]) {
            return Err(failed(format!("removed {id:?} without a remove record")));
        }
    }
    for (i, doc) in &new_docs {
        if doc.score != docs[*i].score && !has(page.id(doc), &[Action::Rescore]) {
            return Err(failed(format!(
                "rescored {:?} without a rescore record",
                page.id(doc)
            )));
        }
    }
    // A removed document takes what was collapsed under it, each with its own record.
    for (i, doc) in docs.iter().enumerate() {
        if !taken[i] && !doc.collapsed.is_empty() {
            let id = page.id(doc);
            for c in &doc.collapsed {
                recs.push(Rec::new(
                    Some(page.id_at(c.at)),
                    Action::Remove,
                    format!("collapsed under {id}, removed with it"),
                ));
            }
        }
    }
    let new: Vec<Doc> = new_docs.into_iter().map(|(_, d)| d).collect();
    let unchanged = new.len() == docs.len() && new.iter().zip(docs).all(|(a, b)| a == b);
    Ok(Out {
        docs: if unchanged { None } else { Some(new) },
        recs,
    })
}

/// A `PyValueError` naming the rule, for config problems found at engine build.
pub fn config_error(msg: String) -> PyErr {
    PyValueError::new_err(msg)
}
