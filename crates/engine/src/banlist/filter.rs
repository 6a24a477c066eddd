//! The sites filter: one 64-bit word per (summary table, top 8 bits of a slot's tag), in
//! which each name counted in that table with those top bits sets three bits, picked by
//! its hash's low 8 bits, so that a page of lookups answers most of its clean sites with
//! one word, not a summary probe: a site goes on to its probe only when all three of its
//! bits are set.
//!
//! A name's word says a little more, for the hosts below it: a name with a domain entry
//! or an org member also sets three bits of its cover ([`covers_held`]), and a name with
//! something below it three bits of each label just below it on the way there (its
//! `summary::child_pair`, mixed with the name's hash: [`child_held`]). A host below its
//! site (`www.`, `cdn.`) whose site's bits are all set goes on only if the cover's bits
//! are set, or its own label's are ([`step_held`]): a `cdn.` host below a site whose
//! `www.` host is banned, a fifth of the banlist bench's page, ends at the word it has
//! already read, where it used to read the site's summary slot and test the slot's
//! filter of labels below, which lets one label in four through. A site with no cover
//! bits has no domain entry or member (a filter never misses), so its step can only go
//! below it: a page of lookups goes straight to the host's name below the site, without
//! the site's probe. The test of the cover and the label is made only for the sites whose
//! three bits are set, so a clean page pays nothing for it but the filter's fuller words.
//!
//! A clean site's summary probe reads two cache lines (its table's header in the summary's
//! vector of tables, then the chunk) and compares a chunk of tags; the filter is one flat
//! array of words read through a directory that stays in the first-level cache, so a clean
//! site reads one line and tests one mask. A name's word is its hash's top 21 bits (its
//! summary table and the top of its tag, `summary::pos`), one shift.
//!
//! The three bits come from hash bits the summary does not keep, so that a clean site
//! whose tag a slot of another name has (about one in forty at 10 M entries: the summary
//! keeps 16 bits of a tag) is most often turned away here too, where it would otherwise go
//! on to the key tables. The price is that a slot alone no longer tells its bits: a name
//! sets its bits whenever it is counted, and when a slot goes its word is cleared only if
//! no slot of its table with the same top tag bits is left (a probe for each such tag
//! tells). Otherwise the bits of the names that went stay set until the filter is made
//! again: a lookup of such a name goes on to its summary probe, which answers as before.
//! Each removal leaves at most three such bits, but they add up while a word keeps some
//! live name: once the entries had turned over (as many removed as are held), about 8 % of
//! clean sites would pass, as many as with one bit a slot. So the writer makes the filter
//! again (`IndexData::fresh_filter`: every entry's names and every org member's) once a
//! quarter of the names held have gone since it was made (and at least 4,096), on a thread
//! of its own from the snapshot just published: about 1.3 s at 10 M entries. The batches
//! applied meanwhile note what they tell the filter ([`FilterEvent`]), and the new filter
//! is told all of it before the first batch after it is made publishes it, or the
//! service's housekeeping does (`BanIndex::publish_ready_filter`), whichever comes first
//! (`apply::Writer`). A making that fails (no thread, or one that panicked) is counted and
//! its cause kept for the service to show and log (`BanIndex::refresh_failures`); the old
//! filter serves on and the next batch tries again. A batch that brings
//! the log past the names held drops the filter being made and starts one from itself.
//! What is counted is summary slots: a re-added entry's name counts as gone when its slot
//! went with the entry, and a name sharing a slot is not counted. A store's start and each
//! Redis resync build a new index, with a new
//! filter, as well. Nothing is ever missed; only the filter's saving shrinks between two
//! makings. The filter is thus a superset of what the summary holds, never missing a name
//! it counts (the model tests check every lookup against the model, and every word set
//! against the summary's slots, with filters made again aside between random batches).
//!
//! Three bits a name, not one: at 10 M entries (13 M names in 2 M words) a word has about
//! six names and, with the cover's and the labels' bits, 35 % of its bits set (a quarter
//! without them), so a clean site's three bits are all set about once in twenty-three;
//! a clean host below its site then most often ends at the cover's and the label's test.
//! One bit a slot in the same 16 MiB let 9.1 % of clean sites go on (each costs a summary
//! probe and a mispredicted branch or two, more than the filter's whole test).
//!
//! 2^21 words (16 MiB) at most, in [`SEGMENTS`] segments of 64 KiB that a snapshot shares
//! and a batch copies on its first write to each, as the summary's tables are. A segment
//! nobody has written is one shared zero segment, so an empty or small index costs a few
//! segments, not 16 MiB. The share of bits set (`IndexData::filter_fill`, printed by the
//! banlist bench) is what decides how often a clean site passes.

