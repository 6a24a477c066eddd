//! One request on the data port: `POST /v1/rerank` as app/api/rerank.py answers it (the
//! body's size cap and deadline, the QA headers, the engine's call, the same bytes out),
//! `POST /v1/feedback` (feedback.rs) and `GET /healthz`; every other request a 404 or 405
//! in the API's error shape.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use pyo3::prelude::*;

use crate::clock::Monotonic;
use crate::contract::Limits;
use crate::engine::{error_body, Call, Engine, Reply, Served};
use crate::experiments::FORCE_HEADER;

use super::events::Captured;
use super::Shared;

pub const RERANK: &str = "/v1/rerank";
pub const HEALTHZ: &str = "/healthz";
pub const FEEDBACK: &str = "/v1/feedback";
/// nginx's code for a client that left before its answer: counted, never sent (`ClientGone`).
pub(super) const GONE: u16 = 499;
const EXPLAIN_HEADER: &str = "x-rearrange-explain";

pub(super) type Answer = Response<Full<Bytes>>;

/// A JSON response; `close` asks hyper to close the connection after it (the rest of a
/// refused body is unread: it would be taken for the next request).
pub(super) fn json(status: u16, body: impl Into<Bytes>, close: bool) -> Answer {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if close {
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// The service's error: the client left before its body was whole. The request is counted
/// (`GONE`) and hyper drops the connection without writing an answer, as the control port
/// does; a client that only half-closed would otherwise read a 499 it was never meant to.
#[derive(Debug)]
pub struct ClientGone;

impl std::fmt::Display for ClientGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the client left before its body was whole")
    }
}

impl std::error::Error for ClientGone {}

pub async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Answer, ClientGone> {
    let arrived = Instant::now();
    let path = req.uri().path();
    let (route, answer) = match (req.method(), path) {
        // counted by `rerank` itself, with what the request left to write
        (&Method::POST, RERANK) => return rerank(&shared, req, arrived).await,
        (&Method::POST, FEEDBACK) => return super::feedback::feedback(&shared, req).await,
        (&Method::GET, HEALTHZ) => (HEALTHZ, json(200, shared.settings.healthz.clone(), false)),
        (_, RERANK | HEALTHZ | FEEDBACK) => {
            let (route, allow) = match path {
                RERANK => (RERANK, "POST"),
                FEEDBACK => (FEEDBACK, "POST"),
                _ => (HEALTHZ, "GET"),
            };
            let mut refused = json(405, error_body(405, None, "Method Not Allowed"), false);
            refused
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static(allow));
            (route, refused)
        }
        _ => (
            "other",
            json(
                404,
                error_body(
                    404,
                    None,
                    "Not Found: the data port serves POST /v1/rerank, POST /v1/feedback and \
                     GET /healthz; the rest of the API is on the control port (REARRANGE_PORT)",
                ),
                false,
            ),
        ),
    };
    if route != RERANK {
        shared
            .events
            .push(route, answer.status().as_u16(), None, Vec::new(), None);
    }
    Ok(answer)
}

/// The QA headers and the token that may come with them.
#[derive(Default)]
struct Qa {
    force: Option<String>,
    explain: Option<String>,
    authorization: Option<String>,
}

fn latin1(value: &HeaderValue) -> String {
    value.as_bytes().iter().map(|&b| b as char).collect()
}

/// The body read (or refused), then `answer`.
async fn rerank(
    shared: &Arc<Shared>,
    req: Request<Incoming>,
    arrived: Instant,
) -> Result<Answer, ClientGone> {
    let settings = &shared.settings;
    let mut qa = Qa::default();
    let mut declared: Option<&HeaderValue> = None;
    for (name, value) in req.headers() {
        match name.as_str() {
            "content-length" => declared = Some(value),
            "authorization" => qa.authorization = Some(latin1(value)),
            EXPLAIN_HEADER => qa.explain = Some(latin1(value)),
            n if n.eq_ignore_ascii_case(FORCE_HEADER) => qa.force = Some(latin1(value)),
            _ => {}
        }
    }
    let limit = settings.max_body_bytes;
    // A declared length over the cap is refused unread, as observe.read_body does.
    if let Some(problem) = declared_over(declared, limit) {
        return Ok(refuse_body(shared, 413, "invalid", &problem));
    }
    let body = match tokio::time::timeout(settings.body_timeout, read_capped(req, limit)).await {
        Ok(Ok(body)) => body,
        Ok(Err(Read::TooLarge)) => {
            let problem = format!("over the limit of {limit} bytes");
            return Ok(refuse_body(shared, 413, "invalid", &problem));
        }
        Ok(Err(Read::Gone)) => {
            shared.events.push(RERANK, GONE, None, Vec::new(), None);
            return Err(ClientGone);
        }
        Ok(Err(Read::Malformed)) => {
            // the control port's answer to bytes its HTTP parser refuses (app/api/serving.py)
            shared.metrics.get().request("", "invalid");
            shared.events.push(RERANK, 400, None, Vec::new(), None);
            return Ok(json(
                400,
                error_body(400, Some("request"), UNREADABLE),
                true,
            ));
        }
        Err(_) => {
            let problem = format!("not received within {} s", settings.body_timeout_text);
            return Ok(refuse_body(shared, 408, "timeout", &problem));
        }
    };
    Ok(answer(shared, body, qa, arrived).await)
}

