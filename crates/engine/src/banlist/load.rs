//! Reading a dump (`dump`'s format) back into an index, every byte checked: a malformed
//! dump is refused with what is wrong and the byte it was found at, never a panic.
//!
//! The shards are rebuilt straight from their segments, the two halves on two threads:
//! each shard sized from its segment's head, its rows pushed in order and its keys placed
//! as they come (its key table is then in cache), the content digest of each entry taken
//! while its strings are at hand. The tables the entries imply (ids, summary, sites
//! filter) are made afterwards all at once (`bulk`), where a build by batches grows and
//! rehashes them entry by entry; org groups are defined last, as a batch would. A load is
//! thus a copy of the entries and one pass over the tables, not a build of 10 M batches'
//! worth of inserts: a replica starts from its snapshot in seconds.
//!
//! Not checked: that no two entries share a numeric id or an order (a dump never holds
//! such; neither makes the index misbehave, and the digest a load returns, compared with
//! the one the caller's meta carries, tells a dump that was altered).

use std::sync::Arc;
use std::time::Instant;

use super::apply::{counted_names, set_group, summarized};
use super::data::{numeric_id, IndexData, Meta, Names, META_CHUNK, NAMED};
use super::digest::{self, Hasher, Id, Metas};
use super::dump::{EXPIRES, SAME_CREATED, SAME_META, TEXT_ID};
use super::names::labels;
pub use super::read::LoadError;
use super::read::{head, wrong, Reader, Segment};
use super::shard::{key_slot, slot_tag, RowData, Shard};
use super::{both, bulk, hash_str, shard_of, tag_of, Scope, SCOPES, SHARDS};

/// An index read from a dump.
#[derive(Debug)]
pub struct Loaded<'a> {
    /// The index.
    pub data: IndexData,
    /// The meta the dump was made with.
    pub meta: &'a [u8],
    /// The content digest of its entries and groups (`digest`).
    pub digest: u128,
    /// Seconds spent reading the shards (with the entries' digest), making the id tables,
    /// and making the summary and the sites filter (the bench prints them).
    pub phases: [f64; 3],
}

/// What one thread read of its half of the shards.
#[derive(Default)]
struct Part<'a> {
    shards: Vec<Shard>,
    /// The text ids: shard (of `shards`), row, the id and where it is (numbered once both
    /// halves are read).
    named: Vec<(u32, u32, &'a str, usize)>,
    digest: u128,
    counts: [usize; 5],
    /// The names the entries count in the summary (`counted_names`).
    names: usize,
    /// The next insertion order past every entry's, the largest numeric id, the most labels
    /// of a domain entry.
    next_ord: u64,
    max_number: i64,
    labels: usize,
}

/// What an entry refers to of the one before it in its segment (`dump`'s "previous").
#[derive(Default)]
struct Previous {
    ord: i64,
    number: i64,
    meta: u32,
    created: f64,
}

/// One entry as read.
struct Record<'a> {
    scope: Scope,
    ord: u32,
    id: Id<'a>,
    meta: u32,
    created: f64,
    /// NaN: none.
    expires: f64,
    value: &'a str,
}

/// The entry at `r`, of a segment where `prev` is what the entries before it left, with
/// `metas` metas to refer to.
fn record<'a>(
    r: &mut Reader<'a>,
    prev: &mut Previous,
    metas: usize,
) -> Result<Record<'a>, LoadError> {
    let at = r.at;
    let flags = r.u8("an entry's flags")?;
    if flags & 0x80 != 0 {
        return wrong(at, format!("an entry's flags {flags:#04x} set bit 7"));
    }
    let Some(&scope) = SCOPES.get(usize::from(flags & 7)) else {
        return wrong(at, format!("an entry's scope {} is no scope", flags & 7));
    };
    prev.ord = prev.ord.saturating_add(r.zigzag("an entry's order")?);
    let Ok(ord) = u32::try_from(prev.ord) else {
        return wrong(at, format!("an entry's order {} is not a u32", prev.ord));
    };
    let id = if flags & TEXT_ID != 0 {
        let text = r.str("an entry's id")?;
        if numeric_id(text).is_some() {
            return wrong(at, format!("the text id {text:?} is a number"));
        }
        Id::Text(text)
    } else {
        let number = prev.number.wrapping_add(r.zigzag("an entry's id")?);
        if !(0..1_000_000_000_000_000_000).contains(&number) {
            let what = format!("the id {number} is not a plain decimal of 18 digits");
            return wrong(at, what);
        }
        prev.number = number;
        Id::Number(number as u64)
    };
    if flags & SAME_META == 0 {
        prev.meta = r.below(metas as u64, "an entry's meta")? as u32;
    } else if metas == 0 {
        return wrong(
            at,
            "an entry's meta is the previous one's, and there are none",
        );
    }
    if flags & SAME_CREATED == 0 {
        prev.created = r.f64("an entry's creation time")?;
    }
    let expires = if flags & EXPIRES != 0 {
        r.f64("an entry's expiry")?
    } else {
        f64::NAN
    };
    Ok(Record {
        scope,
        ord,
        id,
        meta: prev.meta,
        created: prev.created,
        expires,
        value: r.str("an entry's value")?,
    })
}

