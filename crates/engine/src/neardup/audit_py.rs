//! What Python sees: `app._engine.NearDupSets`, the audit's shingle sets. Numbers cross as
//! little-endian bytes (numpy reads them with `frombuffer`), not lists of Python ints.

use std::sync::RwLock;

use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::audit::{Postings, Sets};
use super::minhash::Family;

/// A site's shingle sets, added batch by batch.
#[pyclass(frozen, name = "NearDupSets")]
pub struct PySets {
    width: usize,
    sets: RwLock<Sets>,
}

fn words_of(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect()
}

fn bytes_of<T: Copy, const N: usize>(values: &[T], le: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| le(v)).collect()
}

impl PySets {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Sets> {
        self.sets
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn page(&self, i: usize) -> PyResult<()> {
        if i < self.read().len() {
            Ok(())
        } else {
            Err(PyIndexError::new_err(format!("no page {i}")))
        }
    }
}

#[pymethods]
impl PySets {
    #[new]
    fn new(width: usize) -> PyResult<Self> {
        if width < 1 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "width must be >= 1",
            ));
        }
        Ok(PySets {
            width,
            sets: RwLock::new(Sets::default()),
        })
    }

    fn __len__(&self) -> usize {
        self.read().len()
    }

    /// Shingle and keep the texts; their set sizes (u32).
    fn add<'py>(&self, py: Python<'py>, texts: Vec<String>, threads: usize) -> Bound<'py, PyBytes> {
        let sizes = py.detach(|| {
            let mut sets = self
                .sets
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            sets.add(&texts, self.width, threads)
        });
        PyBytes::new(py, &bytes_of(&sizes, u32::to_le_bytes))
    }

    /// Add, for each text (page `first + n` of `words`), the pairs of its words `words`
    /// holds met within `window` words (`audit::Sets::add_cooccurring`); their sizes (u32).
    fn add_cooccurring<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
        words: PyRef<'py, PySets>,
        first: usize,
        window: usize,
        threads: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        if std::ptr::eq(self, &*words) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "the words must be another NearDupSets",
            ));
        }
        if first + texts.len() > words.read().len() {
            return Err(PyIndexError::new_err(format!(
                "no pages {first}..{} of the words",
                first + texts.len()
            )));
        }
        let other: &PySets = &words;
        let sizes = py.detach(|| {
            let words = other.read();
            self.sets
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .add_cooccurring(&texts, &words, first, window, threads)
        });
        Ok(PyBytes::new(py, &bytes_of(&sizes, u32::to_le_bytes)))
    }

    /// Signatures (u64, k per page) of pages start..end, family `seed`.
    fn sign<'py>(
        &self,
        py: Python<'py>,
        start: usize,
        end: usize,
        k: usize,
        seed: u64,
        threads: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        if start > end || end > self.read().len() {
            return Err(PyIndexError::new_err(format!("no pages {start}..{end}")));
        }
        let rows = py.detach(|| {
            self.read()
                .sign(start..end, &Family::new(k, seed), k, threads)
        });
        Ok(PyBytes::new(py, &bytes_of(&rows, u64::to_le_bytes)))
    }

    /// |a_n ∩ b_n| (u32) for pages a, b given as u32.
    fn intersections<'py>(
        &self,
        py: Python<'py>,
        a: &[u8],
        b: &[u8],
        threads: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let (a, b) = (words_of(a), words_of(b));
        let n = self.read().len();
        if a.len() != b.len() || a.iter().chain(&b).any(|&i| i as usize >= n) {
            return Err(PyIndexError::new_err(
                "pairs name pages not held, or differ in length",
            ));
        }
        let both = py.detach(|| self.read().intersections(&a, &b, threads));
        Ok(PyBytes::new(py, &bytes_of(&both, u32::to_le_bytes)))
    }

    /// One byte per shingle of page i (ascending hash) for each of `others` (u32): 1
    /// where that page holds the shingle too.
    fn shared<'py>(
        &self,
        py: Python<'py>,
        i: usize,
        others: &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.page(i)?;
        let others = words_of(others);
        let n = self.read().len();
        if others.iter().any(|&o| o as usize >= n) {
            return Err(PyIndexError::new_err("others name pages not held"));
        }
        let rows = py.detach(|| self.read().shared(i, &others));
        Ok(PyBytes::new(py, &rows))
    }

    /// What the listed pages (u32) share, by who shares it (`audit::Postings`): each page's
    /// count of shingles no other listed page holds (u32), then the groups of at least
    /// `min_shingles` shingles held by the very same `min_pages` or more pages, as
    /// (ends of each group's pages: u64, pages: u32 indexes into the list, ends of each
    /// group's shingles: u64, shingles: u64).
    #[allow(clippy::type_complexity)]
    fn postings<'py>(
        &self,
        py: Python<'py>,
        pages: &[u8],
        min_pages: usize,
        min_shingles: usize,
    ) -> PyResult<(
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
    )> {
        let pages = words_of(pages);
        let n = self.read().len();
        if pages.iter().any(|&p| p as usize >= n) {
            return Err(PyIndexError::new_err("pages name pages not held"));
        }
        let found = py.detach(|| Postings::of(&self.read(), &pages, min_pages, min_shingles));
        let mut page_ends = Vec::with_capacity(found.groups.len());
        let mut shingle_ends = Vec::with_capacity(found.groups.len());
        let (mut held, mut shingles) = (Vec::new(), Vec::new());
        for g in &found.groups {
            held.extend_from_slice(&g.pages);
            shingles.extend_from_slice(&g.shingles);
            page_ends.push(held.len() as u64);
            shingle_ends.push(shingles.len() as u64);
        }
        Ok((
            PyBytes::new(py, &bytes_of(&found.unique, u32::to_le_bytes)),
            PyBytes::new(py, &bytes_of(&page_ends, u64::to_le_bytes)),
            PyBytes::new(py, &bytes_of(&held, u32::to_le_bytes)),
            PyBytes::new(py, &bytes_of(&shingle_ends, u64::to_le_bytes)),
            PyBytes::new(py, &bytes_of(&shingles, u64::to_le_bytes)),
        ))
    }

    /// Keep of each page only the shingles `min_pages` to `max_pages` pages hold
    /// (`audit::Sets::keep_held_by`); the pages' new sizes (u32).
    fn keep_held_by<'py>(
        &self,
        py: Python<'py>,
        min_pages: usize,
        max_pages: usize,
    ) -> Bound<'py, PyBytes> {
        let sizes = py.detach(|| {
            self.sets
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .keep_held_by(min_pages, max_pages)
        });
        PyBytes::new(py, &bytes_of(&sizes, u32::to_le_bytes))
    }

    /// Page i's shingle hashes (u64, ascending).
    fn shingles<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyBytes>> {
        self.page(i)?;
        Ok(PyBytes::new(
            py,
            &bytes_of(self.read().get(i), u64::to_le_bytes),
        ))
    }
}

/// Add `NearDupSets` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySets>()
}
