//! A dump of the whole index (`BanIndex.dump`): its entries and org groups as of one
//! snapshot, in a compact binary form that `load` reads back into an index answering
//! every lookup as the one dumped. Format 1, field by field:
//!
//! Integers are little-endian. A `varint` is LEB128 (seven bits a byte, the lowest first,
//! the top bit set on every byte but the last; at most 10 bytes); a `zigzag` is a signed
//! difference as a varint (0, -1, 1, -2, … as 0, 1, 2, 3, …); a `str` is a varint byte
//! length and then that many bytes of UTF-8; an `f64` is an IEEE 754 double (epoch seconds).
//!
//! | field | type | what |
//! |---|---|---|
//! | magic | 8 bytes | `RRBANIDX` |
//! | format | u32 | 1 |
//! | meta length | u32 | |
//! | meta | bytes | the caller's (`dump`'s argument: a JSON header), returned as is by a load |
//! | shards | u32 | 1024, the shards the entries are laid out by (another number is refused) |
//! | entries | u64 | how many entries follow, in all the shards' segments |
//! | next order | u32 | the insertion order the next entry added will take |
//! | largest number | i64 | the largest numeric id the index has held (-1: none) |
//! | labels | u32 | the most labels of a domain entry or org member the index has held |
//! | strings | u32 | then that many `str`: each reason, actor and region, once |
//! | metas | u32 | then that many metas: reason and actor (each a varint, a string's number), regions (a varint count, then each a varint string number; the regions in ascending byte order, none twice) |
//! | groups | u32 | then that many org groups: the name (`str`), its members (a varint count, then each a `str`, in the order defined) |
//! | segments | | one per shard, shard 0 first (below) |
//!
//! A shard's segment: its rows (u32); the bytes its values take as `str`s (u64: what its
//! arena holds); the bytes its entries take (u64: up to the next segment); then each
//! entry, in the shard's row order:
//!
//! | field | type | what |
//! |---|---|---|
//! | flags | u8 | bits 0-2 the scope (0 url, 1 prefix, 2 host, 3 domain, 4 org); bit 3 the id is text, not a number; bit 4 an expiry follows; bit 5 the creation time is the previous entry's; bit 6 the meta is the previous entry's; bit 7 is 0 |
//! | order | zigzag | its insertion order less the previous entry's |
//! | id | zigzag or `str` | a number: it less the previous entry's numeric id; text: the id (never a plain decimal of up to 18 digits without a leading zero: that is a number) |
//! | meta | varint | its meta's number, unless bit 6 |
//! | created | f64 | unless bit 5 |
//! | expires | f64 | if bit 4 |
//! | value | `str` | |
//!
//! "Previous" is the previous entry of the same segment; before a segment's first, the
//! order, the numeric id and the meta are 0, the creation time 0.0. The differences are
//! small because the rows of a shard were mostly added about a shard count of entries
//! apart.
//!
//! Why by shard: a load rebuilds each shard from its own segment, presized, placing its
//! keys while the shard's rows are in cache, the two halves of the shards on two threads
//! (a segment's offset is found by hopping over the ones before it); and it checks that
//! each key hashes to its segment's shard. The layout is thus the key hash's (`hash`): a
//! new hash is a new format, and an old dump is refused rather than misplaced. What the
//! index derives from the entries (key, id and summary tables, the sites filter) is made
//! again by the load, never read: a dump cannot make the index miss a ban it holds.

use std::collections::HashMap;

use super::data::{IndexData, Names, NAMED};
use super::shard::Shard;
use super::{both, SHARDS};

/// The first bytes of a dump.
pub const MAGIC: [u8; 8] = *b"RRBANIDX";
/// The format `load` reads and `dump` writes.
pub const FORMAT: u32 = 1;

/// Flag bits of an entry (the scope is bits 0-2).
pub const TEXT_ID: u8 = 1 << 3;
/// An expiry follows.
pub const EXPIRES: u8 = 1 << 4;
/// The creation time is the previous entry's.
pub const SAME_CREATED: u8 = 1 << 5;
/// The meta is the previous entry's.
pub const SAME_META: u8 = 1 << 6;

/// Where a dump's bytes go: counted first, then written into a buffer of that size.
trait Out {
    fn put(&mut self, bytes: &[u8]);
}

/// Counts the bytes.
struct Count(usize);

impl Out for Count {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

/// Writes them into a buffer sized by the count (`short`: it was not: a bug, reported as
/// an error rather than a panic).
struct Fill<'a> {
    buf: &'a mut [u8],
    at: usize,
    short: bool,
}

