//! The sites filter: one bit per (summary table, top 14 bits of a slot's tag), set while
//! some slot of that table has a tag with those top 14 bits, so that a page of lookups
//! answers most of its clean sites with one bit, not a summary probe.
//!
//! A clean site's summary probe reads two cache lines (its table's header in the summary's
//! vector of tables, then the chunk) and compares a chunk of tags; the filter is one flat
//! bitmap read through a directory that stays in the first-level cache, so a clean site
//! reads one line and tests one bit. The bit is made of the bits of the name's hash that
//! its summary slot keeps (the table it is in, the slot's tag), so a slot's bit is known
//! from the slot alone: when a slot goes, its bit is cleared unless the table still has a
//! slot whose tag differs from it only in the two low bits, which four probes tell. The
//! filter is thus exactly what the summary holds, never a bit more or less (`of`, the
//! tests' model).
//!
//! 2^27 bits (16 MiB) at most, in [`SEGMENTS`] segments of 64 KiB that a snapshot shares
//! and a batch copies on its first write to each, as the summary's tables are. A segment
//! nobody has written is one shared zero segment, so an empty or small index costs a few
//! segments, not 16 MiB. The share of bits set (`IndexData::filter_fill`, printed by the
//! banlist bench) is how often a clean site goes on to its summary probe.

use std::sync::{Arc, OnceLock};

use super::chunks::Chunks;
use super::summary::POSITION;
use super::{summary_of, unique, SUMMARY_BITS};

/// Tag bits of a slot in its filter bit (the top ones of the 16 a slot keeps).
const TAG_BITS: u32 = 14;
/// All the filter's bits: a summary table's number above its slots' top tag bits.
pub const BITS: u32 = SUMMARY_BITS + TAG_BITS;
/// Bits of a bit's place that pick its segment.
const SEGMENT_BITS: u32 = 8;
/// Segments: each covers `SUMMARIES / SEGMENTS` summary tables.
pub const SEGMENTS: usize = 1 << SEGMENT_BITS;
/// `u64` words of a segment (64 KiB).
const WORDS: usize = 1 << (BITS - SEGMENT_BITS - 6);

type Segment = Arc<[u64]>;

/// The one zero segment every segment nobody has written shares.
fn zero() -> Segment {
    static ZERO: OnceLock<Segment> = OnceLock::new();
    ZERO.get_or_init(|| Arc::from(vec![0u64; WORDS])).clone()
}

/// The segment and the word in it that hold bit `bit`.
#[inline(always)]
fn place(bit: usize) -> (usize, usize) {
    (
        (bit >> (BITS - SEGMENT_BITS)) & (SEGMENTS - 1),
        (bit >> 6) & (WORDS - 1),
    )
}

/// The filter's bit of the slot `slot` (a summary slot's position bits) in table `table`.
#[inline(always)]
fn bit_of(table: usize, slot: u32) -> usize {
    (table << TAG_BITS) | (slot >> (32 - TAG_BITS)) as usize
}

/// The filter's bit of the name hashed `hash`: the one its summary slot has, if it has one.
#[inline(always)]
pub fn bit(hash: u64) -> usize {
    // `want(hash)`'s top bits: it only raises a position below 2^16, whose top bits are 0
    bit_of(summary_of(hash), hash as u32)
}

/// Whether bit `bit` is set in `word`, the word that holds it (`Filter::word_ref`): a page
/// of lookups finds each word once, to prefetch it, and tests it later.
#[inline(always)]
pub fn holds_in(word: u64, bit: usize) -> bool {
    word >> (bit & 63) & 1 != 0
}

/// The filter (see the module's doc).
#[derive(Clone)]
pub struct Filter {
    segments: Box<[Segment; SEGMENTS]>,
    /// The first word of each segment (`Arc::as_ptr` of `segments[s]`): what a lookup reads
    /// to find its word, one load from a 2 KiB table rather than a fat pointer and past the
    /// `Arc`'s counts. A clone shares the segments and so the addresses.
    words: Box<[*const u64; SEGMENTS]>,
}

