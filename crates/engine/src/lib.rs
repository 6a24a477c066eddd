//! Rearrange's data plane, as the Python module `app._engine`.
//!
//! Everything one `/v1/rerank` touches lives here; the control plane (config, stores,
//! experiments, the admin API) stays in Python and hands this module plain values.

#[cfg(not(miri))] // Miri cannot run mimalloc's C (below)
mod alloc;
pub mod banlist;
pub mod clock;
pub mod contract;
pub mod doc;
pub mod domain;
pub mod effects;
pub mod engine;
pub mod experiments;
pub mod explain;
pub mod fmt;
pub mod interleave;
pub mod json;
pub mod metrics;
pub mod neardup;
pub mod out;
pub mod record;
pub mod response;
pub mod rules;
pub mod runner;
pub mod serve;
pub mod spec;
pub mod traffic;
pub mod url;
pub mod wire;

#[cfg(test)]
mod testing;

use pyo3::prelude::*;

/// mimalloc for every Rust allocation of the engine: a request builds and drops a few
/// thousand small strings, and glibc's malloc spent about a quarter of a body's decoding
/// on them (its free-list consolidation above all); the Python side keeps its own. Not
/// under Miri, which cannot run mimalloc's C and checks Rust's own allocator instead.
#[cfg(not(miri))]
#[global_allocator]
static GLOBAL: alloc::MiMalloc = alloc::MiMalloc;

/// The Python module `app._engine`.
#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<engine::Engine>()?;
    m.add_class::<metrics::EngineMetrics>()?;
    m.add_class::<serve::DataPlane>()?;
    m.add(
        "RuleTimeout",
        m.py().get_type::<rules::python::RuleTimeout>(),
    )?;
    banlist::register(m)?;
    neardup::audit_py::register(m)?;
    url::register(m)?;
    domain::register(m)?;
    contract::py::register(m)?;
    rules::catalog::register(m)?;
    Ok(())
}
