//! The data plane's own listener: `POST /v1/rerank`, `POST /v1/feedback` and `GET /healthz`
//! on a port of their own, served by N threads of this process over the config and banlist indexes the Python
//! control plane publishes (`DataPlane.publish`), with no Python on a request's way unless
//! its profile has a Python rule or it carries a QA header.
//!
//! hyper (HTTP/1.1 server connections) on tokio, rather than axum: two routes need no
//! router, and what the endpoint must do exactly as the Python path does (refuse a body
//! over its cap unread, a deadline on the body and one on the headers, the same bytes for
//! every answer) is hyper's own connection API, which axum would wrap without changing.
//! hyper-util's graceful shutdown drains the connections on `stop`.

pub mod events;
mod feedback;
mod http;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokio::sync::watch;

use crate::banlist::BanIndex;
use crate::engine::{Engine, Failed};
use crate::interleave::ImpressionTuple;
use crate::metrics::EngineMetrics;

use events::Events;

/// What the listener reads for every request, fixed at its making.
pub struct Settings {
    pub max_body_bytes: usize,
    pub body_timeout: Duration,
    /// The body timeout as the Python path writes it in its 408 (`f"{timeout:g}"`).
    pub body_timeout_text: String,
    pub header_timeout: Duration,
    /// The request's time budget from its arrival (None: no deadline).
    pub deadline: Option<Duration>,
    pub max_documents: usize,
    pub max_text_chars: usize,
    /// An audit log is written: the engine writes each request's line.
    pub audit: bool,
    /// The share of answered bodies captured for replay (0: none).
    pub capture_rate: f64,
    /// The body of `GET /healthz`, the control port's own.
    pub healthz: bytes::Bytes,
}