impl Out for Fill<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        match self.buf.get_mut(self.at..self.at + bytes.len()) {
            Some(to) => to.copy_from_slice(bytes),
            None => self.short = true,
        }
        self.at += bytes.len();
    }
}

#[inline]
fn varint(out: &mut impl Out, mut v: u64) {
    let mut buf = [0u8; 10];
    let mut n = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            buf[n] = byte;
            n += 1;
            break;
        }
        buf[n] = byte | 0x80;
        n += 1;
    }
    out.put(&buf[..n]);
}

/// A signed difference as `zigzag` writes it.
#[inline]
pub fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

#[inline]
fn text(out: &mut impl Out, s: &str) {
    varint(out, s.len() as u64);
    out.put(s.as_bytes());
}

/// A dump of one snapshot laid out: its string table, and the bytes each part takes (the
/// dump is counted first and then written into a buffer of its exact size, the halves of
/// the shards on two threads).
pub struct Plan<'d> {
    data: &'d IndexData,
    meta_len: u32,
    strings: Vec<&'d str>,
    numbers: HashMap<&'d str, u32>,
    /// Bytes before the first segment.
    head: usize,
    /// Each shard's segment: its values' bytes and its entries' bytes.
    segments: Vec<(u64, u64)>,
}

/// The bytes of a segment's head (rows, values, entries).
const SEGMENT_HEAD: usize = 4 + 8 + 8;