// SAFETY: `words` only points into `segments`, which are `Send` and `Sync`; it is read
// through `&self` only, and written (`segment_mut`) through `&mut self` only when its
// segment is replaced by a fresh one, whose address it then takes. The words a segment
// holds are written only through `Arc::get_mut`, when no other `Filter` shares it, and
// nothing is read through `words` while `&mut self` is held.
unsafe impl Send for Filter {}
// SAFETY: as for `Send`: a shared `Filter` is only read.
unsafe impl Sync for Filter {}

/// The first word of a segment, with the provenance of the whole segment.
fn first_word(segment: &Segment) -> *const u64 {
    Arc::as_ptr(segment).cast::<u64>()
}

impl Default for Filter {
    fn default() -> Self {
        let segments: Box<[Segment; SEGMENTS]> = Box::new(std::array::from_fn(|_| zero()));
        let words = Box::new(std::array::from_fn(|i| first_word(&segments[i])));
        Filter { segments, words }
    }
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // the bits themselves are 16 MiB: say how many are set and where
        f.debug_struct("Filter")
            .field("bits_set", &self.count())
            .field("bytes", &self.bytes())
            .finish()
    }
}

impl Filter {
    /// Whether bit `bit` (of [`bit`]) is set: the name it was found for may have a summary
    /// slot. Not set: it has none.
    #[inline(always)]
    pub fn holds(&self, bit: usize) -> bool {
        holds_in(*self.word_ref(bit), bit)
    }

    /// The word that holds bit `bit` (a page of lookups prefetches it first).
    #[inline(always)]
    pub fn word_ref(&self, bit: usize) -> &u64 {
        debug_assert!(bit >> BITS == 0);
        let (s, at) = place(bit);
        let segment = self.words[s];
        // SAFETY: `words[s]` is `first_word(&segments[s])` (set with it, in `Default` and
        // `segment_mut`), a segment of `WORDS` words that this filter holds while `self` is
        // borrowed, and `at` is masked below `WORDS`; nothing writes the segment meanwhile
        // (writes need `&mut self`).
        unsafe { &*segment.add(at) }
    }

    /// The word that holds bit `bit`, to write: its segment is copied first if a snapshot
    /// shares it, and the directory then follows the copy.
    fn word_mut(&mut self, bit: usize) -> &mut u64 {
        let (s, at) = place(bit);
        unique(&mut self.segments[s]);
        self.words[s] = first_word(&self.segments[s]);
        &mut unique(&mut self.segments[s])[at]
    }

    /// A slot `slot` was put in summary table `table`.
    pub fn added(&mut self, table: usize, slot: u32) {
        let bit = bit_of(table, slot);
        if !self.holds(bit) {
            *self.word_mut(bit) |= 1 << (bit & 63);
        }
    }

    /// A slot `slot` was taken out of summary table `table`, which is `chunks` now: its bit
    /// is cleared unless another slot there has it, one whose tag differs only in its two
    /// low bits (a table holds a tag once: its names share the slot).
    pub fn removed(&mut self, table: usize, slot: u32, chunks: &Chunks) {
        let bit = bit_of(table, slot);
        // the tags with the same top `TAG_BITS` bits, from the first, one tag apart
        let first = slot >> (32 - TAG_BITS) << (32 - TAG_BITS);
        let apart = POSITION.trailing_zeros();
        let kept = (0..1 << (32 - TAG_BITS - apart))
            .map(|k| first + (k << apart))
            // position 0 is no tag (an empty slot's)
            .any(|pos| pos != 0 && chunks.find(pos, POSITION).is_some());
        if !kept {
            *self.word_mut(bit) &= !(1 << (bit & 63));
        }
    }

    /// The filter of the summary tables `tables`, made from scratch (what the one kept
    /// up by `added` and `removed` must equal).
    #[cfg(test)]
    pub fn of(tables: &[Chunks; super::SUMMARIES]) -> Filter {
        let mut filter = Filter::default();
        for (table, chunks) in tables.iter().enumerate() {
            for slot in chunks.slots() {
                filter.added(table, slot);
            }
        }
        filter
    }

