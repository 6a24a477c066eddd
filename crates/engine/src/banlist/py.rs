//! `app._engine.BanIndex`: the index as the Python stores and rules use it.
//!
//! Entries cross as `app.banlist.model.Entry` objects (made on demand, for a hit or an
//! iteration: the index holds none), matches of `explain` as `model.Match`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::{MutexExt, PyOnceLock};
use pyo3::types::{PyBytes, PyDict, PyFrozenSet, PyTuple, PyType};

use super::apply::{self, Change, NewEntry, Publisher, Writer};
use super::data::IndexData;
use super::select::Selection;
use super::shard::RowRef;
use super::{digest, dump, load};
use super::{Scope, SCOPES};

/// Entries parsed per chunk while building (bounds what a build holds besides the index).
const CHUNK: usize = 65_536;
/// A batch this large is followed by giving back the spare capacity of what it copied.
const LARGE: usize = 4096;

static ENTRY: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static MATCH: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The banlist index: a snapshot swapped whole by every batch of changes.
#[pyclass(frozen, module = "app._engine")]
pub struct BanIndex {
    current: ArcSwap<IndexData>,
    writer: Mutex<Writer>,
    /// Times the sites filter could not be made again (`Writer::take_failure`), and why
    /// the last time, swapped together: read by a scrape without the writer's lock.
    refresh_failures: ArcSwap<Failures>,
    /// This index's number among those the process made: a new one (a resync's) is told
    /// from the one it replaces, whose count of failures it does not carry.
    serial: u64,
}

/// A `BanIndex`'s failures to make its sites filter again.
#[derive(Debug, Default)]
struct Failures {
    count: u64,
    last: Option<String>,
}

/// The next `BanIndex::serial`.
static SERIALS: AtomicU64 = AtomicU64::new(1);

impl BanIndex {
    /// The current snapshot: a request matches its whole page against one.
    pub fn snapshot(&self) -> Arc<IndexData> {
        self.current.load_full()
    }

    /// Apply a batch of changes: readers see all of it or none of it. On an error nothing
    /// is applied.
    pub fn apply_changes(&self, changes: Vec<Change>) -> Result<(), String> {
        let mut writer = self
            .writer
            .lock()
            .map_err(|_| "the banlist writer panicked".to_string())?;
        let mut data = writer.copy(&self.current.load());
        writer.apply(&mut data, changes)?;
        self.publish(&mut writer, data);
        Ok(())
    }

    /// Publish a batch's copy: readers take it from the next request on. A filter made
    /// again aside is put in first when it is ready, and one is started from this copy
    /// when enough names have gone since the filter was made (`Writer::before_publish`).
    fn publish(&self, writer: &mut Writer, data: IndexData) {
        self.publish_by(writer, data, Publisher::Batch);
    }

    /// `publish`, by a batch or another (`Writer::before_publish`).
    fn publish_by(&self, writer: &mut Writer, mut data: IndexData, by: Publisher) {
        let refresh = writer.before_publish(&mut data, by);
        self.current.store(Arc::new(data));
        if refresh {
            writer.refresh_from(self.current.load_full());
        }
        if let Some(cause) = writer.take_failure() {
            // under the writer's lock: no other store between the load and this one
            let count = self.refresh_failures.load().count + 1;
            self.refresh_failures.store(Arc::new(Failures {
                count,
                last: Some(cause),
            }));
        }
    }

    /// Publish the sites filter made again aside once it is made, without waiting for a
    /// batch to bring it (an index that stops changing would serve the old one on): what
    /// the service's housekeeping calls each poll. Nothing when a batch holds the writer
    /// (it publishes the filter itself) or none is ready; true when one was published.
    pub fn publish_ready_filter(&self) -> bool {
        let Ok(mut writer) = self.writer.try_lock() else {
            return false;
        };
        if !writer.filter_ready() {
            return false;
        }
        let data = writer.copy(&self.current.load());
        self.publish_by(&mut writer, data, Publisher::Housekeeping);
        true
    }

    /// The sites filter's failures to be made again: how many, and why the last one.
    pub fn refresh_failures(&self) -> (u64, Option<String>) {
        let failures = self.refresh_failures.load();
        (failures.count, failures.last.clone())
    }

