//! The per-name summary: one `u32` slot per name (a host, a domain, an org member, and each
//! parent of one of them) saying which kinds of entries sit at that name and whether any
//! sit below it, so that a clean site is answered by one probe, and only names with
//! something there are looked up in the key tables.
//!
//! A slot is the name's tag (16 bits of its [`name_hash`]) above six saturating 2-bit
//! counts: host entries of the name, domain entries, url entries under it (their host
//! part), prefix entries under it, org groups holding it as a member, and everything of
//! those at names below it (`BELOW`: counted at each parent of a name, up to [`DEEP`]
//! labels); and above the counts, a 4-bit filter of the labels just below the name that
//! those names below it lie under ([`pair_bit`]), so that a walk stops at a busy site
//! when the host's own label below it is not one of them (a `cdn.` host below a site
//! whose `www.` host is banned, most often, ends at the site's slot). The filter's bits
//! are cleared with `BELOW`'s count, and only then. The name lives in summary table
//! `summary_of(name_hash)`. Names that
//! share a table and a tag share a slot, their counts added: the summary is a filter, and
//! every positive is verified against the stored values by the lookup that follows. A
//! count that reaches its maximum stays there (the true count is then unknown, so it may
//! only err on the side of a lookup).
//!
//! [`HostSummary`] walks a host's names from its site (the name of its last two labels)
//! down, and stops at the first that has nothing below it: every name that could hold an
//! entry covering the host is the host or a parent of it with at least two labels, and
//! each of those is the site or lies below it. A clean site costs one hash and one probe.
//! (An address is only itself; past [`DEEP`] labels the walk probes each name a domain
//! entry could be at, and then the host.)

use super::chunks::Chunks;
use super::chunks::Start;
use super::names::{is_ipv4, last16_dots, last_dot, tail_dots_after, Dots};
use super::SUMMARY_BITS;

/// One count of a summary slot: its shift.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    shift: u32,
}

impl Field {
    /// Whether entries of this field at a name cover the names below it too (a domain
    /// entry, an org member).
    #[inline]
    pub fn covers_below(self) -> bool {
        self.shift == DOMAIN.shift || self.shift == MEMBER.shift
    }
}

/// Host entries with this value.
pub const HOST: Field = Field { shift: 0 };
/// Domain entries with this value.
pub const DOMAIN: Field = Field { shift: 2 };
/// Url entries whose host part is this name.
pub const URL: Field = Field { shift: 4 };
/// Prefix entries whose host part is this name.
pub const PREFIX: Field = Field { shift: 6 };
/// Org groups with this name as a member domain.
pub const MEMBER: Field = Field { shift: 8 };
/// Any of the above at a name below this one (a subdomain of it).
pub const BELOW: Field = Field { shift: 10 };

const MAX: u32 = 3;
/// The six counts.
const FIELD_BITS: u32 = 12;
/// The counts and the filter of labels below: what a slot holds under its tag.
const COUNT_BITS: u32 = 16;
const COUNTS: u32 = (1 << COUNT_BITS) - 1;
/// A slot's position bits: its tag, above its counts.
pub const POSITION: u32 = !COUNTS;
/// The filter of the labels below (`child_bit`), above the counts.
const CHILDREN: u32 = COUNTS & !((1 << FIELD_BITS) - 1);

/// Every bit of the filter of labels below (what a slot that claims everything holds).
#[cfg(test)]
pub const EVERY_CHILD: u32 = CHILDREN;

/// The bit of the filter of labels below a name that `label` sets (the label just below
/// the name on the way to a name below it that holds something): its [`child_pair`],
/// mixed. Only the end of the label counts, so that a walk reads the bit from the bytes
/// just before a name's dot ([`child_bit_at`]) without finding where the label starts.
#[cfg(test)]
pub fn child_bit(label: &[u8]) -> u32 {
    pair_bit(child_pair(label))
}

/// The filter bit ([`pair_bit`]) of the label of `host` just before the name starting at
/// `at` (just past a dot, `at > 0`).
#[inline(always)]
pub fn child_bit_at(host: &[u8], at: usize) -> u32 {
    pair_bit(child_pair_at(host, at))
}

/// The end of a label as the index tells labels below a name apart: its last byte, and
/// the one before it above that (0 for each it is too short to have). The filter of labels
/// below a slot keeps two bits of it ([`pair_bit`]), the sites filter more (`filter`).
#[inline(always)]
pub fn child_pair(label: &[u8]) -> u16 {
    match label {
        [.., before, last] => pair(*last, *before),
        [last] => pair(*last, 0),
        [] => 0,
    }
}

/// A label's end as [`child_pair`] keeps it: its last byte, the one before it above that.
#[inline(always)]
fn pair(last: u8, before: u8) -> u16 {
    u16::from(last) | u16::from(before) << 8
}

