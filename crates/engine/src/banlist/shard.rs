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
    /// Whether the meta lists regions (a lookup reads the meta only then).
    pub regional: bool,
    /// Insertion order across the index.
    pub ord: u32,
}

const SCOPE_SHIFT: u32 = 29;
const REGIONAL: u32 = 1 << 28;
const META_MASK: u32 = REGIONAL - 1;
/// Most metas (distinct reason, actor, regions) an index can hold.
pub const MAX_METAS: u32 = META_MASK;
const ROW_SHIFT: u32 = 32;

/// The key table's slot for a row: the key's tag (32 bits of its hash) and the row + 1.
#[inline]
pub fn key_slot(tag: u32, row: u32) -> u64 {
    (u64::from(tag) << ROW_SHIFT) | (u64::from(row) + 1)
}

/// The position a key slot was placed by: its tag.
#[inline]
pub fn slot_tag(slot: u64) -> u32 {
    (slot >> ROW_SHIFT) as u32
}

#[inline]
fn slot_row(slot: u64) -> u32 {
    ((slot & 0xffff_ffff) as u32).wrapping_sub(1)
}

/// One row, packed: what a hit reads of it lies within 36 bytes, mostly one cache line.
#[derive(Clone, Copy, Debug)]
#[repr(C, packed(4))]
struct Row {
    off: u32,
    meta: u32, // scope << 29 | regional << 28 | meta index
    ord: u32,
    expires: f64,
    id: u64,
    created: f64,
}

/// The rows of one shard.
#[derive(Clone, Debug, Default)]
pub struct Shard {
    arena: Vec<u8>,
    garbage: usize,
    rows: Vec<Row>,
    /// Rows with an expiry (a sweep or a count of the active skips shards without any).
    pub expiring: u32,
    /// Key tag -> rows.
    pub keys: Table<u64>,
}