    /// The segments written: all but those still the shared zero segment.
    fn written(&self) -> impl Iterator<Item = &Segment> {
        let zero = zero();
        self.segments.iter().filter(move |s| !Arc::ptr_eq(s, &zero))
    }

    /// Bytes held: the segments written (the shared zero segment counts once, if used).
    pub fn bytes(&self) -> usize {
        let written = self.written().count();
        (written + usize::from(written < SEGMENTS)) * WORDS * 8
    }

    /// Whether every segment's address in `words` is that segment's (the tests check it
    /// after writes and copies).
    #[cfg(test)]
    pub fn addresses_hold(&self) -> bool {
        (0..SEGMENTS).all(|s| self.words[s] == first_word(&self.segments[s]))
    }

    /// How many bits are set.
    pub fn count(&self) -> usize {
        self.written()
            .flat_map(|s| s.iter())
            .map(|w| w.count_ones() as usize)
            .sum()
    }
}

impl PartialEq for Filter {
    fn eq(&self, other: &Self) -> bool {
        self.segments
            .iter()
            .zip(other.segments.iter())
            .all(|(a, b)| a[..] == b[..])
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::super::data::IndexData;
    use super::super::summary::{name_hash, slot_pos, want, BELOW, EVERY_CHILD, HOST};
    use super::super::SUMMARIES;
    use super::*;

    #[test]
    fn a_names_bit_is_its_slots_bit() {
        // the bit a lookup reads for a name is the one its slot sets, whatever the hash
        for name in ["a.example", "www.b.example", "x", "", "[::1]", "10.0.0.1"] {
            let h = name_hash(name);
            assert_eq!(bit(h), bit_of(summary_of(h), slot_pos(want(h) | 0x0fff)));
        }
        // hashes whose tag bits are small: a slot's position is raised to 2^16
        for low in [0u64, 1, 0xffff, 0x1_0000, 0x3_ffff, 0x4_0000] {
            let h = 0x9876_5432_0000_0000 | low;
            assert_eq!(bit(h), bit_of(summary_of(h), want(h)), "{low:x}");
        }
    }

    #[test]
    fn a_bit_stays_while_another_slot_has_it() {
        let mut tables: Box<[Chunks; SUMMARIES]> =
            Box::new(std::array::from_fn(|_| Chunks::default()));
        let mut filter = Filter::default();
        // whole slots, counts and all: two of table 5 whose tags share their top 14 bits
        // (0x1234 and 0x1237), one with another tag, and one with a tag whose top 14 bits
        // are 0 (0x0001 <- position 0 is no tag, so it is never a sibling to probe)
        let (a, b, c, d) = (0x1234_0401_u32, 0x1237_8c02, 0x8000_0001, 0x0001_0003);
        for slot in [a, b, c, d] {
            tables[5].insert(slot_pos(slot), slot, slot_pos);
            filter.added(5, slot);
        }
        assert_eq!(filter, Filter::of(&tables));
        assert_eq!(filter.count(), 3);
        assert!(filter.holds(bit_of(5, a)) && filter.holds(bit_of(5, c)));
        assert!(!filter.holds(bit_of(4, a)), "another table's bit");
        tables[5].remove(slot_pos(a), a);
        filter.removed(5, a, &tables[5]);
        assert!(filter.holds(bit_of(5, b)), "b still has the bit");
        tables[5].remove(slot_pos(b), b);
        filter.removed(5, b, &tables[5]);
        assert!(!filter.holds(bit_of(5, a)));
        tables[5].remove(slot_pos(d), d);
        filter.removed(5, d, &tables[5]);
        assert!(!filter.holds(bit_of(5, d)));
        assert_eq!(filter, Filter::of(&tables));
        assert_eq!(filter.count(), 1);
        assert!(filter.addresses_hold());
    }

    #[test]
    fn a_sibling_past_its_home_chunk_keeps_the_bit() {
        // sixteen slots whose tags all have one home chunk (of fifteen slots) fill it, so
        // the two siblings that follow (tags 0x1234 and 0x1237: the same top 14 bits) are
        // placed past it, and `removed` finds the one left through the overflow count
        let mut tables: Box<[Chunks; SUMMARIES]> =
            Box::new(std::array::from_fn(|_| Chunks::default()));
        let mut filter = Filter::default();
        let fillers = (0x1240_u32..0x1250).map(|tag| tag << 16 | 0x0401);
        let (a, b) = (0x1234_0401_u32, 0x1237_0802);
        for slot in fillers.chain([a, b]) {
            tables[7].insert(slot_pos(slot), slot, slot_pos);
            filter.added(7, slot);
        }
        assert!(
            !tables[7].in_home(slot_pos(b), b),
            "b lies past its home chunk"
        );
        tables[7].remove(slot_pos(a), a);
        filter.removed(7, a, &tables[7]);
        assert!(
            filter.holds(bit_of(7, b)),
            "b, past its home chunk, keeps the bit"
        );
        tables[7].remove(slot_pos(b), b);
        filter.removed(7, b, &tables[7]);
        assert!(!filter.holds(bit_of(7, b)));
        assert_eq!(filter, Filter::of(&tables));
    }

    #[test]
    fn a_snapshot_keeps_its_segments_and_a_written_shared_segment_is_copied() {
        let mut filter = Filter::default();
        let empty = filter.clone();
        filter.added(5, 0x1234_0001);
        // the snapshot that shared the filter before the write sees none of it
        assert_eq!((empty.count(), empty.bytes()), (0, WORDS * 8));
        assert_eq!(filter.bytes(), 2 * WORDS * 8);
        // a segment already written, then shared, is copied again on the next write
        let shared = filter.clone();
        filter.added(5, 0x8000_0001);
        filter.added(SUMMARIES - 1, 0x8000_0001);
        assert_eq!((shared.count(), filter.count()), (1, 3));
        assert!(shared.holds(bit_of(5, 0x1234_0001)));
        assert!(!shared.holds(bit_of(5, 0x8000_0001)));
        assert!(filter.holds(bit_of(5, 0x8000_0001)));
        assert!(filter.holds(bit_of(SUMMARIES - 1, 0x8000_0001)));
        assert!(empty.addresses_hold() && shared.addresses_hold() && filter.addresses_hold());
        // equal bits are equal filters, whichever segments hold them
        let mut again = Filter::default();
        for (table, slot) in [
            (5, 0x1234_0001),
            (5, 0x8000_0001),
            (SUMMARIES - 1, 0x8000_0001),
        ] {
            again.added(table, slot);
        }
        assert_eq!(again, filter);
        assert_ne!(again, shared);
        assert!(format!("{filter:?}").len() < 100, "Debug prints no bits");
    }

    #[test]
    fn a_names_removal_keeps_the_bit_of_a_name_sharing_it() {
        // two names in one summary table whose tags differ but share their top 14 bits
        let mut seen = HashMap::new();
        let (first, second) = (0..)
            .map(|i| format!("n{i}.example"))
            .find_map(|name| {
                let h = name_hash(&name);
                let (key, tag) = ((summary_of(h), bit(h)), want(h));
                match seen.insert(key, (name.clone(), tag)) {
                    Some((other, other_tag)) if other_tag != tag => Some((other, name)),
                    _ => None,
                }
            })
            .expect("a pair");
        let (h1, h2) = (name_hash(&first), name_hash(&second));
        let mut data = IndexData::default();
        data.bump_summary(h1, HOST, 1, 0);
        data.bump_summary(h2, HOST, 1, 0);
        data.bump_summary(h1, BELOW, 1, EVERY_CHILD);
        assert_eq!(data.filter.count(), 1);
        data.bump_summary(h1, HOST, -1, 0);
        data.bump_summary(h1, BELOW, -1, 0);
        assert!(
            data.filter.holds(bit(h1)),
            "{second} keeps the bit {first} had"
        );
        assert_eq!(data.filter, Filter::of(&data.summary));
        data.bump_summary(h2, HOST, -1, 0);
        assert_eq!(data.filter.count(), 0);
        assert_eq!(data.filter, Filter::of(&data.summary));
    }
}
