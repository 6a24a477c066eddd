//! One shard of the index: the rows of the entries whose key hashes to it, in columns, their
//! values in one arena, and the key table that finds them.
//!
//! A row is removed by moving the last row into its place (no dead rows, nothing to compact
//! but the arena); the order entries were added in is kept in `ord`, not in row numbers.

use super::table::Table;
use super::Scope;

/// A row's place in the index: its shard and row number (valid for one snapshot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowRef {
    /// The shard.
    pub shard: u32,
    /// The row within it.
    pub row: u32,
}

/// What a row holds besides its value.
#[derive(Clone, Copy, Debug)]
pub struct RowData {
    /// The id code (`IndexData::id_text` turns it back into the id).
    pub id: u64,
    /// Creation time, epoch seconds.
    pub created: f64,
    /// Expiry, epoch seconds; NaN when it never expires (`expires <= now` is then false).
    pub expires: f64,
    /// The scope.
    pub scope: Scope,
    /// Into the index's metas (reason, actor, regions).
    pub meta: u32,
    /// Insertion order across the index.
    pub ord: u32,
}

const SCOPE_SHIFT: u32 = 29;
const META_MASK: u32 = (1 << SCOPE_SHIFT) - 1;
/// Most metas (distinct reason, actor, regions) an index can hold.
pub const MAX_METAS: u32 = META_MASK;
const ROW_SHIFT: u32 = 32;

/// The key table's slot for a row: the key's tag (32 bits of its hash) and the row + 1.
#[inline]
pub fn key_slot(tag: u32, row: u32) -> u64 {
    (u64::from(tag) << ROW_SHIFT) | (u64::from(row) + 1)
}

/// The tag a key slot was placed by.
#[inline]
pub fn slot_tag(slot: u64) -> u64 {
    slot >> ROW_SHIFT
}

#[inline]
fn slot_row(slot: u64) -> u32 {
    ((slot & 0xffff_ffff) as u32).wrapping_sub(1)
}

/// The rows of one shard.
#[derive(Clone, Debug, Default)]
pub struct Shard {
    arena: Vec<u8>,
    garbage: usize,
    off: Vec<u32>,
    ids: Vec<u64>,
    created: Vec<f64>,
    expires: Vec<f64>,
    meta: Vec<u32>, // scope << 29 | meta index
    ord: Vec<u32>,
    /// Rows with an expiry (a sweep or a count of the active skips shards without any).
    pub expiring: u32,
    /// Key tag -> rows.
    pub keys: Table,
    /// The summary of the names whose `summary::name_hash` falls in this shard (of entries
    /// of every shard: see `summary`).
    pub names: Table,
}

impl Shard {
    /// How many rows.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether it holds no row.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The value written for a row.
    #[inline]
    pub fn value(&self, row: u32) -> &str {
        let at = self.off[row as usize] as usize;
        let (len, skip) = read_len(&self.arena[at..]);
        let bytes = &self.arena[at + skip..at + skip + len];
        // SAFETY-free: values are pushed from &str, so they are UTF-8; fall back to "" if not.
        std::str::from_utf8(bytes).unwrap_or("")
    }

    /// The bytes of the value written for a row.
    #[inline]
    fn value_bytes(&self, row: u32) -> &[u8] {
        let at = self.off[row as usize] as usize;
        let (len, skip) = read_len(&self.arena[at..]);
        &self.arena[at + skip..at + skip + len]
    }

    /// The row's fields.
    #[inline]
    pub fn data(&self, row: u32) -> RowData {
        let r = row as usize;
        let meta = self.meta[r];
        RowData {
            id: self.ids[r],
            created: self.created[r],
            expires: self.expires[r],
            scope: Scope::from_bits(meta >> SCOPE_SHIFT),
            meta: meta & META_MASK,
            ord: self.ord[r],
        }
    }

    /// The row's scope.
    #[inline]
    pub fn scope(&self, row: u32) -> Scope {
        Scope::from_bits(self.meta[row as usize] >> SCOPE_SHIFT)
    }

    /// The row's meta index.
    #[inline]
    pub fn meta(&self, row: u32) -> u32 {
        self.meta[row as usize] & META_MASK
    }

    /// The row's insertion order.
    #[inline]
    pub fn ord(&self, row: u32) -> u32 {
        self.ord[row as usize]
    }

    /// The row's id code.
    #[inline]
    pub fn id(&self, row: u32) -> u64 {
        self.ids[row as usize]
    }

    /// The row's expiry (NaN: never).
    #[inline]
    pub fn expires(&self, row: u32) -> f64 {
        self.expires[row as usize]
    }

