//! A dump read back (`dump`, `load`) against the index it was made from: random mixed
//! indexes (every scope, regions, expiries, org groups defined and redefined, entries
//! removed and re-added, ids that are not numbers, reasons that need escaping), every
//! lookup asked of both, the digest, a second dump byte for byte, and batches applied to
//! both afterwards; and malformed dumps refused with the byte at fault, never a panic.

use super::digest;
use super::dump::{self, zigzag};
use super::load::{load, LoadError};
use super::names::suffixes;
use super::shard::RowRef;
use super::{page, BanIndex, Change, IndexData, NewEntry, Scope};
use crate::testing::Xorshift as Rng;

const LABELS: [&str; 10] = [
    "a", "b", "co", "uk", "com", "www", "xn--p1ai", "1", "", "cdn",
];
const PATHS: [&str; 6] = ["/", "/p", "/p/", "/p/x", "/p//q/", "/p?q=1"];
const REASONS: [&str; 4] = ["spam", "court \"order\"\n", "ünïcode \u{1F600}", "\\tab\t"];

fn hosts(rng: &mut Rng) -> Vec<String> {
    let mut hosts: Vec<String> = ["1.2.3.4", "[::1]", "localhost", "a.com"]
        .map(String::from)
        .to_vec();
    while hosts.len() < 30 {
        let labels = 1 + rng.next() as usize % 7;
        let host: Vec<&str> = (0..labels).map(|_| *rng.pick(&LABELS)).collect();
        hosts.push(host.join("."));
    }
    hosts
}

fn change(rng: &mut Rng, hosts: &[String]) -> Change {
    let id = match rng.next() % 5 {
        0 => format!("x{}", rng.next() % 20),
        1 => format!("0{}", rng.next() % 5),
        _ => (rng.next() % 60).to_string(),
    };
    let host = rng.pick(hosts).clone();
    let names = suffixes(&host, usize::MAX);
    let name = names
        .get(rng.next() as usize % names.len().max(1))
        .map_or(host.clone(), |n| n.to_string());
    match rng.next() % 14 {
        0 | 1 => return Change::Remove(id),
        2 => {
            let members = (0..1 + rng.next() % 3)
                .map(|_| rng.pick(hosts).clone())
                .chain([name])
                .collect();
            return Change::Group(rng.pick(&["g", "h", "ü"]).to_string(), members);
        }
        _ => {}
    }
    let (scope, value) = match rng.next() % 6 {
        0 | 1 => (Scope::Domain, name),
        2 => (Scope::Host, host.clone()),
        3 => (
            Scope::Url,
            format!("{host}{}", rng.pick(&["/p?q=1", "/p/x", "/"])),
        ),
        4 => (
            Scope::Prefix,
            format!("{host}{}", rng.pick(&["/p/", "/p", "/", "/p//q"])),
        ),
        _ => (Scope::Org, rng.pick(&["g", "h", "ü", "none"]).to_string()),
    };
    const REGIONS: [&[&str]; 4] = [&[], &[], &["DE"], &["FR", "DE"]];
    let regions = *rng.pick(&REGIONS);
    Change::Add(NewEntry {
        id,
        scope,
        value,
        reason: rng.pick(&REASONS).to_string(),
        actor: rng.pick(&["tns", "legal"]).to_string(),
        created: 1.7e9 + (rng.next() % 5) as f64 * 0.0005,
        expires: *rng.pick(&[None, None, Some(5.0), Some(50.0), Some(1.7e9 + 0.5)]),
        regions: regions.iter().map(|r| r.to_string()).collect(),
    })
}

/// Everything an entry is, as the index holds it.
type Held = (
    String,
    &'static str,
    String,
    String,
    String,
    u64,
    u64,
    Vec<String>,
);

fn held(data: &IndexData, at: RowRef) -> Held {
    let (value, row) = data.row(at);
    let meta = data.meta(at);
    (
        data.id_text(row.id),
        row.scope.name(),
        value.to_string(),
        meta.reason.to_string(),
        meta.actor.to_string(),
        row.created.to_bits(),
        if row.expires.is_nan() {
            0
        } else {
            row.expires.to_bits()
        },
        meta.regions.iter().map(|r| r.to_string()).collect(),
    )
}

fn all(data: &IndexData, rows: Vec<RowRef>) -> Vec<Held> {
    rows.into_iter().map(|at| held(data, at)).collect()
}

