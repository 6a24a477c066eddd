//! What the native listener hands the Python control plane after a request: audit lines,
//! rule failures, capture records and response counts, queued here and taken in batches
//! by a Python thread (`DataPlane.drain`), so that no serving thread ever waits for the
//! GIL to write a log line.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;

use crate::engine::Failure;
use crate::interleave::Impression;

/// Events held before the drain falls behind far enough to drop them (counted, by kind):
/// at 100 µs a request, 64 K events is six seconds of a stalled Python thread.
pub const MAX_QUEUED: usize = 65_536;
/// Bytes of captured bodies held at most, whatever their number.
pub const MAX_CAPTURED_BYTES: usize = 64 << 20;

/// A request body kept for replay, with what answered it.
pub struct Captured {
    pub body: Bytes,
    pub status: u16,
    pub config_version: String,
    pub banlist_version: i64,
    /// When the request was answered (epoch seconds).
    pub at: f64,
}

/// One drain's worth.
#[derive(Default)]
pub struct Batch {
    pub lines: Vec<Vec<u8>>,
    pub failures: Vec<Failure>,
    pub captures: Vec<Captured>,
    /// Interleaved pages served, for the feedback store.
    pub impressions: Vec<Impression>,
    /// (route, status) → responses since the last drain.
    pub responses: HashMap<(&'static str, u16), u64>,
    /// (kind, how many) dropped because the queue was full: "audit", "failure", "capture",
    /// "impression".
    pub dropped: HashMap<&'static str, u64>,
    /// Failures of the listener itself, for the log (already rate-limited).
    pub problems: Vec<String>,
    /// Bytes of the captured bodies held.
    captured_bytes: usize,
}

impl Batch {
    fn held(&self) -> usize {
        self.lines.len() + self.failures.len() + self.captures.len() + self.impressions.len()
    }

    fn is_empty(&self) -> bool {
        self.held() == 0
            && self.responses.is_empty()
            && self.dropped.is_empty()
            && self.problems.is_empty()
    }
}

/// The queue between the serving threads and the Python thread that drains it.
#[derive(Default)]
pub struct Events {
    batch: Mutex<Batch>,
    ready: Condvar,
    /// Set by `wake`: waits return at once from then on (the listener stopped).
    woken: AtomicBool,
}

impl Events {
    fn lock(&self) -> MutexGuard<'_, Batch> {
        // A thread that panicked while holding the lock left a batch that is still whole:
        // each push is one Vec push or one map update.
        self.batch.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queue what one request left to write, and count its response. The writer is woken
    /// only for something to write, and only when its queue was empty (it takes all that
    /// came since): a response count alone waits for the next wake or the writer's
    /// periodic drain, so a plain request costs one uncontended lock and no system call.
    pub fn push(
        &self,
        route: &'static str,
        status: u16,
        line: Option<Vec<u8>>,
        failures: Vec<Failure>,
        capture: Option<Captured>,
    ) {
        let mut batch = self.lock();
        *batch.responses.entry((route, status)).or_default() += 1;
        if line.is_none() && failures.is_empty() && capture.is_none() {
            return;
        }
        let waiting = batch.held() == 0;
        let room = MAX_QUEUED.saturating_sub(batch.held());
        if let Some(line) = line {
            if room > 0 {
                batch.lines.push(line);
            } else {
                *batch.dropped.entry("audit").or_default() += 1;
            }
        }
        if !failures.is_empty() {
            if room > failures.len() {
                batch.failures.extend(failures);
            } else {
                *batch.dropped.entry("failure").or_default() += failures.len() as u64;
            }
        }
        if let Some(capture) = capture {
            let bytes = batch.captured_bytes + capture.body.len();
            if room > 1 && bytes <= MAX_CAPTURED_BYTES {
                batch.captured_bytes = bytes;
                batch.captures.push(capture);
            } else {
                *batch.dropped.entry("capture").or_default() += 1;
            }
        }
        drop(batch);
        if waiting {
            self.ready.notify_one();
        }
    }

