//! A page of lookups at once: what the banlist rule asks of the index for one request.
//!
//! One URL's lookup is a chain of dependent reads (its site's summary slot, perhaps the
//! slot of a name below it, then a key slot, a row, a value), and on a large index each
//! read is a cache miss. A page takes each step for all its URLs in turn, prefetching
//! every URL's next read before taking the step that needs it, so the misses of the page
//! overlap instead of following one another; each URL's answer is `lookup`'s.
//!
//! Most of a page is clean: a clean site ends at its bits in the sites filter (`filter`:
//! one word of a flat array, where a summary probe reads its table's header and a chunk),
//! with no more state than its hash; the filter's words are prefetched for the whole page
//! first, then tested. A host below a site whose bits are all set (a clean one's when
//! other names set all three, about once in twenty-three at 10 M entries) goes on only if
//! the word holds the bits of a domain entry or member at the site, or of something below
//! it under the host's own label (`filter::step_held`: a `cdn.` host below a site whose
//! `www.` host is banned ends there). A site that may hold a domain entry or member, or
//! is the host, has its summary chunk prefetched and read; one that holds none goes
//! straight below it. The other walks down the URLs' names run in one small loop while
//! the names they read hold nothing but `BELOW` (a clean host below a busy site ends at
//! the filter's bits of the name below it, or after one probe more).
//! Only a URL whose walk finds something goes on, with the larger state of a whole lookup
//! (the first key, and `HostSummary` for a walk that goes on past what it found), in a
//! group of up to [`GROUP`] such URLs. The first key
//! a group prefetches is handed to the lookup with its hash and whether any key slot
//! holds its tag ([`First`]), so it is neither hashed again nor probed when it has no row.
//! When that key's first row is the key's and active, it is the answer (the lookup reads
//! that key first and stops at what it finds there), read once; otherwise the whole
//! lookup runs. A prefix key under a host with at most one prefix entry is tried shortest
//! first (its path's first segment: banned prefixes are short and URLs deep), else
//! longest first, so the most specific of several wins (`names::prefix_order`).

use std::mem::MaybeUninit;

use super::data::{First, Hit, IndexData};
use super::filter;
use super::names::{first_short_prefix, last_dot, prefix_order, url_key, url_path, UrlPath};
use super::shard::Shard;
use super::summary::{self, Counts, HostSummary, Probe, SiteStep, Walk, DOMAIN, HOST, PREFIX, URL};
use super::{hash_str, shard_of, summary_of, tag_of, Scope};

/// URLs whose reads are in flight together (a bit each in a `u64`).
const BLOCK: usize = 64;
/// URLs whose walk found something, looked up further together (their state is larger).
const GROUP: usize = 8;
/// The room a page with hits reserves first: 1 KiB, an allocator's small size.
const HITS: usize = 16;

/// A walk past its site's step: the item, the walk, the counts its last step read, and the
/// lookup of its next slot.
#[derive(Clone, Copy)]
struct Live<'a> {
    item: u8,
    walk: Walk,
    counts: Counts,
    probe: Probe<'a>,
}

impl Live<'_> {
    /// The walk's step that found something, taken: the walk past it and whether it goes
    /// on, what it found of the host's names noted in `names` (the names before it held
    /// nothing the summary notes, so the summary is not clean).
    #[inline(always)]
    fn found_step(&self, host: &str, labels: usize, names: &mut HostSummary) -> (Walk, bool) {
        let mut walk = self.walk;
        let goes_on = walk.take(host, labels, self.counts, names);
        (walk, goes_on)
    }
}

/// Up to `N` values on the stack, pushed in turn and then read as a slice: a block's (or a
/// group's) state per URL without first filling `N` places with defaults.
struct Bounded<T, const N: usize> {
    items: [MaybeUninit<T>; N],
    len: usize,
}

/// A block's state per URL.
type Stack<T> = Bounded<T, BLOCK>;
/// A group's state per URL.
type Group<T> = Bounded<T, GROUP>;

impl<T: Copy, const N: usize> Bounded<T, N> {
    #[inline(always)]
    fn new() -> Self {
        Bounded {
            items: [const { MaybeUninit::uninit() }; N],
            len: 0,
        }
    }

