//! What Python sees of near-duplicate matching: the pieces the property tests compare with
//! app/neardup/shingles.py, app/neardup/minhash.py and the rule (tests/neardup/test_neardup_engine.py), and the
//! bench's handle on a `Matcher`.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::minhash::Family;
use super::unicode::Words;
use super::{shingles, Input, Matcher, Measure, Method, Pairs, Params, Stats, Stopped, Used};
use crate::contract::MinHashIn;

/// `sorted(app.neardup.shingles.shingles(text, width))`.
#[pyfunction]
fn shingle_hashes(text: &str, width: usize) -> Vec<u64> {
    shingles::shingles(text, width, &mut Words::default())
}

/// (values, shingle count) of `app.neardup.minhash.signature(shingles(text, width), k, seed)`.
#[pyfunction]
fn minhash_signature(text: &str, width: usize, k: usize, seed: u64) -> (Vec<u64>, u64) {
    let set = shingles::shingles(text, width, &mut Words::default());
    let mut values = vec![0; k];
    Family::new(k, seed).sign(&set, &mut values);
    (values, set.len() as u64)
}

/// `tests.reference.sigcache.content_key(text)`.
#[pyfunction]
fn neardup_content_key(text: &str) -> u128 {
    super::cache::content_key(text)
}

/// A page converted once, so that a benchmark times the matching, not the conversion.
#[pyclass(frozen, name = "NearDupPage")]
struct PyPage {
    docs: Vec<Doc>,
    sigs: Vec<Option<MinHashIn>>,
}

#[pymethods]
impl PyPage {
    #[new]
    fn new(docs: Vec<Doc>) -> Self {
        let sigs = signatures(&docs);
        PyPage { docs, sigs }
    }
}

/// A `Matcher` (one configured near_duplicates rule with its caches).
#[pyclass(frozen, name = "NearDupMatcher")]
struct PyMatcher(Matcher);

/// A document: (text or None, (values, shingles, width, seed) or None).
type Doc = (Option<String>, Option<(Vec<u64>, u64, u32, u64)>);

/// A cache's counters by name, None for a cache turned off.
type StatsDict = Option<HashMap<&'static str, u64>>;

fn stats(s: Option<Stats>) -> StatsDict {
    s.map(|s| {
        HashMap::from([
            ("hits", s.hits),
            ("misses", s.misses),
            ("evictions", s.evictions),
            ("entries", s.entries),
            ("bytes", s.bytes),
            ("max_bytes", s.max_bytes),
        ])
    })
}

fn used_name(used: Used) -> &'static str {
    match used {
        Used::Exact => "exact",
        Used::MinHash => "minhash",
    }
}

fn signatures(docs: &[Doc]) -> Vec<Option<MinHashIn>> {
    docs.iter()
        .map(|(_, s)| {
            s.as_ref().map(|(values, shingles, width, seed)| MinHashIn {
                values: values.clone(),
                shingles: *shingles,
                width: *width,
                seed: *seed,
            })
        })
        .collect()
}

fn inputs<'a>(docs: &'a [Doc], sigs: &'a [Option<MinHashIn>]) -> Vec<Input<'a>> {
    docs.iter()
        .zip(sigs)
        .map(|((text, _), sig)| Input {
            text: text.as_deref(),
            minhash: sig.as_ref(),
        })
        .collect()
}

