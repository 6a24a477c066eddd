//! The banlist's content digest (docs/banlist.md, "The content digest"), as
//! `app/banlist/digest.py` computes it from `Entry` objects: the XOR of one 128-bit hash
//! per entry and per org group, as 32 lowercase hex digits.
//!
//! - an entry: the first 16 bytes of SHA-1 of `e` LF id LF payload, the payload being the
//!   bytes `orjson.dumps` gives for the entry's `as_dict()` without `id`: keys `scope`,
//!   `value`, `reason`, `actor`, `created_at`, `expires_at`, `regions` in that order, no
//!   spaces, strings escaped as orjson escapes them (`json::write_str`: `"`, `\` and the
//!   control characters, the rest as UTF-8), the times as `model.iso` writes them
//!   ([`iso`]), `null` for no expiry, the regions sorted;
//! - a group: the first 16 bytes of SHA-1 of `g` LF name LF, then each domain in sorted
//!   order followed by LF.
//!
//! A time Python has no ISO form for (not finite, or outside the years 1 to 9999: its
//! `iso` raises, so Python has no digest of such an entry at all) is written as a JSON
//! number (`json::write_f64`, `null` when not finite), which keeps the digest defined.
//!
//! What repeats across entries (reason, actor, regions) is written once per meta; an
//! index's digest is taken on two threads, each over half of the shards.

use sha1::{Digest as _, Sha1};

use super::data::{IndexData, Meta, NAMED};
use super::shard::Shard;
use super::{both, Scope, SHARDS};
use crate::json;

/// The digest as `/readyz` shows it: 32 lowercase hex digits.
pub fn hex(digest: u128) -> String {
    format!("{digest:032x}")
}

/// The first 16 bytes of the SHA-1 of `text`, read big-endian (Python's
/// `int.from_bytes(sha1(text).digest()[:16])`).
fn sha1_16(text: &[u8]) -> u128 {
    let sum = Sha1::digest(text);
    let mut first = [0u8; 16];
    first.copy_from_slice(&sum[..16]);
    u128::from_be_bytes(first)
}

/// The hash of org group `name` defined as `domains`.
pub fn group_hash(name: &str, domains: &[Box<str>]) -> u128 {
    let mut sorted: Vec<&str> = domains.iter().map(|d| &**d).collect();
    sorted.sort_unstable();
    let mut text =
        Vec::with_capacity(name.len() + 4 + sorted.iter().map(|d| d.len() + 1).sum::<usize>());
    text.extend_from_slice(b"g\n");
    text.extend_from_slice(name.as_bytes());
    text.push(b'\n');
    for domain in sorted {
        text.extend_from_slice(domain.as_bytes());
        text.push(b'\n');
    }
    sha1_16(&text)
}

/// The XOR of the hashes of every org group of `data`.
pub fn groups_hash(data: &IndexData) -> u128 {
    data.groups()
        .order
        .iter()
        .fold(0, |acc, (name, domains)| acc ^ group_hash(name, domains))
}

/// A meta's parts of an entry's payload: what follows the value up to `created_at`'s
/// value, and what follows `expires_at`'s.
#[derive(Debug)]
struct MetaText {
    /// `,"reason":…,"actor":…,"created_at":`
    middle: Box<[u8]>,
    /// `,"regions":[…]}`
    tail: Box<[u8]>,
}

impl MetaText {
    fn of(meta: &Meta) -> MetaText {
        let mut middle = Vec::new();
        middle.extend_from_slice(b",\"reason\":");
        json::write_str(&mut middle, &meta.reason);
        middle.extend_from_slice(b",\"actor\":");
        json::write_str(&mut middle, &meta.actor);
        middle.extend_from_slice(b",\"created_at\":");
        let mut tail = Vec::new();
        tail.extend_from_slice(b",\"regions\":[");
        for (i, region) in meta.regions.iter().enumerate() {
            if i > 0 {
                tail.push(b',');
            }
            json::write_str(&mut tail, region);
        }
        tail.extend_from_slice(b"]}");
        MetaText {
            middle: middle.into(),
            tail: tail.into(),
        }
    }
}

/// The metas' parts of payloads, made once for a digest or a load.
#[derive(Debug)]
pub struct Metas(Vec<MetaText>);

impl Metas {
    /// The parts of each of `metas`, in order (a row's meta number picks its own).
    pub fn of<'a>(metas: impl Iterator<Item = &'a Meta>) -> Metas {
        Metas(metas.map(MetaText::of).collect())
    }

    /// The parts of every meta of `data`.
    pub fn of_index(data: &IndexData) -> Metas {
        Metas::of((0..data.metas_len as u32).map(|i| data.meta_at(i)))
    }
}

