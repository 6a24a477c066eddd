//! The sites filter: one 64-bit word per (summary table, top 8 bits of a slot's tag), in
//! which each slot of that table with those top bits sets three bits picked by the rest of
//! its tag, so that a page of lookups answers most of its clean sites with one word, not a
//! summary probe: a site goes on to its probe only when all three of its bits are set.
//!
//! A clean site's summary probe reads two cache lines (its table's header in the summary's
//! vector of tables, then the chunk) and compares a chunk of tags; the filter is one flat
//! array of words read through a directory that stays in the first-level cache, so a clean
//! site reads one line and tests one mask. The word and the bits are made of the bits of
//! the name's hash that its summary slot keeps (the table it is in, the slot's tag), so a
//! slot's bits are known from the slot alone: when a slot goes, each of its bits is cleared
//! unless another slot of its table with the same top tag bits sets it too, which a probe
//! of each tag that sets that bit tells. The filter is thus exactly what the summary holds
//! (`of`, the tests' model).
//!
//! Three bits a name, not one: at 10 M entries (13 M slots in 2 M words) a word has about
//! six slots and a quarter of its bits set, so a clean site's three bits are all set by
//! other slots about once in fifty; with the clean sites whose tag a slot of another name
//! has (about one in forty, the summary's own false positives), 4.4 % of clean sites go on,
//! where one bit a slot in the same 16 MiB left 9.1 % to go on (each costs a summary probe
//! and a mispredicted branch or two, more than the filter's whole test).
//!
//! 2^21 words (16 MiB) at most, in [`SEGMENTS`] segments of 64 KiB that a snapshot shares
//! and a batch copies on its first write to each, as the summary's tables are. A segment
//! nobody has written is one shared zero segment, so an empty or small index costs a few
//! segments, not 16 MiB. The share of bits set (`IndexData::filter_fill`, printed by the
//! banlist bench) is what decides how often a clean site passes.

use std::sync::{Arc, OnceLock};

use super::chunks::Chunks;
use super::summary::POSITION;
use super::{unique, SUMMARY_BITS};

/// Tag bits of a slot that pick its word (the top ones of the 16 a slot keeps).
const WORD_TAG_BITS: u32 = 8;
/// Bits of a word's place: a summary table's number above its slots' top tag bits.
const WORD_BITS: u32 = SUMMARY_BITS + WORD_TAG_BITS;
/// All the filter's bits.
pub const BITS: u32 = WORD_BITS + 6;
/// Bits of a word's place that pick its segment.
const SEGMENT_BITS: u32 = 8;
/// Segments: each covers `SUMMARIES / SEGMENTS` summary tables.
pub const SEGMENTS: usize = 1 << SEGMENT_BITS;
/// `u64` words of a segment (64 KiB).
const WORDS: usize = 1 << (WORD_BITS - SEGMENT_BITS);
/// Bits a slot sets in its word.
const SET: u32 = 3;

/// The bits of its word that a slot sets, by the low 8 bits of its tag: `SET` distinct
/// bits each, drawn by splitmix64 from those 8 bits, and drawn again where an earlier low
/// byte has the same ones, so that no two low bytes set the same three but 0 and 1: a name
/// whose tag is 0 has its slot placed by tag 1 (`summary::pos`), and the two have the same
/// top bits, so the same word (tags ending in 00 and 01 thus share their bits in every
/// word, a little more of the filter passing, nothing missed).
static MASKS: [u64; 256] = masks();

const fn masks() -> [u64; 256] {
    let mut out = [0u64; 256];
    let mut low = 0;
    while low < 256 {
        let mut x = if low == 0 { 1 } else { low as u64 };
        loop {
            let (mut mask, mut set) = (0u64, 0);
            while set < SET {
                x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                let bit = 1u64 << (z >> 58);
                if mask & bit == 0 {
                    mask |= bit;
                    set += 1;
                }
            }
            // (tag 1 draws what tag 0 drew: the same `x`)
            let mut earlier = if low == 1 { 1 } else { 0 };
            while earlier < low && out[earlier] != mask {
                earlier += 1;
            }
            if earlier == low {
                out[low] = mask;
                break;
            }
        }
        low += 1;
    }
    out
}

type Segment = Arc<[u64]>;

/// The one zero segment every segment nobody has written shares.
fn zero() -> Segment {
    static ZERO: OnceLock<Segment> = OnceLock::new();
    ZERO.get_or_init(|| Arc::from(vec![0u64; WORDS])).clone()
}

