//! The banlist index: what a URL is matched against on the request path.
//!
//! The stores (embedded, Redis) stay in Python and hand their changes to [`BanIndex`] in
//! batches. The index is one immutable snapshot ([`IndexData`]) behind an `ArcSwap`: a
//! batch is applied to a copy and published with one pointer swap, so a reader sees every
//! change of a batch or none, and a request keeps the snapshot it started with.
//!
//! Copying 10 M entries per change would be absurd, so the copy is copy-on-write by shard:
//! entries are spread over [`SHARDS`] shards by the hash of their key (ids over as many id
//! tables, name summaries over [`SUMMARIES`] summary tables), a snapshot is three vectors of
//! shared tables, and a batch clones only the ones it touches. One change thus costs a few
//! table copies (a thousandth of the index each); a seed or a resync builds its index aside
//! with nothing shared to copy, and then sizes every table to what it holds.
//!
//! Layout per entry: its value in its shard's arena (length-prefixed), and one packed row
//! of 36 bytes (offset, scope + meta, insertion order, expiry, id, creation time); what
//! repeats (reason, actor, regions) is interned once as a meta, and a row marks whether its
//! meta lists regions, so that a global entry's lookup never reads the meta. Keys are found
//! through tables of `u64` slots (32 bits of the key's hash and the row), a hit verified
//! against the value.
//!
//! What a lookup probes first is the summary (see `summary`): one `u32` slot per name (a
//! host, a domain, an org member domain, and each parent of one), in chunks of a cache
//! line, counting the host, domain, url and prefix entries at that name, the org groups
//! holding it, whether anything sits below it and under which of the labels just below it
//! (a filter). A lookup walks a host's names from its site (its last two labels) down and
//! stops at the first with nothing below it on the host's way, so a clean site costs one
//! hash and one probe, and goes to the key tables only for names whose summary holds
//! something. The sites filter (`filter`) keeps a word for each summary table and top of a
//! tag, in which each name counted sets three bits picked by hash bits the summary does not
//! keep, so that a page of lookups answers most clean sites with one word, before any
//! summary probe; a name with a domain entry or member, or with something below it under a
//! label, sets three bits more for each, so that most hosts below a busy site (a `cdn.`
//! host below a site whose `www.` host is banned) end at that word too. A page of lookups (`page`) takes each step for all its URLs in turn,
//! prefetching, so that their cache misses overlap; a walk
//! that finds nothing ends in the page's first loops, and only the URLs whose walk finds
//! something go on to the key tables. A key's probe stops at its first row when the
//! summary counts one entry there (a count never falls short).

mod apply;
mod bulk;
mod chunks;
mod data;
pub mod digest;
pub mod dump;
mod filter;
mod hash;
pub mod load;
#[cfg(test)]
mod model_test;
mod names;
mod page;
mod py;
mod read;
mod select;
mod shard;
#[cfg(test)]
mod snapshot_test;
mod summary;
mod table;

pub use apply::{Change, NewEntry};
pub use data::{Hit, IndexData, Match};
pub use page::spread;
pub use py::BanIndex;
pub use shard::RowRef;

use pyo3::prelude::*;

/// Shards of entries (and of ids): a power of two.
pub const SHARD_BITS: u32 = 10;
/// How many shards.
pub const SHARDS: usize = 1 << SHARD_BITS;

/// Summary tables (see `summary`), more than shards: a summary slot keeps 16 bits of its
/// name's hash, and the bits that pick its chunk in its table tell nothing apart within
/// the chunk, so the smaller a table the more of those 16 bits a lookup's test compares
/// (at 10 M entries, 13 M names in 8 K tables of about 150 chunks each: 7 bits pick the
/// chunk, 9 tell its slots apart, a clean site's test passes for about 1 in 40). With
/// 16 K tables the 10 M entries' RSS passed 120 B per entry (smaller blocks, rounded up
/// by the allocator); with 1 K, a clean site's test passed for 1 in 5.
pub const SUMMARY_BITS: u32 = 13;
/// How many summary tables.
pub const SUMMARIES: usize = 1 << SUMMARY_BITS;

/// What an entry covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Scope {
    /// One canonical URL (without its scheme).
    Url = 0,
    /// A host and path prefix.
    Prefix = 1,
    /// One host.
    Host = 2,
    /// A domain and every subdomain.
    Domain = 3,
    /// An org group: its member domains and their subdomains.
    Org = 4,
}

/// Every scope, in the order `counts` lists them.
pub const SCOPES: [Scope; 5] = [
    Scope::Url,
    Scope::Prefix,
    Scope::Host,
    Scope::Domain,
    Scope::Org,
];