/// An entry's id as the digest writes it: a number's decimal digits, or the text.
#[derive(Clone, Copy, Debug)]
pub enum Id<'a> {
    /// A plain decimal id (its code).
    Number(u64),
    /// Any other id.
    Text(&'a str),
}

/// Hashes entries one after the other in one reused buffer.
#[derive(Debug)]
pub struct Hasher<'m> {
    metas: &'m Metas,
    text: Vec<u8>,
    /// The last creation time and expiry written, and how (times repeat: an import's
    /// entries share theirs).
    last: [(u64, Vec<u8>); 2],
}

impl<'m> Hasher<'m> {
    /// A hasher of entries whose metas are `metas`.
    pub fn new(metas: &'m Metas) -> Self {
        Hasher {
            metas,
            text: Vec::with_capacity(512),
            last: [0, 1].map(|_| (f64::NAN.to_bits(), b"null".to_vec())),
        }
    }

    /// The hash of an entry (`expires` NaN: none); `meta` must be one of the metas'.
    #[allow(clippy::too_many_arguments)]
    pub fn entry(
        &mut self,
        id: Id<'_>,
        scope: Scope,
        value: &str,
        meta: u32,
        created: f64,
        expires: f64,
    ) -> u128 {
        let Some(parts) = self.metas.0.get(meta as usize) else {
            return 0;
        };
        let text = &mut self.text;
        text.clear();
        text.extend_from_slice(b"e\n");
        match id {
            Id::Number(n) => json::write_u64(text, n),
            Id::Text(t) => text.extend_from_slice(t.as_bytes()),
        }
        text.extend_from_slice(b"\n{\"scope\":\"");
        text.extend_from_slice(scope.name().as_bytes());
        text.extend_from_slice(b"\",\"value\":");
        json::write_str(text, value);
        text.extend_from_slice(&parts.middle);
        for (k, ts) in [created, expires].into_iter().enumerate() {
            if k == 1 {
                text.extend_from_slice(b",\"expires_at\":");
            }
            let last = &mut self.last[k];
            if ts.to_bits() != last.0 {
                // (NaN, the index's no expiry, is written `null` by either way)
                last.1.clear();
                write_time(&mut last.1, ts);
                last.0 = ts.to_bits();
            }
            text.extend_from_slice(&last.1);
        }
        text.extend_from_slice(&parts.tail);
        sha1_16(text)
    }

    /// The XOR of the hashes of every entry of `shards` (of `data`).
    fn shards(&mut self, data: &IndexData, shards: &[std::sync::Arc<Shard>]) -> u128 {
        let mut acc = 0;
        for shard in shards {
            for row in 0..shard.len() as u32 {
                let r = shard.data(row);
                let id = if r.id & NAMED != 0 {
                    let i = (r.id & !NAMED) as usize;
                    Id::Text(data.names.names.get(i).map_or("", |n| n))
                } else {
                    Id::Number(r.id)
                };
                acc ^= self.entry(id, r.scope, shard.value(row), r.meta, r.created, r.expires);
            }
        }
        acc
    }
}

/// The content digest of `data`: its entries' hashes on two threads, each over half of
/// the shards (a SHA-1 of about 150 bytes an entry is most of the work), and its groups'.
pub fn of_index(data: &IndexData) -> u128 {
    let metas = Metas::of_index(data);
    let (low, high) = data.shards.split_at(SHARDS / 2);
    let (first, second) = both(
        || Hasher::new(&metas).shards(data, low),
        || Hasher::new(&metas).shards(data, high),
    );
    first ^ second ^ groups_hash(data)
}

/// Append `model.iso(ts)` as a JSON string, or a number when Python has no ISO form of it.
fn write_time(out: &mut Vec<u8>, ts: f64) {
    match iso(ts) {
        Some(text) => {
            out.push(b'"');
            out.extend_from_slice(&text);
            out.push(b'"');
        }
        None => json::write_f64(out, ts),
    }
}

/// Seconds of 0001-01-01T00:00:00Z and of 9999-12-31T23:59:59Z since the epoch: the range
/// of Python's `datetime`.
const FIRST: i64 = -62_135_596_800;
const LAST: i64 = 253_402_300_799;