    /// Hold `f` of each of `items` (at most `N` of them), in place of what it held: a
    /// stack is filled where it lies, not built and moved (it is `N` places large).
    #[inline(always)]
    fn fill<U>(&mut self, items: &[U], mut f: impl FnMut(&U) -> T) {
        let items = &items[..items.len().min(N)];
        let mut slot = self.items.as_mut_ptr();
        for item in items {
            // SAFETY: `items` holds at most `N` items, so `slot` is one of the `N` places of
            // `self.items` (it moves on once per item).
            unsafe {
                (*slot).write(f(item));
                slot = slot.add(1);
            }
        }
        self.len = items.len();
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }

    /// Push `item`; panics past `N` (a block has at most that many URLs).
    #[inline(always)]
    fn push(&mut self, item: T) {
        self.items[self.len].write(item);
        self.len += 1;
    }

    /// The values pushed, in order.
    #[inline(always)]
    fn as_mut(&mut self) -> &mut [T] {
        // SAFETY: the first `len` items were each written: `fill` writes the first `len`
        // it sets, `push` the one at `len` before it grows it, and nothing else sets `len`;
        // `MaybeUninit<T>` has `T`'s layout, so they are `len` initialized `T`s.
        unsafe { std::slice::from_raw_parts_mut(self.items.as_mut_ptr().cast::<T>(), self.len) }
    }
}

