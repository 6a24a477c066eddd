//! Rearrange's data plane, as the Python module `app._engine`.
//!
//! Everything one `/v1/rerank` touches lives here; the control plane (config, stores,
//! experiments, the admin API) stays in Python and hands this module plain values.

pub mod contract;
pub mod json;

use pyo3::prelude::*;

/// The Python module `app._engine`.
#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    contract::py::register(m)?;
    Ok(())
}