/// `datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")` with `Z` for
/// `+00:00` (`app.banlist.model.iso`): CPython splits the float into whole seconds and
/// microseconds rounded half to even (`_PyTime_DoubleToDenominator`), and the
/// milliseconds are the microseconds truncated. None where Python raises (not finite, or
/// outside the years 1 to 9999).
pub fn iso(ts: f64) -> Option<[u8; 24]> {
    // (far past the years Python has, and NaN: none; within, `as i64` truncates exactly,
    // without the call to libm that `trunc` is where SSE4.1 is not assumed)
    if ts.is_nan() || ts.abs() >= 1e12 {
        return None;
    }
    let mut whole = ts as i64 as f64;
    // exact: the fraction is the float's own low bits (C's `modf`)
    let mut micros = round_half_even((ts - whole) * 1e6);
    if micros >= 1e6 {
        micros -= 1e6;
        whole += 1.0;
    } else if micros < 0.0 {
        micros += 1e6;
        whole -= 1.0;
    }
    if !(FIRST as f64..=LAST as f64).contains(&whole) {
        return None;
    }
    let secs = whole as i64;
    let millis = (micros as u32) / 1000;
    let (days, of_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400) as u32);
    let (year, month, day) = civil(days);
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, digits: usize, mut v: u32| {
        for k in (at..at + digits).rev() {
            out[k] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, year as u32);
    put(5, 2, month);
    put(8, 2, day);
    put(11, 2, of_day / 3600);
    put(14, 2, of_day / 60 % 60);
    put(17, 2, of_day % 60);
    put(20, 3, millis);
    Some(out)
}

/// CPython's `pytime_round_half_even` (`round`, half away from zero, and at a tie the
/// even neighbour) of `|x| < 2^51`: the nearest integer, ties to even, which adding and
/// taking away 1.5 * 2^52 gives in the default rounding mode (no call to libm).
fn round_half_even(x: f64) -> f64 {
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    (x + SHIFT) - SHIFT
}

/// The proleptic Gregorian (year, month, day) of a day number since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iso_text(ts: f64) -> Option<String> {
        iso(ts).map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    #[test]
    fn times_read_as_python_writes_them() {
        // (what `model.iso` gives, from CPython 3.11)
        let cases: [(f64, &str); 8] = [
            (1.7e9, "2023-11-14T22:13:20.000Z"),
            (-1.5, "1969-12-31T23:59:58.500Z"),
            (0.0005, "1970-01-01T00:00:00.000Z"),
            (1.7e9 + 0.0015, "2023-11-14T22:13:20.001Z"),
            (0.0, "1970-01-01T00:00:00.000Z"),
            (951_782_400.0, "2000-02-29T00:00:00.000Z"),
            (-62_135_596_800.0, "0001-01-01T00:00:00.000Z"),
            (253_402_300_799.999, "9999-12-31T23:59:59.998Z"),
        ];
        for (ts, want) in cases {
            assert_eq!(iso_text(ts).as_deref(), Some(want), "{ts}");
        }
        // microseconds rounded half to even before the milliseconds are cut
        assert_eq!(
            iso_text(0.9999995).as_deref(),
            Some("1970-01-01T00:00:01.000Z")
        );
        assert_eq!(
            iso_text(-0.0000005).as_deref(),
            Some("1970-01-01T00:00:00.000Z")
        );
        let beyond = [
            1e20,
            -62_135_596_801.0,
            253_402_300_800.0,
            253_402_300_799.999_999_6,
        ];
        for ts in [f64::NAN, f64::INFINITY].into_iter().chain(beyond) {
            assert_eq!(iso_text(ts), None, "{ts}");
        }
    }

    #[test]
    fn an_entry_hashes_as_its_text() {
        let meta = Meta {
            reason: "a \"b\"\n".into(),
            actor: "tns".into(),
            regions: vec!["DE".into(), "FR".into()].into(),
        };
        let metas = Metas::of(std::iter::once(&meta));
        let mut hasher = Hasher::new(&metas);
        let got = hasher.entry(Id::Number(7), Scope::Domain, "x.com", 0, 1.7e9, f64::NAN);
        let text = concat!(
            "e\n7\n{\"scope\":\"domain\",\"value\":\"x.com\",\"reason\":\"a \\\"b\\\"\\n\",",
            "\"actor\":\"tns\",\"created_at\":\"2023-11-14T22:13:20.000Z\",",
            "\"expires_at\":null,\"regions\":[\"DE\",\"FR\"]}"
        );
        assert_eq!(got, sha1_16(text.as_bytes()));
        // SHA-1 of "abc" (FIPS 180-1), its first 16 bytes
        assert_eq!(hex(sha1_16(b"abc")), "a9993e364706816aba3e25717850c26c");
        let g = group_hash("acme", &["b.com".into(), "a.com".into()]);
        assert_eq!(g, sha1_16(b"g\nacme\na.com\nb.com\n"));
    }
}