/// What the serving threads share: the published config and indexes, and where their
/// answers' side effects go.
pub struct Shared {
    engine: ArcSwapOption<Py<Engine>>,
    banlist: ArcSwapOption<Py<BanIndex>>,
    quarantine: ArcSwapOption<Py<BanIndex>>,
    executor: Option<Py<PyAny>>,
    /// app/api/rerank.py `check_qa`: (force, explain, authorization) → (status, body,
    /// forced, forced_by, explain), status 0 when the request goes on.
    qa: Py<PyAny>,
    /// app/api/feedback.py `answer` over the services: (body) → (status, body); None: the
    /// listener answers `POST /v1/feedback` 404.
    feedback: Option<Py<PyAny>>,
    metrics: Py<EngineMetrics>,
    settings: Settings,
    events: Events,
    /// The last problem reported for each place, and when: one line per place per 10 s.
    reported: Mutex<Vec<(&'static str, Instant)>>,
}

impl Shared {
    /// A failure of the service itself (not of a request's input): handed to the Python
    /// log, at most once per `place` every ten seconds.
    fn problem(&self, place: &'static str, problem: &str) {
        let mut reported = self.reported.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        match reported.iter_mut().find(|(p, _)| *p == place) {
            Some((_, at)) if now.duration_since(*at) < Duration::from_secs(10) => return,
            Some((_, at)) => *at = now,
            None => reported.push((place, now)),
        }
        drop(reported);
        self.events.problem(format!("{place}: {problem}"));
    }
}

struct Running {
    runtime: tokio::runtime::Runtime,
    /// Set to the grace period: stop accepting and drain within it.
    stop: watch::Sender<Option<Duration>>,
    done: std::sync::mpsc::Receiver<bool>,
    port: u16,
}

/// The data-plane listener (Python: `app._engine.DataPlane`; app/api/dataplane.py runs
/// it).
#[pyclass(frozen, module = "app._engine")]
pub struct DataPlane {
    shared: Arc<Shared>,
    running: Mutex<Option<Running>>,
}

impl Drop for DataPlane {
    /// A listener dropped while serving (the process exits without a stop) does not wait
    /// for its threads: a blocking one may be waiting for the GIL its dropper holds.
    fn drop(&mut self) {
        let running = self
            .running
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(running) = running {
            running.runtime.shutdown_background();
        }
    }
}

/// A uniform draw in [0, 1), for the capture's sampling: a per-thread xorshift seeded from
/// the standard library's random hasher keys (no dependency for a sample rate).
pub(crate) fn draw() -> f64 {
    use std::cell::Cell;
    use std::hash::{BuildHasher, RandomState};
    thread_local! {
        static STATE: Cell<u64> = Cell::new(RandomState::new().hash_one(0u64) | 1);
    }
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// A batch as Python takes it: (audit lines, rule failures, captures as (body, status,
/// config version, banlist version), responses as (route, status, count), drops as
/// (kind, count), problems, impressions as `Engine.rerank` gives one).
type Drained = (
    Vec<Py<PyBytes>>,
    Vec<Failed>,
    Vec<(Py<PyBytes>, u16, String, i64, f64)>,
    Vec<(&'static str, u16, u64)>,
    Vec<(&'static str, u64)>,
    Vec<String>,
    Vec<ImpressionTuple>,
);

fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| PyValueError::new_err(format!("{name}: {value} is not a duration")))
}

#[pymethods]
impl DataPlane {
    /// A listener not yet started. `qa` checks the QA headers (see `Shared::qa`),
    /// `executor` runs Python rules, `deadline` is seconds from arrival (0: none),
    /// `feedback` answers `POST /v1/feedback` (see `Shared::feedback`).
    #[new]
    #[pyo3(signature = (*, metrics, qa, executor, healthz, max_body_bytes, body_timeout,
                        body_timeout_text, header_timeout, deadline, max_documents,
                        max_text_chars, audit, capture_rate, feedback=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        metrics: Py<EngineMetrics>,
        qa: Py<PyAny>,
        executor: Option<Py<PyAny>>,
        healthz: Vec<u8>,
        max_body_bytes: usize,
        body_timeout: f64,
        body_timeout_text: String,
        header_timeout: f64,
        deadline: f64,
        max_documents: usize,
        max_text_chars: usize,
        audit: bool,
        capture_rate: f64,
        feedback: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let settings = Settings {
            max_body_bytes,
            body_timeout: seconds("body_timeout", body_timeout)?,
            body_timeout_text,
            header_timeout: seconds("header_timeout", header_timeout)?,
            deadline: (deadline > 0.0)
                .then(|| seconds("deadline", deadline))
                .transpose()?,
            max_documents,
            max_text_chars,
            audit,
            capture_rate,
            healthz: healthz.into(),
        };
        Ok(DataPlane {
            shared: Arc::new(Shared {
                engine: ArcSwapOption::empty(),
                banlist: ArcSwapOption::empty(),
                quarantine: ArcSwapOption::empty(),
                executor,
                qa,
                feedback,
                metrics,
                settings,
                events: Events::default(),
                reported: Mutex::new(Vec::new()),
            }),
            running: Mutex::new(None),
        })
    }

    /// Serve `engine` (app._engine.Engine) and match `banlist` / `quarantine` (BanIndex)
    /// from the next request on; each one given replaces the one held, whole.
    #[pyo3(signature = (*, engine=None, banlist=None, quarantine=None))]
    fn publish(
        &self,
        engine: Option<Py<Engine>>,
        banlist: Option<Py<BanIndex>>,
        quarantine: Option<Py<BanIndex>>,
    ) {
        if let Some(e) = engine {
            self.shared.engine.store(Some(Arc::new(e)));
        }
        if let Some(b) = banlist {
            self.shared.banlist.store(Some(Arc::new(b)));
        }
        if let Some(q) = quarantine {
            self.shared.quarantine.store(Some(Arc::new(q)));
        }
    }

    /// Bind `host:port` (0: any free port) and serve on `threads` threads; the port bound.
    fn start(&self, host: &str, port: u16, threads: usize) -> PyResult<u16> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if running.is_some() {
            return Err(PyRuntimeError::new_err("the data plane is already serving"));
        }
        if threads == 0 {
            return Err(PyValueError::new_err("threads: at least 1"));
        }
        // Bound here, so that a busy port is the caller's error at once.
        let listener = std::net::TcpListener::bind((host, port))
            .map_err(|e| PyOSError::new_err(format!("data port {host}:{port}: {e}")))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            // Python-rule profiles and QA checks, as many at once as anyio's default
            // limiter lets the control port run
            .max_blocking_threads(40)
            .thread_name("rearrange-data")
            .enable_all()
            .build()?;
        self.shared.events.rearm();
        let (stop, stopping) = watch::channel(None);
        let (finished, done) = std::sync::mpsc::channel();
        let shared = Arc::clone(&self.shared);
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        runtime.spawn(async move {
            let drained = accept(listener, shared, stopping).await;
            // The receiver may be gone: nobody waits for a stop that was never asked.
            let _ = finished.send(drained);
        });
        *running = Some(Running {
            runtime,
            stop,
            done,
            port,
        });
        Ok(port)
    }

