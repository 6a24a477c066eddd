//! Reading a dump's fields (`dump`'s format) in order, each read checked, and its head
//! (everything up to the shards' entries): what is wrong is told with the byte it was
//! found at, never a panic.

use super::data::Meta;
use super::dump::{FORMAT, MAGIC};
use super::shard::MAX_METAS;
use super::SHARDS;

/// What is wrong with a dump, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The byte offset in the dump.
    pub at: usize,
    /// What is wrong there.
    pub what: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "banlist dump: {} at byte {}", self.what, self.at)
    }
}

/// `Err` of what is wrong at byte `at`.
pub fn wrong<T>(at: usize, what: impl Into<String>) -> Result<T, LoadError> {
    Err(LoadError {
        at,
        what: what.into(),
    })
}

/// Reads a dump's fields in order, at most up to `end`.
pub struct Reader<'a> {
    /// The whole dump.
    pub bytes: &'a [u8],
    /// Where the next field starts.
    pub at: usize,
    /// Where the fields read end (a segment's end, or the dump's).
    pub end: usize,
}

impl<'a> Reader<'a> {
    /// The next `n` bytes (`what` names them, should they be missing).
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], LoadError> {
        let left = self.end - self.at;
        if n > left {
            let end = self.end;
            return wrong(
                self.at,
                format!("truncated: {what} needs {n} bytes, {left} left before byte {end}"),
            );
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    /// The next `N` bytes.
    pub fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], LoadError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    /// A byte.
    pub fn u8(&mut self, what: &str) -> Result<u8, LoadError> {
        Ok(self.array::<1>(what)?[0])
    }

    /// A little-endian u32.
    pub fn u32(&mut self, what: &str) -> Result<u32, LoadError> {
        self.array(what).map(u32::from_le_bytes)
    }

    /// A little-endian u64.
    pub fn u64(&mut self, what: &str) -> Result<u64, LoadError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A little-endian f64.
    pub fn f64(&mut self, what: &str) -> Result<f64, LoadError> {
        self.array(what).map(f64::from_le_bytes)
    }

    /// A LEB128 varint of at most 64 bits.
    pub fn varint(&mut self, what: &str) -> Result<u64, LoadError> {
        let start = self.at;
        let mut v = 0u64;
        for k in 0..10 {
            let b = self.u8(what)?;
            let bits = u64::from(b & 0x7f);
            if k == 9 && bits > 1 {
                break;
            }
            v |= bits << (7 * k);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        wrong(start, format!("{what}: a varint past 64 bits"))
    }

    /// A varint that must be below `limit`.
    pub fn below(&mut self, limit: u64, what: &str) -> Result<u64, LoadError> {
        let start = self.at;
        let v = self.varint(what)?;
        if v >= limit {
            return wrong(start, format!("{what} is {v}, past the {limit} there are"));
        }
        Ok(v)
    }

    /// A zigzag varint: a signed difference.
    pub fn zigzag(&mut self, what: &str) -> Result<i64, LoadError> {
        let v = self.varint(what)?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A varint length and that many bytes of UTF-8.
    pub fn str(&mut self, what: &str) -> Result<&'a str, LoadError> {
        let len = self.varint(what)?;
        let start = self.at;
        let bytes = self.take(usize::try_from(len).unwrap_or(usize::MAX), what)?;
        std::str::from_utf8(bytes)
            .or_else(|e| wrong(start + e.valid_up_to(), format!("{what}: bad UTF-8")))
    }
}

/// A shard's segment: where its entries start and end, its rows and its values' bytes.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    /// Where its entries start.
    pub start: usize,
    /// Where they end (the next segment's head).
    pub end: usize,
    /// How many it holds.
    pub rows: u32,
    /// The bytes its values take (its arena's).
    pub values: u64,
}

/// The dump's head: everything up to the segments, read.
pub struct Head<'a> {
    /// The caller's meta.
    pub meta: &'a [u8],
    /// The entry count, and where it is.
    pub entries: (usize, u64),
    /// The order the next entry added takes.
    pub next_ord: u32,
    /// The largest numeric id held.
    pub max_number: i64,
    /// The most labels of a domain entry or member held.
    pub labels: usize,
    /// The metas, in number order.
    pub metas: Vec<Meta>,
    /// The org groups, in the order defined.
    pub groups: Vec<(&'a str, Vec<&'a str>)>,
    /// Each shard's segment, shard 0 first.
    pub segments: Vec<Segment>,
}

