//! Rearrange's data plane, as the Python module `app._engine`.
//!
//! Everything one `/v1/rerank` touches lives here; the control plane (config, stores,
//! experiments, the admin API) stays in Python and hands this module plain values.

pub mod contract;
pub mod json;

use pyo3::prelude::*;

/// mimalloc for every Rust allocation of the engine: a request builds and drops a few
/// thousand small strings, and glibc's malloc spent about a quarter of a body's decoding
/// on them (its free-list consolidation above all); the Python side keeps its own.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The Python module `app._engine`.
#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    contract::py::register(m)?;
    Ok(())
}