/// [`child_pair`] of the label of `host` just before the name starting at `at` (just past
/// a dot, `at > 0`): read from the two bytes before that dot, a dot among them (or the
/// host's start) ending the label.
#[inline(always)]
pub fn child_pair_at(host: &[u8], at: usize) -> u16 {
    debug_assert!(at > 0 && host.get(at - 1) == Some(&b'.'));
    // the host before that dot: its last two bytes, a dot among them ending the label
    let head = host.get(..at.saturating_sub(1)).unwrap_or_default();
    let (last, before) = match head {
        [.., before, last] => (*last, *before),
        [last] => (*last, b'.'),
        [] => (b'.', b'.'),
    };
    match (last, before) {
        (b'.', _) => 0,
        (last, b'.') => pair(last, 0),
        (last, before) => pair(last, before),
    }
}

/// The filter bit of a label whose [`child_pair`] is `pair`.
#[inline(always)]
pub fn pair_bit(pair: u16) -> u32 {
    1 << (FIELD_BITS + (u32::from(pair).wrapping_mul(0x9E37_79B9) >> 30))
}

/// The place of the second highest bit set in `dots`, if two are.
#[inline(always)]
fn before_last(dots: u32) -> Option<usize> {
    if dots == 0 {
        return None;
    }
    // the highest bit cleared (one `btr`, where an xor with a shifted one took three)
    let before = dots & !(1 << (31 - dots.leading_zeros()));
    (before != 0).then(|| 31 - before.leading_zeros() as usize)
}

/// Whether a host ending in `last` may be an address: an IPv6 one ends in `]`, an IPv4 one
/// in a digit, both below `a`, and a canonical host name almost always ends in a lowercase
/// letter (or a byte of a non-ASCII one), from `a` up. One compare in a clean site's first
/// step; [`is_address`] decides for the rest.
#[inline(always)]
fn may_be_address(last: u8) -> bool {
    last < b'a'
}

/// Whether the (canonical) host is an address, which is only itself: an IPv6 one is in
/// brackets, a host name never holds one.
#[inline]
fn is_address(host: &str) -> bool {
    host.ends_with(']') || is_ipv4(host)
}

/// Names of up to this many labels carry `BELOW` (a name deeper than that is summarized
/// at its own slot and at its parents of at most `DEEP` labels; a lookup past `DEEP`
/// labels probes each name).
pub const DEEP: usize = 8;

/// The counts of one name (all zero when the name has no slot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts(u32);

impl Counts {
    /// Whether the field's count is nonzero.
    #[inline]
    pub fn has(self, field: Field) -> bool {
        (self.0 >> field.shift) & MAX != 0
    }

    /// Whether the field counts exactly one entry: then the name has at most one entry of
    /// it (names sharing a slot add their counts, so a count never falls short).
    #[inline]
    pub fn single(self, field: Field) -> bool {
        (self.0 >> field.shift) & MAX == 1
    }

    /// Url (bit 1) and prefix (bit 2) entries under the name.
    #[inline]
    pub fn under(self) -> u8 {
        u8::from(self.has(URL)) | (u8::from(self.has(PREFIX)) << 1)
    }

    /// Whether something below the name may lie under the label `bit` (`child_bit`) just
    /// below it: false says nothing does.
    #[inline]
    pub fn below_through(self, bit: u32) -> bool {
        self.0 & bit != 0
    }

    /// Whether a domain entry or an org member is at the name.
    #[inline]
    pub fn covers_below(self) -> bool {
        self.0 & ((MAX << DOMAIN.shift) | (MAX << MEMBER.shift)) != 0
    }

    fn adjust(self, field: Field, delta: i32) -> Counts {
        let v = (self.0 >> field.shift) & MAX;
        let w = match v {
            MAX => MAX,
            v if delta > 0 => v + 1,
            v => v.saturating_sub(1),
        };
        let mut counts = (self.0 & !(MAX << field.shift)) | (w << field.shift);
        if field.shift == BELOW.shift && w == 0 {
            // nothing below any more: no label below either
            counts &= !CHILDREN;
        }
        Counts(counts)
    }
}

/// Where in a name's hash its slot's position is: the 32 bits just below those that pick
/// its summary table (`summary_of`), so that the table and the top of the tag, which make
/// the name's word in the sites filter, are the hash's top bits, found in one shift
/// (`filter::key`).
const POSITION_SHIFT: u32 = 64 - SUMMARY_BITS - 32;

/// The position a name's slot is found by: its tag, in the slot's top bits (never 0: an
/// empty slot is).
#[inline]
fn pos(hash: u64) -> u32 {
    (((hash >> POSITION_SHIFT) as u32) & !COUNTS).max(1 << COUNT_BITS)
}

/// The position the slot of a name hashed `hash` is placed by (its tag, the top 16 bits).
#[cfg(test)]
pub fn want(hash: u64) -> u32 {
    pos(hash)
}

