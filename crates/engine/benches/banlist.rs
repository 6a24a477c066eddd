//! Benchmark of the banlist index (issue 14's targets), ratios within one run; nothing here
//! asserts a time.
//!
//! 1. memory: RSS after building an index of `--entries` entries (default 1 M) minus RSS
//!    before, per entry, once the allocators (mimalloc, the engine's; glibc's) have
//!    returned their free pages. The mix is `bench/banlist.py`'s: n distinct generated
//!    sites, 40 % domain, 30 % host, 20 % url, 10 % prefix entries, one reason and actor.
//! 2. lookup: 100 URLs looked up in the index, given each URL's canonical form and host
//!    (what decoding a request has already computed: canonicalization is outside both
//!    sides), against the floor of any check, 100 probes of a plain
//!    `hashbrown::HashMap<Box<str>, u32>` (foldhash, its default hasher, seeded: below)
//!    holding the same n values, keyed by the URLs' hosts, each host hashed by the probe
//!    (nothing pre-hashed: "as cheap as looking each URL's host up once in a hash set").
//!    foldhash's default draws its seed per process, and where the page's 100 hosts land
//!    moves the floor by a few percent, so the floor is measured with each of
//!    `--floor-seeds` fixed seeds (0, 1, 2 by default), a map and a run of the rounds each,
//!    and the ratios are the medians over the seeds: one run is comparable with the next,
//!    and no one seed decides the figure (each seed's own line is printed too; the seeds
//!    run one after the other, so their range holds the process's drift as well). The index
//!    is asked as the banlist rule asks it, the page at once (`IndexData::lookup_page`),
//!    and one URL at a time (`IndexData::lookup`); both give the same answers. A tenth of
//!    the URLs hit an entry (one of each scope in turn); the rest are clean, each on a site
//!    of its own (as a results page is): `www.shop…com`, `shop…org`, `m.shop….example`, and
//!    a fifth of them a clean subdomain (`cdn.`) of a site whose `www.` host is banned.
//!    Interleaved rounds (the three in turn), medians, and the page's lowest and highest
//!    ratio over the fifths of each seed's run (how far the ratio moves with the machine's
//!    load); warm (the same page round after round, for each of the warm pages in turn:
//!    below) and cold (each of the three reads a page none has read for hundreds of rounds,
//!    so neither the index's memory nor the page's strings are in cache); then the first
//!    warm page's clean URLs and its hits apart.
//! 3. writes: a batch of one change (an add, then its removal) against the built index,
//!    and an empty index's making, medians: what a replica spends on each change; and
//!    the sites filter made again from every entry's names, once (what its thread spends
//!    when a quarter of the names have gone since it was made).
//!
//! 4. snapshot: the built index dumped (`BanIndex.dump`'s bytes), the dump loaded back into
//!    a new index (`BanIndex.load`: read, the entries' digest, the tables made), and the
//!    content digest taken of the built index, each once (the entries' creation times
//!    differ, as a store's do); the dump's size per entry; and
//!    the load's peak RSS (with the dump's bytes it reads) over the RSS of the index it
//!    made. The loaded index's digest and its answers on the pages are checked against the
//!    built one's. `--only-snapshot` skips 2 and 3; `--write-dump PATH` keeps the dump.
//!
//! `cargo bench --bench banlist -- --entries 10000000`
//!
//! Where one page's 100 sites land in the index (how many clean sites pass the sites
//! filter, how many meet a summary slot of another name) moves its warm figure by a tenth
//! or more, so the warm figure is over several pages: `--warm-seeds` (default
//! `11,1,2,3,4,5,6`, 11 the page the bench had alone before) each draw one, each warm for
//! its share of the rounds in turn, and the warm ratio is the pages' mean time over the
//! floor's; each page's own ratio is printed too. `--warm-seed S` asks page S alone.
//!
//! With `--count WAY` (`page`, `one`, `floor`, the floor's map seeded `--floor-seed`, default
//! 0; `--class clean|cdn|hits|all`, default all, or a scope's name for the hits of that
//! scope) it only builds the index and then asks the warm page's URLs of that class
//! `--rounds` times in `counted`, for
//! `valgrind --tool=callgrind --toggle-collect='*counted*'`: the instructions of one round
//! are the total over `--rounds`.