impl Shard {
    /// How many rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether it holds no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The value written for a row.
    #[inline]
    pub fn value(&self, row: u32) -> &str {
        let bytes = self.value_bytes(row);
        // SAFETY: the arena holds only whole values pushed from `&str` (a compaction copies
        // whole records), and a row's offset is the start of its record, so these bytes
        // are one UTF-8 string.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    /// The bytes of the value written for a row.
    #[inline]
    fn value_bytes(&self, row: u32) -> &[u8] {
        let off = self.rows[row as usize].off;
        self.value_at(off).expect("a row's value lies in the arena")
    }

    /// The bytes of the value whose record starts at `off` (a row's offset); None past the
    /// arena (never, for a row's). A value shorter than 128 bytes (nearly every one) has one
    /// length byte, and its end, within 128 bytes of a `u32` offset, is found without the
    /// checks of a sum that could overflow.
    #[inline(always)]
    fn value_at(&self, off: u32) -> Option<&[u8]> {
        let at = off as usize;
        let first = *self.arena.get(at)?;
        if first & 0x80 == 0 {
            return self.arena.get(at + 1..at + 1 + usize::from(first));
        }
        let (len, skip) = read_len(&self.arena[at..]);
        self.arena.get(at + skip..at + skip + len)
    }

    /// The row's fields.
    #[inline]
    pub fn data(&self, row: u32) -> RowData {
        let r = self.rows[row as usize];
        RowData {
            id: r.id,
            created: r.created,
            expires: r.expires,
            scope: Scope::from_bits(r.meta >> SCOPE_SHIFT),
            meta: r.meta & META_MASK,
            regional: r.meta & REGIONAL != 0,
            ord: r.ord,
        }
    }

    /// The row's scope.
    #[inline]
    pub fn scope(&self, row: u32) -> Scope {
        Scope::from_bits(self.rows[row as usize].meta >> SCOPE_SHIFT)
    }

    /// The row's meta index.
    #[inline]
    pub fn meta(&self, row: u32) -> u32 {
        self.rows[row as usize].meta & META_MASK
    }

    /// The row's insertion order.
    #[inline]
    pub fn ord(&self, row: u32) -> u32 {
        self.rows[row as usize].ord
    }

    /// The row's id code.
    #[inline]
    pub fn id(&self, row: u32) -> u64 {
        self.rows[row as usize].id
    }

    /// The row's expiry (NaN: never).
    #[inline]
    pub fn expires(&self, row: u32) -> f64 {
        self.rows[row as usize].expires
    }

    /// The row's insertion order, expiry, and its meta index when that lists regions.
    #[inline]
    pub fn activity(&self, row: u32) -> (u32, f64, Option<u32>) {
        let r = self.rows[row as usize];
        let meta = (r.meta & REGIONAL != 0).then_some(r.meta & META_MASK);
        (r.ord, r.expires, meta)
    }

    /// An empty shard with room for `rows` rows and `arena` bytes of values, its key table
    /// sized for `rows` (a load knows all three: nothing grows while it pushes).
    pub fn with_capacity(rows: usize, arena: usize) -> Shard {
        Shard {
            arena: Vec::with_capacity(arena),
            garbage: 0,
            rows: Vec::with_capacity(rows),
            expiring: 0,
            keys: Table::with_capacity(rows),
        }
    }

    /// Sets a row's id code (a load numbers the ids that are not numbers once every shard
    /// is read).
    pub fn set_id(&mut self, row: u32, id: u64) {
        self.rows[row as usize].id = id;
    }

    /// Sets a row's insertion order (renumbering, when the counter would overflow).
    pub fn set_ord(&mut self, row: u32, ord: u32) {
        self.rows[row as usize].ord = ord;
    }

    /// Append a row (not yet in the key table); its number, or None when the shard's arena
    /// would pass 4 GiB.
    pub fn push(&mut self, value: &str, data: RowData) -> Option<u32> {
        let at = u32::try_from(self.arena.len()).ok()?;
        u32::try_from(self.arena.len() + value.len() + 5).ok()?;
        let row = u32::try_from(self.rows.len()).ok()?;
        write_len(&mut self.arena, value.len());
        self.arena.extend_from_slice(value.as_bytes());
        let regional = if data.regional { REGIONAL } else { 0 };
        self.rows.push(Row {
            off: at,
            meta: ((data.scope as u32) << SCOPE_SHIFT) | regional | (data.meta & META_MASK),
            ord: data.ord,
            expires: data.expires,
            id: data.id,
            created: data.created,
        });
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
        let gone = self.rows[r];
        let at = gone.off as usize;
        let (len, skip) = read_len(&self.arena[at..]);
        self.garbage += len + skip;
        if !gone.expires.is_nan() {
            self.expiring -= 1;
        }
        let last = self.rows.len() - 1;
        self.rows.swap_remove(r);
        if self.garbage > 4096 && self.garbage * 2 > self.arena.len() {
            self.compact_arena();
        }
        (r != last).then_some(last as u32)
    }

    fn compact_arena(&mut self) {
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        for row in self.rows.iter_mut() {
            let at = row.off as usize;
            let (len, skip) = read_len(&self.arena[at..]);
            row.off = arena.len() as u32; // smaller than the old arena, which fit in u32
            arena.extend_from_slice(&self.arena[at..at + skip + len]);
        }
        self.arena = arena;
        self.garbage = 0;
    }

    /// Give back spare capacity (after a large batch: what a build leaves over).
    pub fn shrink(&mut self) {
        fit(&mut self.arena);
        fit(&mut self.rows);
        self.keys.fit(slot_tag);
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
        self.keys
            .probe(tag)
            .filter(move |&slot| slot_tag(slot) == tag)
            .map(slot_row)
            .filter(move |&row| self.keyed(row, scope, key))
    }

    /// Call `each` with every row of `scope` keyed exactly `key` (tag `tag`), in table
    /// order (`rows`, as a plain loop for the lookup path).
    #[inline(always)]
    pub fn each_row(&self, scope: Scope, key: &str, tag: u32, mut each: impl FnMut(u32)) {
        for slot in self.keys.probe(tag) {
            if slot_tag(slot) == tag && self.keyed(slot_row(slot), scope, key) {
                each(slot_row(slot));
            }
        }
    }

    /// The first row of `scope` keyed exactly `key` (tag `tag`), in table order (`rows`,
    /// stopping at the first).
    #[inline(always)]
    pub fn first_row(&self, scope: Scope, key: &str, tag: u32) -> Option<u32> {
        self.keys
            .probe(tag)
            .filter(|&slot| slot_tag(slot) == tag)
            .map(slot_row)
            .find(|&row| self.keyed(row, scope, key))
    }

    /// Prefetch the first row whose key slot holds `tag` (the slots themselves already read
    /// in, `Table::prefetch`): the next read of a lookup that found its key's tag. Returns
    /// that row, None when no slot holds the tag (the key then has no row).
    #[inline(always)]
    pub fn prefetch_row(&self, tag: u32) -> Option<u32> {
        let row = slot_row(self.keys.probe(tag).find(|&slot| slot_tag(slot) == tag)?);
        super::prefetch(self.rows.get(row as usize)?);
        Some(row)
    }

    /// Prefetch the value of `row` (the row already read in, `prefetch_row`): what a
    /// lookup compares its key with.
    #[inline(always)]
    pub fn prefetch_value(&self, row: u32) {
        if let Some(r) = self.rows.get(row as usize) {
            // a hint needs no check that the offset is within the arena (a row's always is)
            super::prefetch_at(self.arena.as_ptr().wrapping_add(r.off as usize));
        }
    }

    /// Whether the row is of `scope` and keyed `key` (a tag hit verified).
    #[inline(always)]
    pub fn is_keyed(&self, row: u32, scope: Scope, key: &str) -> bool {
        self.keyed(row, scope, key)
    }

    /// Whether the row is of `scope` and keyed `key`.
    #[inline(always)]
    fn keyed(&self, row: u32, scope: Scope, key: &str) -> bool {
        self.scope(row) == scope && key_matches(scope, self.value_bytes(row), key)
    }

    /// The row's id code, expiry, meta index when that lists regions, and value, when it is
    /// of `scope` and keyed `key` (a tag hit verified): what a hit and its verdict read of
    /// the row, read once.
    #[inline(always)]
    pub fn keyed_hit(
        &self,
        row: u32,
        scope: Scope,
        key: &str,
    ) -> Option<(u64, f64, Option<u32>, &str)> {
        let r = *self.rows.get(row as usize)?;
        // the bits a row's scope is written as (`push`), not read back through `from_bits`
        if r.meta >> SCOPE_SHIFT != scope as u32 {
            return None;
        }
        let bytes = self.value_at(r.off)?;
        if !key_matches(scope, bytes, key) {
            return None;
        }
        let regional = (r.meta & REGIONAL != 0).then_some(r.meta & META_MASK);
        // SAFETY: as `value`'s: these are the bytes of the row's whole value.
        let value = unsafe { std::str::from_utf8_unchecked(bytes) };
        Some((r.id, r.expires, regional, value))
    }

    /// A row's id code, scope and value (what a hit reports).
    #[inline]
    pub fn hit_parts(&self, row: u32) -> (u64, Scope, &str) {
        let r = self.rows[row as usize];
        (
            r.id,
            Scope::from_bits(r.meta >> SCOPE_SHIFT),
            self.value(row),
        )
    }

    /// Bytes held (capacity, not only what is used).
    pub fn bytes(&self) -> usize {
        self.arena.capacity()
            + self.rows.capacity() * std::mem::size_of::<Row>()
            + self.keys.bytes()
    }
}

/// Move a vector into an allocation of its length. (`shrink_to_fit` may not: mimalloc, the
/// engine's allocator, keeps a block in place when at most half of it would be freed, and
/// a vector grown by doubling always is.)
fn fit<T: Copy>(v: &mut Vec<T>) {
    if v.capacity() > v.len() {
        let mut exact = Vec::with_capacity(v.len());
        exact.extend_from_slice(v);
        *v = exact;
    }
}

/// Whether a value of `scope` is keyed `key` (`Scope::key_of`, on bytes).
#[inline(always)]
fn key_matches(scope: Scope, value: &[u8], key: &str) -> bool {
    let key = key.as_bytes();
    if scope != Scope::Prefix {
        return same(value, key);
    }
    // a prefix's key is its value without trailing slashes
    value.len() >= key.len()
        && same(&value[..key.len()], key)
        && value[key.len()..].iter().all(|&b| b == b'/')
        && key.last() != Some(&b'/')
}

/// `a == b`, comparing short slices (most keys) in line: up to 16 bytes a word at a time,
/// longer ones 16 bytes at a time (overlapping at the end), the differences of a key of up
/// to 64 bytes (nearly every url key) gathered with no branch before one test.
#[inline(always)]
pub(super) fn same(a: &[u8], b: &[u8]) -> bool {
    let len = a.len();
    if len != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| {
        let mut w = [0; 8];
        w.copy_from_slice(&s[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let block = |s: &[u8], at: usize| {
        let mut w = [0; 16];
        w.copy_from_slice(&s[at..at + 16]);
        u128::from_le_bytes(w)
    };
    let apart = |at: usize| block(a, at) ^ block(b, at);
    match len {
        // two words, overlapping when shorter than 16
        8..=16 => word(a, 0) == word(b, 0) && word(a, len - 8) == word(b, len - 8),
        17..=32 => apart(0) | apart(len - 16) == 0,
        33..=64 => apart(0) | apart(16) | apart(len - 32) | apart(len - 16) == 0,
        65.. => {
            let mut at = 0;
            while at + 16 < len {
                if apart(at) != 0 {
                    return false;
                }
                at += 16;
            }
            apart(len - 16) == 0
        }
        _ => a == b,
    }
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
    // a value shorter than 128 bytes (nearly every one): its one byte, without the loop
    if let Some(&b) = bytes.first().filter(|&&b| b & 0x80 == 0) {
        return (usize::from(b), 1);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_as_the_value_reads_and_short_ones_a_word_at_a_time() {
        let words = [
            "",
            "a",
            "a/",
            "example.com",
            "example.com/p",
            "ab/",
            "x/y//",
        ];
        let mut values: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        for len in 0..40 {
            let text: String = (0..len).map(|i| (b'a' + (i % 7) as u8) as char).collect();
            let mut other = text.clone().into_bytes();
            if let Some(last) = other.last_mut() {
                *last = b'z';
            }
            values.push(text.clone());
            values.push(String::from_utf8(other).unwrap_or_default());
            values.push(format!("{text}//"));
        }
        for value in &values {
            for key in &values {
                assert_eq!(same(value.as_bytes(), key.as_bytes()), value == key);
                for scope in [Scope::Url, Scope::Host, Scope::Domain, Scope::Prefix] {
                    assert_eq!(
                        key_matches(scope, value.as_bytes(), key),
                        scope.key_of(value) == key,
                        "{scope:?} {value:?} {key:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn same_finds_a_difference_at_every_byte_of_every_length() {
        // each length through the word, block and loop cases, each byte changed in turn
        for len in 0..150 {
            let a: Vec<u8> = (0..len).map(|i| b'a' + (i % 23) as u8).collect();
            assert!(same(&a, &a.clone()), "{len}");
            for at in 0..len {
                let mut b = a.clone();
                b[at] ^= 0x20;
                assert!(!same(&a, &b), "{len} at {at}");
            }
            assert!(!same(&a, &a[..len.saturating_sub(1)]) || len == 0);
        }
    }

    #[test]
    fn a_packed_row_reads_back_what_was_pushed() {
        let mut shard = Shard::default();
        let data = RowData {
            id: u64::MAX - 3,
            created: 1.5,
            expires: f64::NAN,
            scope: Scope::Prefix,
            meta: MAX_METAS,
            regional: true,
            ord: 7,
        };
        let row = shard.push("h/p", data).unwrap_or(u32::MAX);
        let back = shard.data(row);
        assert_eq!(
            (
                back.id,
                back.created,
                back.scope,
                back.meta,
                back.regional,
                back.ord
            ),
            (
                data.id,
                data.created,
                data.scope,
                data.meta,
                data.regional,
                data.ord
            )
        );
        assert!(back.expires.is_nan() && shard.expiring == 0);
        let (ord, expires, meta) = shard.activity(row);
        assert!(ord == 7 && expires.is_nan() && meta == Some(MAX_METAS));
        assert_eq!(shard.hit_parts(row), (u64::MAX - 3, Scope::Prefix, "h/p"));
        assert_eq!(std::mem::size_of::<Row>(), 36);
    }
}