/// The position a slot was placed by.
#[inline]
pub fn slot_pos(slot: u32) -> u32 {
    slot & !COUNTS
}

/// The counts in `table` for the name hashed `hash`.
#[inline(always)]
pub fn counts(table: &Chunks, hash: u64) -> Counts {
    table
        .find(pos(hash), !COUNTS)
        .map_or(Counts(0), |slot| Counts(slot & COUNTS))
}

/// Where a name's counts are read (the index's tables by shard; one table in tests).
pub trait Source {
    /// The counts of the name hashed `hash`.
    fn counts(&self, hash: u64) -> Counts;
}

impl Source for [Chunks] {
    #[inline(always)]
    fn counts(&self, hash: u64) -> Counts {
        counts(&self[super::summary_of(hash)], hash)
    }
}

/// A name's summary lookup begun: the chunk it starts at and the position it looks for (a
/// page of lookups finds and prefetches the chunk of each URL's site first, and reads them
/// all after).
#[derive(Clone, Copy, Debug, Default)]
pub struct Probe<'a> {
    start: Start<'a>,
    want: u32,
}

impl<'a> Probe<'a> {
    /// The lookup in `table` of the name hashed `hash`.
    #[inline(always)]
    pub fn new(table: &'a Chunks, hash: u64) -> Self {
        let want = pos(hash);
        Probe {
            start: table.start(want),
            want,
        }
    }

    /// Ask the CPU to bring the chunk in.
    #[inline(always)]
    pub fn prefetch(self) {
        self.start.prefetch();
    }

    /// `counts` of the name, read from the chunk found (`table`, the one `new` was given,
    /// is walked only when a slot passed that chunk full): one test of it, most often.
    #[inline(always)]
    pub fn counts(self, table: &Chunks) -> Counts {
        self.start
            .find(table, self.want, !COUNTS)
            .map_or(Counts(0), |slot| Counts(slot & COUNTS))
    }
}

/// Prefetch the summary slot of the name hashed `hash` (see `Chunks::prefetch`).
#[inline(always)]
pub fn prefetch(table: &Chunks, hash: u64) {
    table.prefetch(pos(hash));
}

/// What a [`bump`] did to the name's slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotChange {
    /// The name had no slot and now has one.
    Added,
    /// The name's slot, this one, is gone.
    Removed(u32),
    /// The slot is still there, or still not.
    Kept,
}

/// Count one more (`delta > 0`) or one fewer entry of `field` at the name hashed `hash`;
/// `child`: for `BELOW`, the `child_bit` of the label below the name that the entry lies
/// under (a count added sets it; 0 for the other fields). Says whether the name's slot
/// came or went (the sites filter clears a word when its last slot goes).
pub fn bump(table: &mut Chunks, hash: u64, field: Field, delta: i32, child: u32) -> SlotChange {
    debug_assert!(child & !CHILDREN == 0);
    let want = pos(hash);
    let old = table.find(want, !COUNTS);
    let before = old.map_or(Counts(0), |slot| Counts(slot & COUNTS));
    let mut after = before.adjust(field, delta);
    if delta > 0 && field.shift == BELOW.shift {
        after.0 |= child;
    }
    match old {
        None if after.0 != 0 => {
            table.insert(want, want | after.0, slot_pos);
            SlotChange::Added
        }
        Some(old) if after.0 == 0 => {
            table.remove(want, old);
            SlotChange::Removed(old)
        }
        Some(old) if after != before => {
            table.replace(want, old, want | after.0);
            SlotChange::Kept
        }
        _ => SlotChange::Kept,
    }
}

/// The hash a name is summarized under: the key tables' own (`hash_str`), so that a name
/// found in the summary is looked up in its key table without hashing it again.
#[inline(always)]
pub fn name_hash(name: &str) -> u64 {
    super::hash_str(name)
}

/// `name_hash` of a name's bytes (a page of lookups slices a host's site at a dot, a char
/// boundary, and so needs no check that it is one).
#[inline(always)]
pub fn name_hash_bytes(name: &[u8]) -> u64 {
    super::hash::hash(name)
}

/// The parents of `name` that count it in `BELOW`: those of 2 to [`DEEP`] labels, as the
/// byte offsets they start at (a dot-separated name; the bare last label is no parent).
pub fn parents(name: &str) -> impl Iterator<Item = usize> + '_ {
    Dots::of(name).skip(1).take(DEEP - 1).map(|dot| dot + 1)
}

/// `parents`, each with the `child_pair` of the label of `name` just below it.
pub fn parents_and_children(name: &str) -> impl Iterator<Item = (usize, u16)> + '_ {
    parents(name).map(move |at| {
        let bytes = &name.as_bytes()[..at - 1];
        let label = bytes
            .iter()
            .rposition(|&b| b == b'.')
            .map_or(0, |dot| dot + 1);
        (at, child_pair(&bytes[label..]))
    })
}