/// Every question asked of `a` and `b` gets the same answer.
fn same_answers(a: &IndexData, b: &IndexData, hosts: &[String]) {
    assert_eq!((a.len(), a.counts()), (b.len(), b.counts()));
    assert_eq!(a.groups().order, b.groups().order);
    assert_eq!(all(a, a.all_rows()), all(b, b.all_rows()));
    let urls: Vec<(String, String)> = hosts
        .iter()
        .flat_map(|h| {
            PATHS
                .iter()
                .map(move |p| (format!("https://{h}{p}"), h.clone()))
        })
        .collect();
    for now in [1.0, 10.0, 1.7e9 + 0.5, 2e9] {
        assert_eq!(all(a, a.expired(now)), all(b, b.expired(now)));
        assert_eq!(a.active_count(now), b.active_count(now));
        for after in [None, Some("3"), Some("x1"), Some("99")] {
            for limit in [1, 7, 100] {
                let (ra, ma) = a.page(after, limit, now);
                let (rb, mb) = b.page(after, limit, now);
                assert_eq!((all(a, ra), ma), (all(b, rb), mb));
            }
        }
        for region in [None, Some("DE"), Some("FR")] {
            let paged = |d: &IndexData| -> Vec<Option<Held>> {
                let hits = d.lookup_page(&urls, |(c, h)| (c, h), region, now);
                page::spread_in_order(hits, urls.len())
                    .into_iter()
                    .map(|hit| hit.map(|h| held(d, h.at)))
                    .collect()
            };
            assert_eq!(paged(a), paged(b));
            for (c, h) in &urls {
                let one = |d: &IndexData| d.lookup(c, h, region, now).map(|x| held(d, x.at));
                assert_eq!(one(a), one(b), "{c}");
                let url = |d: &IndexData| d.match_url(c, h, region, now).map(|at| held(d, at));
                assert_eq!(url(a), url(b), "{c}");
                // (the flag of url or prefix entries under the host is the summary's, which
                // a build makes anew: a count the source saw reach its top stays there, so
                // the load's may be false where the source's still says true, never the
                // other way)
                let ((at_a, under_a), (at_b, under_b)) = (
                    a.host_verdict(h, region, now),
                    b.host_verdict(h, region, now),
                );
                assert_eq!(
                    at_a.map(|at| held(a, at)),
                    at_b.map(|at| held(b, at)),
                    "{h}"
                );
                assert!(under_a || !under_b, "{h}");
            }
        }
    }
    for (c, h) in &urls {
        let explain = |d: &IndexData| -> Vec<(Held, String)> {
            d.explain(c, h)
                .into_iter()
                .map(|m| (held(d, m.at), m.expression))
                .collect()
        };
        assert_eq!(explain(a), explain(b), "{c}");
        assert_eq!(a.domain_keys(h), b.domain_keys(h));
        assert_eq!(b.under(h) & !a.under(h), 0, "{h}");
    }
    for id in (0..60)
        .map(|i| i.to_string())
        .chain((0..20).map(|i| format!("x{i}")))
    {
        let find = |d: &IndexData| d.find(&id).map(|at| held(d, at));
        assert_eq!(find(a), find(b), "{id}");
    }
    for scope in super::SCOPES {
        for h in hosts {
            let rows = |d: &IndexData| all(d, d.rows_for(scope, h));
            assert_eq!(rows(a), rows(b));
        }
    }
}

fn mixed(seed: u64) -> (BanIndex, Vec<String>, Rng) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let hosts = hosts(&mut rng);
    let index = BanIndex::empty();
    for _ in 0..8 {
        let batch: Vec<Change> = (0..1 + rng.next() % 60)
            .map(|_| change(&mut rng, &hosts))
            .collect();
        index.apply_iter(batch).expect("a batch applies");
    }
    (index, hosts, rng)
}

#[test]
fn a_loaded_dump_answers_as_the_index_it_was_made_from() {
    for seed in 1..=10u64 {
        let (index, hosts, mut rng) = mixed(seed);
        let data = index.snapshot();
        let meta = format!("{{\"seed\": {seed}}}").into_bytes();
        let bytes = dump::dump(&data, &meta).expect("a dump");
        let loaded = load(&bytes).expect("a load");
        assert_eq!(loaded.meta, &meta[..]);
        assert_eq!(loaded.digest, digest::of_index(&data), "seed {seed}");
        assert_eq!(digest::of_index(&loaded.data), loaded.digest);
        same_answers(&data, &loaded.data, &hosts);
        // the loaded index dumps to the same bytes
        assert_eq!(dump::dump(&loaded.data, &meta).expect("a dump"), bytes);
        // and takes the same batches after
        let again = BanIndex::of_data(loaded.data);
        for _ in 0..4 {
            let batch: Vec<Change> = (0..1 + rng.next() % 30)
                .map(|_| change(&mut rng, &hosts))
                .collect();
            index.apply_iter(batch.clone()).expect("a batch applies");
            again.apply_iter(batch).expect("a batch applies");
            let (a, b) = (index.snapshot(), again.snapshot());
            same_answers(&a, &b, &hosts);
            assert_eq!(digest::of_index(&a), digest::of_index(&b));
            // an entry added with a meta the dump held shares it
            assert_eq!(a.metas_len, b.metas_len, "seed {seed}");
        }
    }
}