impl IndexData {
    /// [`IndexData::lookup`] of each item of a page: `url` gives an item's canonical URL
    /// and host. Only the hits are given, each with its item's place in `items`, in item
    /// order; an item not among them is clean (most of a page, which then allocates
    /// nothing and fills no place for it).
    pub fn lookup_page<'a, T>(
        &'a self,
        items: &[T],
        url: impl Fn(&T) -> (&str, &str),
        region: Option<&str>,
        now: f64,
    ) -> Vec<(usize, Hit<'a>)> {
        let mut out = Vec::new();
        for (n, block) in items.chunks(BLOCK).enumerate() {
            self.lookup_block(block, n * BLOCK, &url, region, now, &mut out);
        }
        out
    }

    /// `lookup_page` of up to `BLOCK` items, on the stack. Every URL's site is hashed and
    /// its bits in the sites filter read: a clean site with one of them clear (most of a
    /// page) ends there, and so does a host below its site when the word holds neither a
    /// domain entry or member at the site nor something below it under the host's label.
    /// The others' summary chunks are prefetched, then each read: a site with no slot ends
    /// there too, and the rest take the site's step of their walk down their names as it
    /// is read (`Walk::at_site`); a site the filter says holds no domain entry or member is
    /// not read, its step going below it. Those that go on step while the names they
    /// read hold nothing but `BELOW`; a URL whose walk finds something goes on in
    /// `lookup_group`, a `GROUP` at a time. The block's first item is item `base` of the
    /// page; the hits are pushed to `out`.
    #[inline(always)]
    fn lookup_block<'a, T>(
        &'a self,
        block: &[T],
        base: usize,
        url: &impl Fn(&T) -> (&str, &str),
        region: Option<&str>,
        now: f64,
        out: &mut Vec<(usize, Hit<'a>)>,
    ) {
        let tables = &*self.summary;
        let host = |i: usize| url(&block[i]).1;
        // each item's site (its hash, where it starts) and its word of the filter, prefetched
        // now and tested in the next pass
        let mut hashed = Stack::<(u64, usize, &u64)>::new();
        self.hash_sites(block, url, &mut hashed);
        // bit i: item i's site's bits in the filter are set (its site may have a summary slot)
        // (from the last item down, each shifting in its bit: no shift by a variable)
        let mut held: u64 = 0;
        for &(hash, _, word) in hashed.as_mut().iter().rev() {
            held = held << 1 | u64::from(filter::holds_in(*word, filter::key(hash)));
        }
        // the sites the filter holds, with their items, in item order, and their summary
        // lookups, prefetched: below its site, a host's walk goes on only where a domain
        // entry or member may be at the site or something below it under the host's label
        // (a `cdn.` host below a site whose `www.` host is banned, most often, ends here),
        // and a site that no domain entry or member may be at is not probed (its step can
        // only go below it: None)
        let mut probes = Stack::<(u8, Option<Probe>)>::new();
        while held != 0 {
            let i = held.trailing_zeros() as usize;
            held &= held - 1;
            let (hash, at, word) = hashed.as_mut()[i];
            let probe = if at == 0 || filter::covers_held(*word, hash) {
                let probe = Probe::new(&tables[summary_of(hash)], hash);
                probe.prefetch();
                Some(probe)
            } else if filter::child_held(*word, hash, host(i).as_bytes(), at) {
                None
            } else {
                continue;
            };
            probes.push((i as u8, probe));
        }
        // what each of those sites' slots holds and what the site's step does: the walks
        // that found something there or go on below it, in item order, each with the lookup
        // of the slot it reads next (the site's own, for a walk that found something there);
        // bit k of `found`: walk k found something at its `counts` (`walk` is the walk before
        // that step), of `walking`: walk k has a name left to probe
        let mut walks = Stack::<Live>::new();
        let (mut found, mut walking): (u64, u64) = (0, 0);
        for &(i, site_probe) in probes.as_mut().iter() {
            let item = usize::from(i);
            let (hash, at, _) = hashed.as_mut()[item];
            // the slot is read from the chunk found and prefetched for it (a site with no
            // slot reads no counts, and its step ends there); a site not probed goes below
            let (c, step) = match site_probe {
                Some(probe) => {
                    let c = probe.counts(&tables[summary_of(hash)]);
                    (c, Walk::at_site(host(item), at, c))
                }
                None => {
                    let dot = last_dot(host(item).as_bytes(), at - 1);
                    (Counts::default(), SiteStep::Below(dot))
                }
            };
            let mut walk = Walk::new(at, hash);
            let bit = 1 << walks.len();
            let probe = match step {
                SiteStep::Ends => continue,
                SiteStep::Below(dot) => {
                    walk.descend(host(item), self.labels, dot);
                    // a step at a name the filter does not hold would read nothing it acts
                    // on and end the walk (`filter::step_held`)
                    if walk.ends_at_nothing()
                        && !self
                            .filter
                            .holds_step(walk.hash, host(item).as_bytes(), walk.at)
                    {
                        continue;
                    }
                    walking |= bit;
                    let probe = Probe::new(&tables[summary_of(walk.hash)], walk.hash);
                    probe.prefetch();
                    probe
                }
                SiteStep::Notes => {
                    found |= bit;
                    site_probe.unwrap_or_default()
                }
            };
            walks.push(Live {
                item: i,
                walk,
                counts: c,
                probe,
            });
        }
        // what a step that notes nothing writes (the walk has found nothing so far)
        let mut scratch = HostSummary::default();
        let live = walks.as_mut();
        while walking != 0 {
            let mut left = walking;
            while left != 0 {
                let k = left.trailing_zeros() as usize;
                left &= left - 1;
                let Live {
                    item, walk, probe, ..
                } = &mut live[k];
                // the slot is read from the chunk found and prefetched for it
                let c = probe.counts(&tables[summary_of(walk.hash)]);
                if c == Counts::default() && walk.ends_at_nothing() {
                    // the walk ends clean (`take` would note nothing and stop)
                    walking &= !(1 << k);
                    continue;
                }
                if walk.notes(c) {
                    found |= 1 << k;
                    live[k].counts = c;
                    walking &= !(1 << k);
                } else if walk.take(host(*item as usize), self.labels, c, &mut scratch) {
                    *probe = Probe::new(&tables[summary_of(walk.hash)], walk.hash);
                    probe.prefetch();
                } else {
                    walking &= !(1 << k);
                }
            }
        }
        if found != 0 {
            // room for a hit of each walk that found something: at least `HITS` the first
            // time, which most pages' hits fit in, so that a page with hits allocates once,
            // small (a clean page allocates nothing)
            let want = found.count_ones() as usize;
            if out.capacity() == 0 {
                // allocated as it is made: `reserve` would go through the vector's growth
                *out = Vec::with_capacity(want.max(HITS));
            } else {
                out.reserve(want);
            }
        }
        let first = out.len();
        while found != 0 {
            // up to `GROUP` of them: the lowest bits of `found`
            let mut rest = found;
            for _ in 0..GROUP {
                rest &= rest.wrapping_sub(1);
            }
            let group = (&*live, found & !rest);
            self.lookup_group(block, url, group, region, now, out);
            found = rest;
        }
        for (i, _) in &mut out[first..] {
            *i += base;
        }
    }

    /// The first pass of `lookup_block`: each item's site, hashed, and its word of the
    /// sites filter, prefetched, held in `hashed`. Out of line, so that its loop (a page's
    /// most run code) has the registers to itself: inside `lookup_block` its constants and
    /// bounds were reloaded from the stack for every item.
    #[inline(never)]
    fn hash_sites<'a, T>(
        &'a self,
        block: &[T],
        url: &impl Fn(&T) -> (&str, &str),
        hashed: &mut Stack<(u64, usize, &'a u64)>,
    ) {
        hashed.fill(block, |item| {
            let (at, hash) = HostSummary::site(url(item).1);
            let word = self.filter.word_ref(filter::key(hash));
            super::prefetch(word);
            (hash, at, word)
        });
    }

    /// The rest of the lookup of the walks of `live` whose bit is set in `group` (at most
    /// `GROUP`; each walk is the walk before the step that found something, with the counts
    /// that step read), their hits pushed to `out` in item order with their places in the
    /// block: the rest of the walks down their names, then their first key slots, rows and
    /// values, each step for all of them in turn. Most walks end at the step that found
    /// something, and most of their lookups at their first key: what the walk found of the
    /// names is kept only by a walk that goes on, and is found again from that step for a
    /// lookup that reads on.
    #[inline(never)]
    fn lookup_group<'a, T>(
        &'a self,
        block: &[T],
        url: &impl Fn(&T) -> (&str, &str),
        (live, group): (&[Live], u64),
        region: Option<&str>,
        now: f64,
        out: &mut Vec<(usize, Hit<'a>)>,
    ) {
        let tables = &self.summary[..];
        let prefetch = |walk: &Walk| summary::prefetch(&tables[summary_of(walk.hash)], walk.hash);
        let mut pending = Group::new();
        let mut walkers = Group::<Walker>::new();
        // (at most `GROUP` bits: `push` panics past them)
        let mut left = group;
        while left != 0 {
            let k = left.trailing_zeros() as usize;
            left &= left - 1;
            let item = live[k].item;
            let (canonical, host) = url(&block[item as usize]);
            let mut names = HostSummary::default();
            let (walk, goes_on) = live[k].found_step(host, self.labels, &mut names);
            let first = if goes_on {
                prefetch(&walk);
                let at = pending.len() as u8;
                walkers.push(Walker { at, walk, names });
                None
            } else {
                // most walks end at the step that found something: the first key now
                self.first_key(canonical, host, &names)
            };
            pending.push(Pending {
                item,
                walk: k as u8,
                first,
            });
        }
        let pending = pending.as_mut();
        let walkers = walkers.as_mut();
        // bit w: walkers[w] has a name left to probe
        let mut walking: u32 = (1 << walkers.len()) - 1;
        while walking != 0 {
            let mut left = walking;
            while left != 0 {
                let w = left.trailing_zeros() as usize;
                left &= left - 1;
                let Walker { at, walk, names } = &mut walkers[w];
                let host = url(&block[pending[*at as usize].item as usize]).1;
                if walk.step(host, self.labels, tables, names) {
                    prefetch(walk);
                } else {
                    walking &= !(1 << w);
                }
            }
        }
        for w in walkers.iter() {
            let p = &mut pending[w.at as usize];
            let (canonical, host) = url(&block[p.item as usize]);
            p.first = self.first_key(canonical, host, &w.names);
        }
        // each URL's first key slot (`first_key` prefetched it), then the row it points
        // to, then its value: each pass brings in the next read for every URL at once
        for a in pending.iter_mut().filter_map(|p| p.first.as_mut()) {
            a.row = a.shard.prefetch_row(a.tag);
        }
        for a in pending.iter().filter_map(|p| p.first.as_ref()) {
            if let Some(row) = a.row {
                a.shard.prefetch_value(row);
            }
        }
        for (j, p) in pending.iter().enumerate() {
            let i = p.item as usize;
            // an active row of the first key is the answer: the lookup reads that key first
            // and stops at what it finds there
            if let Some(a) = &p.first {
                if let (Some(row), true) = (a.row, a.single) {
                    let key = (a.scope, a.key, a.hash);
                    if let Some(hit) = self.single_hit(a.shard, key, row, region, now) {
                        out.push((i, hit));
                        continue;
                    }
                } else if let Some(row) = a.row {
                    let known = (a.hash, Some(Some(row)));
                    let best = self.best_known(a.scope, a.key, known, false, region, now);
                    if let Some((_, at)) = best {
                        out.push((i, self.hit(at)));
                        continue;
                    }
                }
            }
            let (canonical, host) = url(&block[i]);
            let names = match walkers.iter().find(|w| usize::from(w.at) == j) {
                Some(w) => w.names,
                None => {
                    // the walk's step that found something, taken again
                    let mut names = HostSummary::default();
                    live[usize::from(p.walk)].found_step(host, self.labels, &mut names);
                    names
                }
            };
            let known = p.first.and_then(|a| a.known(canonical, host));
            if let Some(at) = self.match_summarized(canonical, host, &names, known, region, now) {
                out.push((i, self.hit(at)));
            }
        }
    }

    /// The key the lookup of a summarized URL reads first (`match_summarized`'s order), its
    /// key slot prefetched.
    #[inline(always)]
    fn first_key<'a, 'k>(
        &'a self,
        canonical: &'k str,
        host: &'k str,
        names: &HostSummary,
    ) -> Option<Ahead<'a, 'k>> {
        let own = names.own;
        let (scope, key, hash, single, path_end) = if own.has(URL) {
            let key = url_key(canonical);
            (Scope::Url, key, hash_str(key), own.single(URL), 0)
        } else if own.has(PREFIX) {
            // the prefix key probed first (`match_under`), when it is a slice of the url key
            let single = own.single(PREFIX);
            let (key, path_end) = match first_short_prefix(canonical, host) {
                // the path's end is found only if the lookup needs it
                Some((whole, len)) if single => (&whole[..host.len() + len], 0),
                _ => {
                    let UrlPath {
                        whole,
                        path,
                        sliced,
                    } = url_path(canonical, host);
                    if !sliced {
                        return None;
                    }
                    let path = path?;
                    let len = prefix_order(path, single).next()?;
                    let end = u32::try_from(host.len() + path.len()).ok()?;
                    (&whole[..host.len() + len], end)
                }
            };
            (Scope::Prefix, key, hash_str(key), single, path_end)
        } else if own.has(HOST) {
            (Scope::Host, host, names.own_hash, own.single(HOST), 0)
        } else {
            let c = names.flagged()?.next()?;
            let start = c.start as usize;
            debug_assert!(host.is_char_boundary(start));
            // SAFETY: a candidate starts where a walk's name does: 0, or just past a dot of
            // the host (`HostSummary::site`, `Walk::descend`), so within it and at a char
            // boundary.
            let key = unsafe { host.get_unchecked(start..) };
            (Scope::Domain, key, c.hash, c.counts.single(DOMAIN), 0)
        };
        let ahead = Ahead {
            scope,
            key,
            hash,
            single,
            path_end,
            shard: &self.shards[shard_of(hash)],
            tag: tag_of(scope, hash),
            row: None,
        };
        ahead.shard.keys.prefetch(ahead.tag);
        Some(ahead)
    }
}

