//! The contract's Python functions: the decoder's verdict on a body (bench/contract.py), and
//! the wire's JSON Schemas (app/api/openapi.py).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::{decode, Limits, Request};

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

/// The JSON Schemas of /v1/rerank's request, answer and error bodies (`wire::schemas`), as
/// JSON text: the OpenAPI document's components for them.
#[pyfunction]
fn wire_schemas() -> String {
    serde_json::Value::Object(crate::wire::schemas()).to_string()
}

/// Add the contract's functions and BodyRefused to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("BodyRefused", m.py().get_type::<BodyRefused>())?;
    m.add_function(wrap_pyfunction!(decode_check, m)?)?;
    m.add_function(wrap_pyfunction!(wire_schemas, m)?)?;
    Ok(())
}