use std::sync::{Arc, OnceLock};

use super::chunks::Chunks;
use super::summary::{self, Field, POSITION};
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
/// Summary tables whose words a segment holds: the filter's bits for the names of tables
/// `s * TABLES_PER_SEGMENT ..` are all in segment `s`.
pub const TABLES_PER_SEGMENT: usize = super::SUMMARIES / SEGMENTS;
/// `u64` words of a segment (64 KiB).
const WORDS: usize = 1 << (WORD_BITS - SEGMENT_BITS);
/// Bits a name sets in its word.
const SET: u32 = 3;

/// The bits of its word that a name sets, by its hash's low 8 bits: `SET` distinct bits
/// each, drawn by splitmix64 from those 8 bits, and drawn again where an earlier value has
/// the same ones, so that no two values set the same three.
static MASKS: [u64; 256] = masks();

const fn masks() -> [u64; 256] {
    let mut out = [0u64; 256];
    let mut low = 0;
    while low < 256 {
        let mut x = low as u64;
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
            let mut earlier = 0;
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

/// What a batch told the filter, in order: kept while a filter is made again aside from an
/// earlier snapshot, and told to that one before it is published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterEvent {
    /// `Filter::set` of these bits: a name counted ([`counted_key`]).
    Set(Key),
    /// `Filter::removed` of this slot of this table.
    Removed(usize, u32),
}

/// A name's place in the filter: its word (of all of them) and the bits it sets there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    word: usize,
    mask: u64,
}

impl Key {
    /// The word's number among all the filter's words, and the bits: what a load sets in
    /// the segments it makes (`Filter::put_segments`).
    pub fn parts(self) -> (usize, u64) {
        (self.word, self.mask)
    }
}

/// The words of the summary tables of one segment.
pub const SEGMENT_WORDS: usize = WORDS;

/// `n` segments of zero words, each its own (for `Filter::put_segments`).
pub fn fresh_segments(n: usize) -> Vec<Arc<[u64]>> {
    (0..n).map(|_| Arc::from(vec![0u64; WORDS])).collect()
}

/// The segment and the word in it of the word `word`.
#[inline(always)]
fn place(word: usize) -> (usize, usize) {
    (
        (word >> (WORD_BITS - SEGMENT_BITS)) & (SEGMENTS - 1),
        word & (WORDS - 1),
    )
}

/// The word of the names whose slot is `slot` (a summary slot's position bits) in table
/// `table`.
#[inline(always)]
fn word_of(table: usize, slot: u32) -> usize {
    (table << WORD_TAG_BITS) | (slot >> (32 - WORD_TAG_BITS)) as usize
}

/// Whether `chunks` holds a slot whose tag has the top bits of position `first` (whose
/// low tag bits are 0): a probe for each such tag, up to 256.
fn any_slot_from(chunks: &Chunks, first: u32) -> bool {
    let apart = POSITION.trailing_zeros();
    (0..1u32 << (32 - WORD_TAG_BITS - apart))
        .map(|low| first | low << apart)
        // position 0 is no tag (an empty slot's)
        .any(|pos| pos != 0 && chunks.find(pos, POSITION).is_some())
}

/// The filter's key of the name hashed `hash`.
#[inline(always)]
pub fn key(hash: u64) -> Key {
    // the table's bits (`summary_of`) and just below them the top of the slot's tag
    // (`summary::pos`, which raises tag 0 to 1: the same top bits); the bits from the low
    // end of the hash, which the summary does not keep
    Key {
        word: (hash >> (64 - WORD_BITS)) as usize,
        mask: MASKS[(hash & 0xff) as usize],
    }
}

