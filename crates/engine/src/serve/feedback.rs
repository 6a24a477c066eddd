//! `POST /v1/feedback` on the data port: the body read under the same cap and deadline as
//! a page's, then handed to the control plane's handler (app/api/feedback.py `answer`, the
//! control port's route's own) on a blocking thread, which takes the GIL: the serving
//! threads never wait for it, nor for the Redis round trip behind it. Its bytes are the
//! answer, so both ports say the same.

use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::CONTENT_LENGTH;
use hyper::Request;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::engine::error_body;

use super::http::{
    declared_over, json, read_capped, Answer, ClientGone, Read, FEEDBACK, GONE, UNREADABLE,
};
use super::Shared;

/// The answer to one feedback, counted under its route (a client gone as `GONE`, and
/// answered nothing).
pub async fn feedback(shared: &Arc<Shared>, req: Request<Incoming>) -> Result<Answer, ClientGone> {
    let (status, answer) = answered(shared, req).await;
    shared.events.push(FEEDBACK, status, None, Vec::new(), None);
    if status == GONE {
        return Err(ClientGone);
    }
    Ok(answer)
}

async fn answered(shared: &Arc<Shared>, req: Request<Incoming>) -> (u16, Answer) {
    let settings = &shared.settings;
    let limit = settings.max_body_bytes;
    if let Some(problem) = declared_over(req.headers().get(CONTENT_LENGTH), limit) {
        return refused(413, "body", &problem, true);
    }
    let body = match tokio::time::timeout(settings.body_timeout, read_capped(req, limit)).await {
        Ok(Ok(body)) => body,
        Ok(Err(Read::TooLarge)) => {
            return refused(
                413,
                "body",
                &format!("over the limit of {limit} bytes"),
                true,
            )
        }
        Ok(Err(Read::Gone)) => return (GONE, json(GONE, Bytes::new(), true)),
        Ok(Err(Read::Malformed)) => return refused(400, "request", UNREADABLE, true),
        Err(_) => {
            let problem = format!("not received within {} s", settings.body_timeout_text);
            return refused(408, "body", &problem, true);
        }
    };
    if shared.feedback.is_none() {
        return refused(404, "request", "this listener takes no feedback", false);
    }
    let calling = Arc::clone(shared);
    let called = tokio::task::spawn_blocking(move || {
        Python::attach(|py| {
            let Some(handler) = calling.feedback.as_ref() else {
                unreachable!("checked before")
            };
            handler
                .call1(py, (PyBytes::new(py, &body),))
                .and_then(|answer| answer.extract::<(u16, Vec<u8>)>(py))
                .map_err(|e| e.to_string())
        })
    })
    .await;
    let problem = match called {
        Ok(Ok((status, body))) => return (status, json(status, body, false)),
        Ok(Err(problem)) => problem,
        Err(panicked) => panicked.to_string(),
    };
    shared.problem("feedback", &problem);
    (
        500,
        json(500, error_body(500, None, "Internal Server Error"), false),
    )
}

fn refused(status: u16, field: &str, problem: &str, close: bool) -> (u16, Answer) {
    (
        status,
        json(status, error_body(status, Some(field), problem), close),
    )
}