/// A name a domain entry or an org member covering a host may be at.
#[derive(Clone, Copy, Debug, Default)]
pub struct Candidate {
    /// Where the name starts in the host.
    pub start: u32,
    /// Its counts (some domain entry or member).
    pub counts: Counts,
    /// Its [`name_hash`], the key tables' hash of it: its domain entries are found by it.
    pub hash: u64,
}

const FLAGGED: usize = 3;

/// What the summary says of a host: its own counts, and the names a domain entry or an org
/// member covering it could be at whose summary holds one.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostSummary {
    /// The host's own counts (zero when the walk stopped above it: nothing is there).
    pub own: Counts,
    /// The host's [`name_hash`] when the walk reached it (`own` was read), else 0: its host
    /// entries are found by it.
    pub own_hash: u64,
    flagged: [Candidate; FLAGGED],
    len: usize,
}

impl HostSummary {
    /// Summarize `host`: its site, then each name below it down to the host, stopping at
    /// the first with nothing below it. `limit` is the most labels a domain entry or member
    /// has (past [`DEEP`] labels only names within it are probed); `source` gives a name's
    /// counts by its hash.
    #[inline(always)]
    pub fn of(host: &str, limit: usize, source: &(impl Source + ?Sized)) -> Self {
        let (at, hash) = Self::site(host);
        Self::from(host, limit, source, at, hash)
    }

    /// Where the walk of `host` starts, and that name's [`name_hash`]: at its site (the name
    /// of its last two labels), or at the host itself (0) when it is the site, has one
    /// label, or is an address.
    #[inline(always)]
    pub fn site(host: &str) -> (usize, u64) {
        let at = Self::site_start(host);
        let bytes = host.as_bytes();
        debug_assert!(at <= bytes.len());
        // SAFETY: `site_start` is at most the host's length: the place just past a dot of
        // it, or 0.
        let site = unsafe { bytes.get_unchecked(at..) };
        (at, name_hash_bytes(site))
    }

    /// `site`'s start: the site's two dots are almost always among the host's last 16
    /// bytes, else among its last 32, found there in one compare or two (a `Dots` iterator
    /// costs more than the rest of a clean lookup's first step); a host of fewer than 8
    /// bytes by `start`. Every place it gives is at most the host's length.
    #[inline(always)]
    fn site_start(host: &str) -> usize {
        let bytes = host.as_bytes();
        let len = bytes.len();
        if len < 8 {
            return Self::start(host);
        }
        // (the last byte is tested before the dots' compare, read where it lies: tested
        // after it, it was taken from the compare's vector through the stack)
        if may_be_address(bytes[len - 1]) && is_address(host) {
            return 0;
        }
        // bit t: byte len - 16 + t is a dot (len - 32 + t, of `tail_dots`)
        let dots = last16_dots(bytes);
        if let Some(t) = before_last(dots) {
            // just past the dot before the last one
            return len + t - 15;
        }
        if len <= 16 {
            // the mask held the whole host: fewer than two dots
            return 0;
        }
        if let Some(t) = before_last(tail_dots_after(bytes, dots)) {
            return len + t - 31;
        }
        if len <= 32 {
            return 0;
        }
        Dots::of(host).nth(1).map_or(0, |dot| dot + 1)
    }

    /// Where the walk of `host` starts, as `site` finds it: just past its dot before the
    /// last one, or 0 (an address, or fewer than two dots). `site` finds it so in a host
    /// of fewer than 8 bytes, and its tests hold it to this.
    pub fn start(host: &str) -> usize {
        if is_address(host) {
            return 0;
        }
        Dots::of(host).nth(1).map_or(0, |dot| dot + 1)
    }

    /// `of`, given where the walk starts and that name's hash.
    #[inline(always)]
    pub fn from(
        host: &str,
        limit: usize,
        source: &(impl Source + ?Sized),
        start: usize,
        hash: u64,
    ) -> Self {
        let mut out = HostSummary::default();
        let mut walk = Walk::new(start, hash);
        while walk.step(host, limit, source, &mut out) {}
        out
    }

    #[inline(always)]
    fn note(&mut self, start: u32, counts: Counts, hash: u64) {
        if counts.covers_below() {
            if let Some(slot) = self.flagged.get_mut(self.len) {
                *slot = Candidate {
                    start,
                    counts,
                    hash,
                };
            }
            self.len += 1;
        }
    }