    /// Sets a row's insertion order (renumbering, when the counter would overflow).
    pub fn set_ord(&mut self, row: u32, ord: u32) {
        self.ord[row as usize] = ord;
    }

    /// Append a row (not yet in the key table); its number, or None when the shard's arena
    /// would pass 4 GiB.
    pub fn push(&mut self, value: &str, data: RowData) -> Option<u32> {
        let at = u32::try_from(self.arena.len()).ok()?;
        u32::try_from(self.arena.len() + value.len() + 5).ok()?;
        let row = u32::try_from(self.ids.len()).ok()?;
        write_len(&mut self.arena, value.len());
        self.arena.extend_from_slice(value.as_bytes());
        self.off.push(at);
        self.ids.push(data.id);
        self.created.push(data.created);
        self.expires.push(data.expires);
        self.meta
            .push(((data.scope as u32) << SCOPE_SHIFT) | data.meta);
        self.ord.push(data.ord);
        if !data.expires.is_nan() {
            self.expiring += 1;
        }
        Some(row)
    }

    /// Drop a row by moving the last row into its place; returns the row number the moved
    /// row had (the caller re-points its key and id slots), or None when `row` was last.
    /// The row's own key slot must be removed first.
    pub fn swap_remove(&mut self, row: u32) -> Option<u32> {
        let r = row as usize;
        let at = self.off[r] as usize;
        let (len, skip) = read_len(&self.arena[at..]);
        self.garbage += len + skip;
        if !self.expires[r].is_nan() {
            self.expiring -= 1;
        }
        let last = self.ids.len() - 1;
        self.off.swap_remove(r);
        self.ids.swap_remove(r);
        self.created.swap_remove(r);
        self.expires.swap_remove(r);
        self.meta.swap_remove(r);
        self.ord.swap_remove(r);
        if self.garbage > 4096 && self.garbage * 2 > self.arena.len() {
            self.compact_arena();
        }
        (r != last).then_some(last as u32)
    }

    fn compact_arena(&mut self) {
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        for off in self.off.iter_mut() {
            let at = *off as usize;
            let (len, skip) = read_len(&self.arena[at..]);
            *off = arena.len() as u32; // smaller than the old arena, which fit in u32
            arena.extend_from_slice(&self.arena[at..at + skip + len]);
        }
        self.arena = arena;
        self.garbage = 0;
    }

    /// Give back spare capacity (after a large batch: what a build leaves over).
    pub fn shrink(&mut self) {
        self.arena.shrink_to_fit();
        self.off.shrink_to_fit();
        self.ids.shrink_to_fit();
        self.created.shrink_to_fit();
        self.expires.shrink_to_fit();
        self.meta.shrink_to_fit();
        self.ord.shrink_to_fit();
    }

    /// Rows of `scope` keyed exactly `key` (tag `tag`), in table order: a tag hit is
    /// checked against the row's scope and value, never trusted.
    #[inline]
    pub fn rows<'a>(
        &'a self,
        scope: Scope,
        key: &'a str,
        tag: u32,
    ) -> impl Iterator<Item = u32> + 'a {
        let want = u64::from(tag);
        self.keys
            .probe(u64::from(tag))
            .filter(move |&slot| slot_tag(slot) == want)
            .map(slot_row)
            .filter(move |&row| {
                self.scope(row) == scope && key_matches(scope, self.value_bytes(row), key)
            })
    }

    /// Bytes held (capacity, not only what is used).
    pub fn bytes(&self) -> usize {
        self.arena.capacity()
            + self.off.capacity() * 4
            + self.ids.capacity() * 8
            + self.created.capacity() * 8
            + self.expires.capacity() * 8
            + self.meta.capacity() * 4
            + self.ord.capacity() * 4
            + self.keys.bytes()
            + self.names.bytes()
    }
}

/// Whether a value of `scope` is keyed `key` (`Scope::key_of`, on bytes).
#[inline]
fn key_matches(scope: Scope, value: &[u8], key: &str) -> bool {
    let value = if scope == Scope::Prefix {
        let end = value
            .iter()
            .rposition(|&b| b != b'/')
            .map_or(0, |at| at + 1);
        &value[..end]
    } else {
        value
    };
    value == key.as_bytes()
}

fn write_len(arena: &mut Vec<u8>, mut len: usize) {
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            arena.push(byte);
            return;
        }
        arena.push(byte | 0x80);
    }
}

#[inline]
fn read_len(bytes: &[u8]) -> (usize, usize) {
    let (mut len, mut shift, mut used) = (0usize, 0, 0);
    for &b in bytes.iter().take(5) {
        used += 1;
        len |= usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (len, used)
}
