//! Near-duplicate detection for the `near_duplicates` rule (seed 000): word shingles
//! compared exactly (Jaccard or containment) on small pages, MinHash signatures on large
//! ones or when documents bring them (the reference model: tests/reference/rules/diversity.py
//! and tests/reference/neardup.py).
//!
//! A `Matcher` is built once per config load and holds the rule's two caches; `pairs`
//! finds, in rank order, each document folded under an earlier one, with the value the
//! Python rule finds (the same floats: the same integers divided, the same estimate formula
//! in the same order). Nothing is folded until every comparison is done, so a request
//! stopped by its deadline changes nothing; what was computed by then stays cached.

pub mod audit;
pub mod audit_py;
mod cache;
mod format;
mod lru;
mod minhash;
mod murmur3;
mod shingles;
mod tables;
mod unicode;

use std::sync::Arc;

use crate::contract::MinHashIn;
pub use cache::Stats;
use cache::{content_key, ShingleSetCache, SignatureCache};
use minhash::Family;
use unicode::Words;

/// (i, j, value): document i folded under the earlier j, with its similarity value.
pub type Pairs = Vec<(usize, usize, f64)>;

/// Matching pairs folded between two calls of `check` on the MinHash path.
const HITS_PER_CHECK: usize = 4096;

/// How a lower document's shingles are scored against a higher one's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// The share of the lower document's shingles inside the higher one's (asymmetric).
    Containment,
    /// |A ∩ B| / |A ∪ B|.
    Jaccard,
}

/// The `method` parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Exact up to `exact_max_docs` documents with text, MinHash above that or as soon as
    /// one document brings a signature.
    Auto,
    /// Always exact shingle sets (documents' signatures are not used).
    Exact,
    /// Always MinHash signatures.
    MinHash,
}

/// The method a page was compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Used {
    /// Exact shingle sets.
    Exact,
    /// MinHash estimates.
    MinHash,
}

/// The matcher's parameters, from `near_duplicates`' Params (rules/near_duplicates.rs).
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `shingle_words`: words per shingle.
    pub width: usize,
    /// `measure`.
    pub measure: Measure,
    /// `threshold`: a document folds when its value reaches it.
    pub threshold: f64,
    /// `method`.
    pub method: Method,
    /// `exact_max_docs`: the most documents with text `Auto` compares exactly.
    pub exact_max_docs: usize,
    /// `num_perm`: k, the signature's length.
    pub num_perm: usize,
    /// `seed`: the MinHash family's seed.
    pub seed: u64,
    /// `cache_mb` in bytes; 0 turns the signature cache off.
    pub cache_bytes: usize,
    /// `exact_cache_mb` in bytes; 0 turns the shingle-set cache off.
    pub exact_cache_bytes: usize,
}

/// One document of the page, as the rule sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Input<'a> {
    /// `text`; None and "" alike mean no text.
    pub text: Option<&'a str>,
    /// `minhash`, a precomputed signature.
    pub minhash: Option<&'a MinHashIn>,
}

impl Input<'_> {
    fn text(&self) -> Option<&str> {
        self.text.filter(|t| !t.is_empty())
    }
}

/// The request's deadline passed: the rule is skipped and the page left unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped;

/// A document's signature this rule cannot compare: a 422 naming
/// `documents[<original position - 1>].minhash.<field>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The document's index in the `docs` given.
    pub index: usize,
    /// `values`, `width` or `seed`.
    pub field: &'static str,
    /// The problem, worded as the Python rule words it.
    pub problem: String,
}

/// The caches' counters, for the metrics (None where the config turned a cache off).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// `rearrange_signature_cache_*`.
    pub signature: Option<Stats>,
    /// `rearrange_shingle_cache_*`.
    pub shingle: Option<Stats>,
}

/// One configured rule's matching: parameters, hash family and caches.
pub struct Matcher {
    p: Params,
    family: Family,
    signatures: Option<SignatureCache>,
    sets: Option<ShingleSetCache>,
}

