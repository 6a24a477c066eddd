//! Benchmark of the review's traffic counts (crates/engine/src/traffic.rs) against exact
//! counts of the same traffic; nothing here asserts a figure.
//!
//! `--hosts N` distinct hosts (default 1 M), three to a site (`h<i>.s<i/3>.com`), and
//! `--requests R` requests (default 2 M) of `--docs D` documents (default 10), each host
//! drawn from a Zipf law of exponent 1.1 over the hosts (a few sites on most pages, a long
//! tail): every host is seen. The requests are spread over the hour the window covers. Reports the counts' bytes and the process's RSS growth, the
//! time one request's recording takes, and, against exact counts of every key (hosts, sites,
//! `com`), how far the estimate is over the truth, as a share of the requests: the largest,
//! the 99.9th percentile, the keys under half the review share (0.001) that the estimate
//! puts over it (a review that was not needed), the keys under the truth (past
//! `traffic::EVERY` requests a slot the counts are a sample), and the keys over the share,
//! or over twice it, that the estimate puts under it (a ban let through).

use std::collections::HashMap;
use std::time::Instant;

use rearrange_engine::traffic::{keys_of, Traffic};

/// xorshift64*: the same traffic every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

fn rss_kib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let hosts_n = arg("--hosts", 1_000_000);
    let requests = arg("--requests", 2_000_000);
    let docs = arg("--docs", 10);
    let hosts: Vec<String> = (0..hosts_n)
        .map(|i| format!("h{i}.s{}.com", i / 3))
        .collect();
    // Zipf(1.1) by inversion of its cumulative weights
    let mut cumulative = Vec::with_capacity(hosts_n);
    let mut total = 0.0;
    for rank in 1..=hosts_n {
        total += 1.0 / (rank as f64).powf(1.1);
        cumulative.push(total);
    }
    let mut rng = Rng(0x7EA_FF1C);
    let mut pages: Vec<Vec<u32>> = Vec::with_capacity(requests);
    for r in 0..requests {
        let page = (0..docs)
            .map(|d| {
                if r < hosts_n / docs + 1 {
                    // the first requests go over every host once: each is seen
                    ((r * docs + d) % hosts_n) as u32
                } else {
                    let x = rng.unit() * total;
                    cumulative.partition_point(|&c| c < x).min(hosts_n - 1) as u32
                }
            })
            .collect();
        pages.push(page);
    }
    let before = rss_kib();
    let traffic = Traffic::default();
    let started = Instant::now();
    // spread over the window's six slots, read at its end
    let end = 3599.0;
    for (r, page) in pages.iter().enumerate() {
        let at = end * r as f64 / requests as f64;
        traffic.record(at, page.iter().map(|&h| hosts[h as usize].as_str()));
    }
    let per_request = started.elapsed().as_secs_f64() / requests as f64;
    let grown = rss_kib().saturating_sub(before);
    let mut truth: HashMap<&str, u64> = HashMap::new();
    for page in &pages {
        let mut keys: Vec<&str> = page
            .iter()
            .flat_map(|&h| keys_of(&hosts[h as usize]))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        for k in keys {
            *truth.entry(k).or_insert(0) += 1;
        }
    }
    let threshold = 0.001;
    let mut over: Vec<f64> = Vec::with_capacity(truth.len());
    let (mut under, mut needless, mut small) = (0, 0, 0);
    // keys over the share read under it (a ban let through), over twice the share likewise
    let (mut missed, mut big, mut missed_twice, mut twice) = (0, 0, 0, 0);
    for (key, &n) in &truth {
        let (count, total_requests) = traffic.share(end, key);
        assert_eq!(total_requests as usize, requests);
        if count < n {
            under += 1;
        }
        let excess = (count.saturating_sub(n)) as f64 / requests as f64;
        over.push(excess);
        let (truth_share, read) = (n as f64 / requests as f64, count as f64 / requests as f64);
        if truth_share > threshold {
            big += 1;
            missed += usize::from(read <= threshold);
        }
        if truth_share > 2.0 * threshold {
            twice += 1;
            missed_twice += usize::from(read <= threshold);
        }
        if (n as f64) / (requests as f64) < threshold / 2.0 {
            small += 1;
            if count as f64 / requests as f64 > threshold {
                needless += 1;
            }
        }
    }
    over.sort_by(f64::total_cmp);
    let pct = |q: f64| over[((over.len() - 1) as f64 * q) as usize];
    println!(
        "traffic counts: {hosts_n} hosts, {requests} requests of {docs} documents, {} keys",
        truth.len()
    );
    println!(
        "  memory: {} MiB counted by nbytes, RSS grew {} MiB",
        traffic.nbytes() >> 20,
        grown >> 10
    );
    println!("  recording: {:.2} µs a request", per_request * 1e6);
    println!(
        "  over the truth, share of requests: max {:.2e}, p99.9 {:.2e}, p99 {:.2e}",
        pct(1.0),
        pct(0.999),
        pct(0.99)
    );
    println!(
        "  keys under {:.4} sent over {threshold}: {needless} of {small}; under the truth: {under}",
        threshold / 2.0
    );
    println!(
        "  keys over {threshold} read under it: {missed} of {big}; over {}: {missed_twice} of {twice}",
        2.0 * threshold
    );
}
