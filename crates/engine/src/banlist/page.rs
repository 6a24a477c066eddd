//! A page of lookups at once: what the banlist rule asks of the index for one request.
//!
//! One URL's lookup is a chain of dependent reads (its site's summary slot, perhaps the
//! slot of a name below it, then a key slot, a row, a value), and on a large index each
//! read is a cache miss. A page takes each step for all its URLs in turn, prefetching
//! every URL's next read before taking the step that needs it, so the misses of the page
//! overlap instead of following one another; each URL's answer is `lookup`'s.

use super::data::{Hit, IndexData};
use super::names::{path_of, url_key};
use super::summary::{self, HostSummary, Walk, HOST, PREFIX, URL};
use super::{hash_str, shard_of, tag_of, Scope};

/// URLs whose reads are in flight together (a bit each in a `u32`).
const BLOCK: usize = 32;

impl IndexData {
    /// [`IndexData::lookup`] of each item of a page, in order: `url` gives an item's
    /// canonical URL and host.
    pub fn lookup_page<'a, T>(
        &'a self,
        items: &[T],
        url: impl Fn(&T) -> (&str, &str),
        region: Option<&str>,
        now: f64,
    ) -> Vec<Option<Hit<'a>>> {
        let mut out = Vec::with_capacity(items.len());
        for block in items.chunks(BLOCK) {
            self.lookup_block(block, &url, region, now, &mut out);
        }
        out
    }

    /// `lookup_page` of up to `BLOCK` items, on the stack.
    #[inline(always)]
    fn lookup_block<'a, T>(
        &'a self,
        block: &[T],
        url: &impl Fn(&T) -> (&str, &str),
        region: Option<&str>,
        now: f64,
        out: &mut Vec<Option<Hit<'a>>>,
    ) {
        let tables = &self.summary[..];
        let prefetch = |walk: &Walk| summary::prefetch(&tables[shard_of(walk.hash)], walk.hash);
        let mut walks = [Walk::default(); BLOCK];
        let mut names = [HostSummary::default(); BLOCK];
        // bit i: item i's walk has a name left to probe
        let mut walking: u32 = 0;
        for (i, item) in block.iter().enumerate() {
            let host = url(item).1;
            let at = HostSummary::start(host);
            walks[i] = Walk::new(at, summary::name_hash(&host[at..]));
            // where the site's table is (the next pass reads it to prefetch the slot)
            super::prefetch(&tables[shard_of(walks[i].hash)]);
            walking |= 1 << i;
        }
        for walk in &walks[..block.len()] {
            prefetch(walk);
        }
        while walking != 0 {
            let mut left = walking;
            while left != 0 {
                let i = left.trailing_zeros() as usize;
                left &= left - 1;
                let host = url(&block[i]).1;
                if walks[i].step(host, self.labels, tables, &mut names[i]) {
                    prefetch(&walks[i]);
                } else {
                    walking &= !(1 << i);
                }
            }
        }
        for (names, item) in names.iter().zip(block) {
            if !names.is_clean() {
                let (canonical, host) = url(item);
                self.prefetch_first_key(canonical, host, names);
            }
        }
        for (names, item) in names.iter().zip(block) {
            out.push(if names.is_clean() {
                None
            } else {
                let (canonical, host) = url(item);
                self.match_summarized(canonical, host, names, region, now)
                    .map(|at| self.hit(at))
            });
        }
    }

    /// Prefetch the key slot the lookup of a summarized URL reads first.
    fn prefetch_first_key(&self, canonical: &str, host: &str, names: &HostSummary) {
        let (scope, h) = if names.own.has(URL) {
            (Scope::Url, hash_str(url_key(canonical)))
        } else if names.own.has(PREFIX) {
            // the longest prefix key, when it is a slice of the url key (`match_under`)
            let (Some(path), whole) = (path_of(canonical), url_key(canonical)) else {
                return;
            };
            match whole.strip_prefix(host) {
                Some(rest) if rest.starts_with(path) => (
                    Scope::Prefix,
                    hash_str(whole[..host.len() + path.len()].trim_end_matches('/')),
                ),
                _ => return,
            }
        } else if names.own.has(HOST) {
            (Scope::Host, names.own_hash)
        } else {
            match names.flagged().and_then(|mut list| list.next()) {
                Some(c) => (Scope::Domain, c.hash),
                None => return,
            }
        };
        self.shards[shard_of(h)].keys.prefetch(tag_of(scope, h));
    }
}