/// A URL of a group on its way: its item, its walk's place among the block's walks, and the
/// key its lookup reads first.
#[derive(Clone, Copy)]
struct Pending<'a, 'k> {
    item: u8,
    walk: u8,
    first: Option<Ahead<'a, 'k>>,
}

/// A walk of a group that goes on past the step that found something: its URL's place in
/// the group, the walk down its names, and what it found of them.
#[derive(Clone, Copy)]
struct Walker {
    at: u8,
    walk: Walk,
    names: HostSummary,
}

/// The key a summarized URL's lookup reads first, as a page of lookups finds it ahead.
#[derive(Clone, Copy, Debug)]
struct Ahead<'a, 'k> {
    scope: Scope,
    /// The key.
    key: &'k str,
    /// Its `hash_str`.
    hash: u64,
    /// Whether the summary says at most one entry has the key.
    single: bool,
    /// A prefix key's: where the path ends in the url key (`First::path_end`); 0 when it
    /// is not yet found (and for the other scopes).
    path_end: u32,
    /// The shard the key is in, and its tag there.
    shard: &'a Shard,
    tag: u32,
    /// The row of the first key slot holding its tag, once a page has looked (`First::row`).
    row: Option<u32>,
}

impl Ahead<'_, '_> {
    /// What the whole lookup of the URL (`canonical`, `host`) is told of this key, its first:
    /// None when a prefix key's path end does not fit (the lookup then finds it all again).
    #[inline]
    fn known(&self, canonical: &str, host: &str) -> Option<First> {
        let path_end = match self.path_end {
            0 if self.scope == Scope::Prefix => {
                let path = url_path(canonical, host).path.map_or(0, str::len);
                u32::try_from(host.len() + path).ok()?
            }
            end => end,
        };
        Some(First {
            scope: self.scope,
            hash: self.hash,
            row: self.row,
            path_end,
        })
    }
}

