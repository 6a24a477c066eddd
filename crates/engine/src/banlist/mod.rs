//! The banlist index: what a URL is matched against on the request path.
//!
//! The stores (embedded, Redis) stay in Python and hand their changes to [`BanIndex`] in
//! batches. The index is one immutable snapshot ([`IndexData`]) behind an `ArcSwap`: a
//! batch is applied to a copy and published with one pointer swap, so a reader sees every
//! change of a batch or none, and a request keeps the snapshot it started with.
//!
//! Copying 10 M entries per change would be absurd, so the copy is copy-on-write by shard:
//! entries are spread over [`SHARDS`] shards by the hash of their key (ids over as many id
//! shards), a snapshot is two vectors of `Arc`s, and a batch clones only the shards it
//! touches (`Arc::make_mut`). One change thus costs two shard copies (about a thousandth of
//! the index), a seed or a resync builds its index aside with nothing shared to copy.
//!
//! Layout per entry: its value in its shard's arena (length-prefixed), and columns of u32
//! and u64/f64 (offset, id, created, expires, scope + meta, insertion order); what repeats
//! (reason, actor, regions) is interned once as a meta. Keys are found through tables of
//! `u64` slots (32 bits of the key's hash and the row), a hit verified against the value.

mod apply;
mod data;
mod names;
mod py;
mod shard;
mod table;

pub use apply::{Change, NewEntry};
pub use data::{Hit, IndexData, Match};
pub use py::BanIndex;
pub use shard::RowRef;

use pyo3::prelude::*;

/// Shards of entries (and of ids): a power of two.
pub const SHARD_BITS: u32 = 10;
/// How many shards.
pub const SHARDS: usize = 1 << SHARD_BITS;

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
    fn salt(self) -> u32 {
        [
            0x4F6C_DD1D,
            0x4C95_7F2D,
            0xF767_814F,
            0xFE94_F82B,
            0x9E37_79B9,
        ][self as usize]
    }
}

/// The hash of a key or host (fixed seed: the same name always lands in the same place).
#[inline]
pub fn hash_str(text: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x5EED_BA11).hash_one(text)
}

/// The shard a key (or a host's marks) lives in.
#[inline]
pub fn shard_of(hash: u64) -> usize {
    (hash >> (64 - SHARD_BITS)) as usize
}

/// The tag of a key of `scope` whose hash is `hash`.
#[inline]
pub fn tag_of(scope: Scope, hash: u64) -> u32 {
    (hash as u32) ^ scope.salt()
}

/// Registers the `BanIndex` class on the Python module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BanIndex>()?;
    m.add_class::<py::EntryIter>()?;
    Ok(())
}