    /// The candidates whose summary holds a domain entry or a member, most specific first;
    /// None when there are more than are kept (the caller then walks every candidate).
    #[inline]
    pub fn flagged(&self) -> Option<impl Iterator<Item = Candidate> + '_> {
        self.flagged
            .get(..self.len)
            .map(|list| list.iter().rev().copied())
    }

    /// Whether nothing may cover the host: no candidate, nothing at the host itself.
    #[inline]
    pub fn is_clean(&self) -> bool {
        self.len == 0 && self.own == Counts(0)
    }

    /// Whether no candidate name may hold a domain entry or a member.
    #[inline]
    pub fn no_parents(&self) -> bool {
        self.len == 0
    }
}

/// A walk down a host's names, one probe a step (a page of lookups steps every walk in
/// turn, prefetching each one's next slot).
#[derive(Clone, Copy, Debug, Default)]
pub struct Walk {
    /// Where the name probed next starts in the host (0: the host itself).
    pub at: usize,
    /// That name's hash.
    pub hash: u64,
    found: usize,
}

impl Walk {
    /// A walk starting at `at` (`HostSummary::site`), that name hashed `hash`.
    #[inline(always)]
    pub fn new(at: usize, hash: u64) -> Self {
        // the name after the k-th dot from the end has k labels; the walk starts at 2
        Walk { at, hash, found: 2 }
    }

    /// Whether a step that reads nothing at its name ends the walk (noting nothing): true
    /// but past where `BELOW` is kept, where every name down to the host is probed.
    #[inline(always)]
    pub fn ends_at_nothing(&self) -> bool {
        self.at == 0 || self.found <= DEEP
    }

    /// Whether a step that reads `c` notes something (`take` would leave a clean
    /// `HostSummary` no longer clean).
    #[inline(always)]
    pub fn notes(&self, c: Counts) -> bool {
        c.covers_below() || (self.at == 0 && c != Counts(0))
    }

    /// What the step at the site (`at`, where the walk starts) that reads `c` does, as
    /// `notes` and then `take` would find, without a walk: a page of lookups sets the walks
    /// that end there aside as it reads the sites' slots (a `cdn.` host below a site whose
    /// `www.` host is banned, most often), and goes down with the others at once.
    #[inline(always)]
    pub fn at_site(host: &str, at: usize, c: Counts) -> SiteStep {
        if at == 0 {
            // the host itself: anything there is noted
            return if c == Counts(0) {
                SiteStep::Ends
            } else {
                SiteStep::Notes
            };
        }
        if c.covers_below() {
            return SiteStep::Notes;
        }
        // a site has two labels, so `BELOW` and the filter of labels below are kept at it
        if !c.has(BELOW) {
            return SiteStep::Ends;
        }
        let bytes = host.as_bytes();
        if c.below_through(child_bit_at(bytes, at)) {
            SiteStep::Below(last_dot(bytes, at - 1))
        } else {
            SiteStep::Ends
        }
    }

    /// Probe the next name into `out`; whether there is one more to probe (`at`, `hash`).
    #[inline(always)]
    pub fn step(
        &mut self,
        host: &str,
        limit: usize,
        source: &(impl Source + ?Sized),
        out: &mut HostSummary,
    ) -> bool {
        let c = source.counts(self.hash);
        self.take(host, limit, c, out)
    }

    /// `step`, given the counts of the name probed (a page of lookups has read its site's
    /// counts already).
    #[inline(always)]
    pub fn take(&mut self, host: &str, limit: usize, c: Counts, out: &mut HostSummary) -> bool {
        out.note(self.at as u32, c, self.hash);
        if self.at == 0 {
            // the host itself: the site, the last name below it, or an address
            out.own = c;
            out.own_hash = self.hash;
            return false;
        }
        // `BELOW` and the filter of labels below are kept at this name
        let kept = self.found <= DEEP;
        if kept && !c.has(BELOW) {
            return false;
        }
        // the host's label just below this name: when nothing below lies under it, nothing
        // below covers the host
        let bytes = host.as_bytes();
        if kept && !c.below_through(child_bit_at(bytes, self.at)) {
            return false;
        }
        self.descend(host, limit, last_dot(bytes, self.at - 1));
        true
    }

    /// Go down to the next name past the label below this one, `dot` the dot before that
    /// label (None: it starts the host): what `take` does once it found the walk goes on.
    #[inline(always)]
    pub fn descend(&mut self, host: &str, limit: usize, dot: Option<usize>) {
        self.found += 1;
        let found = self.found;
        // the dot before this name starts the next one down; past where `BELOW` is kept
        // and where a domain entry could be, the host is next
        self.at = (dot)
            .filter(|_| found <= DEEP || found <= limit)
            .map_or(0, |dot| dot + 1);
        self.hash = name_hash(&host[self.at..]);
    }
}

/// What a walk's step at its site does (`Walk::at_site`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SiteStep {
    /// It notes nothing, and the walk ends.
    Ends,
    /// It notes something: the walk goes on as a whole lookup's.
    Notes,
    /// It notes nothing and goes down past the label below the site, whose dot before it
    /// is this (`Walk::descend`).
    Below(Option<usize>),
}