/// A name's place in the filter: its word (of all of them) and the bits it sets there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    word: usize,
    mask: u64,
}

/// The segment and the word in it of the word `word`.
#[inline(always)]
fn place(word: usize) -> (usize, usize) {
    (
        (word >> (WORD_BITS - SEGMENT_BITS)) & (SEGMENTS - 1),
        word & (WORDS - 1),
    )
}

/// The filter's key of the slot `slot` (a summary slot's position bits) in table `table`.
#[inline(always)]
fn key_of(table: usize, slot: u32) -> Key {
    Key {
        word: (table << WORD_TAG_BITS) | (slot >> (32 - WORD_TAG_BITS)) as usize,
        mask: MASKS[((slot >> (32 - 2 * WORD_TAG_BITS)) & 0xff) as usize],
    }
}

/// The filter's key of the name hashed `hash`: the one its summary slot has, if it has one.
#[inline(always)]
pub fn key(hash: u64) -> Key {
    // the table's bits (`summary_of`), and just below them the slot's tag (`summary::pos`,
    // which raises tag 0 to 1, whose bits `MASKS` makes tag 0's)
    Key {
        word: (hash >> (64 - WORD_BITS)) as usize,
        mask: MASKS[((hash >> (64 - WORD_BITS - WORD_TAG_BITS)) & 0xff) as usize],
    }
}