/// The head of `bytes`, a dump, read; its segments found.
pub fn head(bytes: &[u8]) -> Result<Head<'_>, LoadError> {
    let mut r = Reader {
        bytes,
        at: 0,
        end: bytes.len(),
    };
    if r.array::<8>("the magic")? != MAGIC {
        return wrong(0, "not a banlist dump (its magic is not RRBANIDX)");
    }
    let format = r.u32("the format")?;
    if format != FORMAT {
        return wrong(8, format!("format {format}, this build reads {FORMAT}"));
    }
    let meta_len = r.u32("the meta's length")? as usize;
    let meta = r.take(meta_len, "the meta")?;
    let at = r.at;
    let shards = r.u32("the shard count")?;
    if shards as usize != SHARDS {
        return wrong(
            at,
            format!("laid out by {shards} shards, this build has {SHARDS}"),
        );
    }
    let entries = (r.at, r.u64("the entry count")?);
    let next_ord = r.u32("the next order")?;
    let max_number = i64::from_le_bytes(r.array("the largest number")?);
    let labels = r.u32("the labels")? as usize;
    let metas = metas(&mut r)?;
    let groups = groups(&mut r)?;
    let segments = segments(&mut r)?;
    if r.at != bytes.len() {
        return wrong(r.at, format!("{} trailing bytes", bytes.len() - r.at));
    }
    let rows: u64 = segments.iter().map(|s| u64::from(s.rows)).sum();
    if rows != entries.1 {
        return wrong(
            entries.0,
            format!("{} entries counted, the shards hold {rows}", entries.1),
        );
    }
    Ok(Head {
        meta,
        entries,
        next_ord,
        max_number,
        labels,
        metas,
        groups,
        segments,
    })
}

/// The string table and the metas made of it.
fn metas(r: &mut Reader<'_>) -> Result<Vec<Meta>, LoadError> {
    let mut strings = Vec::new();
    for _ in 0..r.u32("the string count")? {
        strings.push(r.str("a string")?);
    }
    let count = strings.len() as u64;
    let at = r.at;
    let metas_count = r.u32("the meta count")?;
    if metas_count > MAX_METAS {
        let what = format!("{metas_count} metas, past the {MAX_METAS} an index holds");
        return wrong(at, what);
    }
    let mut metas = Vec::new();
    for _ in 0..metas_count {
        let reason = strings[r.below(count, "a meta's reason")? as usize];
        let actor = strings[r.below(count, "a meta's actor")? as usize];
        let mut regions: Vec<Box<str>> = Vec::new();
        for _ in 0..r.varint("a meta's region count")? {
            let at = r.at;
            let region = strings[r.below(count, "a meta's region")? as usize];
            if regions.last().is_some_and(|last| **last >= *region) {
                let what = format!("region {region:?} out of order or twice in a meta");
                return wrong(at, what);
            }
            regions.push(region.into());
        }
        metas.push(Meta {
            reason: reason.into(),
            actor: actor.into(),
            regions: regions.into(),
        });
    }
    Ok(metas)
}

/// The org groups: name and members, in the order defined.
fn groups<'a>(r: &mut Reader<'a>) -> Result<Vec<(&'a str, Vec<&'a str>)>, LoadError> {
    let mut groups = Vec::new();
    let mut named = std::collections::HashSet::new();
    for _ in 0..r.u32("the group count")? {
        let at = r.at;
        let name = r.str("a group's name")?;
        if !named.insert(name) {
            return wrong(at, format!("the group {name:?} is defined twice"));
        }
        let mut members = Vec::new();
        for _ in 0..r.varint("a group's member count")? {
            members.push(r.str("a group's member")?);
        }
        groups.push((name, members));
    }
    Ok(groups)
}

/// Each shard's segment, found by hopping over the entries of the ones before it.
fn segments(r: &mut Reader<'_>) -> Result<Vec<Segment>, LoadError> {
    let mut segments = Vec::with_capacity(SHARDS);
    for s in 0..SHARDS {
        let at = r.at;
        let rows = r.u32("a shard segment's rows")?;
        let values = r.u64("a shard segment's value bytes")?;
        let len = r.u64("a shard segment's length")?;
        let start = r.at;
        let left = (r.end - start) as u64;
        if len > left {
            let what = format!("truncated: shard {s}'s segment takes {len} bytes, {left} left");
            return wrong(at, what);
        }
        r.at += len as usize;
        segments.push(Segment {
            start,
            end: r.at,
            rows,
            values,
        });
    }
    Ok(segments)
}
