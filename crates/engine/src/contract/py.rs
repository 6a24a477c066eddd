//! The contract's Python functions: the decoder's verdict on a body, and the JSON writers,
//! for the property tests that hold them to tests/reference/contract.py and msgspec.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::{decode, Document, Limits, Request, Text};
use crate::json::{write_f64, write_i64, write_list, write_opt_str, write_str, write_u64};

pyo3::create_exception!(
    _engine,
    BodyRefused,
    PyValueError,
    "A refused /v1/rerank body: args are (status, field, problem)."
);

fn limits(max_documents: usize, max_text_chars: usize) -> Limits {
    Limits {
        max_documents,
        max_text_chars,
    }
}

fn run(body: &[u8], max_documents: usize, max_text_chars: usize) -> PyResult<Request<'_>> {
    decode(body, &limits(max_documents, max_text_chars))
        .map_err(|e| BodyRefused::new_err((e.status, e.field, e.problem)))
}

/// Decode and check a body as the engine will; BodyRefused(status, field, problem) if bad.
#[pyfunction]
fn decode_check(body: &[u8], max_documents: usize, max_text_chars: usize) -> PyResult<()> {
    run(body, max_documents, max_text_chars).map(drop)
}

/// The decoded request written back as msgspec writes app.api.contract.RerankRequest.
#[pyfunction]
fn decode_dump<'py>(
    py: Python<'py>,
    body: &[u8],
    max_documents: usize,
    max_text_chars: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let req = run(body, max_documents, max_text_chars)?;
    let mut out = Vec::new();
    dump(&mut out, &req);
    Ok(PyBytes::new(py, &out))
}

fn opt_str(out: &mut Vec<u8>, v: &Option<Text<'_>>) {
    write_opt_str(out, v.as_deref());
}

fn strs(out: &mut Vec<u8>, v: &[Text<'_>]) {
    write_list(out, v, |out, s| write_str(out, s));
}

fn key(out: &mut Vec<u8>, first: bool, k: &str) {
    if !first {
        out.push(b',');
    }
    write_str(out, k);
    out.push(b':');
}

fn dump(out: &mut Vec<u8>, r: &Request) {
    out.extend_from_slice(b"{\"documents\":[");
    for (i, d) in r.documents.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        dump_doc(out, d);
    }
    out.extend_from_slice(b"],\"request_id\":");
    opt_str(out, &r.request_id);
    out.extend_from_slice(b",\"query\":{\"text\":");
    write_str(out, &r.query.text);
    out.extend_from_slice(b",\"classes\":");
    strs(out, &r.query.classes);
    out.extend_from_slice(b",\"region\":");
    opt_str(out, &r.query.region);
    out.extend_from_slice(b",\"age_mode\":");
    write_str(out, r.query.age_mode.as_str());
    out.extend_from_slice(b"},\"unit\":{");
    for (i, (k, v)) in r.unit.iter().enumerate() {
        key(out, i == 0, k);
        write_str(out, v);
    }
    out.extend_from_slice(b"},\"profile\":");
    opt_str(out, &r.profile);
    out.extend_from_slice(b",\"depth\":");
    match r.depth {
        Some(d) => write_u64(out, u64::from(d)),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b'}');
}

fn dump_doc(out: &mut Vec<u8>, d: &Document) {
    out.extend_from_slice(b"{\"id\":");
    write_str(out, &d.id);
    out.extend_from_slice(b",\"url\":");
    write_str(out, &d.url);
    out.extend_from_slice(b",\"score\":");
    write_f64(out, d.score);
    out.extend_from_slice(b",\"factors\":{");
    for (i, (k, v)) in d.factors.iter().enumerate() {
        key(out, i == 0, k);
        write_f64(out, *v);
    }
    out.extend_from_slice(b"},\"spam_score\":");
    write_f64(out, d.spam_score);
    out.extend_from_slice(b",\"adult_score\":");
    write_f64(out, d.adult_score);
    out.extend_from_slice(b",\"domain_age_days\":");
    match d.domain_age_days {
        Some(v) => write_f64(out, v),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(if d.is_ad {
        b",\"is_ad\":true,\"topics\":"
    } else {
        b",\"is_ad\":false,\"topics\":"
    });
    strs(out, &d.topics);
    out.extend_from_slice(b",\"blocked_regions\":");
    strs(out, &d.blocked_regions);
    out.extend_from_slice(b",\"text\":");
    opt_str(out, &d.text);
    out.extend_from_slice(b",\"minhash\":");
    match &d.minhash {
        Some(m) => {
            out.extend_from_slice(b"{\"values\":[");
            for (i, v) in m.values.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_u64(out, *v);
            }
            out.extend_from_slice(b"],\"shingles\":");
            write_u64(out, m.shingles);
            out.extend_from_slice(b",\"width\":");
            write_u64(out, u64::from(m.width));
            out.extend_from_slice(b",\"seed\":");
            write_u64(out, m.seed);
            out.push(b'}');
        }
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"attributes\":");
    out.extend_from_slice(d.attributes.as_bytes());
    out.push(b'}');
}

/// A str as the engine writes it in JSON.
#[pyfunction]
fn encode_json_str<'py>(py: Python<'py>, s: &str) -> Bound<'py, PyBytes> {
    let mut out = Vec::new();
    write_str(&mut out, s);
    PyBytes::new(py, &out)
}

/// A float as the engine writes it in JSON.
#[pyfunction]
fn encode_json_f64(py: Python<'_>, v: f64) -> Bound<'_, PyBytes> {
    let mut out = Vec::new();
    write_f64(&mut out, v);
    PyBytes::new(py, &out)
}

/// An int (i64) as the engine writes it in JSON.
#[pyfunction]
fn encode_json_i64(py: Python<'_>, v: i64) -> Bound<'_, PyBytes> {
    let mut out = Vec::new();
    write_i64(&mut out, v);
    PyBytes::new(py, &out)
}

/// `repr()` of a str as the engine writes it in problems.
#[pyfunction]
fn py_repr(s: &str) -> String {
    super::py_repr(s)
}

/// Add the contract's functions and BodyRefused to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("BodyRefused", m.py().get_type::<BodyRefused>())?;
    m.add_function(wrap_pyfunction!(decode_check, m)?)?;
    m.add_function(wrap_pyfunction!(decode_dump, m)?)?;
    m.add_function(wrap_pyfunction!(encode_json_str, m)?)?;
    m.add_function(wrap_pyfunction!(encode_json_f64, m)?)?;
    m.add_function(wrap_pyfunction!(encode_json_i64, m)?)?;
    m.add_function(wrap_pyfunction!(py_repr, m)?)?;
    Ok(())
}