    /// Queue an interleaved page served (before the request's `push`, so that whoever has
    /// the answer finds it queued); past the cap it is dropped and counted.
    pub fn impression(&self, impression: Impression) {
        let mut batch = self.lock();
        let waiting = batch.held() == 0;
        if batch.held() < MAX_QUEUED {
            batch.impressions.push(impression);
        } else {
            *batch.dropped.entry("impression").or_default() += 1;
        }
        drop(batch);
        if waiting {
            self.ready.notify_one();
        }
    }

    /// Queue a failure of the listener itself for the log.
    pub fn problem(&self, problem: String) {
        let mut batch = self.lock();
        let waiting = batch.held() == 0 && batch.problems.is_empty();
        batch.problems.push(problem);
        drop(batch);
        if waiting {
            self.ready.notify_one();
        }
    }

    /// Wait up to `timeout` until something is queued to write (or `wake`); whether
    /// anything is queued, response counts included (the caller drains at a timeout too).
    pub fn wait(&self, timeout: Duration) -> bool {
        let batch = self.lock();
        let batch = self
            .ready
            .wait_timeout_while(batch, timeout, |b| {
                b.held() == 0 && b.problems.is_empty() && !self.woken.load(Ordering::Acquire)
            })
            .unwrap_or_else(PoisonError::into_inner)
            .0;
        !batch.is_empty()
    }

    /// End every wait, now and from now on.
    pub fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        let _held = self.lock(); // a waiter between its check and its sleep sees the flag
        self.ready.notify_all();
    }

    /// Let waits wait again (the listener started anew).
    pub fn rearm(&self) {
        self.woken.store(false, Ordering::Release);
    }

    /// Everything queued.
    pub fn take(&self) -> Batch {
        std::mem::take(&mut *self.lock())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_wake_ends_waits_at_once() {
        let events = Events::default();
        events.wake();
        let started = std::time::Instant::now();
        assert!(!events.wait(Duration::from_secs(30)));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "waited for its timeout"
        );
    }

    use super::*;

    #[test]
    fn counts_responses_and_drops_past_the_cap_counted() {
        let events = Events::default();
        for _ in 0..MAX_QUEUED + 3 {
            events.push("/v1/rerank", 200, Some(b"{}".to_vec()), Vec::new(), None);
        }
        events.push("/healthz", 200, None, Vec::new(), None);
        let batch = events.take();
        assert_eq!(batch.lines.len(), MAX_QUEUED);
        assert_eq!(batch.dropped.get("audit"), Some(&3));
        assert_eq!(
            batch.responses.get(&("/v1/rerank", 200)),
            Some(&(MAX_QUEUED as u64 + 3))
        );
        assert_eq!(batch.responses.get(&("/healthz", 200)), Some(&1));
        assert!(events.take().is_empty());
    }

    #[test]
    fn impressions_are_queued_and_dropped_past_the_cap_counted() {
        let events = Events::default();
        let impression = |n: usize| Impression {
            request_id: format!("r{n}"),
            experiment: "e".into(),
            unit: "u".into(),
            at: 1.0,
            teams: vec![("d1".into(), "control")],
        };
        for n in 0..MAX_QUEUED - 2 {
            events.push("/v1/rerank", 200, Some(b"{}".to_vec()), Vec::new(), None);
            if n == 0 {
                events.impression(impression(n));
            }
        }
        events.impression(impression(1));
        events.impression(impression(2));
        let batch = events.take();
        assert_eq!(batch.impressions.len(), 2);
        assert_eq!(batch.impressions[1].request_id, "r1");
        assert_eq!(batch.dropped.get("impression"), Some(&1));
    }

    #[test]
    fn a_waiting_drain_wakes_on_a_push() {
        let events = std::sync::Arc::new(Events::default());
        let pusher = std::sync::Arc::clone(&events);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            pusher.push("/v1/rerank", 200, Some(b"{}".to_vec()), Vec::new(), None);
        });
        // (the wait below returns on the push, long before its 30 s)
        let started = std::time::Instant::now();
        assert!(events.wait(Duration::from_secs(30)));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "woken by its timeout"
        );
        let batch = events.take();
        t.join().unwrap();
        assert_eq!(batch.responses.get(&("/v1/rerank", 200)), Some(&1));
        assert_eq!(batch.lines.len(), 1);
    }
}