use std::hint::black_box;
use std::time::Instant;

use foldhash::fast::FixedState;
use rearrange_engine::banlist::{digest, dump, load, spread, BanIndex, Change, NewEntry, Scope};

fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

extern "C" {
    fn malloc_trim(pad: usize) -> i32;
    fn mi_collect(force: bool);
}

fn trimmed_rss() -> usize {
    // SAFETY: both only return free pages to the system (mimalloc's is linked in by the
    // engine, its global allocator).
    unsafe {
        mi_collect(true);
        malloc_trim(0);
    }
    rss()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn entry(i: usize, n: usize, rng: &mut Rng) -> (Scope, String) {
    let site = format!("s{i}-{:x}.example", rng.next() % (1 << 30));
    let f = i as f64 / n as f64;
    if f < 0.4 {
        (Scope::Domain, site)
    } else if f < 0.7 {
        (Scope::Host, format!("www.{site}"))
    } else if f < 0.9 {
        (Scope::Url, format!("{site}/p/{i}.html"))
    } else {
        (Scope::Prefix, format!("{site}/forum"))
    }
}

/// A page: (canonical URL, host) pairs, a tenth of them hitting an entry.
fn page(values: &[(Scope, String)], rng: &mut Rng) -> Vec<Url> {
    let n = values.len();
    // an entry of the scope's share of the entries (`entry`'s order)
    let pick = |share: (f64, f64), rng: &mut Rng| {
        let span = ((share.1 - share.0) * n as f64) as u64;
        let i = (share.0 * n as f64) as usize + (rng.next() % span.max(1)) as usize;
        &values[i.min(n - 1)]
    };
    let shares = [(0.0, 0.4), (0.4, 0.7), (0.7, 0.9), (0.9, 1.0)];
    let mut out = Vec::with_capacity(100);
    for k in 0..10 {
        // one of each scope in turn
        let (scope, value) = pick(shares[k % 4], rng);
        let host = value.split('/').next().unwrap_or(value).to_string();
        out.push(match scope {
            Scope::Domain => (
                format!("https://news.{host}/a/b?id=3"),
                format!("news.{host}"),
            ),
            Scope::Host => (format!("http://{host}/x"), host),
            Scope::Url => (format!("http://{value}"), host),
            _ => (format!("https://{value}/t/9"), host),
        });
    }
    while out.len() < 100 {
        let r = rng.next() % 1_000_000;
        let host = match out.len() % 5 {
            0 | 1 => format!("www.shop{r}.com"),
            2 => format!("shop{r}.org"),
            3 => format!("m.shop{r}.example"),
            _ => {
                // a clean subdomain of a site with a banned `www.` host
                let (_, value) = pick(shares[1], rng);
                format!("cdn.{}", value.trim_start_matches("www."))
            }
        };
        out.push((
            format!(
                "https://{host}/cat/item-{}?ref=serp",
                rng.next() % 1_000_000
            ),
            host,
        ));
    }
    for i in (1..out.len()).rev() {
        out.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    out
}

/// A URL of a page: its canonical form and its host.
type Url = (String, String);

/// One way of asking a page of the index, or the floor: how many hit.
type Way<'a> = &'a dyn Fn(&[Url]) -> usize;

/// The floor: a plain map of the values, probed by host, with foldhash's hasher seeded.
type Floor = hashbrown::HashMap<Box<str>, u32, FixedState>;

/// The floor's way: 100 probes of `map`, one per URL's host.
fn probes(map: &Floor, urls: &[Url]) -> usize {
    let mut hits = 0;
    for (_, h) in urls {
        if map.get(black_box(h.as_str())).is_some() {
            hits += 1;
        }
    }
    hits
}

/// One run of the timed rounds against one floor: the medians (us) of the three ways
/// (the page, one by one, the floor), warm and cold, and warm on the clean URLs and the hits
/// apart; and the page's lowest and highest ratio, warm and cold, over the run's fifths.
struct Run {
    /// Warm (the mean over the warm pages of each page's median), then cold.
    pages: [[f64; 3]; 2],
    /// Each warm page's median over the floor's on that page.
    warm_ratios: Vec<f64>,
    /// The clean URLs, then the hits.
    apart: [[f64; 3]; 2],
    /// Cold: the page's lowest and highest ratio over the run's fifths.
    fifths: (f64, f64),
}

impl Run {
    /// Interleaved rounds of `ways` (`interleaved`) on a `warm` page (each in turn for its
    /// share of the rounds) and a `cold` one each turn, then on the first warm page's
    /// `clean` URLs and its `hits` apart.
    fn measure(
        ways: [Way; 3],
        (warm, cold): (&[Vec<Url>], &[Vec<Url>]),
        (clean, hits): (&[Url], &[Url]),
        rounds: usize,
    ) -> Run {
        // the warm page of round r: each page for a run of rounds, so that it stays warm
        // (the rounds spread evenly, each page given one at least)
        let rounds = rounds.max(warm.len());
        let page_rounds =
            |p: usize| (p * rounds).div_ceil(warm.len())..((p + 1) * rounds).div_ceil(warm.len());
        let mut times = interleaved(ways, rounds, |r, k| {
            // a page none of the ways has read for many rounds
            [
                &warm[r * warm.len() / rounds][..],
                &cold[(3 * r + k) % cold.len()][..],
            ]
        });
        // the cold page's ratio in each fifth of the run (before the medians sort the
        // times): how much it moves with what else the machine runs meanwhile
        let fifths = fifths(&times[0][1], &times[2][1]);
        // each warm page's median of each way, over the rounds it had
        let by_page: Vec<[f64; 3]> = (0..warm.len())
            .map(|p| [0, 1, 2].map(|w| median(&mut times[w][0][page_rounds(p)].to_vec())))
            .collect();
        let mean = |w: usize| by_page.iter().map(|m| m[w]).sum::<f64>() / by_page.len() as f64;
        let warm_ratios = by_page.iter().map(|m| m[0] / m[2]).collect();
        let cold_medians = [0, 1, 2].map(|w| median(&mut times[w][1]));
        let pages = [[0, 1, 2].map(mean), cold_medians];
        let apart = [clean, hits].map(|urls| {
            let mut times = interleaved(ways, rounds, |_, _| [urls]);
            [0, 1, 2].map(|w| median(&mut times[w][0]))
        });
        Run {
            pages,
            warm_ratios,
            apart,
            fifths,
        }
    }

    /// The page's median over the floor's, warm (0) or cold (1).
    fn ratio(&self, i: usize) -> f64 {
        self.pages[i][0] / self.pages[i][2]
    }

    /// The run in one line: the warm ratio with each page's, the cold one with its range
    /// over the run's fifths, and the floor's warm time.
    fn line(&self) -> String {
        let pages: Vec<String> = self
            .warm_ratios
            .iter()
            .map(|r| format!("{r:.2}x"))
            .collect();
        let (low, high) = self.fifths;
        format!(
            "warm {:.2}x (pages {}), cold {:.2}x ({low:.2}x to {high:.2}x in the run's fifths); 100 hash probes {:.2} us warm",
            self.ratio(0),
            pages.join(" "),
            self.ratio(1),
            self.pages[0][2]
        )
    }
}

/// `rounds` interleaved rounds of `ways`, each way's turn in a round rotating, each way
/// timed on each of the pages `pages(round, turn)` gives: the times of each way on each
/// page, in the order they were taken.
fn interleaved<'p, const P: usize>(
    ways: [Way; 3],
    rounds: usize,
    pages: impl Fn(usize, usize) -> [&'p [Url]; P],
) -> [[Vec<u128>; P]; 3] {
    let mut times = std::array::from_fn(|_| std::array::from_fn(|_| Vec::with_capacity(rounds)));
    for r in 0..rounds {
        for k in 0..3 {
            let w = (r + k) % 3;
            for (p, urls) in pages(r, k).into_iter().enumerate() {
                let t = Instant::now();
                black_box(ways[w](urls));
                times[w][p].push(t.elapsed().as_nanos());
            }
        }
    }
    times
}

/// `rounds` runs of `way` over `urls`, alone: what `--count` gives callgrind to count.
#[inline(never)]
fn counted(way: Way, urls: &[Url], rounds: usize) -> usize {
    (0..rounds).map(|_| way(black_box(urls))).sum()
}

fn median(v: &mut [u128]) -> f64 {
    v.sort_unstable();
    v[v.len() / 2] as f64 / 1000.0
}

/// The lowest and highest ratio of `way`'s median to `floor`'s over the fifths of a run
/// (the times in the order they were taken, a round each, as many of each).
fn fifths(way: &[u128], floor: &[u128]) -> (f64, f64) {
    let len = way.len().min(floor.len());
    let ratios = (0..5)
        .map(|k| (k * len / 5, (k + 1) * len / 5))
        .filter(|(from, to)| from < to)
        .map(|(from, to)| {
            median(&mut way[from..to].to_vec()) / median(&mut floor[from..to].to_vec())
        });
    range(ratios)
}

/// The lowest and highest of `ratios`.
fn range(ratios: impl Iterator<Item = f64>) -> (f64, f64) {
    ratios.fold((f64::INFINITY, 0.0), |(low, high), r| {
        (low.min(r), high.max(r))
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // the word after `--name`, if it was given
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(String::as_str)
    };
    let arg =
        |name: &str, default: usize| value(name).and_then(|v| v.parse().ok()).unwrap_or(default);
    let n = arg("--entries", 1_000_000);
    let rounds = arg("--rounds", 2001);

    let before = trimmed_rss();
    let started = Instant::now();
    let index = BanIndex::empty();
    let mut rng = Rng(7);
    let built = index.apply_iter((0..n).map(|i| {
        let (scope, value) = entry(i, n, &mut rng);
        Change::Add(NewEntry {
            id: (i + 1).to_string(),
            scope,
            value,
            reason: "spam".into(),
            actor: "tns".into(),
            // a creation time of its own (a quarter second apart, as a store's entries
            // differ), which is what a dump writes and a digest hashes of each
            created: 1.7e9 + i as f64 * 0.25,
            expires: None,
            regions: Vec::new(),
        })
    }));
    if let Err(problem) = built {
        eprintln!("build failed: {problem}");
        return;
    }
    let build_s = started.elapsed().as_secs_f64();
    let after = trimmed_rss();
    let snap = index.snapshot();
    let per_entry = (after - before) as f64 / n as f64;
    println!(
        "[1] memory: {per_entry:.1} B per entry (RSS delta, {n} entries, built in {build_s:.1} s; goal <= 120); own structures {:.1} B per entry",
        snap.bytes() as f64 / n as f64
    );

    // the same values again, for the floor's maps and for picking hits
    let mut rng = Rng(7);
    let values: Vec<(Scope, String)> = (0..n).map(|i| entry(i, n, &mut rng)).collect();
    // the warm pages' seeds; the cold pages follow the first page of seed 11, as they did
    // when that page was the only warm one
    let seeds: Vec<u64> = match (value("--warm-seed"), value("--warm-seeds")) {
        (Some(one), _) => one.parse().ok().into_iter().collect(),
        (None, list) => list
            .unwrap_or("11,1,2,3,4,5,6")
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect(),
    };
    if seeds.is_empty() {
        eprintln!("--warm-seeds: no seed given");
        return;
    }
    let mut rng = Rng(11);
    let default_page = page(&values, &mut rng);
    let warms: Vec<Vec<Url>> = seeds
        .iter()
        .map(|&s| match s {
            11 => default_page.clone(),
            s => page(&values, &mut Rng(s)),
        })
        .collect();
    let warm = &warms[0];
    // `--count` asks only the warm page: no cold pages to make and check (their lookups
    // would be counted by a tool that counts the whole run, such as cachegrind's branches)
    let count_way = value("--count");
    let counting = count_way.is_some();
    let cold_pages = if counting { 0 } else { rounds.min(600) };
    let cold: Vec<Vec<Url>> = (0..cold_pages).map(|_| page(&values, &mut rng)).collect();
    // the floor's map with foldhash's seed `seed`, made from `values` (kept alive for each
    // seed's map in turn). Its default hasher draws a seed per process, and where the page's
    // hosts land moves the floor by a few percent: a fixed seed makes runs comparable, and
    // several seeds keep any one of them from deciding the ratio.
    let floor_map = |seed: u64| {
        let mut map: Floor = hashbrown::HashMap::with_hasher(FixedState::with_seed(seed));
        map.extend(
            values
                .iter()
                .enumerate()
                .map(|(i, (_, v))| (v.clone().into_boxed_str(), i as u32)),
        );
        map
    };

    let now = 1.8e9;
    let page = |urls: &[Url]| {
        let found = snap.lookup_page(black_box(urls), |(c, h)| (c, h), None, now);
        found.len()
    };
    let one_by_one = |urls: &[Url]| {
        let mut hits = 0;
        for (c, h) in urls {
            if snap.lookup(black_box(c), black_box(h), None, now).is_some() {
                hits += 1;
            }
        }
        hits
    };
    // the two ways give the same answers on every page
    for urls in cold.iter().chain(&warms) {
        let hits = snap.lookup_page(urls, |(c, h)| (c, h), None, now);
        assert!(
            hits.windows(2).all(|w| w[0].0 < w[1].0),
            "hits in item order"
        );
        for ((c, h), hit) in urls.iter().zip(spread(hits, urls.len())) {
            let single = snap.lookup(c, h, None, now);
            assert_eq!(hit.map(|x| x.at), single.map(|x| x.at), "{c}");
        }
    }
    println!(
        "    {} of 100 warm URLs banned; {:.1} % of the sites filter's bits set",
        page(warm),
        100.0 * snap.filter_fill()
    );
    if args.iter().any(|a| a == "--only-snapshot") {
        snapshot(&index, n, &warms);
        return;
    }
    if let Some(way) = count_way {
        let class = value("--class").unwrap_or("all");
        let urls: Vec<Url> = warm
            .iter()
            .filter(|(c, h)| {
                let scope = snap.lookup(c, h, None, now).map(|hit| hit.scope);
                let hit = scope.is_some();
                match class {
                    "hits" => hit,
                    "clean" => !hit && !h.starts_with("cdn."),
                    "cdn" => !hit && h.starts_with("cdn."),
                    "all" => true,
                    // the hits of one scope
                    scope_name => scope == Some(scope_name),
                }
            })
            .cloned()
            .collect();
        let map = floor_map(arg("--floor-seed", 0) as u64);
        let floor = |urls: &[Url]| probes(&map, urls);
        let way: Way = match way {
            "one" => &one_by_one,
            "floor" => &floor,
            _ => &page,
        };
        let found = counted(way, &urls, rounds);
        println!(
            "    --count {class}: {} URLs, {found} found over {rounds} rounds",
            urls.len()
        );
        return;
    }
    let (hits, clean): (Vec<_>, Vec<_>) = warm
        .iter()
        .cloned()
        .partition(|(c, h)| snap.lookup(c, h, None, now).is_some());
    let floor_seeds = arg("--floor-seeds", 3).max(1) as u64;
    println!(
        "[2] 100 URLs against {n} entries, {rounds} interleaved rounds (medians; {} warm pages, seeds {seeds:?}), against the floor with each of {floor_seeds} seeds:",
        warms.len()
    );
    let mut runs = Vec::new();
    for seed in 0..floor_seeds {
        let map = floor_map(seed);
        let floor = |urls: &[Url]| probes(&map, urls);
        let ways: [Way; 3] = [&page, &one_by_one, &floor];
        let run = Run::measure(ways, (&warms, &cold), (&clean, &hits), rounds);
        println!("    seed {seed}: {}", run.line());
        runs.push(run);
    }
    // the median over the seeds of a figure of each seed's run (a ratio's is the median of
    // the seeds' ratios, so the medians of the times need not divide to it)
    let mid = |f: &dyn Fn(&Run) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        let half = v.len() / 2;
        if v.len() % 2 == 0 {
            (v[half - 1] + v[half]) / 2.0
        } else {
            v[half]
        }
    };
    for (i, what) in ["warm", "cold"].into_iter().enumerate() {
        let ratio = |r: &Run| r.ratio(i);
        let (low, high) = range(runs.iter().map(ratio));
        println!(
            "    {what}: lookup_page {:.2} us, ratio {:.2}x (goal <= 2x; {low:.2}x to {high:.2}x over the seeds); one by one {:.2} us, {:.2}x; 100 hash probes {:.2} us",
            mid(&|r| r.pages[i][0]),
            mid(&ratio),
            mid(&|r| r.pages[i][1]),
            mid(&|r| r.pages[i][1] / r.pages[i][2]),
            mid(&|r| r.pages[i][2]),
        );
    }
    let each: Vec<String> = (seeds.iter().enumerate())
        .map(|(p, seed)| format!("{seed}: {:.2}x", mid(&|r| r.warm_ratios[p])))
        .collect();
    println!("    warm, each page (seed: ratio): {}", each.join(", "));
    for (k, what, len) in [(0, "clean URLs", clean.len()), (1, "hits", hits.len())] {
        println!(
            "    warm, the first page's {len} {what} alone: lookup_page {:.2}x, one by one {:.2}x ({:.2} us of probes)",
            mid(&|r| r.apart[k][0] / r.apart[k][2]),
            mid(&|r| r.apart[k][1] / r.apart[k][2]),
            mid(&|r| r.apart[k][2]),
        );
    }
    writes(&index, n, rounds.min(200));
    snapshot(&index, n, &warms);
}

/// The number after `--name` on the command line, or `default`.
fn arg_of(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The peak RSS since `reset_peak` (VmHWM).
fn peak_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .unwrap_or(0)
        * 1024
}

/// Start the peak RSS over from the RSS now.
fn reset_peak() {
    // (Linux: "5" resets the peak RSS of the process to its RSS)
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The built index dumped, the dump loaded, the built index's digest taken (see the
/// module's doc, 4).
fn snapshot(index: &BanIndex, n: usize, pages: &[Vec<Url>]) {
    let snap = index.snapshot();
    let t = Instant::now();
    let digest = digest::of_index(&snap);
    let digest_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let bytes = match dump::dump(&snap, b"{\"bench\": true}") {
        Ok(bytes) => bytes,
        Err(problem) => {
            eprintln!("dump failed: {problem}");
            return;
        }
    };
    let dump_s = t.elapsed().as_secs_f64();
    // `--write-dump PATH`: the dump kept in a file, for a replica's start to be timed on it
    let args: Vec<String> = std::env::args().collect();
    if let Some(path) = args
        .iter()
        .position(|a| a == "--write-dump")
        .and_then(|i| args.get(i + 1))
    {
        if let Err(e) = std::fs::write(path, &bytes) {
            eprintln!("--write-dump {path}: {e}");
        }
    }
    // `--loads K`: K - 1 loads before the one measured (for a profiler)
    for _ in 1..arg_of("--loads", 1) {
        black_box(load::load(&bytes).map(|l| l.data.len()).ok());
    }
    let before = trimmed_rss();
    reset_peak();
    let t = Instant::now();
    let loaded = match load::load(&bytes) {
        Ok(loaded) => loaded,
        Err(problem) => {
            eprintln!("load failed: {problem}");
            return;
        }
    };
    let load_s = t.elapsed().as_secs_f64();
    let peak = peak_rss();
    let [read, ids, summary] = loaded.phases;
    let same = loaded.digest == digest;
    let again = BanIndex::of_data(loaded.data);
    let after = trimmed_rss();
    let own = after.saturating_sub(before).max(1);
    // the load's peak over the RSS before it, with the dump's bytes it read (held before)
    let ratio = (peak.saturating_sub(before) + bytes.len()) as f64 / own as f64;
    let loaded = again.snapshot();
    let now = 1.8e9;
    for urls in pages {
        let hits = |d: &rearrange_engine::banlist::IndexData| -> Vec<Option<String>> {
            spread(d.lookup_page(urls, |(c, h)| (c, h), None, now), urls.len())
                .into_iter()
                .map(|hit| hit.map(|h| h.describe()))
                .collect()
        };
        assert_eq!(
            hits(&snap),
            hits(&loaded),
            "the loaded index answers as the built one"
        );
    }
    // the pages asked of both, in turn: a loaded index's tables are those of a built one
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..201 {
        for (k, d) in [&snap, &loaded].into_iter().enumerate() {
            for urls in pages {
                let t = Instant::now();
                black_box(
                    d.lookup_page(black_box(urls), |(c, h)| (c, h), None, now)
                        .len(),
                );
                times[k].push(t.elapsed().as_nanos());
            }
        }
    }
    let [built_us, loaded_us] = times.map(|mut t| median(&mut t));
    println!(
        "[4] snapshot of {n} entries: dump {dump_s:.2} s ({:.1} B per entry); load {load_s:.2} s (shards read and digested {read:.2} s, id tables {ids:.2} s, summary and filter {summary:.2} s); digest {digest_s:.2} s ({}{})",
        bytes.len() as f64 / n as f64,
        digest::hex(digest),
        if same { ", the load's the same" } else { ", THE LOAD'S DIFFERS" },
    );
    println!(
        "    the loaded index: {:.1} B of RSS per entry; the load's peak with the dump {:.2}x that (goal <= 1.5x); lookup_page warm {loaded_us:.2} us (the built index {built_us:.2} us)",
        own as f64 / n as f64,
        ratio
    );
}

/// A batch of one change against the built index (an add, then its removal: each copies
/// what it touches, the rest shared with the snapshot readers hold), and an empty index's
/// making: what a replica spends on each change it applies.
fn writes(index: &BanIndex, n: usize, rounds: usize) {
    let mut add = Vec::with_capacity(rounds);
    let mut remove = Vec::with_capacity(rounds);
    for r in 0..rounds {
        let id = format!("w{r}");
        let change = Change::Add(NewEntry {
            id: id.clone(),
            scope: Scope::Host,
            value: format!("w{r}.write.example"),
            reason: "spam".into(),
            actor: "tns".into(),
            created: 1.7e9,
            expires: None,
            regions: Vec::new(),
        });
        let t = Instant::now();
        index.apply_changes(vec![change]).expect("a valid entry");
        add.push(t.elapsed().as_nanos());
        let t = Instant::now();
        index
            .apply_changes(vec![Change::Remove(id)])
            .expect("a known id");
        remove.push(t.elapsed().as_nanos());
    }
    // the sites filter made again from every entry's names (on a thread of its own, once
    // a quarter of the names counted have gone since it was made)
    let snap = index.snapshot();
    let t = Instant::now();
    black_box(snap.fresh_filter());
    let refresh = t.elapsed().as_secs_f64();
    let mut empty: Vec<u128> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            black_box(BanIndex::empty());
            t.elapsed().as_nanos()
        })
        .collect();
    println!(
        "[3] writes against {n} entries ({rounds} rounds, medians): one add {:.0} us, one remove {:.0} us; an empty index {:.0} us; the sites filter made again {refresh:.2} s",
        median(&mut add),
        median(&mut remove),
        median(&mut empty)
    );
}