    /// The port being served (None before `start` and after `stop`).
    #[getter]
    fn port(&self) -> Option<u16> {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.as_ref().map(|r| r.port)
    }

    /// Stop accepting, let the requests in flight finish (at most `grace` seconds), then
    /// stop the threads. True if every connection closed within `grace`.
    fn stop(&self, py: Python<'_>, grace: f64) -> PyResult<bool> {
        let grace = seconds("grace", grace)?;
        let Some(running) = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Ok(true);
        };
        let Running {
            runtime,
            stop,
            done,
            ..
        } = running;
        let done = Mutex::new(done); // a Receiver is Send, not Sync: detach wants Sync
        py.detach(move || {
            // The accept loop may be gone (a runtime shutting down): then nothing accepts.
            let _ = stop.send(Some(grace));
            // The accept loop ends its drain at `grace`; the margin is its last steps'.
            let drained = done
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .recv_timeout(grace + Duration::from_millis(100))
                .unwrap_or(false);
            // What is still running (a Python rule past the grace) is left to the process's
            // exit, not waited for.
            runtime.shutdown_background();
            self.shared.events.wake();
            Ok(drained)
        })
    }

    /// Wait up to `timeout` seconds (the GIL released) until the serving threads queued
    /// something; whether they did. Returns at once after `stop`.
    fn wait(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let timeout = seconds("timeout", timeout)?;
        let events = &self.shared.events;
        Ok(py.detach(|| events.wait(timeout)))
    }

    /// What the serving threads queued since the last drain.
    fn drain(&self, py: Python<'_>) -> PyResult<Drained> {
        let batch = self.shared.events.take();
        Ok((
            batch
                .lines
                .iter()
                .map(|l| PyBytes::new(py, l).unbind())
                .collect(),
            batch.failures.into_iter().map(|f| f.into_py(py)).collect(),
            batch
                .captures
                .into_iter()
                .map(|c| {
                    (
                        PyBytes::new(py, &c.body).unbind(),
                        c.status,
                        c.config_version,
                        c.banlist_version,
                        c.at,
                    )
                })
                .collect(),
            batch
                .responses
                .into_iter()
                .map(|((route, status), n)| (route, status, n))
                .collect(),
            batch.dropped.into_iter().collect(),
            batch.problems,
            batch
                .impressions
                .into_iter()
                .map(crate::interleave::Impression::into_tuple)
                .collect(),
        ))
    }
}

/// Accept connections until `stopping`, then drain them; whether all closed in time.
async fn accept(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    mut stopping: watch::Receiver<Option<Duration>>,
) -> bool {
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.settings.header_timeout)
        .keep_alive(true);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of file descriptors, most often: wait for some to close.
                        shared.problem("accept", &e.to_string());
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                // Small answers go out at once, not after a delayed ACK.
                if let Err(e) = stream.set_nodelay(true) {
                    shared.problem("accept", &format!("TCP_NODELAY: {e}"));
                }
                let serving = Arc::clone(&shared);
                let service = service_fn(move |req| http::handle(Arc::clone(&serving), req));
                let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
                tokio::spawn(async move {
                    // A connection ends in an error when its client misbehaves or leaves
                    // (a malformed request, headers past their deadline, a reset): the
                    // client's doing, answered or closed by hyper, not the service's.
                    let _ = connection.await;
                });
            }
            _ = stopping.changed() => break,
        }
    }
    drop(listener);
    let grace = stopping.borrow().unwrap_or_default();
    tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_ok()
}
