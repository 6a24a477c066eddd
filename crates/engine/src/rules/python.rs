//! A Python rule (CONTRACT.md "Python rules"): called with the page as dicts in the
//! request's document format and a context dict; what it returns is checked
//! (`python_output`) before the runner takes it, and anything it cannot vouch for is a
//! failure of the rule. Problems are worded as the Python runner (the reference model,
//! tests/reference/plugins.py) words them.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::python_output::check;
use super::{Cause, Ctx, Failure, RuleResult};
use crate::contract::given;
use crate::doc::Doc;
use crate::record::Phase;

/// A callable `rule(documents, context) -> (documents, records)` built by Python.
pub struct PyRule {
    pub name: String,
    pub callable: Py<PyAny>,
}

/// An exception of the rule (or of a check its output made Python run) as the Python
/// runner says it, `raised <type>: <message>`, with the exception for the log.
fn raised(py: Python<'_>, err: PyErr) -> Failure {
    let kind = err
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let message = err
        .value(py)
        .str()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "<its str() raised>".into());
    let cause = Cause(Arc::new(err.into_value(py).into_any()));
    Failure::Raised(format!("raised {kind}: {message}"), cause)
}

impl PyRule {
    /// Call the rule on `docs` and check what it returns.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>, phase: Phase) -> RuleResult<'a> {
        Python::attach(|py| {
            let checked = self
                .call(py, docs, ctx, phase)
                .and_then(|result| check(ctx, docs, phase, &result));
            checked.unwrap_or_else(|err| Err(raised(py, err)))
        })
    }

    fn call<'py>(
        &self,
        py: Python<'py>,
        docs: &[Doc],
        ctx: &Ctx,
        phase: Phase,
    ) -> PyResult<Bound<'py, PyAny>> {
        // msgspec, as the request was decoded: the same values for `attributes`.
        let decode = py.import("msgspec.json")?.getattr("decode")?;
        let documents = PyList::empty(py);
        for doc in docs {
            documents.append(document(py, ctx, doc, &decode)?)?;
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
        self.callable.bind(py).call1((documents, context))
    }
}

/// The document as the request gave it: `id`, `url`, the current `score` and exactly the
/// optional fields the request had (a null one as None), in the contract's field order.
fn document<'py>(
    py: Python<'py>,
    ctx: &Ctx,
    doc: &Doc,
    decode: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = ctx.page.src(doc);
    let has = |bit: u16| d.given & bit != 0;
    let out = PyDict::new(py);
    out.set_item("id", &d.id)?;
    out.set_item("url", &d.url)?;
    out.set_item("score", doc.score)?;
    if has(given::FACTORS) {
        let factors = PyDict::new(py);
        for (k, v) in &d.factors {
            factors.set_item(k, v)?;
        }
        out.set_item("factors", factors)?;
    }
    if has(given::SPAM_SCORE) {
        out.set_item("spam_score", d.spam_score)?;
    }
    if has(given::ADULT_SCORE) {
        out.set_item("adult_score", d.adult_score)?;
    }
    if has(given::DOMAIN_AGE_DAYS) {
        out.set_item("domain_age_days", d.domain_age_days)?;
    }
    if has(given::IS_AD) {
        out.set_item("is_ad", d.is_ad)?;
    }
    if has(given::TOPICS) {
        out.set_item("topics", d.topics.as_slice())?;
    }
    if has(given::BLOCKED_REGIONS) {
        out.set_item("blocked_regions", d.blocked_regions.as_slice())?;
    }
    if has(given::TEXT) {
        out.set_item("text", &d.text)?;
    }
    if has(given::MINHASH) {
        match &d.minhash {
            Some(m) => {
                let mh = PyDict::new(py);
                mh.set_item("values", &m.values)?;
                mh.set_item("shingles", m.shingles)?;
                mh.set_item("width", m.width)?;
                mh.set_item("seed", m.seed)?;
                out.set_item("minhash", mh)?;
            }
            None => out.set_item("minhash", py.None())?,
        }
    }
    if has(given::ATTRIBUTES) {
        out.set_item("attributes", decode.call1((&d.attributes,))?)?;
    }
    Ok(out)
}

/// A `PyValueError` naming the rule, for config problems found at engine build.
pub fn config_error(msg: String) -> PyErr {
    PyValueError::new_err(msg)
}
