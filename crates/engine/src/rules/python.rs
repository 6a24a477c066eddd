//! A Python rule (CONTRACT.md "Python rules"): called with the page as dicts in the
//! request's document format and a context dict; what it returns is checked
//! (`python_output`) before the runner takes it, and anything it cannot vouch for is a
//! failure of the rule. Problems are worded as the Python runner (the reference model,
//! tests/reference/plugins.py) words them.
//!
//! With an executor (the service's `app.engine.executor.RuleExecutor`) the call runs in
//! one of its rule processes and this thread waits for the answer at most until the
//! request's deadline or the step's `timeout_ms`, whichever comes first (the wait releases
//! the GIL): a rule that has not returned by then is a failure, `timeout`, whatever it is
//! doing, and the executor kills the process it ran in. Without one (the offline tools,
//! the engine's own tests) the rule is called here, as it is.

use std::sync::Arc;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::python_output::check;
use super::{Cause, Ctx, Failure, RuleResult};
use crate::contract::given;
use crate::doc::Doc;
use crate::record::Phase;

create_exception!(
    app._engine,
    RuleTimeout,
    PyException,
    "A Python rule did not return in its time: the executor raises it in the waiting caller."
);

/// The problem of a Python rule that did not return in its time (CONTRACT "Python rules").
pub const TIMEOUT: &str = "timeout";

/// The longest exception message a problem keeps: the 503 body and the log line carry it.
const MAX_MESSAGE_CHARS: usize = 1000;

/// A callable `rule(documents, context) -> (documents, records)` built by Python.
pub struct PyRule {
    pub name: String,
    pub callable: Py<PyAny>,
    /// The step's `timeout_ms`: the rule's time when shorter than what is left of the
    /// request's (only with an executor).
    pub timeout: Option<Duration>,
}

/// `text` on one line: control characters (line breaks, escape sequences) and Unicode's
/// line and paragraph separators as Python's repr writes them, cut after
/// `MAX_MESSAGE_CHARS`. What a rule raises goes into a log line and an error body: a
/// newline in it must not start a line of its own (a forged log record).
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(4 * MAX_MESSAGE_CHARS));
    for (n, c) in text.chars().enumerate() {
        if n == MAX_MESSAGE_CHARS {
            let rest = text.chars().count() - n;
            out.push_str(&format!("... ({rest} more characters)"));
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x100 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// An exception of the rule (or of a check its output made Python run) as the Python
/// runner says it, `raised <type>: <message>`, with the exception for the log.
fn raised(py: Python<'_>, err: PyErr) -> Failure {
    let kind = err
        .get_type(py)
        .name()
        .map(|n| one_line(&n.to_string()))
        .unwrap_or_else(|_| "Exception".into());
    let message = err
        .value(py)
        .str()
        .map(|s| one_line(&s.to_string_lossy()))
        .unwrap_or_else(|_| "<its str() raised>".into());
    let cause = Cause(Arc::new(err.into_value(py).into_any()));
    Failure::Raised(format!("raised {kind}: {message}"), cause)
}

impl PyRule {
    /// Call the rule on `docs` (in the executor's process when the request has one) and
    /// check what it returns.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>, phase: Phase) -> RuleResult<'a> {
        Python::attach(|py| {
            let called = match ctx.executor {
                Some(executor) => match self.time_left(ctx) {
                    Some(left) if left.is_zero() => {
                        // No time left to give it: the timeout it would have been, counted
                        // as one (rearrange_python_rule_events_total), not left out.
                        let executor = executor.bind(py);
                        if let Err(err) = executor.call_method1("expired", (&self.name,)) {
                            err.write_unraisable(py, Some(executor));
                        }
                        return Err(Failure::Failed(TIMEOUT.into()));
                    }
                    left => self.call_on(py, executor.bind(py), docs, ctx, phase, left),
                },
                None => self
                    .arguments(py, docs, ctx, phase)
                    .and_then(|args| self.callable.bind(py).call1(args)),
            };
            let result = match called {
                Ok(result) => result,
                Err(err) if err.is_instance_of::<RuleTimeout>(py) => {
                    return Err(Failure::Failed(TIMEOUT.into()))
                }
                Err(err) => return Err(raised(py, err)),
            };
            check(ctx, docs, phase, &result).unwrap_or_else(|err| Err(raised(py, err)))
        })
    }

    /// The rule's time from now: what is left of the request's (none past its deadline)
    /// or the step's `timeout_ms`, the shorter; None when there is neither.
    fn time_left(&self, ctx: &Ctx) -> Option<Duration> {
        let left = ctx
            .deadline
            .map(|at| at.saturating_duration_since(ctx.clock.now()));
        match (left, self.timeout) {
            (Some(l), Some(t)) => Some(l.min(t)),
            (l, t) => l.or(t),
        }
    }

    /// `executor.call(name, rule, (documents, context), seconds)`: the rule's result, its
    /// exception, or RuleTimeout once `left` has passed (None: the executor's own limit).
    fn call_on<'py>(
        &self,
        py: Python<'py>,
        executor: &Bound<'py, PyAny>,
        docs: &[Doc],
        ctx: &Ctx,
        phase: Phase,
        left: Option<Duration>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = self.arguments(py, docs, ctx, phase)?;
        let seconds = left.map(|l| l.as_secs_f64());
        executor.call_method1(
            intern!(py, "call"),
            (&self.name, self.callable.bind(py), args, seconds),
        )
    }

    /// `(documents, context)` as the rule takes them.
    fn arguments<'py>(
        &self,
        py: Python<'py>,
        docs: &[Doc],
        ctx: &Ctx,
        phase: Phase,
    ) -> PyResult<Bound<'py, PyTuple>> {
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
        PyTuple::new(py, [documents.into_any(), context.into_any()])
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_escapes_line_breaks_and_controls_and_cuts_a_long_message() {
        assert_eq!(
            one_line("bad\nINFO: forged\r\t\u{1b}[2J\u{85}\u{7f}\u{2028}é ok"),
            "bad\\nINFO: forged\\r\\t\\x1b[2J\\x85\\x7f\\u2028é ok"
        );
        let long = "x".repeat(MAX_MESSAGE_CHARS + 5);
        let cut = one_line(&long);
        assert!(cut.ends_with("x... (5 more characters)"));
        assert_eq!(cut.chars().filter(|&c| c == 'x').count(), MAX_MESSAGE_CHARS);
    }
}
