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
        // a summarized URL's first key slot, then the rows it points to, then their
        // values: each pass brings in the next read for every URL at once
        let mut first = [None; BLOCK];
        for ((names, item), first) in names.iter().zip(block).zip(&mut first) {
            if !names.is_clean() {
                let (canonical, host) = url(item);
                *first = self.first_key(canonical, host, names);
                if let Some((scope, h)) = *first {
                    self.shards[shard_of(h)].keys.prefetch(tag_of(scope, h));
                }
            }
        }
        for first in first[..block.len()].iter_mut() {
            if let Some((scope, h)) = *first {
                if !self.shards[shard_of(h)].prefetch_rows(tag_of(scope, h)) {
                    *first = None;
                }
            }
        }
        for &(scope, h) in first[..block.len()].iter().flatten() {
            self.shards[shard_of(h)].prefetch_values(tag_of(scope, h));
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

    /// The scope and hash of the key the lookup of a summarized URL reads first.
    fn first_key(&self, canonical: &str, host: &str, names: &HostSummary) -> Option<(Scope, u64)> {
        Some(if names.own.has(URL) {
            (Scope::Url, hash_str(url_key(canonical)))
        } else if names.own.has(PREFIX) {
            // the longest prefix key, when it is a slice of the url key (`match_under`)
            let (path, whole) = (path_of(canonical)?, url_key(canonical));
            match whole.strip_prefix(host) {
                Some(rest) if rest.starts_with(path) => (
                    Scope::Prefix,
                    hash_str(whole[..host.len() + path.len()].trim_end_matches('/')),
                ),
                _ => return None,
            }
        } else if names.own.has(HOST) {
            (Scope::Host, names.own_hash)
        } else {
            (Scope::Domain, names.flagged()?.next()?.hash)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{BanIndex, Change, NewEntry};
    use super::*;

    fn add(id: &str, scope: Scope, value: &str) -> Change {
        Change::Add(NewEntry {
            id: id.into(),
            scope,
            value: value.into(),
            reason: "r".into(),
            actor: "a".into(),
            created: 0.0,
            expires: None,
            regions: Vec::new(),
        })
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
            // the longest prefix key first: the entry is found further down
            (
                "https://p.example/forum/t/9",
                "p.example",
                Some((Scope::Prefix, "p.example/forum/t/9", false)),
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
            let got = first.map(|(scope, h)| {
                let rows = snap.shards[shard_of(h)].prefetch_rows(tag_of(scope, h));
                (scope, h, rows)
            });
            let want = want.map(|(scope, key, rows)| (scope, hash_str(key), rows));
            assert_eq!(got, want, "{canonical}");
        }
        // the page answers as one lookup at a time does
        let page: Vec<(&str, &str)> = cases.iter().map(|&(c, h, _)| (c, h)).collect();
        let paged = snap.lookup_page(&page, |&(c, h)| (c, h), None, 1.0);
        for (&(c, h), hit) in page.iter().zip(paged) {
            let single = snap.lookup(c, h, None, 1.0);
            assert_eq!(hit.map(|x| x.at), single.map(|x| x.at), "{c}");
        }
    }
}
