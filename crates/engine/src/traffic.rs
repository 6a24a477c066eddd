//! How many recent requests served a page with each host, or with a host under each domain:
//! what a ban of that host or domain would have removed results from. A ban whose share is
//! over REARRANGE_BAN_REVIEW_SHARE waits for a second person (app/banlist/review.py).
//!
//! A count-min sketch (Cormode and Muthukrishnan) per time slot: each key is counted in one
//! cell of each of `DEPTH` rows, and its count is read as the smallest of its cells, so the
//! answer is never below the truth and is above it only by what collided with the key in
//! every row. Over-counting sends a ban to review that did not need it; it never lets a
//! high-impact ban through. The memory is fixed whatever the number of hosts:
//! `SLOTS * DEPTH * WIDTH * 4` bytes (12 MiB), allocated slot by slot as traffic reaches it.
//!
//! A request counts each key once, however many of its documents share it: the host of each
//! served document and every parent domain of it up to the top-level one
//! (`news.example.co.uk` counts `news.example.co.uk`, `example.co.uk`, `co.uk` and `uk`),
//! so a `domain` ban of any of them, and a `host` ban (bounded by the count of its name as
//! a domain), reads one key.
//!
//! The window slides by slots: `SLOTS` slots of `SLOT_SECONDS`, the current one filling, so
//! a reading covers the last 50 to 60 minutes. A slot is emptied when the clock reaches it
//! again; a request on a thread that meets a slot being emptied may be lost from the count.
//!
//! A slot records each of its first `EVERY` requests, then one request in `STRIDE`, that
//! one counted `STRIDE` times: a busy replica's counts are then a sample (thousands of
//! requests a slot all the same), and a request pays the cells' cache misses (a few µs at
//! 100 documents) a quarter of the time. Every request counts in the slot's total.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};

use std::hash::BuildHasher;

/// Cells per row: a power of two. The mean over-count of a row is (keys counted) / WIDTH,
/// about 40 keys a request: 3e-4 of the requests on one row, less for the smallest of four.
pub const WIDTH: usize = 1 << 17;
/// Rows, each with its own hash of the key.
pub const DEPTH: usize = 4;
/// Slots of the window.
pub const SLOTS: usize = 6;
/// Seconds a slot covers.
pub const SLOT_SECONDS: f64 = 600.0;
/// Requests of a slot each recorded, before it samples.
pub const EVERY: u64 = 8192;
/// Past `EVERY`, one request in this many is recorded, with this weight.
pub const STRIDE: u64 = 4;

/// One slot: the period it holds (`now / SLOT_SECONDS`, floored; `i64::MIN` for none), its
/// requests and its cells (made when a request first reaches the slot).
struct Slot {
    period: AtomicI64,
    requests: AtomicU64,
    cells: OnceLock<Box<[AtomicU32]>>,
    emptying: Mutex<()>,
}

impl Slot {
    fn new() -> Self {
        Slot {
            period: AtomicI64::new(i64::MIN),
            requests: AtomicU64::new(0),
            cells: OnceLock::new(),
            emptying: Mutex::new(()),
        }
    }

    fn cells(&self) -> &[AtomicU32] {
        self.cells
            .get_or_init(|| (0..DEPTH * WIDTH).map(|_| AtomicU32::new(0)).collect())
    }

    /// Make the slot hold `period`, emptied if it held an older one; false if it holds a
    /// newer one (a clock that went back: the request is not counted).
    fn hold(&self, period: i64) -> bool {
        let held = self.period.load(Relaxed);
        if held == period {
            return true;
        }
        if held > period {
            return false;
        }
        let _one = self.emptying.lock().unwrap_or_else(|p| p.into_inner());
        let held = self.period.load(Relaxed);
        if held < period {
            if let Some(cells) = self.cells.get() {
                for c in cells.iter() {
                    c.store(0, Relaxed);
                }
            }
            self.requests.store(0, Relaxed);
            self.period.store(period, Relaxed);
        }
        held <= period
    }
}

