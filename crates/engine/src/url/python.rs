//! The URL functions as Python sees them (`app._engine`), for app/banlist/canon.py.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use super::UrlError;

create_exception!(
    app._engine,
    InvalidURL,
    PyValueError,
    "A URL that cannot be canonicalized; the message says what is wrong."
);

fn invalid(error: UrlError) -> PyErr {
    InvalidURL::new_err(error.to_string())
}

/// The text of a Python str; one with an unpaired surrogate is no URL.
fn text<'a>(url: &'a Bound<'_, PyString>) -> PyResult<std::borrow::Cow<'a, str>> {
    url.to_cow().map_err(|_| invalid(UrlError::Surrogate))
}

/// The Safe Browsing canonical form of a URL, its host as a browser resolves it.
#[pyfunction]
fn canonicalize(url: &Bound<'_, PyString>) -> PyResult<String> {
    super::canonicalize(&text(url)?).map_err(invalid)
}

/// (canonical URL, its host) in one call.
#[pyfunction]
fn canonicalize_with_host(url: &Bound<'_, PyString>) -> PyResult<(String, String)> {
    super::canonicalize_with_host(&text(url)?).map_err(invalid)
}

/// The canonical form of a URL given as bytes, which need not be UTF-8.
#[pyfunction]
fn canonicalize_bytes(raw: &[u8]) -> PyResult<String> {
    super::canonicalize_bytes(raw).map_err(invalid)
}

/// The dotted quad for any IPv4 spelling Safe Browsing accepts, else None.
#[pyfunction]
fn parse_ipv4(host: &str) -> Option<String> {
    super::parse_ipv4(host)
}

/// Add the URL functions and `InvalidURL` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("InvalidURL", m.py().get_type::<InvalidURL>())?;
    m.add_function(wrap_pyfunction!(canonicalize, m)?)?;
    m.add_function(wrap_pyfunction!(canonicalize_with_host, m)?)?;
    m.add_function(wrap_pyfunction!(canonicalize_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(parse_ipv4, m)?)?;
    Ok(())
}