    /// Wait for a filter being made again and publish it (tests and benches).
    pub fn finish_refresh(&self) -> Result<(), String> {
        let mut writer = self
            .writer
            .lock()
            .map_err(|_| "the banlist writer panicked".to_string())?;
        let data = writer.copy(&self.current.load());
        self.publish_by(&mut writer, data, Publisher::Waiting);
        Ok(())
    }

    /// The writer, for a test to set or read.
    #[cfg(test)]
    pub(super) fn with_writer<R>(&self, f: impl FnOnce(&mut Writer) -> R) -> R {
        f(&mut self.writer.lock().expect("the writer"))
    }

    /// An index holding `data`, made whole aside (a load).
    pub fn of_data(data: IndexData) -> Self {
        let writer = Writer::of_index(&data);
        BanIndex {
            current: ArcSwap::from_pointee(data),
            writer: Mutex::new(writer),
            refresh_failures: ArcSwap::default(),
            serial: SERIALS.fetch_add(1, Ordering::Relaxed),
        }
    }

    // Waits detached from the interpreter: a writer holding the lock may need it back.
    /// An empty index.
    pub fn empty() -> Self {
        BanIndex {
            current: ArcSwap::from_pointee(IndexData::default()),
            writer: Mutex::default(),
            refresh_failures: ArcSwap::default(),
            serial: SERIALS.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Apply a stream of changes as one batch, `CHUNK` at a time to one copy published at
    /// the end (a build or a resync: never a whole copy per chunk).
    pub fn apply_iter(&self, changes: impl IntoIterator<Item = Change>) -> Result<(), String> {
        let mut writer = self
            .writer
            .lock()
            .map_err(|_| "the banlist writer panicked".to_string())?;
        let mut data = writer.copy(&self.current.load());
        let mut changes = changes.into_iter().peekable();
        let mut total = 0;
        while changes.peek().is_some() {
            let chunk: Vec<Change> = changes.by_ref().take(CHUNK).collect();
            total += chunk.len();
            writer.apply(&mut data, chunk)?;
        }
        if total >= LARGE {
            Writer::settle(&mut data);
        }
        self.publish(&mut writer, data);
        Ok(())
    }

    fn lock(&self, py: Python<'_>) -> PyResult<std::sync::MutexGuard<'_, Writer>> {
        self.writer
            .lock_py_attached(py)
            .map_err(|_| PyRuntimeError::new_err("the banlist writer panicked"))
    }

    fn apply_py(&self, py: Python<'_>, changes: Vec<Change>) -> PyResult<()> {
        let mut writer = self.lock(py)?;
        let mut data = writer.copy(&self.current.load());
        writer
            .apply(&mut data, changes)
            .map_err(PyValueError::new_err)?;
        self.publish(&mut writer, data);
        Ok(())
    }

    /// Apply changes parsed from Python chunk by chunk to one copy, published at the end
    /// with `version` (None: the version it had).
    fn apply_stream(
        &self,
        py: Python<'_>,
        changes: &Bound<'_, PyAny>,
        parse: fn(&Bound<'_, PyAny>) -> PyResult<Change>,
        version: Option<i64>,
    ) -> PyResult<()> {
        let mut writer = self.lock(py)?;
        let mut data = writer.copy(&self.current.load());
        let mut chunk = Vec::with_capacity(CHUNK);
        let mut total = 0;
        for item in changes.try_iter()? {
            chunk.push(parse(&item?)?);
            total += 1;
            if chunk.len() == CHUNK {
                let batch = std::mem::take(&mut chunk);
                let w: &mut Writer = &mut writer;
                py.detach(|| w.apply(&mut data, batch))
                    .map_err(PyValueError::new_err)?;
            }
        }
        let w: &mut Writer = &mut writer;
        py.detach(|| w.apply(&mut data, chunk))
            .map_err(PyValueError::new_err)?;
        if total >= LARGE {
            py.detach(|| Writer::settle(&mut data));
        }
        if let Some(version) = version {
            data.version = version;
        }
        self.publish(&mut writer, data);
        Ok(())
    }
}

fn entry_of(obj: &Bound<'_, PyAny>) -> PyResult<NewEntry> {
    let scope: String = obj.getattr("scope")?.extract()?;
    let scope = Scope::parse(&scope)
        .ok_or_else(|| PyValueError::new_err(format!("unknown scope {scope:?}")))?;
    let expires = obj.getattr("expires_at")?;
    let mut regions: Vec<String> = Vec::new();
    for region in obj.getattr("regions")?.try_iter()? {
        regions.push(region?.extract()?);
    }
    Ok(NewEntry {
        id: obj.getattr("id")?.extract()?,
        scope,
        value: obj.getattr("value")?.extract()?,
        reason: obj.getattr("reason")?.extract()?,
        actor: obj.getattr("actor")?.extract()?,
        created: obj.getattr("created_at")?.extract()?,
        expires: if expires.is_none() {
            None
        } else {
            Some(expires.extract()?)
        },
        regions,
    })
}

fn add_of(obj: &Bound<'_, PyAny>) -> PyResult<Change> {
    Ok(Change::Add(entry_of(obj)?))
}

fn group_of(name: &Bound<'_, PyAny>, domains: &Bound<'_, PyAny>) -> PyResult<Change> {
    let mut members = Vec::new();
    for d in domains.try_iter()? {
        members.push(d?.extract()?);
    }
    Ok(Change::Group(name.extract()?, members))
}

fn change_of(obj: &Bound<'_, PyAny>) -> PyResult<Change> {
    let parts = obj.cast::<PyTuple>()?;
    let op: String = parts.get_item(0)?.extract()?;
    match op.as_str() {
        "add" => add_of(&parts.get_item(1)?),
        "remove" => Ok(Change::Remove(parts.get_item(1)?.extract()?)),
        "group" => group_of(&parts.get_item(1)?, &parts.get_item(2)?),
        _ => Err(PyValueError::new_err(format!(
            "unknown change {op:?} (add, remove or group)"
        ))),
    }
}

/// The row as an `Entry`.
fn make_entry<'py>(py: Python<'py>, data: &IndexData, at: RowRef) -> PyResult<Bound<'py, PyAny>> {
    let (value, row) = data.row(at);
    let meta = data.meta(at);
    let regions = PyFrozenSet::new(py, meta.regions.iter().map(|r| &**r))?;
    let expires = if row.expires.is_nan() {
        None
    } else {
        Some(row.expires)
    };
    ENTRY.import(py, "app.banlist.model", "Entry")?.call1((
        data.id_text(row.id),
        row.scope.name(),
        value,
        &*meta.reason,
        &*meta.actor,
        row.created,
        expires,
        regions,
    ))
}

fn entries<'py>(
    py: Python<'py>,
    data: &IndexData,
    rows: &[RowRef],
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    rows.iter().map(|&at| make_entry(py, data, at)).collect()
}

fn maybe<'py>(
    py: Python<'py>,
    data: &IndexData,
    at: Option<RowRef>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    at.map(|at| make_entry(py, data, at)).transpose()
}