impl Scope {
    /// The scope's name as entries and responses write it.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Url => "url",
            Scope::Prefix => "prefix",
            Scope::Host => "host",
            Scope::Domain => "domain",
            Scope::Org => "org",
        }
    }

    /// The scope named `name`.
    pub fn parse(name: &str) -> Option<Scope> {
        SCOPES.into_iter().find(|s| s.name() == name)
    }

    fn from_bits(bits: u32) -> Scope {
        SCOPES.get(bits as usize).copied().unwrap_or(Scope::Url)
    }

    /// The string an entry is matched by: a prefix without its trailing slashes.
    pub fn key_of(self, value: &str) -> &str {
        if self == Scope::Prefix {
            value.trim_end_matches('/')
        } else {
            value
        }
    }

    // Mixed into a key's tag, so `a.com` as a host and as a domain take different slots
    // (a static: an array built in the function is written to the stack at every call)
    fn salt(self) -> u32 {
        static SALTS: [u32; 5] = [
            0x4F6C_DD1D,
            0x4C95_7F2D,
            0xF767_814F,
            0xFE94_F82B,
            0x9E37_79B9,
        ];
        SALTS[self as usize]
    }
}

/// The hash of a key or host (fixed seed: the same name always lands in the same place;
/// see `hash`).
#[inline(always)]
pub fn hash_str(text: &str) -> u64 {
    hash::hash(text.as_bytes())
}

/// The shard a key lives in.
#[inline]
pub fn shard_of(hash: u64) -> usize {
    (hash >> (64 - SHARD_BITS)) as usize
}

/// The summary table a name hashed `hash` is counted in.
#[inline]
pub fn summary_of(hash: u64) -> usize {
    (hash >> (64 - SUMMARY_BITS)) as usize
}

/// The tag of a key of `scope` whose hash is `hash`.
#[inline]
pub fn tag_of(scope: Scope, hash: u64) -> u32 {
    (hash as u32) ^ scope.salt()
}

/// Ask the CPU to bring `item`'s cache line in (a page of lookups issues these ahead, so
/// that the misses of its URLs overlap).
#[inline(always)]
pub(crate) fn prefetch<T>(item: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it reads nothing into the program and cannot
    // fault, and the pointer is that of a live reference.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((item as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}

/// The items of `shared` to write, copied first when another holder (a snapshot) shares
/// them: copy on write of a slice (`Arc::make_mut` takes slices only from Rust 1.81).
pub(crate) fn unique<T: Clone>(shared: &mut std::sync::Arc<[T]>) -> &mut [T] {
    if std::sync::Arc::get_mut(shared).is_none() {
        *shared = std::sync::Arc::from(&shared[..]);
    }
    std::sync::Arc::get_mut(shared).unwrap_or(&mut [])
}

/// `prefetch` of the cache line at `at`, which need not point into anything live: a
/// prefetch is only a hint, and the address is not read through.
#[inline(always)]
pub(crate) fn prefetch_at(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it reads nothing into the program and cannot
    // fault, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// `first` here and `second` on a thread of its own, at once: the whole-index work (a load,
/// a dump, a digest) is split in two, for the two cores a replica runs on. A panic of
/// `second` goes on here; where no thread can be started, `second` runs here after `first`.
pub(crate) fn both<R, S: Send>(
    first: impl FnOnce() -> R,
    second: impl FnOnce() -> S + Send,
) -> (R, S) {
    // (a thread that cannot be started drops what it was given: `second` is lent to it)
    let lent = std::sync::Mutex::new(Some(second));
    let take = || lent.lock().ok().and_then(|mut second| second.take());
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new().spawn_scoped(scope, || take().map(|f| f()));
        let mine = first();
        let theirs = spawned.ok().and_then(|other| {
            other
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e))
        });
        match theirs.or_else(|| take().map(|f| f())) {
            Some(theirs) => (mine, theirs),
            // the thread took `second` and gave back its result, or never took it
            None => unreachable!("`second` ran on neither thread"),
        }
    })
}

/// Registers the `BanIndex` class on the Python module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BanIndex>()?;
    Ok(())
}