/// The answer to a body read whole: the QA headers checked, then the engine's call.
async fn answer(shared: &Arc<Shared>, body: Bytes, qa: Qa, arrived: Instant) -> Answer {
    let mut forced: Vec<(String, String)> = Vec::new();
    let mut forced_by = None;
    let mut explain = false;
    if qa.force.is_some() || qa.explain.is_some() {
        // The token check and the headers' parsing are the control plane's (app/api/rerank.py
        // `check_qa`), on a blocking thread: QA traffic is rare, and its GIL wait holds no
        // serving thread.
        let checker = Arc::clone(shared);
        let checked = tokio::task::spawn_blocking(move || checker.check_qa(qa)).await;
        match checked {
            Ok(Ok(QaChecked::Refused(status, body, headers))) => {
                shared.events.push(RERANK, status, None, Vec::new(), None);
                let mut refused = json(status, body, false);
                for (name, value) in headers {
                    if let (Ok(n), Ok(v)) = (
                        hyper::header::HeaderName::from_bytes(name.as_bytes()),
                        HeaderValue::from_str(&value),
                    ) {
                        refused.headers_mut().insert(n, v);
                    }
                }
                return refused;
            }
            Ok(Ok(QaChecked::Allowed(f, by, e))) => {
                forced = f;
                forced_by = by;
                explain = e;
            }
            Ok(Err(problem)) => {
                shared.problem("qa", &problem);
                shared.events.push(RERANK, 500, None, Vec::new(), None);
                return json(500, error_body(500, None, "Internal Server Error"), false);
            }
            Err(panicked) => {
                let problem = panicked.to_string();
                shared.problem("qa", &problem);
                shared.events.push(RERANK, 500, None, Vec::new(), None);
                return json(500, error_body(500, None, "Internal Server Error"), false);
            }
        }
    }
    let Some(engine) = shared.engine.load_full() else {
        shared.events.push(RERANK, 503, None, Vec::new(), None);
        return json(503, error_body(503, None, "no config is loaded yet"), false);
    };
    let job = Job {
        shared: Arc::clone(shared),
        engine,
        body,
        forced,
        forced_by,
        explain,
        arrived,
    };
    // Answered on this thread unless the profile has a Python rule; then on a blocking
    // thread, so that the serving threads never wait for a rule (or the GIL).
    let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run(true)));
    match answered {
        Err(panicked) => {
            let problem = panicked
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panicked.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            shared.problem("rerank", &problem);
            shared.events.push(RERANK, 500, None, Vec::new(), None);
            json(500, error_body(500, None, "Internal Server Error"), false)
        }
        Ok(Some(answer)) => answer,
        Ok(None) => match tokio::task::spawn_blocking(move || job.run(false)).await {
            Ok(Some(answer)) => answer,
            Ok(None) => unreachable!("answered when not deferred"),
            Err(panicked) => {
                shared.problem("rerank", &panicked.to_string());
                shared.events.push(RERANK, 500, None, Vec::new(), None);
                json(500, error_body(500, None, "Internal Server Error"), false)
            }
        },
    }
}

/// The problem of a declared `Content-Length` over `limit` (None: none declared, or within
/// it), in observe.read_body's words.
pub(super) fn declared_over(declared: Option<&HeaderValue>, limit: usize) -> Option<String> {
    let n = declared
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))?;
    let n = n.trim_start_matches('0');
    let over = n.len() > 20 || n.parse::<u128>().is_ok_and(|n| n > limit as u128);
    over.then(|| {
        format!(
            "{} bytes, over the limit of {limit}",
            if n.is_empty() { "0" } else { n }
        )
    })
}

/// A refusal of the body itself (size, deadline): counted as the Python path counts it,
/// the connection closed.
fn refuse_body(shared: &Shared, status: u16, outcome: &str, problem: &str) -> Answer {
    shared.metrics.get().request("", outcome);
    shared.events.push(RERANK, status, None, Vec::new(), None);
    json(status, error_body(status, Some("body"), problem), true)
}

pub(super) enum Read {
    TooLarge,
    /// The client closed the connection before its body was whole.
    Gone,
    /// The body's framing is broken (a malformed chunk).
    Malformed,
}

/// app/api/serving.py's problem for bytes the HTTP parser refuses, word for word.
pub(super) const UNREADABLE: &str =
    "not an HTTP/1.1 request this server can read: a malformed request \
                          line or header, or one longer than the parser takes (a URL or a \
                          header past about 64 KiB)";