#[pymethods]
impl BanIndex {
    /// `BanIndex(entries=(), groups=None, version=0)`: built aside from an iterable of
    /// entries and a mapping of org group name -> domains, holding the list at `version`.
    #[new]
    #[pyo3(signature = (entries = None, groups = None, version = 0))]
    fn new(
        py: Python<'_>,
        entries: Option<&Bound<'_, PyAny>>,
        groups: Option<&Bound<'_, PyDict>>,
        version: i64,
    ) -> PyResult<Self> {
        let index = BanIndex::empty();
        if let Some(groups) = groups {
            let changes = groups
                .iter()
                .map(|(k, v)| group_of(&k, &v))
                .collect::<PyResult<Vec<_>>>()?;
            index.apply_py(py, changes)?;
        }
        let none = PyTuple::empty(py).into_any();
        index.apply_stream(py, entries.unwrap_or(&none), add_of, Some(version))?;
        Ok(index)
    }

    /// The sites filter's state: `gone`, the summary's slots gone since the filter was
    /// made per slot held (it is made again aside at a quarter); `refreshed`, the times it
    /// was made again since the index was made (a snapshot's); `failures`, the times that
    /// failed (the next batch tries again), and `failure`, why the last time (or None).
    /// No lock is waited for.
    #[getter]
    fn filter_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (gone, slots, refreshed) = {
            let data = self.current.load();
            (data.gone, data.slots, data.refreshed)
        };
        let (failures, failure) = self.refresh_failures();
        let out = PyDict::new(py);
        out.set_item("gone", gone as f64 / slots.max(1) as f64)?;
        out.set_item("refreshed", refreshed)?;
        out.set_item("failures", failures)?;
        out.set_item("failure", failure)?;
        Ok(out)
    }

    /// This index's number among those the process made (a resync's new index has
    /// another): what tells a new index's counts from the old one's.
    #[getter]
    fn serial(&self) -> u64 {
        self.serial
    }

    /// Publish the sites filter made again aside if it is made (`publish_ready_filter`):
    /// True when one was.
    #[pyo3(name = "publish_ready_filter")]
    fn publish_ready_filter_py(&self, py: Python<'_>) -> bool {
        py.detach(|| self.publish_ready_filter())
    }

    /// Org group name -> its member domains (a copy).
    #[getter]
    fn groups<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let data = self.current.load();
        let out = PyDict::new(py);
        for (name, domains) in &data.groups().order {
            out.set_item(&**name, PyTuple::new(py, domains.iter().map(|d| &**d))?)?;
        }
        Ok(out)
    }

    /// Entries per scope (a copy).
    #[getter]
    fn counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (name, n) in self.current.load().named_counts() {
            out.set_item(name, n)?;
        }
        Ok(out)
    }

    /// Define or redefine an org group; entries banning it follow the new members at once.
    fn set_group(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        domains: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.apply_py(py, vec![group_of(name, domains)?])
    }

    /// Index an entry (replacing one with the same id).
    fn add(&self, py: Python<'_>, entry: &Bound<'_, PyAny>) -> PyResult<()> {
        self.apply_py(py, vec![add_of(entry)?])
    }

    /// Index many entries as one batch.
    fn add_many(&self, py: Python<'_>, entries: &Bound<'_, PyAny>) -> PyResult<()> {
        self.apply_stream(py, entries, add_of, None)
    }

    /// Drop an entry by id; returns it, or None if it was not there.
    fn remove<'py>(&self, py: Python<'py>, entry_id: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut writer = self.lock(py)?;
        let base = self.current.load_full();
        let Some(at) = base.find(entry_id) else {
            return Ok(None);
        };
        let entry = make_entry(py, &base, at)?;
        let mut data = writer.copy(&base);
        drop(base);
        apply::remove(&mut data, entry_id);
        self.publish(&mut writer, data);
        Ok(Some(entry))
    }

    /// Apply a batch of changes atomically: `("add", entry)`, `("remove", id)`,
    /// `("group", name, domains)`, in order; a reader sees all of them or none.
    #[pyo3(signature = (changes, version = None))]
    fn apply(
        &self,
        py: Python<'_>,
        changes: &Bound<'_, PyAny>,
        version: Option<i64>,
    ) -> PyResult<()> {
        self.apply_stream(py, changes, change_of, version)
    }

    /// The version of the list the current snapshot holds, published with its data by
    /// `apply(changes, version)`: read with the data in one load, never apart from it.
    #[getter]
    fn version(&self) -> i64 {
        self.current.load().version
    }

    fn __len__(&self) -> usize {
        self.current.load().len()
    }

    /// Every entry, oldest first, as of this call.
    fn __iter__(&self) -> EntryIter {
        self.frozen()
    }

    /// Every entry as of this call, made one at a time while writers go on.
    fn frozen(&self) -> EntryIter {
        let data = self.current.load_full();
        let rows = data.all_rows();
        EntryIter { data, rows, at: 0 }
    }

    /// The entry with this id.
    fn get<'py>(&self, py: Python<'py>, entry_id: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        let data = self.current.load();
        maybe(py, &data, data.find(entry_id))
    }

    /// Every entry written for exactly this scope and value, oldest first.
    fn by_value<'py>(
        &self,
        py: Python<'py>,
        scope: &str,
        value: &str,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let data = self.current.load();
        let rows = match Scope::parse(scope) {
            Some(s) => data
                .rows_for(s, s.key_of(value))
                .into_iter()
                .filter(|&at| data.row(at).0 == value)
                .collect(),
            None => Vec::new(),
        };
        PyTuple::new(py, entries(py, &data, &rows)?)
    }

    /// Entries expired at `now`, oldest first.
    fn expired<'py>(&self, py: Python<'py>, now: f64) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let data = self.current.load();
        entries(py, &data, &data.expired(now))
    }

    /// Up to `limit` unexpired entries after id `after` (numbers by number, then other ids
    /// by string), and whether more follow.
    #[pyo3(signature = (after, limit, now))]
    fn page<'py>(
        &self,
        py: Python<'py>,
        after: Option<&str>,
        limit: usize,
        now: f64,
    ) -> PyResult<(Vec<Bound<'py, PyAny>>, bool)> {
        let data = self.current.load();
        let (rows, more) = data.page(after, limit, now);
        Ok((entries(py, &data, &rows)?, more))
    }

    /// How many entries are unexpired at `now`.
    fn active_count(&self, now: f64) -> usize {
        self.current.load().active_count(now)
    }

    /// Up to `limit` entries unexpired at `now` that every filter given picks, after id
    /// `after` in `page`'s order; whether more follow, and how many are picked in all
    /// (`select.rs`). Times are epoch seconds; `reason_contains` ignores case.
    #[pyo3(signature = (after, limit, now, *, scope = None, actor = None,
                        reason_contains = None, value_suffix = None, created_before = None,
                        created_after = None, expires_before = None))]
    #[allow(clippy::too_many_arguments)]
    fn select<'py>(
        &self,
        py: Python<'py>,
        after: Option<&str>,
        limit: usize,
        now: f64,
        scope: Option<&str>,
        actor: Option<String>,
        reason_contains: Option<String>,
        value_suffix: Option<String>,
        created_before: Option<f64>,
        created_after: Option<f64>,
        expires_before: Option<f64>,
    ) -> PyResult<(Vec<Bound<'py, PyAny>>, bool, usize)> {
        let scope = match scope {
            Some(name) => Some(
                Scope::parse(name)
                    .ok_or_else(|| PyValueError::new_err(format!("unknown scope {name:?}")))?,
            ),
            None => None,
        };
        let sel = Selection {
            scope,
            actor,
            reason_contains,
            value_suffix,
            created_before,
            created_after,
            expires_before,
        };
        let data = self.current.load_full();
        let picked = py.detach(|| data.select(&sel, after, limit, now));
        Ok((entries(py, &data, &picked.rows)?, picked.more, picked.total))
    }

    /// The most specific active entry for a canonical URL (url, prefix, host, domain, org).
    #[pyo3(name = "match", signature = (canonical, host, region, now))]
    fn match_<'py>(
        &self,
        py: Python<'py>,
        canonical: &str,
        host: &str,
        region: Option<&str>,
        now: f64,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let data = self.current.load();
        maybe(py, &data, data.match_any(canonical, host, region, now))
    }

    /// The active url or prefix entry for a URL: what depends on more than the host.
    #[pyo3(signature = (canonical, host, region, now))]
    fn match_url<'py>(
        &self,
        py: Python<'py>,
        canonical: &str,
        host: &str,
        region: Option<&str>,
        now: f64,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let data = self.current.load();
        maybe(py, &data, data.match_url(canonical, host, region, now))
    }

    /// (the active host, domain or org entry for a host, most specific first; whether a
    /// url or prefix entry exists under the host).
    #[pyo3(signature = (host, region, now))]
    fn host_verdict<'py>(
        &self,
        py: Python<'py>,
        host: &str,
        region: Option<&str>,
        now: f64,
    ) -> PyResult<(Option<Bound<'py, PyAny>>, bool)> {
        let data = self.current.load();
        let (at, under) = data.host_verdict(host, region, now);
        Ok((maybe(py, &data, at)?, under))
    }

    /// The names a domain or org ban of this host is looked up under, most specific first.
    fn domain_keys<'py>(&self, py: Python<'py>, host: &str) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.current.load().domain_keys(host))
    }

    /// Every entry, active or not, whose value covers the URL, with the expression.
    fn explain<'py>(
        &self,
        py: Python<'py>,
        canonical: &str,
        host: &str,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let data = self.current.load();
        let cls = MATCH.import(py, "app.banlist.model", "Match")?;
        data.explain(canonical, host)
            .into_iter()
            .map(|m| cls.call1((make_entry(py, &data, m.at)?, m.expression)))
            .collect()
    }

    /// The whole index, entries and org groups, as of one snapshot, behind `meta` (the
    /// caller's header), in the binary form `BanIndex.load` reads (`banlist::dump`).
    /// Written with the interpreter released, straight into the `bytes` returned.
    fn dump<'py>(&self, py: Python<'py>, meta: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.current.load_full();
        let plan = py
            .detach(|| dump::Plan::of(&data, meta.len()))
            .map_err(PyValueError::new_err)?;
        let len = plan.len();
        // SAFETY: a NULL source asks CPython for a new bytes object of `len` bytes, not yet
        // initialized (not touched with the interpreter held).
        let raw =
            unsafe { ffi::PyBytes_FromStringAndSize(std::ptr::null(), len as ffi::Py_ssize_t) };
        // SAFETY: a new reference, or NULL with the error set.
        let out = unsafe { Bound::from_owned_ptr_or_err(py, raw)? };
        // SAFETY: `raw` is a bytes object (made above and held by `out`): its buffer of
        // `len` bytes lives as long as it does.
        let at = unsafe { ffi::PyBytes_AsString(raw) } as usize;
        let written = py.detach(|| {
            let buf = at as *mut u8;
            // SAFETY: `buf` is the buffer of the bytes object `out` holds across this call,
            // `len` bytes that no other code can see before it is returned: zeroed first,
            // it is then an initialized slice that only this call writes.
            let buf = unsafe {
                std::ptr::write_bytes(buf, 0, len);
                std::slice::from_raw_parts_mut(buf, len)
            };
            plan.write(meta, buf)
        });
        written.map_err(PyRuntimeError::new_err)?;
        Ok(out.cast_into()?)
    }

    /// A dump (`dump`'s bytes) read back: the index, the dump's meta and the content
    /// digest of what it holds (`digest`), all made with the interpreter released.
    /// ValueError, naming what is wrong and at which byte, when the dump is malformed.
    #[staticmethod]
    fn load<'py>(
        py: Python<'py>,
        data: &[u8],
    ) -> PyResult<(BanIndex, Bound<'py, PyBytes>, String)> {
        let loaded = py
            .detach(|| load::load(data))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let meta = PyBytes::new(py, loaded.meta);
        let digest = digest::hex(loaded.digest);
        Ok((BanIndex::of_data(loaded.data), meta, digest))
    }

    /// The content digest of the index (docs/banlist.md, "The content digest"): what
    /// `app.banlist.digest.Digest.of(index, index.groups).hex` gives, 32 hex digits, made
    /// on two threads with the interpreter released.
    fn digest(&self, py: Python<'_>) -> String {
        let data = self.current.load_full();
        py.detach(|| digest::hex(digest::of_index(&data)))
    }

    /// Bytes the index's own structures hold (what `bench` reports beside RSS).
    fn nbytes(&self) -> usize {
        self.current.load().bytes()
    }

    fn __repr__(&self) -> String {
        let data = self.current.load();
        let counts: Vec<String> = SCOPES
            .iter()
            .map(|s| format!("{}={}", s.name(), data.counts()[*s as usize]))
            .collect();
        format!("BanIndex({} entries: {})", data.len(), counts.join(", "))
    }
}

/// An iterator over the entries of one snapshot, oldest first.
#[pyclass(module = "app._engine")]
pub struct EntryIter {
    data: Arc<IndexData>,
    rows: Vec<RowRef>,
    at: usize,
}

#[pymethods]
impl EntryIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(&at) = self.rows.get(self.at) else {
            return Ok(None);
        };
        self.at += 1;
        make_entry(py, &self.data, at).map(Some)
    }
}
