//! The contract's Python function: the wire's JSON Schemas (app/api/openapi.py).

use pyo3::prelude::*;

/// The JSON Schemas of /v1/rerank's request, answer and error bodies (`wire::schemas`), as
/// JSON text: the OpenAPI document's components for them.
#[pyfunction]
fn wire_schemas() -> String {
    serde_json::Value::Object(crate::wire::schemas()).to_string()
}

/// Add the contract's function to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(wire_schemas, m)?)?;
    Ok(())
}