/// Whether `word`, the word that holds `key` (`Filter::word_ref`), has all of its bits set:
/// a page of lookups finds each word once, to prefetch it, and tests it later.
#[inline(always)]
pub fn holds_in(word: u64, key: Key) -> bool {
    word & key.mask == key.mask
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
    /// Whether every bit of `key` (of [`key`]) is set: the name it was found for may have a
    /// summary slot. Not set: it has none.
    #[inline(always)]
    pub fn holds(&self, key: Key) -> bool {
        holds_in(*self.word_ref(key), key)
    }

    /// The word that holds `key` (a page of lookups prefetches it first).
    #[inline(always)]
    pub fn word_ref(&self, key: Key) -> &u64 {
        debug_assert!(key.word >> WORD_BITS == 0);
        let (s, at) = place(key.word);
        let segment = self.words[s];
        // SAFETY: `words[s]` is `first_word(&segments[s])` (set with it, in `Default` and
        // `segment_mut`), a segment of `WORDS` words that this filter holds while `self` is
        // borrowed, and `at` is masked below `WORDS`; nothing writes the segment meanwhile
        // (writes need `&mut self`).
        unsafe { &*segment.add(at) }
    }

    /// The word that holds `key`, to write: its segment is copied first if a snapshot
    /// shares it, and the directory then follows the copy.
    fn word_mut(&mut self, key: Key) -> &mut u64 {
        let (s, at) = place(key.word);
        unique(&mut self.segments[s]);
        self.words[s] = first_word(&self.segments[s]);
        &mut unique(&mut self.segments[s])[at]
    }

    /// A slot `slot` was put in summary table `table`.
    pub fn added(&mut self, table: usize, slot: u32) {
        let key = key_of(table, slot);
        if !self.holds(key) {
            *self.word_mut(key) |= key.mask;
        }
    }

    /// A slot `slot` was taken out of summary table `table`, which is `chunks` now: each of
    /// its bits is cleared unless another slot there sets it, one whose tag has the same top
    /// bits (a table holds a tag once: its names share the slot). Each tag that would set
    /// one of those bits is probed for, about a dozen a bit.
    pub fn removed(&mut self, table: usize, slot: u32, chunks: &Chunks) {
        let key = key_of(table, slot);
        // the position of the first tag with these top bits, and how far apart tags are
        let first = slot >> (32 - WORD_TAG_BITS) << (32 - WORD_TAG_BITS);
        let apart = POSITION.trailing_zeros();
        let mut kept = 0;
        for (low, &mask) in (0u32..).zip(MASKS.iter()) {
            let pos = first | low << apart;
            // position 0 is no tag (an empty slot's)
            if mask & key.mask & !kept != 0 && pos != 0 && chunks.find(pos, POSITION).is_some() {
                kept |= mask & key.mask;
            }
        }
        if key.mask & !kept != 0 {
            *self.word_mut(key) &= !(key.mask & !kept);
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
    use super::super::{summary_of, SUMMARIES};
    use super::*;

    #[test]
    fn a_names_key_is_its_slots_key() {
        // the word and bits a lookup reads for a name are the ones its slot sets
        for name in ["a.example", "www.b.example", "x", "", "[::1]", "10.0.0.1"] {
            let h = name_hash(name);
            assert_eq!(key(h), key_of(summary_of(h), slot_pos(want(h) | 0x0fff)));
        }
        // hashes whose tag bits are small: a slot's position is raised to 2^16 (tag 1)
        for low in [0u64, 1, 0xff, 0x100, 0xffff, 0x1_0000, 0x3_ffff, 0x4_0000] {
            // (the position's bits start 19 bits up: `summary::pos`)
            let h = 0x9876_0000_0000_0000 | low << 19;
            assert_eq!(key(h), key_of(summary_of(h), want(h)), "{low:x}");
        }
    }

    #[test]
    fn each_tag_sets_three_bits_of_its_word_and_tags_share_few() {
        for (low, mask) in MASKS.iter().enumerate() {
            assert_eq!(mask.count_ones(), SET, "{low}");
        }
        assert_eq!(MASKS[0], MASKS[1]);
        // no two tags past 0 set the same bits, and few share two of them
        let distinct: std::collections::HashSet<u64> = MASKS[1..].iter().copied().collect();
        assert_eq!(distinct.len(), 255);
        let mut two = 0;
        for (i, a) in MASKS[1..].iter().enumerate() {
            two += MASKS[i + 2..]
                .iter()
                .filter(|b| (*a & **b).count_ones() >= 2)
                .count();
        }
        // three bits of 64 drawn at random: 184 in 41,664 pairs share two, about 143 of
        // these 32,385
        assert!(two < 200, "{two}");
    }

    /// The key of tag `tag` in `table`, as a slot of that tag (any counts) gives it.
    fn tag_key(table: usize, tag: u32) -> Key {
        key_of(table, tag << 16 | 0x0401)
    }

    #[test]
    fn a_bit_stays_while_another_slot_sets_it() {
        let mut tables: Box<[Chunks; SUMMARIES]> =
            Box::new(std::array::from_fn(|_| Chunks::default()));
        let mut filter = Filter::default();
        // in table 5: a tag, another with the same top 8 bits that shares a bit with it,
        // one with other top bits, and tag 1 (tag 0, position 0, is no tag: never probed)
        let first = 0x1200_u32;
        let mask = |tag: u32| MASKS[(tag & 0xff) as usize];
        let sibling = (first + 1..first + 0x100)
            .find(|&tag| mask(tag) & mask(first) != 0)
            .expect("a tag sharing a bit");
        let slots = [first, sibling, 0x8000, 0x0001].map(|tag| tag << 16 | 0x0401);
        for slot in slots {
            tables[5].insert(slot_pos(slot), slot, slot_pos);
            filter.added(5, slot);
        }
        assert_eq!(filter, Filter::of(&tables));
        assert!(filter.holds(tag_key(5, first)) && filter.holds(tag_key(5, 0x8000)));
        assert!(!filter.holds(tag_key(4, first)), "another table's word");
        let [a, b, c, d] = slots;
        tables[5].remove(slot_pos(a), a);
        filter.removed(5, a, &tables[5]);
        let left = *filter.word_ref(tag_key(5, first));
        assert_eq!(
            left & mask(first),
            mask(first) & mask(sibling),
            "the shared bit stays"
        );
        assert!(filter.holds(tag_key(5, sibling)));
        tables[5].remove(slot_pos(b), b);
        filter.removed(5, b, &tables[5]);
        assert_eq!(*filter.word_ref(tag_key(5, first)), 0);
        tables[5].remove(slot_pos(d), d);
        filter.removed(5, d, &tables[5]);
        assert!(!filter.holds(tag_key(5, 0x0001)));
        assert_eq!(filter, Filter::of(&tables));
        assert_eq!(filter.count(), SET as usize);
        assert!(filter.holds(key_of(5, c)));
        assert!(filter.addresses_hold());
    }

    #[test]
    fn a_sibling_past_its_home_chunk_keeps_the_bits() {
        // sixteen slots whose tags all have one home chunk (of fifteen slots) fill it, so
        // the two that follow (tag 0x1234 and one of the same top 8 bits that shares a bit
        // with it) are placed past it, and `removed` finds the one left through the
        // overflow count
        let mut tables: Box<[Chunks; SUMMARIES]> =
            Box::new(std::array::from_fn(|_| Chunks::default()));
        let mut filter = Filter::default();
        let fillers = (0x1240_u32..0x1250).map(|tag| tag << 16 | 0x0401);
        let sibling = (0x1235_u32..0x1240)
            .find(|&tag| MASKS[(tag & 0xff) as usize] & MASKS[0x34] != 0)
            .expect("a tag sharing a bit with 0x1234");
        let (a, b) = (0x1234_0401_u32, sibling << 16 | 0x0802);
        for slot in fillers.clone().chain([a, b]) {
            tables[7].insert(slot_pos(slot), slot, slot_pos);
            filter.added(7, slot);
        }
        assert!(
            !tables[7].in_home(slot_pos(b), b),
            "b lies past its home chunk"
        );
        assert!(
            !tables[7].in_home(slot_pos(a), a),
            "a lies past its home chunk"
        );
        tables[7].remove(slot_pos(a), a);
        filter.removed(7, a, &tables[7]);
        assert!(
            filter.holds(key_of(7, b)),
            "b, past its home chunk, keeps its bits, the one it shares with a too"
        );
        assert_eq!(filter, Filter::of(&tables));
        for slot in fillers.chain([b]) {
            tables[7].remove(slot_pos(slot), slot);
            filter.removed(7, slot, &tables[7]);
        }
        assert!(!filter.holds(key_of(7, b)));
        assert_eq!(filter.count(), 0);
        assert_eq!(filter, Filter::of(&tables));
    }

    #[test]
    fn a_snapshot_keeps_its_segments_and_a_written_shared_segment_is_copied() {
        let mut filter = Filter::default();
        let empty = filter.clone();
        filter.added(5, 0x1234_0001);
        let set = SET as usize;
        // the snapshot that shared the filter before the write sees none of it
        assert_eq!((empty.count(), empty.bytes()), (0, WORDS * 8));
        assert_eq!(filter.bytes(), 2 * WORDS * 8);
        // a segment already written, then shared, is copied again on the next write
        let shared = filter.clone();
        filter.added(5, 0x8000_0001);
        filter.added(SUMMARIES - 1, 0x8000_0001);
        assert_eq!((shared.count(), filter.count()), (set, 3 * set));
        assert!(shared.holds(key_of(5, 0x1234_0001)));
        assert!(!shared.holds(key_of(5, 0x8000_0001)));
        assert!(filter.holds(key_of(5, 0x8000_0001)));
        assert!(filter.holds(key_of(SUMMARIES - 1, 0x8000_0001)));
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
        // two names in one summary table whose tags differ but share their top 8 bits, and
        // a bit of the three each sets
        let mut seen = HashMap::new();
        let (first, second) = (0..)
            .map(|i| format!("n{i}.example"))
            .find_map(|name| {
                let h = name_hash(&name);
                let (word, tag) = ((summary_of(h), key(h).word), want(h));
                match seen.insert(word, (name.clone(), tag, key(h).mask)) {
                    Some((other, other_tag, other_mask))
                        if other_tag != tag && other_mask & key(h).mask != 0 =>
                    {
                        Some((other, name))
                    }
                    _ => None,
                }
            })
            .expect("a pair");
        let (h1, h2) = (name_hash(&first), name_hash(&second));
        let mut data = IndexData::default();
        data.bump_summary(h1, HOST, 1, 0);
        data.bump_summary(h2, HOST, 1, 0);
        data.bump_summary(h1, BELOW, 1, EVERY_CHILD);
        let shared = key(h1).mask & key(h2).mask;
        assert_eq!(
            data.filter.count(),
            (key(h1).mask | key(h2).mask).count_ones() as usize
        );
        data.bump_summary(h1, HOST, -1, 0);
        data.bump_summary(h1, BELOW, -1, 0);
        assert_eq!(
            *data.filter.word_ref(key(h1)) & key(h1).mask,
            shared,
            "{second} keeps the bit {first} shares with it"
        );
        assert_eq!(data.filter, Filter::of(&data.summary));
        data.bump_summary(h2, HOST, -1, 0);
        assert_eq!(data.filter.count(), 0);
        assert_eq!(data.filter, Filter::of(&data.summary));
    }
}