impl<'d> Plan<'d> {
    /// The dump of `data` behind a meta of `meta_len` bytes, laid out.
    pub fn of(data: &'d IndexData, meta_len: usize) -> Result<Plan<'d>, String> {
        let meta_len = u32::try_from(meta_len)
            .map_err(|_| format!("a dump's meta is at most 4 GiB, not {meta_len} bytes"))?;
        let mut strings = Vec::new();
        let mut numbers = HashMap::new();
        for i in 0..data.metas_len as u32 {
            let meta = data.meta_at(i);
            let all = [&meta.reason, &meta.actor]
                .into_iter()
                .chain(meta.regions.iter());
            for s in all {
                numbers.entry(&**s).or_insert_with(|| {
                    strings.push(&**s);
                    strings.len() as u32 - 1
                });
            }
        }
        let mut plan = Plan {
            data,
            meta_len,
            strings,
            numbers,
            head: 0,
            segments: Vec::new(),
        };
        let mut count = Count(0);
        plan.head_to(&mut count, &[]);
        plan.head = count.0 + meta_len as usize;
        let (low, high) = data.shards.split_at(SHARDS / 2);
        let names = &*data.names;
        let sizes = |shards: &[std::sync::Arc<Shard>]| -> Vec<(u64, u64)> {
            shards
                .iter()
                .map(|shard| {
                    let mut count = Count(0);
                    let values = entries(&mut count, shard, names);
                    (values, count.0 as u64)
                })
                .collect()
        };
        let (mut first, second) = both(|| sizes(low), || sizes(high));
        first.extend(second);
        plan.segments = first;
        Ok(plan)
    }

    /// The dump's length in bytes.
    pub fn len(&self) -> usize {
        self.head
            + self
                .segments
                .iter()
                .map(|&(_, bytes)| SEGMENT_HEAD + bytes as usize)
                .sum::<usize>()
    }

    /// Whether the dump is empty (never: it has a head).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Write the dump behind `meta` (of the length planned) into `buf` (of `len()` bytes),
    /// the halves of the shards on two threads.
    pub fn write(&self, meta: &[u8], buf: &mut [u8]) -> Result<(), String> {
        if buf.len() != self.len() || meta.len() != self.meta_len as usize {
            return Err("a dump's buffer or meta is not of the size planned".into());
        }
        let half: usize = self.head
            + self.segments[..SHARDS / 2]
                .iter()
                .map(|&(_, bytes)| SEGMENT_HEAD + bytes as usize)
                .sum::<usize>();
        let (first, second) = buf.split_at_mut(half);
        let (low, high) = self.data.shards.split_at(SHARDS / 2);
        let (sizes_low, sizes_high) = self.segments.split_at(SHARDS / 2);
        let (short_first, short_second) = both(
            || self.segments_to(first, low, sizes_low, |out| self.head_to(out, meta)),
            || self.segments_to(second, high, sizes_high, |_| {}),
        );
        if short_first || short_second {
            return Err("a dump's parts did not take the bytes planned".into());
        }
        Ok(())
    }

    /// Write `shards`' segments (their sizes planned in `sizes`) into `buf`, after what
    /// `before` writes; true when the bytes did not match the plan.
    fn segments_to(
        &self,
        buf: &mut [u8],
        shards: &[std::sync::Arc<Shard>],
        sizes: &[(u64, u64)],
        before: impl FnOnce(&mut Fill<'_>),
    ) -> bool {
        let mut out = Fill {
            buf,
            at: 0,
            short: false,
        };
        before(&mut out);
        for (shard, &(values, bytes)) in shards.iter().zip(sizes) {
            out.put(&(shard.len() as u32).to_le_bytes());
            out.put(&values.to_le_bytes());
            out.put(&bytes.to_le_bytes());
            let start = out.at;
            entries(&mut out, shard, &self.data.names);
            out.short |= (out.at - start) as u64 != bytes;
        }
        out.short || out.at != out.buf.len()
    }

    /// The dump up to its first segment.
    fn head_to(&self, out: &mut impl Out, meta: &[u8]) {
        let data = self.data;
        out.put(&MAGIC);
        out.put(&FORMAT.to_le_bytes());
        out.put(&self.meta_len.to_le_bytes());
        out.put(meta);
        out.put(&(SHARDS as u32).to_le_bytes());
        out.put(&(data.len as u64).to_le_bytes());
        out.put(&data.next_ord.to_le_bytes());
        out.put(&data.max_number.to_le_bytes());
        out.put(&(data.labels.min(u32::MAX as usize) as u32).to_le_bytes());
        out.put(&(self.strings.len() as u32).to_le_bytes());
        for s in &self.strings {
            text(out, s);
        }
        out.put(&(data.metas_len as u32).to_le_bytes());
        let number = |s: &str| u64::from(self.numbers.get(s).copied().unwrap_or(0));
        for i in 0..data.metas_len as u32 {
            let meta = data.meta_at(i);
            varint(out, number(&meta.reason));
            varint(out, number(&meta.actor));
            varint(out, meta.regions.len() as u64);
            for region in meta.regions.iter() {
                varint(out, number(region));
            }
        }
        let groups = &data.groups().order;
        out.put(&(groups.len() as u32).to_le_bytes());
        for (name, members) in groups {
            text(out, name);
            varint(out, members.len() as u64);
            for member in members {
                text(out, member);
            }
        }
    }
}

/// Write a shard's entries; the bytes its values take as `str`s.
fn entries(out: &mut impl Out, shard: &Shard, names: &Names) -> u64 {
    let (mut ord, mut number, mut meta, mut created) = (0i64, 0i64, 0u32, 0f64.to_bits());
    let mut values = 0u64;
    for row in 0..shard.len() as u32 {
        let r = shard.data(row);
        let value = shard.value(row);
        let mut flags = r.scope as u8;
        if r.id & NAMED != 0 {
            flags |= TEXT_ID;
        }
        if !r.expires.is_nan() {
            flags |= EXPIRES;
        }
        if r.created.to_bits() == created {
            flags |= SAME_CREATED;
        }
        if r.meta == meta {
            flags |= SAME_META;
        }
        out.put(&[flags]);
        varint(out, zigzag(i64::from(r.ord) - ord));
        ord = i64::from(r.ord);
        if r.id & NAMED != 0 {
            let i = (r.id & !NAMED) as usize;
            text(out, names.names.get(i).map_or("", |n| n));
        } else {
            varint(out, zigzag(r.id as i64 - number));
            number = r.id as i64;
        }
        if flags & SAME_META == 0 {
            varint(out, u64::from(r.meta));
            meta = r.meta;
        }
        if flags & SAME_CREATED == 0 {
            out.put(&r.created.to_le_bytes());
            created = r.created.to_bits();
        }
        if flags & EXPIRES != 0 {
            out.put(&r.expires.to_le_bytes());
        }
        values += (varint_len(value.len() as u64) + value.len()) as u64;
        text(out, value);
    }
    values
}

/// The bytes a varint of `v` takes.
fn varint_len(v: u64) -> usize {
    let mut count = Count(0);
    varint(&mut count, v);
    count.0
}

/// The dump of `data` behind `meta`, in a new buffer (tests and the bench; `BanIndex.dump`
/// writes into a Python `bytes` of the planned size).
pub fn dump(data: &IndexData, meta: &[u8]) -> Result<Vec<u8>, String> {
    let plan = Plan::of(data, meta.len())?;
    let mut buf = vec![0u8; plan.len()];
    plan.write(meta, &mut buf)?;
    Ok(buf)
}