#[pymethods]
impl PyMatcher {
    #[new]
    #[pyo3(signature = (*, width = 10, measure = "containment", threshold = 0.5, method = "auto",
                        exact_max_docs = 30, num_perm = 128, seed = 1, cache_bytes = 0,
                        exact_cache_bytes = 0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        width: usize,
        measure: &str,
        threshold: f64,
        method: &str,
        exact_max_docs: usize,
        num_perm: usize,
        seed: u64,
        cache_bytes: usize,
        exact_cache_bytes: usize,
    ) -> PyResult<Self> {
        let measure = match measure {
            "containment" => Measure::Containment,
            "jaccard" => Measure::Jaccard,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "unknown measure {measure:?}"
                )))
            }
        };
        let method = match method {
            "auto" => Method::Auto,
            "exact" => Method::Exact,
            "minhash" => Method::MinHash,
            _ => return Err(PyValueError::new_err(format!("unknown method {method:?}"))),
        };
        if width < 1 || num_perm < 1 {
            return Err(PyValueError::new_err("width and num_perm must be >= 1"));
        }
        Ok(PyMatcher(Matcher::new(Params {
            width,
            measure,
            threshold,
            method,
            exact_max_docs,
            num_perm,
            seed,
            cache_bytes,
            exact_cache_bytes,
        })))
    }

    /// (pairs, method used); `check()` is called where the rule checks its deadline, and
    /// an exception it raises stops the work and propagates. Without `check` the GIL is
    /// released meanwhile.
    #[pyo3(signature = (docs, check = None))]
    fn pairs(
        &self,
        py: Python<'_>,
        docs: Vec<Doc>,
        check: Option<Bound<'_, PyAny>>,
    ) -> PyResult<(Pairs, &'static str)> {
        let sigs = signatures(&docs);
        let result = match check {
            None => py.detach(|| self.0.pairs(&inputs(&docs, &sigs), &mut || Ok(()))),
            Some(check) => {
                let mut raised = None;
                let result = self.0.pairs(&inputs(&docs, &sigs), &mut || {
                    check.call0().map(drop).map_err(|e| {
                        raised = Some(e);
                        Stopped
                    })
                });
                if let Some(e) = raised {
                    return Err(e);
                }
                result
            }
        };
        let (pairs, used) = result.map_err(|Stopped| PyValueError::new_err("stopped"))?;
        Ok((pairs, used_name(used)))
    }

    /// `pairs` of a converted page, without a check, the GIL released.
    fn pairs_page(&self, py: Python<'_>, page: &PyPage) -> PyResult<(Pairs, &'static str)> {
        let docs = inputs(&page.docs, &page.sigs);
        let (pairs, used) = py
            .detach(|| self.0.pairs(&docs, &mut || Ok(())))
            .map_err(|Stopped| PyValueError::new_err("stopped"))?;
        Ok((pairs, used_name(used)))
    }

    /// "exact" or "minhash" for this page.
    fn method_for(&self, docs: Vec<Doc>) -> &'static str {
        let sigs = signatures(&docs);
        used_name(self.0.method_for(&inputs(&docs, &sigs)))
    }

    /// (index, field, problem) of the first signature refused, or None.
    fn refused(&self, docs: Vec<Doc>) -> Option<(usize, &'static str, String)> {
        let sigs = signatures(&docs);
        let r = self.0.refused(&inputs(&docs, &sigs))?;
        Some((r.index, r.field, r.problem))
    }

    /// The audit reason of one fold.
    fn reason(&self, value: f64, leader_id: &str, used: &str) -> String {
        let used = if used == "exact" {
            Used::Exact
        } else {
            Used::MinHash
        };
        self.0.reason(value, leader_id, used)
    }

    /// ({signature cache stats} or None, {shingle-set cache stats} or None).
    fn cache_stats(&self) -> (StatsDict, StatsDict) {
        let s = self.0.cache_stats();
        (stats(s.signature), stats(s.shingle))
    }
}

/// Add the near-duplicate functions and class to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(shingle_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(minhash_signature, m)?)?;
    m.add_function(wrap_pyfunction!(neardup_content_key, m)?)?;
    m.add_class::<PyMatcher>()?;
    m.add_class::<PyPage>()?;
    m.add_class::<super::audit_py::PySets>()?;
    m.add("NEARDUP_UNICODE_VERSION", super::tables::UNICODE_VERSION)?;
    Ok(())
}