/// The bits a name counted in the summary sets: its key's (every name counted), and for
/// a domain entry or an org member at it those of its cover, or for an entry below it
/// (`BELOW`, `below` the `summary::child_pair` of the label below the name that the entry
/// lies under) those of that label.
#[inline]
pub fn counted_key(hash: u64, field: Field, below: Option<u16>) -> Key {
    let own = key(hash);
    let more = match below {
        Some(pair) => child_mask(hash, pair),
        None if field.covers_below() => cover_mask(hash),
        None => 0,
    };
    Key {
        word: own.word,
        mask: own.mask | more,
    }
}

/// Whether `word`, the word that holds `key` (`Filter::word_ref`), has all of its bits set:
/// a page of lookups finds each word once, to prefetch it, and tests it later.
#[inline(always)]
pub fn holds_in(word: u64, key: Key) -> bool {
    word & key.mask == key.mask
}

/// The bits a domain entry or an org member at the name hashed `hash` sets in its word
/// besides those of [`key`] (which every name counted sets): drawn by other bits of the
/// hash, so that a lookup of a host below a name with none turns away most often.
#[inline(always)]
fn cover_mask(hash: u64) -> u64 {
    MASKS[((hash >> 8) & 0xff) as usize]
}

/// The bits that something below the name hashed `hash` under the label whose
/// `summary::child_pair` is `pair` sets in its word besides those of [`key`]: the label's
/// end mixed with yet other bits of the hash, so that a host below a busy name on a label
/// nothing lies under (a `cdn.` host below a site whose `www.` host is banned) is most
/// often turned away.
#[inline(always)]
fn child_mask(hash: u64, pair: u16) -> u64 {
    let mixed = (u32::from(pair) | 1 << 16).wrapping_mul(0x9E37_79B1) ^ hash as u32;
    MASKS[(mixed >> 24) as usize]
}

/// Whether a walk's step at the name hashed `hash`, starting at `at` in `host` (0: the
/// host itself), may find something or go on, by `word` (the name's, of `key(hash)`):
/// the name is counted ([`holds_in`] its key), and it is the host, or below it a domain
/// entry or member may be at it ([`covers_held`]) or something below it under the host's
/// label just before it ([`child_held`]). Not held: the step reads nothing it would act
/// on (`summary::Walk::at_site`, `Walk::take`), so the walk ends there clean.
#[inline(always)]
pub fn step_held(word: u64, hash: u64, host: &[u8], at: usize) -> bool {
    holds_in(word, key(hash))
        && (at == 0 || covers_held(word, hash) || child_held(word, hash, host, at))
}

/// Whether the word `word` of the name hashed `hash` holds the bits of a domain entry or
/// member at the name. Not held: none is, and a walk's step there can only go below it.
#[inline(always)]
pub fn covers_held(word: u64, hash: u64) -> bool {
    let cover = cover_mask(hash);
    word & cover == cover
}