/// The sketch: `record` on every served request, `share` when a ban is weighed.
pub struct Traffic {
    slots: [Slot; SLOTS],
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic {
            slots: std::array::from_fn(|_| Slot::new()),
        }
    }
}

/// The key's hash: the rows' cells are `(a + row * b) mod WIDTH` of its two halves (Kirsch
/// and Mitzenmacher: two hashes make `DEPTH` as good as independent ones).
fn hash(key: &str) -> u64 {
    foldhash::quality::FixedState::with_seed(0x7EA_FF1C).hash_one(key.as_bytes())
}

fn cell(h: u64, row: usize) -> usize {
    let (a, b) = (h as u32 as usize, ((h >> 32) as usize) | 1);
    row * WIDTH + (a.wrapping_add(row.wrapping_mul(b)) & (WIDTH - 1))
}

/// splitmix64's finalizer.
fn mixed(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn period_of(now: f64) -> i64 {
    (now / SLOT_SECONDS).floor() as i64
}

/// Each key of `host`: the host, then each parent domain up to the top-level label. An IP
/// address (a bracketed IPv6 or an IPv4 dotted quad) is its own only key.
pub fn keys_of(host: &str) -> impl Iterator<Item = &str> {
    let ip = host.starts_with('[') || host.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let mut next = if host.is_empty() { None } else { Some(host) };
    std::iter::from_fn(move || {
        let key = next?;
        next = if ip {
            None
        } else {
            key.split_once('.')
                .map(|(_, parent)| parent)
                .filter(|p| !p.is_empty())
        };
        Some(key)
    })
}

impl Traffic {
    /// Count one served request at `now` (epoch seconds) whose page holds `hosts`.
    pub fn record<'h>(&self, now: f64, hosts: impl Iterator<Item = &'h str>) {
        let period = period_of(now);
        let slot = &self.slots[period.rem_euclid(SLOTS as i64) as usize];
        if !now.is_finite() || !slot.hold(period) {
            return;
        }
        let seen = slot.requests.fetch_add(1, Relaxed);
        let weight = match seen {
            s if s < EVERY => 1,
            // drawn by a mix of the count, not the count itself: traffic in step with the
            // stride (a client's round robin) is sampled fairly
            s if mixed(s) % STRIDE == 0 => STRIDE as u32,
            _ => return,
        };
        let mut keys: Vec<u64> = hosts.flat_map(keys_of).map(hash).collect();
        keys.sort_unstable();
        keys.dedup();
        let cells = slot.cells();
        for h in keys {
            for row in 0..DEPTH {
                cells[cell(h, row)].fetch_add(weight, Relaxed);
            }
        }
    }

    /// (requests that served `key`, at most, or about past `EVERY` requests a slot;
    /// requests) over the window ending at `now`.
    pub fn share(&self, now: f64, key: &str) -> (u64, u64) {
        let period = period_of(now);
        let h = hash(key);
        let mut rows = [0u64; DEPTH];
        let mut requests = 0;
        for slot in &self.slots {
            let held = slot.period.load(Relaxed);
            if held > period || held <= period - SLOTS as i64 {
                continue;
            }
            requests += slot.requests.load(Relaxed);
            if let Some(cells) = slot.cells.get() {
                for (row, sum) in rows.iter_mut().enumerate() {
                    *sum += u64::from(cells[cell(h, row)].load(Relaxed));
                }
            }
        }
        let count = rows.into_iter().min().unwrap_or(0);
        (count.min(requests), requests)
    }

    /// Bytes the slots' cells hold now (every slot that traffic reached).
    pub fn nbytes(&self) -> usize {
        let held = self
            .slots
            .iter()
            .filter(|s| s.cells.get().is_some())
            .count();
        held * DEPTH * WIDTH * std::mem::size_of::<AtomicU32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_the_host_and_each_parent_domain() {
        let keys: Vec<_> = keys_of("news.example.co.uk").collect();
        assert_eq!(keys, ["news.example.co.uk", "example.co.uk", "co.uk", "uk"]);
        assert_eq!(keys_of("192.168.0.1").collect::<Vec<_>>(), ["192.168.0.1"]);
        assert_eq!(keys_of("[::1]").collect::<Vec<_>>(), ["[::1]"]);
        assert_eq!(keys_of("").count(), 0);
    }

    #[test]
    fn a_request_counts_each_key_once() {
        let t = Traffic::default();
        t.record(
            1000.0,
            ["a.example.com", "b.example.com", "a.example.com"].into_iter(),
        );
        t.record(1001.0, ["other.org"].into_iter());
        assert_eq!(t.share(1002.0, "example.com"), (1, 2));
        assert_eq!(t.share(1002.0, "a.example.com"), (1, 2));
        assert_eq!(t.share(1002.0, "com"), (1, 2));
        assert_eq!(t.share(1002.0, "org"), (1, 2));
        assert_eq!(t.share(1002.0, "never.example"), (0, 2));
    }

    #[test]
    fn the_window_slides_by_slots() {
        let t = Traffic::default();
        let start = 10.0 * SLOT_SECONDS;
        t.record(start, ["old.example"].into_iter());
        t.record(start + SLOT_SECONDS, ["new.example"].into_iter());
        let last_in = start + (SLOTS as f64 - 0.5) * SLOT_SECONDS;
        assert_eq!(t.share(last_in, "old.example"), (1, 2));
        // a slot later the first has left the window, and a request there empties it
        let out = start + SLOTS as f64 * SLOT_SECONDS;
        assert_eq!(t.share(out, "old.example"), (0, 1));
        t.record(out, ["newest.example"].into_iter());
        assert_eq!(t.share(out, "old.example"), (0, 2));
        assert_eq!(t.share(out, "newest.example"), (1, 2));
        // a clock gone back to a period the slot no longer holds counts nothing
        t.record(start, ["old.example"].into_iter());
        assert_eq!(t.share(out, "old.example"), (0, 2));
    }

    #[test]
    fn the_estimate_is_never_below_the_truth() {
        let t = Traffic::default();
        let mut truth = std::collections::HashMap::new();
        for i in 0..EVERY {
            // a skewed page: one of 50 popular hosts and three of 200,000 others
            let hosts = [
                format!("h{}.popular.example", i % 50),
                format!("s{}.tail.example", (i * 7919) % 200_000),
                format!("s{}.tail.example", (i * 104_729) % 200_000),
                format!("s{}.tail.example", (i * 1_299_709) % 200_000),
            ];
            let mut seen: Vec<&str> = hosts.iter().map(String::as_str).collect();
            seen.sort_unstable();
            seen.dedup();
            for h in &seen {
                *truth.entry(h.to_string()).or_insert(0u64) += 1;
            }
            t.record(5.0, hosts.iter().map(String::as_str));
        }
        let mut over = 0;
        for (host, n) in &truth {
            let (count, requests) = t.share(5.0, host);
            assert_eq!(requests, EVERY);
            assert!(count >= *n, "{host}: {count} < {n}");
            over = over.max(count - n);
        }
        // ~65 k keys counted into 131 k cells a row: the smallest of four rarely collides
        // with a popular host (~160 requests each)
        assert!(over < 160, "largest over-count {over}");
    }

    #[test]
    fn past_every_a_sample_counts_for_the_rest() {
        let t = Traffic::default();
        let n = EVERY * 6;
        for i in 0..n {
            // one host on every request in step with the stride, one on every tenth
            let hosts = [
                format!("h{}.step.example", i % STRIDE),
                format!("t{}.ten.example", i % 10),
            ];
            t.record(5.0, hosts.iter().map(String::as_str));
        }
        for (host, truth) in [("h1.step.example", n / STRIDE), ("t3.ten.example", n / 10)] {
            let (count, requests) = t.share(5.0, host);
            assert_eq!(requests, n);
            let off = (count as f64 - truth as f64).abs() / truth as f64;
            assert!(off < 0.1, "{host}: {count} for {truth}");
        }
    }
}