/// `lookup_page`'s hits (or any values in their places) spread over the `len` items of
/// the page, `None` where an item is clean: an answer per item, for a caller that wants
/// one.
pub fn spread<H>(hits: impl IntoIterator<Item = (usize, H)>, len: usize) -> Vec<Option<H>> {
    let mut out = Vec::with_capacity(len);
    out.resize_with(len, || None);
    for (i, hit) in hits {
        out[i] = Some(hit);
    }
    out
}

/// [`spread`], once it has checked that the hits come in item order, as `lookup_page`
/// gives them (what the tests compare with one lookup at a time).
#[cfg(test)]
pub(crate) fn spread_in_order(hits: Vec<(usize, Hit<'_>)>, len: usize) -> Vec<Option<Hit<'_>>> {
    assert!(
        hits.windows(2).all(|w| w[0].0 < w[1].0),
        "hits in item order"
    );
    spread(hits, len)
}

#[cfg(test)]
mod tests {
    use super::super::{added as add, BanIndex, Change};
    use super::*;

    /// The ids of the entries a page of (canonical, host) pairs hits, in item order, once it
    /// has checked that each answer is the one a lookup of that URL alone gives.
    fn page_ids(
        snap: &IndexData,
        page: &[(&str, &str)],
        region: Option<&str>,
        now: f64,
    ) -> Vec<Option<u64>> {
        let paged = spread_in_order(
            snap.lookup_page(page, |&(c, h)| (c, h), region, now),
            page.len(),
        );
        for (&(c, h), hit) in page.iter().zip(&paged) {
            let single = snap.lookup(c, h, region, now);
            assert_eq!(hit.map(|x| x.at), single.map(|x| x.at), "{c}");
        }
        paged.iter().map(|hit| hit.map(|x| x.id)).collect()
    }

    #[test]
    fn the_key_a_page_prefetches_first_is_the_one_its_lookup_reads_first() {
        let index = BanIndex::empty();
        index
            .apply_iter(vec![
                add("1", Scope::Domain, "d.example"),
                add("2", Scope::Host, "www.h.example"),
                add("3", Scope::Url, "u.example/p/1.html"),
                add("4", Scope::Prefix, "p.example/forum"),
                add("5", Scope::Prefix, "q.example/forum"),
                add("6", Scope::Prefix, "q.example/forum/t"),
                add("7", Scope::Prefix, "r.example/"),
            ])
            .unwrap();
        let snap = index.snapshot();
        // (canonical, host, the first key's scope and key, whether a row holds its tag)
        let cases = [
            (
                "https://news.d.example/a",
                "news.d.example",
                Some((Scope::Domain, "d.example", true)),
            ),
            (
                "http://www.h.example/x",
                "www.h.example",
                Some((Scope::Host, "www.h.example", true)),
            ),
            (
                "http://u.example/p/1.html",
                "u.example",
                Some((Scope::Url, "u.example/p/1.html", true)),
            ),
            (
                "http://u.example/p/2.html",
                "u.example",
                Some((Scope::Url, "u.example/p/2.html", false)),
            ),
            (
                "https://p.example/forum",
                "p.example",
                Some((Scope::Prefix, "p.example/forum", true)),
            ),
            // one prefix entry under the host: the shortest key past the root first
            (
                "https://p.example/forum/t/9",
                "p.example",
                Some((Scope::Prefix, "p.example/forum", true)),
            ),
            (
                "https://p.example/about/t/9",
                "p.example",
                Some((Scope::Prefix, "p.example/about", false)),
            ),
            // the first segment ends where the query starts
            (
                "https://p.example/forum?t=/9",
                "p.example",
                Some((Scope::Prefix, "p.example/forum", true)),
            ),
            (
                "https://p.example//?t=/9",
                "p.example",
                Some((Scope::Prefix, "p.example", false)),
            ),
            // several: the longest first (the most specific wins), found further down
            (
                "https://q.example/forum/t/9",
                "q.example",
                Some((Scope::Prefix, "q.example/forum/t/9", false)),
            ),
            // the root's key (the host alone) is probed last
            (
                "https://r.example/a/b",
                "r.example",
                Some((Scope::Prefix, "r.example/a", false)),
            ),
            ("http://cdn.h.example/x", "cdn.h.example", None),
            ("http://clean.example/", "clean.example", None),
        ];
        for (canonical, host, want) in cases {
            let names = HostSummary::of(host, snap.labels, &snap.summary[..]);
            let first = if names.is_clean() {
                None
            } else {
                snap.first_key(canonical, host, &names)
            };
            let got = first.map(|a| {
                assert_eq!(hash_str(a.key), a.hash, "{canonical}");
                let rows = snap.shards[shard_of(a.hash)].prefetch_row(tag_of(a.scope, a.hash));
                (a.scope, a.hash, rows.is_some())
            });
            let want = want.map(|(scope, key, rows)| (scope, hash_str(key), rows));
            assert_eq!(got, want, "{canonical}");
        }
        // the page answers as one lookup at a time does
        let page: Vec<(&str, &str)> = cases.iter().map(|&(c, h, _)| (c, h)).collect();
        let paged = spread_in_order(
            snap.lookup_page(&page, |&(c, h)| (c, h), None, 1.0),
            page.len(),
        );
        for (&(c, h), hit) in page.iter().zip(paged) {
            let single = snap.lookup(c, h, None, 1.0);
            assert_eq!(hit.map(|x| x.at), single.map(|x| x.at), "{c}");
        }
        let id = |c| snap.lookup(c, "q.example", None, 1.0).map(|x| x.id);
        assert_eq!(id("https://q.example/forum/t/9"), Some(6));
        assert_eq!(id("https://q.example/forum/x"), Some(5));
        let root = snap.lookup("https://r.example/a/b", "r.example", None, 1.0);
        assert_eq!(root.map(|x| x.id), Some(7));
    }

    #[test]
    fn a_first_key_whose_row_is_not_active_leaves_the_answer_to_the_whole_lookup() {
        // the first key's one row expired, or of another region: the entry behind it answers
        let index = BanIndex::empty();
        let mut expired = add("1", Scope::Url, "e.example/p/1.html");
        let mut regional = add("3", Scope::Host, "www.r.example");
        // a prefix key found without its path's end: the whole lookup finds that end
        let mut prefix = add("5", Scope::Prefix, "f.example/forum");
        if let (Change::Add(e), Change::Add(r), Change::Add(p)) =
            (&mut expired, &mut regional, &mut prefix)
        {
            e.expires = Some(0.5);
            r.regions = vec!["eu".into()];
            p.expires = Some(0.5);
        }
        index
            .apply_iter(vec![
                expired,
                add("2", Scope::Host, "e.example"),
                regional,
                add("4", Scope::Domain, "r.example"),
                prefix,
                add("6", Scope::Host, "f.example"),
            ])
            .unwrap();
        let snap = index.snapshot();
        let page = [
            ("http://e.example/p/1.html", "e.example"),
            ("http://www.r.example/x", "www.r.example"),
            ("https://f.example/forum/t?q=/a/b", "f.example"),
        ];
        for (region, now, want) in [
            (None, 1.0, [2, 4, 6]),
            (Some("eu"), 1.0, [2, 3, 6]),
            (Some("us"), 0.1, [1, 4, 5]),
        ] {
            let ids = page_ids(&snap, &page, region, now);
            assert_eq!(ids, want.map(Some), "{region:?} {now}");
        }
    }

    #[test]
    fn a_walk_that_goes_on_past_what_it_found_answers_from_all_it_found() {
        // a domain entry at the site and a host entry below it: the walk finds the domain
        // entry and goes on to the host, whose entry answers when active, else the domain's
        let index = BanIndex::empty();
        let mut host = add("2", Scope::Host, "www.w.example");
        if let Change::Add(entry) = &mut host {
            entry.expires = Some(0.5);
        }
        index
            .apply_iter(vec![
                add("1", Scope::Domain, "w.example"),
                host,
                add("3", Scope::Domain, "d.example"),
                add("4", Scope::Url, "u.example/p/1.html"),
            ])
            .unwrap();
        let snap = index.snapshot();
        // walks that end where they found something around the one that goes on, and URLs
        // whose first key is not the answer
        let page = [
            ("https://news.d.example/a", "news.d.example"),
            ("http://u.example/p/2.html", "u.example"),
            ("http://www.w.example/x", "www.w.example"),
            ("http://m.w.example/x", "m.w.example"),
            ("http://u.example/p/1.html", "u.example"),
        ];
        for (now, want) in [
            (0.1, [Some(3), None, Some(2), Some(1), Some(4)]),
            (1.0, [Some(3), None, Some(1), Some(1), Some(4)]),
        ] {
            assert_eq!(page_ids(&snap, &page, None, now), want, "{now}");
        }
    }

    #[test]
    fn walks_that_find_something_go_on_in_groups_and_answer_as_one_lookup_does() {
        // more URLs whose walk finds something than a group holds, in one block and across
        // blocks, at every step of a walk: the site, a name below it, the host, past DEEP
        let index = BanIndex::empty();
        let mut changes = vec![
            add("1", Scope::Domain, "d.example"),
            add("2", Scope::Host, "www.h.example"),
            add("3", Scope::Url, "u.example/p/1.html"),
            add("4", Scope::Prefix, "p.example/forum"),
            add("5", Scope::Domain, "c.b.a.deep.example"),
            add("6", Scope::Host, "a.b.c.d.e.f.g.h.i.j.k.deep.example"),
        ];
        // two entries of one key, the first expired: the probe may not stop at it
        let mut expired = add("7", Scope::Host, "two.example");
        if let Change::Add(entry) = &mut expired {
            entry.expires = Some(0.5);
        }
        changes.push(expired);
        changes.push(add("8", Scope::Host, "two.example"));
        index.apply_iter(changes).unwrap();
        let snap = index.snapshot();
        let hosts = [
            "news.d.example",
            "www.h.example",
            "cdn.h.example",
            "u.example",
            "p.example",
            "x.c.b.a.deep.example",
            "b.a.deep.example",
            "a.b.c.d.e.f.g.h.i.j.k.deep.example",
            "z.b.c.d.e.f.g.h.i.j.k.deep.example",
            "two.example",
            "clean.example",
            "www.clean.example",
        ];
        let paths = ["/", "/p/1.html", "/forum/t/9", "/forum"];
        let mut page: Vec<(String, String)> = Vec::new();
        for round in 0..4 {
            for (k, host) in hosts.iter().enumerate() {
                let path = paths[(k + round) % paths.len()];
                page.push((format!("https://{host}{path}"), host.to_string()));
            }
        }
        let mut hits = 0;
        for now in [1.0, 0.1] {
            let paged = snap.lookup_page(&page, |(c, h)| (c.as_str(), h.as_str()), None, now);
            let paged = spread_in_order(paged, page.len());
            for ((c, h), hit) in page.iter().zip(paged) {
                let single = snap.lookup(c, h, None, now);
                assert_eq!(hit.map(|x| x.at), single.map(|x| x.at), "{c}");
                hits += usize::from(hit.is_some());
            }
        }
        // five banned hosts a round, the url once and the prefix twice in four rounds
        assert_eq!(hits, 2 * (4 * 5 + 3));
        let two = snap.lookup("http://two.example/", "two.example", None, 1.0);
        assert_eq!(two.map(|h| h.id), Some(8));
    }
}