#[cfg(test)]
mod tests {
    use super::super::names::{labels, suffixes};
    use super::*;

    impl Source for Chunks {
        fn counts(&self, hash: u64) -> Counts {
            counts(self, hash)
        }
    }

    struct Counting<'a>(&'a Chunks, std::cell::RefCell<Vec<u64>>);

    impl Source for Counting<'_> {
        fn counts(&self, hash: u64) -> Counts {
            self.1.borrow_mut().push(hash);
            counts(self.0, hash)
        }
    }

    /// A summary table as the writer keeps it: each name at its slot, `BELOW` at its
    /// parents.
    fn table(names: &[(&str, Field)]) -> Chunks {
        let mut t = Chunks::default();
        for &(name, field) in names {
            bump(&mut t, name_hash(name), field, 1, 0);
            for (at, child) in parents_and_children(name) {
                bump(&mut t, name_hash(&name[at..]), BELOW, 1, pair_bit(child));
            }
        }
        t
    }

    const HOSTS: [&str; 13] = [
        "a.b.c.d",
        "shop12345.example.com",
        "x",
        "c.d",
        "1.2.3.4",
        "9.1.2.3.4",
        "[::1]",
        "very-long-label-of-a-host.sub.domain.example.co.uk",
        "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u",
        "",
        ".",
        "a..b",
        "example.com.",
    ];

    #[test]
    fn the_walk_flags_exactly_the_candidates_holding_something() {
        for host in HOSTS {
            let limit = labels(host).max(1);
            let candidates = suffixes(host, limit);
            for (i, pick) in candidates.iter().enumerate() {
                // a domain entry at one candidate, a member at the next, the host banned
                let member = candidates.get(i + 1);
                let mut names = vec![(*pick, DOMAIN), (host, HOST)];
                names.extend(member.map(|m| (*m, MEMBER)));
                let t = table(&names);
                let summary = HostSummary::of(host, limit, &t);
                assert!(summary.own.has(HOST), "{host}");
                // the hashes the walk keeps are those the key tables find the names by
                assert_eq!(summary.own_hash, name_hash(host), "{host}");
                let flagged: Vec<(&str, bool, bool)> = summary
                    .flagged()
                    .map(|list| {
                        list.map(|c| {
                            let name = &host[c.start as usize..];
                            assert_eq!(c.hash, name_hash(name), "{host}: {name}");
                            (name, c.counts.has(DOMAIN), c.counts.has(MEMBER))
                        })
                        .collect()
                    })
                    .unwrap_or_default();
                let want: Vec<(&str, bool, bool)> = candidates
                    .iter()
                    .filter(|c| *c == pick || Some(*c) == member)
                    .map(|c| (*c, c == pick, Some(c) == member))
                    .collect();
                assert_eq!(flagged, want, "{host}");
            }
            let t = Chunks::default();
            let clean = HostSummary::of(host, limit, &t);
            assert!(clean.no_parents() && clean.own == Counts::default());
        }
        // more flagged candidates than are kept: the caller walks them all
        let host = "a.b.c.d.e.f.g";
        let names: Vec<(&str, Field)> = suffixes(host, 9).iter().map(|n| (*n, DOMAIN)).collect();
        let t = table(&names);
        assert!(HostSummary::of(host, 9, &t).flagged().is_none());
    }

    #[test]
    fn a_clean_site_is_one_probe_and_the_walk_stops_where_nothing_is_below() {
        let t = table(&[("www.banned.com", HOST), ("x.y.z.other.com", DOMAIN)]);
        let probes = |host: &str| {
            let seen = Counting(&t, std::cell::RefCell::new(Vec::new()));
            HostSummary::of(host, 5, &seen);
            let seen = seen.1;
            let names: Vec<&str> = suffixes(host, 99).into_iter().rev().collect();
            let seen = seen.into_inner();
            names[..seen.len()]
                .iter()
                .zip(&seen)
                .for_each(|(n, h)| assert_eq!(name_hash(n), *h));
            seen.len()
        };
        assert_eq!(probes("a.b.clean.com"), 1);
        // below a busy site, a host whose label is not in the site's filter of labels
        // below ends at the site; one whose label shares www's bit goes on to its own slot
        let www = child_bit(b"www");
        let labels = ["cdn", "m", "img", "static", "news", "api", "mail", "shop"];
        let (other, same): (Vec<&str>, Vec<&str>) =
            labels.iter().partition(|l| child_bit(l.as_bytes()) != www);
        assert!(!other.is_empty() && !same.is_empty());
        for label in other {
            assert_eq!(probes(&format!("{label}.banned.com")), 1, "{label}");
            assert_eq!(probes(&format!("a.{label}.banned.com")), 1, "{label}");
        }
        for label in same {
            assert_eq!(probes(&format!("{label}.banned.com")), 2, "{label}");
        }
        assert_eq!(probes("www.banned.com"), 2);
        // below y.z.other.com only x. holds something: a. stops there unless it shares x's bit
        let a_apart = child_bit(b"a") != child_bit(b"x");
        assert_eq!(probes("a.y.z.other.com"), if a_apart { 3 } else { 4 });
        assert_eq!(probes("a.x.y.z.other.com"), 4);
        // deeper than DEEP labels and than any domain entry: the host's own slot next
        let deep = "a.b.c.d.e.f.g.h.i.j.k.z.other.com";
        let t = table(&[(deep, HOST)]);
        let s = HostSummary::of(deep, 5, &t);
        assert!(s.own.has(HOST));
    }

    #[test]
    fn a_step_that_reads_nothing_ends_the_walk_where_ends_at_nothing_says() {
        for host in HOSTS {
            // every name below the site holds something: the walk goes down to the host
            let names: Vec<(&str, Field)> = suffixes(host, 99).iter().map(|n| (*n, HOST)).collect();
            let t = table(&names);
            let at = HostSummary::start(host);
            let mut walk = Walk::new(at, name_hash(&host[at..]));
            let mut out = HostSummary::default();
            loop {
                let mut nothing = walk;
                let mut seen = HostSummary::default();
                let more = nothing.take(host, 99, Counts::default(), &mut seen);
                assert!(seen.is_clean(), "{host}");
                assert_eq!(more, !walk.ends_at_nothing(), "{host} at {}", walk.at);
                if !walk.step(host, 99, &t, &mut out) {
                    break;
                }
            }
        }
    }

    #[test]
    fn the_site_and_its_hash_are_where_start_finds_them() {
        let mut hosts: Vec<String> = HOSTS.iter().map(|h| h.to_string()).collect();
        hosts.extend(
            [
                "1.2.3.4.5",
                "1.2.3.a",
                "12.34.56.78",
                "[::ffff:1.2.3.4]",
                "[2001:db8::1]",
                // addresses and names of 16 bytes and more, ending in what an address may
                "[2001:db8:85a3::8a2e:370:7334]",
                "255.255.255.255",
                "www.shop123.com9",
                "cdn.s1234567-3fffffff.exampl_",
                "localhost",
                "www.shop123.com",
                "shop123.org",
                "m.shop123.example",
                "cdn.s1234567-3fffffff.example",
                "a.b",
                "ab.c",
                "a.bcdefghijklmnop",
                "abcdefghijklmno.p",
                "é.ü.x",
                "..",
                "a.",
                ".a",
            ]
            .map(String::from),
        );
        // a dot at every place of names of every length to past two windows, and two dots
        for len in 0..40 {
            for dot in 0..len {
                for gap in [1, 2, 7, 15, 16, 17] {
                    let mut name = "a".repeat(len);
                    name.replace_range(dot..=dot, ".");
                    if dot + gap < len {
                        name.replace_range(dot + gap..=dot + gap, ".");
                    }
                    hosts.push(name.clone());
                    hosts.push(format!("x.{name}"));
                }
            }
        }
        for host in &hosts {
            let at = HostSummary::start(host);
            let want = (at, name_hash(&host[at..]));
            assert_eq!(HostSummary::site(host), want, "{host:?}");
        }
    }

    #[test]
    fn a_site_step_ends_where_notes_and_take_say() {
        // counts of every field alone and with `BELOW`, each label's bit in the filter or not
        let www = child_bit(b"www");
        let mut all = vec![Counts(0)];
        for field in [HOST, DOMAIN, URL, PREFIX, MEMBER, BELOW] {
            for other in [0, 1 << BELOW.shift | www, 1 << BELOW.shift | EVERY_CHILD] {
                all.push(Counts(1 << field.shift | other));
            }
        }
        let mut hosts: Vec<String> = HOSTS.iter().map(|h| h.to_string()).collect();
        hosts.extend(
            [
                "www.shop1.com",
                "cdn.s12345-3fffffff.example",
                "a.cdn.s12345-3fffffff.example",
                "a-label-longer-than-sixteen.cdn.b.c",
                "a.b.a-label-longer-than-sixteen.cdn.b.c",
                "www.banned.com",
            ]
            .map(String::from),
        );
        for host in &hosts {
            let at = HostSummary::start(host);
            let walk = Walk::new(at, name_hash(&host[at..]));
            for &c in &all {
                let mut out = HostSummary::default();
                let mut taken = walk;
                let more = taken.take(host, 99, c, &mut out);
                let step = Walk::at_site(host, at, c);
                assert_eq!(step == SiteStep::Notes, walk.notes(c), "{host} {c:?}");
                if let SiteStep::Below(dot) = step {
                    let mut down = walk;
                    down.descend(host, 99, dot);
                    assert!(more && (down.at, down.hash) == (taken.at, taken.hash));
                } else {
                    assert!(!more || walk.notes(c), "{host} {c:?}");
                    assert_eq!(step == SiteStep::Ends, !walk.notes(c), "{host} {c:?}");
                }
            }
        }
    }

    #[test]
    fn parents_from_two_labels_to_deep() {
        let of =
            |name: &'static str| -> Vec<&str> { parents(name).map(|at| &name[at..]).collect() };
        assert_eq!(of("a.b.c.d.e.f.g.h.i.j")[DEEP - 2], "c.d.e.f.g.h.i.j");
        assert_eq!(of("a.b.c.d"), ["c.d", "b.c.d"]);
        assert_eq!(of("c.d"), Vec::<&str>::new());
        assert_eq!(of("d"), Vec::<&str>::new());
        assert_eq!(of("a.b.c.d.e.f.g.h.i.j").len(), DEEP - 1);
    }

    #[test]
    fn the_filter_of_labels_below_goes_with_the_count_below() {
        let mut t = Chunks::default();
        let h = name_hash("example.com");
        let (www, cdn) = (child_bit(b"www"), child_bit(b"x-cdn"));
        bump(&mut t, h, HOST, 1, 0);
        bump(&mut t, h, BELOW, 1, www);
        bump(&mut t, h, BELOW, 1, cdn);
        let c = counts(&t, h);
        assert!(c.below_through(www) && c.below_through(cdn));
        assert_eq!(c.0 & CHILDREN, www | cdn);
        // one of two entries below gone: the bits stay (which one went is not known)
        bump(&mut t, h, BELOW, -1, 0);
        assert!(counts(&t, h).below_through(www) && counts(&t, h).below_through(cdn));
        // none below: no label below either, the host entry still there
        bump(&mut t, h, BELOW, -1, 0);
        let c = counts(&t, h);
        assert!(c.has(HOST) && !c.has(BELOW) && c.0 & CHILDREN == 0);
        bump(&mut t, h, HOST, -1, 0);
        assert_eq!(t.len(), 0);
        // every label gives one of the filter's bits
        for label in [
            "",
            "a",
            "www",
            "cdn",
            "xn--i-7iq",
            "a-very-long-label-of-sixty-chars",
        ] {
            let bit = child_bit(label.as_bytes());
            assert!(bit.is_power_of_two() && bit & CHILDREN == bit, "{label}");
        }
    }

    #[test]
    fn a_walk_reads_the_filter_bit_the_index_set_for_each_label() {
        // what the walk reads before a name's dot (`child_bit_at`) is what a write set for
        // the label there (`parents_and_children`, from the label itself): one-byte,
        // empty and long labels, at the host's start and deep in it
        let names = [
            "www.example.com",
            "m.example.com",
            "a.b.c.d.e.f.g.h.i.j.example.com",
            "xn--i-7iq.ws.example",
            "ab.cd.example",
            "a..example",
            ".x.example",
            "x.y..example",
            "a-very-long-label-of-sixty-chars.example.org",
        ];
        for name in names {
            for (at, child) in parents_and_children(name) {
                assert_eq!(child_pair_at(name.as_bytes(), at), child, "{name} at {at}");
                assert_eq!(child_bit_at(name.as_bytes(), at), pair_bit(child));
            }
        }
        // the label's end decides: the same last two bytes, the same bit
        assert_eq!(child_bit(b"www"), child_bit(b"ww"));
        assert_eq!(child_bit(b"www"), child_bit(b"aww"));
        assert_ne!(child_bit(b"www"), child_bit(b"cdn"));
    }

    #[test]
    fn counts_saturate_and_slots_go_when_empty() {
        let mut t = Chunks::default();
        let h = name_hash("example.com");
        bump(&mut t, h, URL, 1, 0);
        bump(&mut t, h, HOST, 1, 0);
        assert_eq!(counts(&t, h).under(), 1);
        assert!(counts(&t, h).has(HOST) && !counts(&t, h).has(DOMAIN));
        bump(&mut t, h, URL, -1, 0);
        bump(&mut t, h, HOST, -1, 0);
        assert_eq!(t.len(), 0);
        for _ in 0..2 {
            bump(&mut t, h, PREFIX, 1, 0);
        }
        for _ in 0..2 {
            bump(&mut t, h, PREFIX, -1, 0);
        }
        assert_eq!(t.len(), 0);
        for _ in 0..3 {
            bump(&mut t, h, PREFIX, 1, 0);
        }
        for _ in 0..5 {
            bump(&mut t, h, PREFIX, -1, 0);
        }
        // at its maximum the count is unknown: it stays
        assert_eq!(counts(&t, h).under(), 2);
        assert_eq!(counts(&t, name_hash("example.org")), Counts::default());
    }
}