#[test]
fn an_empty_index_dumps_and_loads() {
    let data = BanIndex::empty().snapshot();
    let bytes = dump::dump(&data, b"").expect("a dump");
    let loaded = load(&bytes).expect("a load");
    assert_eq!(
        (loaded.data.len(), loaded.digest, loaded.meta),
        (0, 0, &b""[..])
    );
    assert_eq!(digest::hex(loaded.digest), "0".repeat(32));
}

/// A dump of a few entries (each with a region and an expiry) and one group.
fn small_dump() -> Vec<u8> {
    let index = BanIndex::empty();
    let add = |id: &str, scope, value: &str| {
        let mut entry = match super::added(id, scope, value) {
            Change::Add(e) => e,
            _ => unreachable!(),
        };
        entry.regions = vec!["DE".into()];
        entry.expires = Some(9.0);
        Change::Add(entry)
    };
    index
        .apply_iter([
            Change::Group("g".into(), vec!["a.com".into()]),
            add("1", Scope::Domain, "example.com"),
            add("n", Scope::Url, "www.example.com/p"),
        ])
        .expect("applies");
    dump::dump(&index.snapshot(), b"{}").expect("a dump")
}

/// The offset of the first entry of `small_dump`'s bytes (its flags byte): the segments
/// follow the head, which ends with its one group ("g", of "a.com"), and the first
/// segment with rows holds it.
fn first_entry(bytes: &[u8]) -> usize {
    let tail = b"\x01\x00\x00\x00\x01g\x01\x05a.com";
    let mut pos = bytes
        .windows(tail.len())
        .position(|w| w == tail)
        .map_or(0, |at| at + tail.len());
    let word = |at: usize, n: usize| {
        let mut w = [0u8; 8];
        w[..n].copy_from_slice(&bytes[at..at + n]);
        u64::from_le_bytes(w) as usize
    };
    for _ in 0..super::SHARDS {
        if word(pos, 4) > 0 {
            return pos + 20;
        }
        pos += 20 + word(pos + 12, 8);
    }
    panic!("no entry in the dump")
}

fn refused(bytes: &[u8]) -> LoadError {
    match load(bytes) {
        Ok(_) => panic!("a malformed dump was loaded"),
        Err(e) => e,
    }
}

#[test]
fn a_malformed_dump_is_refused_with_the_byte_at_fault() {
    let good = small_dump();
    assert!(load(&good).is_ok());
    // every prefix is truncated somewhere, and says so
    for len in 0..good.len() {
        let e = refused(&good[..len]);
        assert!(e.at <= len, "{len}: {e}");
        assert!(
            e.what.contains("truncated") || e.what.contains("magic"),
            "{len}: {e}"
        );
    }
    let mut bad = good.clone();
    bad[0] = b'X';
    assert_eq!(
        refused(&bad).to_string(),
        "banlist dump: not a banlist dump (its magic is not RRBANIDX) at byte 0"
    );
    let mut bad = good.clone();
    bad[8] = 2;
    assert!(refused(&bad).what.contains("format 2"));
    let mut bad = good.clone();
    bad.push(0);
    let e = refused(&bad);
    assert_eq!((e.at, e.what.as_str()), (good.len(), "1 trailing bytes"));
    // the first entry's scope, then a value's bytes
    let entry = first_entry(&good);
    let mut bad = good.clone();
    bad[entry] = (bad[entry] & !7) | 5;
    let e = refused(&bad);
    assert_eq!(e.at, entry);
    assert!(e.what.contains("scope 5 is no scope"), "{e}");
    let value = good
        .windows(11)
        .rposition(|w| w == b"example.com")
        .expect("a value");
    let mut bad = good.clone();
    bad[value + 2] = 0xff;
    let e = refused(&bad);
    assert!(e.what.contains("bad UTF-8") && e.at == value + 2, "{e}");
    // a key in another shard's segment
    let mut bad = good.clone();
    bad[value] = b'f';
    let e = refused(&bad);
    assert!(e.what.contains("belongs in shard"), "{e}");
}

#[test]
fn random_damage_is_refused_or_loaded_never_a_panic() {
    let good = small_dump();
    let mut rng = Rng(0x00DA_3A6E);
    // 2,000 damaged copies, each kind of damage (a byte set, a bit flipped, a byte
    // inserted) hundreds of times: each load builds the 1,024 shards of an index in an
    // unoptimized build, and 20,000 cost the suite half a minute
    for _ in 0..2_000 {
        let mut bad = good.clone();
        for _ in 0..1 + rng.next() % 3 {
            let at = rng.next() as usize % bad.len();
            match rng.next() % 3 {
                0 => bad[at] = rng.next() as u8,
                1 => bad[at] ^= 1 << (rng.next() % 8),
                _ => bad.insert(at, rng.next() as u8),
            }
        }
        let _ = load(&bad);
    }
}

#[test]
fn ids_and_orders_are_written_as_differences() {
    assert_eq!([0, -1, 1, -2, 2].map(zigzag), [0, 1, 2, 3, 4]);
    assert_eq!(zigzag(i64::MIN), u64::MAX);
}