/// Whether the word `word` of the name hashed `hash`, starting at `at` in `host` (`at >
/// 0`), holds the bits of something below the name under the host's label just before it
/// (read only here: a page of lookups asks it for the few names whose key's bits are all
/// set and that no domain entry or member may be at).
#[inline(always)]
pub fn child_held(word: u64, hash: u64, host: &[u8], at: usize) -> bool {
    let child = child_mask(hash, summary::child_pair_at(host, at));
    word & child == child
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
    /// Whether every bit of `key` (of [`key`]) is set: the name it was found for may be
    /// counted in the summary. Not set: it is not (nothing is at it or below it).
    #[inline(always)]
    pub fn holds(&self, key: Key) -> bool {
        holds_in(*self.word_ref(key), key)
    }

    /// The word that holds `key` (a page of lookups prefetches it first).
    #[inline(always)]
    pub fn word_ref(&self, key: Key) -> &u64 {
        self.word(key.word)
    }

    /// Word `word` of all of them.
    #[inline(always)]
    fn word(&self, word: usize) -> &u64 {
        debug_assert!(word >> WORD_BITS == 0);
        let (s, at) = place(word);
        let segment = self.words[s];
        // SAFETY: `words[s]` is `first_word(&segments[s])` (set with it, in `Default` and
        // `segment_mut`), a segment of `WORDS` words that this filter holds while `self` is
        // borrowed, and `at` is masked below `WORDS`; nothing writes the segment meanwhile
        // (writes need `&mut self`).
        unsafe { &*segment.add(at) }
    }

    /// Word `word`, to write: its segment is copied first if a snapshot shares it, and the
    /// directory then follows the copy.
    fn word_mut(&mut self, word: usize) -> &mut u64 {
        let (s, at) = place(word);
        unique(&mut self.segments[s]);
        self.words[s] = first_word(&self.segments[s]);
        &mut unique(&mut self.segments[s])[at]
    }

    /// [`step_held`] of the name hashed `hash` starting at `at` in `host`.
    #[inline(always)]
    pub fn holds_step(&self, hash: u64, host: &[u8], at: usize) -> bool {
        step_held(*self.word_ref(key(hash)), hash, host, at)
    }

    /// Set the bits of `key` (a name counted: [`counted_key`]).
    pub fn set(&mut self, key: Key) {
        if !self.holds(key) {
            *self.word_mut(key.word) |= key.mask;
        }
    }

    /// Segments `first..` put in place of this filter's (a segment all zero stays the shared
    /// zero one): a load makes the filter's segments on two threads, each those of its own
    /// summary tables, writing their words in place (`fresh_segments`).
    pub fn put_segments(&mut self, first: usize, segments: Vec<Arc<[u64]>>) {
        for (k, segment) in segments.into_iter().enumerate() {
            let s = first + k;
            if s >= SEGMENTS {
                return;
            }
            self.segments[s] = if segment.iter().all(|&w| w == 0) {
                zero()
            } else {
                segment
            };
            self.words[s] = first_word(&self.segments[s]);
        }
    }

    /// A slot `slot` was taken out of summary table `table`, which is `chunks` now: its word
    /// is cleared when no slot of the table with the same top tag bits is left, and kept as
    /// it is otherwise (the names that went keep their bits until the filter is made again;
    /// see the module's doc).
    pub fn removed(&mut self, table: usize, slot: u32, chunks: &Chunks) {
        let word = word_of(table, slot);
        if *self.word(word) == 0 {
            return;
        }
        let first = slot >> (32 - WORD_TAG_BITS) << (32 - WORD_TAG_BITS);
        if !any_slot_from(chunks, first) {
            *self.word_mut(word) = 0;
        }
    }

    /// How many of the words set have no slot of their table with their top tag bits:
    /// none, when a word is cleared with the last such slot (the model tests' check).
    #[cfg(test)]
    pub fn words_without_slots(&self, tables: &[Chunks; super::SUMMARIES]) -> usize {
        let zero = zero();
        let mut without = 0;
        for (s, segment) in self.segments.iter().enumerate() {
            if Arc::ptr_eq(segment, &zero) {
                continue;
            }
            for (at, &bits) in segment.iter().enumerate() {
                if bits == 0 {
                    continue;
                }
                let word = s << (WORD_BITS - SEGMENT_BITS) | at;
                let table = word >> WORD_TAG_BITS;
                let first = ((word & ((1 << WORD_TAG_BITS) - 1)) as u32) << (32 - WORD_TAG_BITS);
                without += usize::from(!any_slot_from(&tables[table], first));
            }
        }
        without
    }

    /// Whether every bit set in `other` is set in this one.
    #[cfg(test)]
    pub fn contains(&self, other: &Filter) -> bool {
        let words = |f: &Filter| {
            f.segments
                .iter()
                .flat_map(|s| s.iter().copied())
                .collect::<Vec<_>>()
        };
        words(self)
            .iter()
            .zip(words(other))
            .all(|(&a, b)| a & b == b)
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
    use super::super::names::suffixes;
    use super::super::summary::{name_hash, slot_pos, want, HostSummary, DOMAIN, HOST};
    use super::super::{added, summary_of, BanIndex, Scope, SUMMARIES};
    use super::*;

    /// An index holding `entries` (scope, value), made as a store's batch makes it.
    fn index_of(entries: &[(Scope, &str)]) -> Arc<IndexData> {
        let index = BanIndex::empty();
        let changes = entries
            .iter()
            .enumerate()
            .map(|(i, &(scope, value))| added(&(i + 1).to_string(), scope, value));
        index
            .apply_iter(changes.collect::<Vec<_>>())
            .expect("applies");
        index.snapshot()
    }

    #[test]
    fn a_host_below_a_busy_site_goes_on_only_where_something_may_cover_it() {
        let data = index_of(&[
            (Scope::Host, "www.banned.com"),
            (Scope::Domain, "covered.com"),
            (Scope::Url, "listed.com/p"),
        ]);
        // the step at a host's site (where it starts in the host: past its first label)
        let held = |host: &str, site: &str| {
            let at = host.len() - site.len();
            data.filter.holds_step(name_hash(site), host.as_bytes(), at)
        };
        // www.banned.com is banned: its site counts something below it under `www`, and
        // a host on another label ends at the site's word
        assert!(held("www.banned.com", "banned.com"));
        for label in ["cdn", "img", "static", "api", "m", "news"] {
            let host = format!("{label}.banned.com");
            assert!(!held(&host, "banned.com"), "{host}");
        }
        // a domain entry covers its name and every host below it
        for host in ["covered.com", "cdn.covered.com", "www.covered.com"] {
            assert!(held(host, "covered.com"), "{host}");
        }
        // a url entry is at its host only
        assert!(held("listed.com", "listed.com"));
        assert!(!held("www.listed.com", "listed.com"));
    }

    #[test]
    fn a_walks_step_that_may_find_something_is_held() {
        // random entries over a small universe of names; every name of every host that
        // a walk may step at (its site and each name below it) is held where something
        // there may matter to the host: anything at the host itself, a domain entry at a
        // name above it, or an entry below such a name under the host's own label there
        const LABELS: [&str; 9] = ["a", "b", "www", "cdn", "co", "uk", "", "1", "xn--p1ai"];
        let mut rng = crate::testing::Xorshift(0x5EED);
        let mut checked = 0;
        for round in 0..60 {
            let hosts: Vec<String> = (0..30)
                .map(|_| {
                    let labels = 1 + rng.next() as usize % 6;
                    let host: Vec<&str> = (0..labels).map(|_| *rng.pick(&LABELS)).collect();
                    host.join(".")
                })
                .collect();
            let mut entries: Vec<(Scope, String)> = Vec::new();
            for _ in 0..1 + rng.next() % 8 {
                let host = rng.pick(&hosts).clone();
                let names = suffixes(&host, usize::MAX);
                let name = names
                    .get(rng.next() as usize % names.len().max(1))
                    .map_or(host.clone(), |n| n.to_string());
                entries.push(match rng.next() % 4 {
                    0 => (Scope::Domain, name),
                    1 => (Scope::Host, host),
                    2 => (Scope::Url, format!("{host}/p")),
                    _ => (Scope::Prefix, format!("{host}/p/")),
                });
            }
            let listed: Vec<(Scope, &str)> =
                entries.iter().map(|(s, v)| (*s, v.as_str())).collect();
            let data = index_of(&listed);
            // each entry's name (a url's or a prefix's host) and whether it covers below
            let named: Vec<(&str, bool)> = entries
                .iter()
                .map(|(scope, value)| {
                    let name = value.split('/').next().unwrap_or(value);
                    (name, *scope == Scope::Domain)
                })
                .collect();
            for host in &hosts {
                let site = HostSummary::site(host).0;
                // the names a walk steps at: from the site down to the host
                let starts = std::iter::once(0)
                    .chain(host.match_indices('.').map(|(dot, _)| dot + 1))
                    .filter(|&at| at <= site);
                for at in starts {
                    let name = &host[at..];
                    let matters = named.iter().any(|&(entry, covers)| {
                        if entry == name {
                            return at == 0 || covers;
                        }
                        // an entry below the name, under the host's label just above it
                        let Some(head) = entry.strip_suffix(name) else {
                            return false;
                        };
                        let Some(head) = head.strip_suffix('.') else {
                            return false;
                        };
                        if name.is_empty() && !entry.ends_with('.') {
                            return false;
                        }
                        let label = head.rsplit('.').next().unwrap_or(head);
                        at != 0
                            && summary::child_pair(label.as_bytes())
                                == summary::child_pair_at(host.as_bytes(), at)
                    });
                    if matters {
                        checked += 1;
                        let held = data.filter.holds_step(name_hash(name), host.as_bytes(), at);
                        assert!(held, "round {round}: {host} at {at}, {entries:?}");
                    }
                }
            }
        }
        assert!(checked > 200, "{checked}");
    }

    #[test]
    fn a_names_word_is_its_slots_word() {
        // the word a lookup reads for a name is the one its slot's table and tag make
        for name in ["a.example", "www.b.example", "x", "", "[::1]", "10.0.0.1"] {
            let h = name_hash(name);
            assert_eq!(
                key(h).word,
                word_of(summary_of(h), slot_pos(want(h) | 0x0fff))
            );
        }
        // hashes whose tag bits are small: a slot's position is raised to 2^16 (tag 1)
        for low in [0u64, 1, 0xff, 0x100, 0xffff, 0x1_0000, 0x3_ffff, 0x4_0000] {
            // (the position's bits start 19 bits up: `summary::pos`)
            let h = 0x9876_0000_0000_0000 | low << 19;
            assert_eq!(key(h).word, word_of(summary_of(h), want(h)), "{low:x}");
        }
    }

    #[test]
    fn each_name_sets_three_bits_of_its_word_and_values_share_few() {
        for (low, mask) in MASKS.iter().enumerate() {
            assert_eq!(mask.count_ones(), SET, "{low}");
        }
        let distinct: std::collections::HashSet<u64> = MASKS.iter().copied().collect();
        assert_eq!(distinct.len(), 256);
        let mut two = 0;
        for (i, a) in MASKS.iter().enumerate() {
            two += MASKS[i + 1..]
                .iter()
                .filter(|b| (*a & **b).count_ones() >= 2)
                .count();
        }
        // three bits of 64 drawn at random: 184 in 41,664 pairs share two, about 144 of
        // these 32,640
        assert!(two < 200, "{two}");
    }

    #[test]
    fn names_whose_tags_collide_have_their_own_bits() {
        // two names in one summary table with one tag share a slot, but a lookup of one
        // that the other's bits do not cover is turned away by the filter
        let mut seen = HashMap::new();
        let (first, second) = (0..)
            .map(|i| format!("c{i}.example"))
            .find_map(|name| {
                let h = name_hash(&name);
                let slot = (summary_of(h), want(h));
                match seen.insert(slot, (name.clone(), h)) {
                    Some((other, oh)) if key(oh).mask & !key(h).mask != 0 => Some((other, name)),
                    _ => None,
                }
            })
            .expect("a pair");
        let (h1, h2) = (name_hash(&first), name_hash(&second));
        let mut data = IndexData::default();
        data.bump_summary(h1, HOST, 1, None);
        assert!(data.filter.holds(key(h1)));
        assert!(
            !data.filter.holds(key(h2)),
            "{second} shares {first}'s slot, not its bits"
        );
        data.bump_summary(h2, DOMAIN, 1, None);
        assert!(data.filter.holds(key(h1)) && data.filter.holds(key(h2)));
    }

    #[test]
    fn a_word_is_cleared_with_the_last_slot_of_its_table_and_top_bits() {
        // three names in one word (one summary table, the same top 8 bits of a tag): the
        // word keeps every bit while any of their slots is left, and is cleared with the last
        let mut names: HashMap<usize, Vec<u64>> = HashMap::new();
        let word = (0..)
            .map(|i| name_hash(&format!("w{i}.example")))
            .find_map(|h| {
                let same = names.entry(key(h).word).or_default();
                if !same.iter().any(|&o| want(o) == want(h)) {
                    same.push(h);
                }
                (same.len() == 3).then_some(key(h).word)
            })
            .expect("three names in a word");
        let hashes = names[&word].clone();
        let mut data = IndexData::default();
        for &h in &hashes {
            data.bump_summary(h, HOST, 1, None);
        }
        let all = hashes.iter().fold(0, |m, &h| m | key(h).mask);
        let bits = |data: &IndexData| *data.filter.word_ref(key(hashes[0]));
        assert_eq!(bits(&data), all);
        data.bump_summary(hashes[0], HOST, -1, None);
        data.bump_summary(hashes[1], HOST, -1, None);
        assert_eq!(bits(&data), all, "a slot is left: the bits stay");
        assert!(data.filter.holds(key(hashes[2])));
        assert_eq!(data.filter.words_without_slots(&data.summary), 0);
        data.bump_summary(hashes[2], HOST, -1, None);
        assert_eq!(bits(&data), 0, "the last slot went");
        assert_eq!(data.filter.count(), 0);
    }

    #[test]
    fn a_slot_past_its_home_chunk_keeps_its_word() {
        // sixteen slots whose tags all have one home chunk (of fifteen slots) fill it, so
        // the two that follow (tags 0x1234 and 0x1235, the same top 8 bits) are placed past
        // it, and `removed` finds the one left through the overflow count
        let mut tables: Box<[Chunks; SUMMARIES]> =
            Box::new(std::array::from_fn(|_| Chunks::default()));
        let mut filter = Filter::default();
        let fillers = (0x1240_u32..0x1250).map(|tag| tag << 16 | 0x0401);
        let (a, b) = (0x1234_0401_u32, 0x1235_0802);
        // a hash of table 7 for each slot, its tag in bits 35 to 50 and 0x2a at the bottom
        let hash = |slot: u32| (7u64 << 51) | u64::from(slot >> 16) << 35 | 0x2a;
        for slot in fillers.clone().chain([a, b]) {
            assert_eq!(want(hash(slot)), slot_pos(slot));
            tables[7].insert(slot_pos(slot), slot, slot_pos);
            filter.set(key(hash(slot)));
        }
        for slot in [a, b] {
            assert!(
                !tables[7].in_home(slot_pos(slot), slot),
                "{slot:x} lies past its home"
            );
        }
        tables[7].remove(slot_pos(a), a);
        filter.removed(7, a, &tables[7]);
        let fillers_gone = fillers.clone().all(|slot| {
            tables[7].remove(slot_pos(slot), slot);
            filter.removed(7, slot, &tables[7]);
            true
        });
        assert!(fillers_gone);
        assert!(
            filter.holds(key(hash(b))),
            "b, past its home chunk, keeps the word"
        );
        assert_eq!(filter.words_without_slots(&tables), 0);
        tables[7].remove(slot_pos(b), b);
        filter.removed(7, b, &tables[7]);
        assert_eq!(filter.count(), 0);
    }

    #[test]
    fn a_snapshot_keeps_its_segments_and_a_written_shared_segment_is_copied() {
        // names hashed into table 5 (twice, two words) and the last table
        let (a, b, c) = (5u64 << 51 | 1, 5u64 << 51 | 0x8000 << 35 | 2, u64::MAX);
        let mut filter = Filter::default();
        let empty = filter.clone();
        filter.set(key(a));
        let set = SET as usize;
        // the snapshot that shared the filter before the write sees none of it
        assert_eq!((empty.count(), empty.bytes()), (0, WORDS * 8));
        assert_eq!(filter.bytes(), 2 * WORDS * 8);
        // a segment already written, then shared, is copied again on the next write
        let shared = filter.clone();
        filter.set(key(b));
        filter.set(key(c));
        assert_eq!((shared.count(), filter.count()), (set, 3 * set));
        assert!(shared.holds(key(a)));
        assert!(!shared.holds(key(b)));
        assert!(filter.holds(key(b)));
        assert!(filter.holds(key(c)));
        assert!(empty.addresses_hold() && shared.addresses_hold() && filter.addresses_hold());
        // equal bits are equal filters, whichever segments hold them
        let mut again = Filter::default();
        for h in [a, b, c] {
            again.set(key(h));
        }
        assert_eq!(again, filter);
        assert_ne!(again, shared);
        assert!(format!("{filter:?}").len() < 100, "Debug prints no bits");
    }
}