impl Matcher {
    /// Build at config load: the family's coefficients and the (empty) caches.
    pub fn new(p: Params) -> Self {
        let signatures =
            (p.cache_bytes > 0).then(|| SignatureCache::new(p.cache_bytes, p.num_perm));
        let sets = (p.exact_cache_bytes > 0).then(|| ShingleSetCache::new(p.exact_cache_bytes));
        Matcher {
            family: Family::new(p.num_perm, p.seed),
            p,
            signatures,
            sets,
        }
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &Params {
        &self.p
    }

    /// Exact or MinHash, from the documents alone (never from the caches' state).
    pub fn method_for(&self, docs: &[Input<'_>]) -> Used {
        match self.p.method {
            Method::Exact => Used::Exact,
            Method::MinHash => Used::MinHash,
            Method::Auto if docs.iter().any(|d| d.minhash.is_some()) => Used::MinHash,
            Method::Auto => {
                let with_text = docs.iter().filter(|d| d.text().is_some()).count();
                if with_text <= self.p.exact_max_docs {
                    Used::Exact
                } else {
                    Used::MinHash
                }
            }
        }
    }

    fn comparable(docs: &[Input<'_>]) -> bool {
        docs.iter()
            .filter(|d| d.text().is_some() || d.minhash.is_some())
            .nth(1)
            .is_some()
    }

    /// The first signature this rule cannot compare, where the Python rule would refuse
    /// the request: on a page it compares by MinHash. Call before `pairs`, which passes
    /// over such signatures as matching nothing.
    pub fn refused(&self, docs: &[Input<'_>]) -> Option<Refused> {
        if !Self::comparable(docs) || self.method_for(docs) != Used::MinHash {
            return None;
        }
        docs.iter().enumerate().find_map(|(index, d)| {
            let s = d.minhash?;
            let (field, problem) = self.incompatible(s)?;
            Some(Refused {
                index,
                field,
                problem,
            })
        })
    }

    fn incompatible(&self, s: &MinHashIn) -> Option<(&'static str, String)> {
        let p = &self.p;
        if s.values.len() != p.num_perm {
            Some((
                "values",
                format!(
                    "{} values, but this profile's near_duplicates compares k={} (num_perm)",
                    s.values.len(),
                    p.num_perm
                ),
            ))
        } else if s.width as usize != p.width {
            Some(("width", format!("shingles of {} words, but this profile's near_duplicates uses {} (shingle_words)", s.width, p.width)))
        } else if s.seed != p.seed {
            Some((
                "seed",
                format!(
                    "family seed {}, but this profile's near_duplicates uses {}",
                    s.seed, p.seed
                ),
            ))
        } else {
            None
        }
    }

    /// (i, j, value) for each document i folded under an earlier j, in the Python rule's
    /// order and with its values; the method used. `check` is called per text shingled or
    /// signed and per block of comparisons; its error stops the work.
    pub fn pairs(
        &self,
        docs: &[Input<'_>],
        check: &mut dyn FnMut() -> Result<(), Stopped>,
    ) -> Result<(Pairs, Used), Stopped> {
        let used = self.method_for(docs);
        if !Self::comparable(docs) {
            return Ok((Vec::new(), used));
        }
        let pairs = match used {
            Used::Exact => self.exact_pairs(docs, check)?,
            Used::MinHash => self.minhash_pairs(docs, check)?,
        };
        Ok((pairs, used))
    }

    /// The audit reason of a fold, as the Python rule words it.
    pub fn reason(&self, value: f64, leader_id: &str, used: Used) -> String {
        let measure = match self.p.measure {
            Measure::Containment => "containment",
            Measure::Jaccard => "jaccard",
        };
        let how = match used {
            Used::Exact => String::new(),
            Used::MinHash => format!(" (MinHash estimate, k={})", self.p.num_perm),
        };
        format!(
            "{measure} {} >= {} with {leader_id}{how}; collapsed under it",
            format::fixed2(value),
            format::general(self.p.threshold)
        )
    }

    /// The caches' counters.
    pub fn cache_stats(&self) -> CacheStats {
        CacheStats {
            signature: self.signatures.as_ref().map(SignatureCache::stats),
            shingle: self.sets.as_ref().map(ShingleSetCache::stats),
        }
    }

    fn exact_pairs(
        &self,
        docs: &[Input<'_>],
        check: &mut dyn FnMut() -> Result<(), Stopped>,
    ) -> Result<Pairs, Stopped> {
        let mut words = Words::default();
        let mut sets: Vec<Arc<[u64]>> = Vec::with_capacity(docs.len());
        let none: Arc<[u64]> = Arc::from(Vec::new());
        for d in docs {
            let Some(text) = d.text() else {
                sets.push(none.clone());
                continue;
            };
            check()?;
            let Some(cache) = &self.sets else {
                sets.push(shingles::shingles(text, self.p.width, &mut words).into());
                continue;
            };
            let key = content_key(text);
            let set = match cache.get(key) {
                Some(set) => set,
                None => {
                    let set: Arc<[u64]> = shingles::shingles(text, self.p.width, &mut words).into();
                    cache.put(key, set.clone());
                    set
                }
            };
            sets.push(set);
        }
        shingles::fold(&sets, self.p.measure, self.p.threshold, check)
    }
}

mod signed;