/// A change that adds a plain entry (reason `r`, actor `a`, no expiry, in every region):
/// what the tests add.
#[cfg(test)]
pub(crate) fn added(id: &str, scope: Scope, value: &str) -> Change {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn add(id: &str, scope: Scope, value: &str, regions: &[&str], expires: Option<f64>) -> Change {
        Change::Add(NewEntry {
            id: id.into(),
            scope,
            value: value.into(),
            reason: "legal removal".into(),
            actor: "tns".into(),
            created: 0.0,
            expires,
            regions: regions.iter().map(|r| r.to_string()).collect(),
        })
    }

    #[test]
    fn lookup_gives_the_rules_verdict_and_reason() {
        let index = BanIndex::empty();
        let changes = vec![
            add("1", Scope::Domain, "example.org", &[], None),
            add("2", Scope::Url, "www.example.org/a", &["DE"], None),
            add("3", Scope::Prefix, "www.example.org/f/", &[], Some(5.0)),
            add("4", Scope::Host, "h.example.net", &[], None),
            Change::Group("acme".into(), vec!["acme.com".into()]),
            add("5", Scope::Org, "acme", &[], None),
        ];
        index.apply_iter(changes).unwrap();
        let snap = index.snapshot();
        assert_eq!(snap.len(), 5);
        let hit = |url: &str, host: &str, region: Option<&str>, now: f64| {
            snap.lookup(url, host, region, now).map(|h| h.describe())
        };
        let www = "www.example.org";
        assert_eq!(
            hit("http://www.example.org/a", www, Some("DE"), 1.0).as_deref(),
            Some("url www.example.org/a banned (legal removal) [entry 2]")
        );
        assert_eq!(
            hit("http://www.example.org/a", www, Some("FR"), 1.0).as_deref(),
            Some("domain example.org banned (legal removal) [entry 1]")
        );
        let prefix = snap
            .lookup("http://www.example.org/f/x", www, None, 1.0)
            .unwrap();
        assert_eq!(
            (prefix.id, prefix.scope, prefix.value),
            (3, "prefix", "www.example.org/f/")
        );
        assert_eq!(
            snap.lookup("http://www.example.org/f/x", www, None, 5.0)
                .unwrap()
                .id,
            1
        );
        assert_eq!(
            snap.lookup("http://x.h.example.net/", "x.h.example.net", None, 1.0)
                .map(|h| h.id),
            None
        );
        assert_eq!(
            snap.lookup("http://h.example.net/", "h.example.net", None, 1.0)
                .unwrap()
                .id,
            4
        );
        assert_eq!(
            snap.lookup("http://a.acme.com/", "a.acme.com", None, 1.0)
                .unwrap()
                .scope,
            "org"
        );
        // a later batch does not change the snapshot a reader holds
        index.apply_iter(vec![Change::Remove("1".into())]).unwrap();
        assert_eq!(
            snap.lookup("http://b.example.org/", "b.example.org", None, 1.0)
                .unwrap()
                .id,
            1
        );
        assert!(index
            .snapshot()
            .lookup("http://b.example.org/", "b.example.org", None, 1.0)
            .is_none());
    }

    /// A domain row of id 2 that the tests below put under another value's tag.
    fn forged_domain_row() -> shard::RowData {
        shard::RowData {
            id: 2,
            created: 0.0,
            expires: f64::NAN,
            scope: Scope::Domain,
            meta: 0,
            regional: false,
            ord: 9,
        }
    }

    #[test]
    fn a_page_verifies_the_first_row_it_prefetched_before_taking_it() {
        // a row of another value under evil.com's tag, first in the probe: the page hands
        // that row on, and the lookup must look past it to evil.com's own
        let index = BanIndex::empty();
        index
            .apply_iter(vec![add("1", Scope::Domain, "evil.com", &[], None)])
            .unwrap();
        let mut data = IndexData::clone(&index.snapshot());
        let h = hash_str("evil.com");
        let shard = std::sync::Arc::make_mut(&mut data.shards[shard_of(h)]);
        let tag = tag_of(Scope::Domain, h);
        let own = shard.first_row(Scope::Domain, "evil.com", tag).unwrap();
        assert!(shard
            .keys
            .remove(tag, shard::key_slot(tag, own), shard::slot_tag));
        let forged = shard.push("other.com", forged_domain_row()).unwrap();
        for row in [forged, own] {
            shard
                .keys
                .insert(tag, shard::key_slot(tag, row), shard::slot_tag);
        }
        assert_eq!(shard.prefetch_row(tag), Some(forged));
        let page = [
            ("http://evil.com/", "evil.com"),
            ("https://news.evil.com/a", "news.evil.com"),
            ("http://other.com/", "other.com"),
        ];
        let paged = page::spread_in_order(
            data.lookup_page(&page, |&(c, h)| (c, h), None, 1.0),
            page.len(),
        );
        let ids: Vec<Option<u64>> = paged.iter().map(|hit| hit.map(|h| h.id)).collect();
        assert_eq!(ids, [Some(1), Some(1), None]);
    }

    #[test]
    fn a_tag_collision_is_verified_against_the_value() {
        let index = BanIndex::empty();
        index
            .apply_iter(vec![add("1", Scope::Domain, "evil.com", &[], None)])
            .unwrap();
        let mut data = IndexData::clone(&index.snapshot());
        // forge a row of another value under clean.com's tag in clean.com's shard
        let h = hash_str("clean.com");
        let shard = std::sync::Arc::make_mut(&mut data.shards[shard_of(h)]);
        let tag = tag_of(Scope::Domain, h);
        let row = shard.push("other.com", forged_domain_row()).unwrap();
        shard
            .keys
            .insert(tag, shard::key_slot(tag, row), shard::slot_tag);
        assert_eq!(
            shard
                .keys
                .probe(tag)
                .filter(|&s| shard::slot_tag(s) == tag)
                .count(),
            1
        );
        assert!(data
            .lookup("http://clean.com/", "clean.com", None, 1.0)
            .is_none());
        assert_eq!(
            data.lookup("http://evil.com/", "evil.com", None, 1.0)
                .unwrap()
                .id,
            1
        );
    }
}