/// The shards of `segments` (the first being shard `first`) read.
fn part<'a>(
    bytes: &'a [u8],
    segments: &[Segment],
    first: usize,
    metas: (&[Meta], &Metas),
) -> Result<Part<'a>, LoadError> {
    let mut part = Part {
        max_number: -1,
        ..Part::default()
    };
    let mut hasher = Hasher::new(metas.1);
    for (k, seg) in segments.iter().enumerate() {
        let s = first + k;
        let mut r = Reader {
            bytes,
            at: seg.start,
            end: seg.end,
        };
        let len = seg.end - seg.start;
        // (a declared count is only believed as far as the bytes could hold it: an entry
        // takes 4 at least)
        let rows = (seg.rows as usize).min(len / 4);
        let mut shard = Shard::with_capacity(rows, (seg.values as usize).min(len));
        let mut prev = Previous::default();
        for _ in 0..seg.rows {
            let at = r.at;
            let e = record(&mut r, &mut prev, metas.0.len())?;
            let key = e.scope.key_of(e.value);
            let h = hash_str(key);
            if shard_of(h) != s {
                let (scope, value, home) = (e.scope.name(), e.value, shard_of(h));
                return wrong(
                    at,
                    format!("{scope} {value:?} belongs in shard {home}, not {s}"),
                );
            }
            let code = match e.id {
                Id::Number(n) => {
                    part.max_number = part.max_number.max(n as i64);
                    n
                }
                Id::Text(_) => NAMED,
            };
            let row_data = RowData {
                id: code,
                created: e.created,
                expires: e.expires,
                scope: e.scope,
                meta: e.meta,
                regional: !metas.0[e.meta as usize].regions.is_empty(),
                ord: e.ord,
            };
            let Some(row) = shard.push(e.value, row_data) else {
                return wrong(at, format!("shard {s} is full (4 GiB of values)"));
            };
            let tag = tag_of(e.scope, h);
            shard.keys.insert(tag, key_slot(tag, row), slot_tag);
            if let Id::Text(text) = e.id {
                part.named.push((k as u32, row, text, at));
            }
            part.digest ^= hasher.entry(e.id, e.scope, e.value, e.meta, e.created, e.expires);
            if let Some((name, field)) = summarized(e.scope, key) {
                part.names += counted_names(name, field).count();
            }
            part.counts[e.scope as usize] += 1;
            part.next_ord = part.next_ord.max(u64::from(e.ord) + 1);
            if e.scope == Scope::Domain {
                part.labels = part.labels.max(labels(e.value));
            }
        }
        if r.at != seg.end {
            let what = format!(
                "shard {s}'s entries end {} bytes before its segment does",
                seg.end - r.at
            );
            return wrong(r.at, what);
        }
        part.shards.push(shard);
    }
    Ok(part)
}

/// The index a dump holds, its meta and its content digest; or what is wrong with it.
pub fn load(bytes: &[u8]) -> Result<Loaded<'_>, LoadError> {
    let started = Instant::now();
    let head = head(bytes)?;
    let texts = Metas::of(head.metas.iter());
    let metas = (&head.metas[..], &texts);
    let (low, high) = head.segments.split_at(SHARDS / 2);
    let (first, second) = both(
        || part(bytes, low, 0, metas),
        || part(bytes, high, SHARDS / 2, metas),
    );
    // (the first half's fault, if it has one, comes first in the dump)
    let (mut first, mut second) = (first?, second?);
    let mut data = IndexData::default();
    let mut names = Names::default();
    for part in [&mut first, &mut second] {
        for &(k, row, text, at) in &part.named {
            let code = NAMED | names.names.len() as u64;
            if names.codes.insert(text.into(), code).is_some() {
                return wrong(at, format!("the id {text:?} is held twice"));
            }
            names.names.push(text.into());
            part.shards[k as usize].set_id(row, code);
        }
    }
    let mut counts = first.counts;
    for (c, n) in counts.iter_mut().zip(second.counts) {
        *c += n;
    }
    data.shards = first
        .shards
        .into_iter()
        .chain(second.shards)
        .map(Arc::new)
        .collect();
    data.metas = head
        .metas
        .chunks(META_CHUNK)
        .map(|chunk| Arc::new(chunk.to_vec()))
        .collect();
    data.metas_len = head.metas.len();
    data.names = Arc::new(names);
    data.counts = counts;
    data.len = head.entries.1 as usize;
    data.labels = head.labels.max(first.labels).max(second.labels).max(1);
    let next = first.next_ord.max(second.next_ord).min(u64::from(u32::MAX));
    data.next_ord = head.next_ord.max(next as u32);
    data.max_number = head.max_number.max(first.max_number).max(second.max_number);
    let read = started.elapsed().as_secs_f64();
    let [ids, summary] = bulk::tables(&mut data, first.names + second.names);
    for (name, members) in &head.groups {
        let members = members.iter().map(|m| m.to_string()).collect();
        set_group(&mut data, (*name).to_string(), members);
    }
    let digest = first.digest ^ second.digest ^ digest::groups_hash(&data);
    Ok(Loaded {
        data,
        meta: head.meta,
        digest,
        phases: [read, ids, summary],
    })
}
