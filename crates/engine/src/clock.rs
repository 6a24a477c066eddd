//! The clock a request's deadline is read on, given to the engine: the process's monotonic
//! clock in production, a clock a test sets in the tests (Python's `Engine.rerank(clock=)`,
//! the Rust tests' `FakeClock`, under cfg(test)).

use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// Where the time a deadline is checked against comes from.
pub trait Clock {
    /// Now, on this clock.
    fn now(&self) -> Instant;
}

/// The process's monotonic clock: production's.
pub struct Monotonic;

impl Clock for Monotonic {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A Python callable returning monotonic seconds, as `time.monotonic` does: each reading
/// is placed `origin` plus the seconds it returns (clamped to zero and to a year; a
/// reading that fails or is not a number counts as the latest time).
pub struct PyClock<'py> {
    read: Bound<'py, PyAny>,
    origin: Instant,
}

/// The furthest a reading is placed after `origin`.
const LONGEST: Duration = Duration::from_secs(365 * 86_400);

impl<'py> PyClock<'py> {
    /// Read `read` from now on.
    pub fn new(read: Bound<'py, PyAny>) -> Self {
        PyClock {
            read,
            origin: Instant::now(),
        }
    }
}

impl Clock for PyClock<'_> {
    fn now(&self) -> Instant {
        let seconds = self
            .read
            .call0()
            .and_then(|s| s.extract::<f64>())
            .unwrap_or(f64::INFINITY);
        let after = if seconds.is_nan() || seconds <= 0.0 {
            Duration::ZERO
        } else {
            Duration::try_from_secs_f64(seconds).map_or(LONGEST, |d| d.min(LONGEST))
        };
        self.origin + after
    }
}

/// A clock a Rust test sets and moves on by hand, or that moves on by `step` at every
/// reading (a deadline that passes between two given readings).
#[cfg(test)]
pub struct FakeClock {
    at: std::cell::Cell<Instant>,
    step: Duration,
}

#[cfg(test)]
impl FakeClock {
    /// Stopped at the time it was made.
    pub fn new() -> Self {
        Self::ticking(Duration::ZERO)
    }

    /// Moving on by `step` after each reading.
    pub fn ticking(step: Duration) -> Self {
        FakeClock {
            at: std::cell::Cell::new(Instant::now()),
            step,
        }
    }

    /// Move it on by `by`.
    pub fn advance(&self, by: Duration) {
        self.at.set(self.at.get() + by);
    }
}

#[cfg(test)]
impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
impl Clock for FakeClock {
    fn now(&self) -> Instant {
        let now = self.at.get();
        self.at.set(now + self.step);
        now
    }
}