/// The whole body, or TooLarge past `limit` bytes; a body in one frame is not copied.
pub(super) async fn read_capped(req: Request<Incoming>, limit: usize) -> Result<Bytes, Read> {
    let mut body = req.into_body();
    let mut first: Option<Bytes> = None;
    let mut more = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            if e.is_parse() || broken_framing(&e) {
                Read::Malformed
            } else {
                Read::Gone
            }
        })?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        let held = first.as_ref().map_or(0, Bytes::len) + more.len() + data.len();
        if held > limit {
            return Err(Read::TooLarge);
        }
        match first.take() {
            None if more.is_empty() => first = Some(data),
            None => more.extend_from_slice(&data),
            Some(f) => {
                more.extend_from_slice(&f);
                more.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| more.freeze()))
}

/// A body error that is the client's framing, not its leaving: hyper's chunk decoder reports
/// a bad chunk size line (`zz`, or one past u64) as an io error of kind InvalidInput or
/// InvalidData, not as a parse error. Taken for a client gone, it was answered 499.
fn broken_framing(e: &hyper::Error) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData
            )
        })
}

/// What `check_qa` answers: (status, error body, headers, forced, forced_by, explain).
type QaAnswer = (
    u16,
    Vec<u8>,
    Vec<(String, String)>,
    Vec<(String, String)>,
    Option<String>,
    bool,
);

pub enum QaChecked {
    /// (status, error body, headers)
    Refused(u16, Vec<u8>, Vec<(String, String)>),
    /// (forced variants, who forced them, explain)
    Allowed(Vec<(String, String)>, Option<String>, bool),
}

impl Shared {
    fn check_qa(&self, qa: Qa) -> Result<QaChecked, String> {
        Python::attach(|py| {
            let answer = self
                .qa
                .call1(py, (qa.force, qa.explain, qa.authorization))
                .map_err(|e| e.to_string())?;
            let (status, body, headers, forced, forced_by, explain): QaAnswer =
                answer.extract(py).map_err(|e: PyErr| e.to_string())?;
            Ok(if status != 0 {
                QaChecked::Refused(status, body, headers)
            } else {
                QaChecked::Allowed(forced, forced_by, explain)
            })
        })
    }
}

/// One request for the engine, owned, so that it can move to a blocking thread.
struct Job {
    shared: Arc<Shared>,
    engine: Arc<Py<Engine>>,
    body: Bytes,
    forced: Vec<(String, String)>,
    forced_by: Option<String>,
    explain: bool,
    arrived: Instant,
}

impl Job {
    /// The answer, or None with `defer` when the profile has a Python rule.
    fn run(&self, defer: bool) -> Option<Answer> {
        let shared = &*self.shared;
        let settings = &shared.settings;
        let engine = self.engine.get();
        let banlist = shared.banlist.load().as_ref().map(|i| i.get().snapshot());
        let quarantine = shared
            .quarantine
            .load()
            .as_ref()
            .map(|i| i.get().snapshot());
        let banlist_version = banlist.as_ref().map_or(0, |b| b.version());
        let started = Instant::now();
        let elapsed = started.duration_since(self.arrived).as_secs_f64();
        let budget = settings.deadline.map(|d| d.as_secs_f64() - elapsed);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let call = Call {
            banlist,
            quarantine,
            now,
            budget_seconds: budget,
            forced: &self.forced,
            forced_by: self.forced_by.as_deref(),
            limits: Limits {
                max_documents: settings.max_documents,
                max_text_chars: settings.max_text_chars,
            },
            elapsed,
            clock: &Monotonic,
            audit_line: settings.audit,
            explain: self.explain,
            executor: shared.executor.as_ref(),
            defer_python: defer,
        };
        let mut out = |n: usize| Ok(Vec::with_capacity(n));
        let served = match engine.serve(&self.body, &call, &mut out) {
            Ok(served) => served,
            Err(e) => {
                let problem = e.to_string();
                shared.problem("rerank", &problem);
                shared.events.push(RERANK, 500, None, Vec::new(), None);
                return Some(json(
                    500,
                    error_body(500, None, "Internal Server Error"),
                    false,
                ));
            }
        };
        let Reply {
            status,
            body,
            line,
            failures,
            impression,
        } = match served {
            Served::Deferred => return None,
            Served::Reply(r) => r,
        };
        // QA traffic (forced variants) is not real traffic; 4xx bodies replay as 4xx. Drawn
        // here, as Capture.offer draws: only the kept bodies are queued and copied.
        let capture = (self.forced.is_empty()
            && matches!(status, 200 | 503)
            && settings.capture_rate > 0.0
            && super::draw() < settings.capture_rate)
            .then(|| Captured {
                body: self.body.clone(),
                status,
                config_version: engine.config().version.clone(),
                banlist_version,
                at: now,
            });
        // Queued before the answer leaves: whoever has the answer finds its line queued.
        if let Some(impression) = impression {
            shared.events.impression(impression);
        }
        shared.events.push(RERANK, status, line, failures, capture);
        Some(json(status, body, false))
    }
}
