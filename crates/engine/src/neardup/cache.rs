//! Bounded LRUs of what near_duplicates computes from a text, keyed by a 128-bit
//! MurmurHash3 of it (tests/reference/sigcache.py): MinHash signatures, and the exact method's
//! shingle sets. Popular pages come back on many result pages; memory is capped in bytes.
//!
//! One mutex per cache guards its map and counters; rows are copied out under it, and
//! shingling or signing a missed text runs outside it, so concurrent requests share it.

use std::sync::{Arc, Mutex, MutexGuard};

use super::lru::Lru;
use super::murmur3;

/// Bytes an entry costs beyond its values: the LRU node, the index slot, the allocation.
pub const ENTRY_OVERHEAD: usize = 104;

/// What the metrics read of one cache (`rearrange_<kind>_cache_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Lookups that found the text.
    pub hits: u64,
    /// Lookups that did not (the text was then shingled or signed).
    pub misses: u64,
    /// Entries dropped to stay under the cap.
    pub evictions: u64,
    /// Entries held.
    pub entries: u64,
    /// Bytes the entries account for (values plus ENTRY_OVERHEAD each).
    pub bytes: u64,
    /// The cap in bytes (cache_mb or exact_cache_mb).
    pub max_bytes: u64,
}

/// The cache key of a text: MurmurHash3 x64 128 of its UTF-8 (mmh3's `hash128`).
pub fn content_key(text: &str) -> u128 {
    murmur3::hash128(text.as_bytes())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves a cache that is still consistent
    // (every update is complete before it can panic), so a poisoned lock is taken as is.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct Held<V> {
    lru: Lru<V>,
    stats: Stats,
}

/// LRU of k-value signatures and their shingle counts, at most max_bytes.
pub struct SignatureCache {
    k: usize,
    capacity: usize,
    entry_bytes: usize,
    held: Mutex<Held<(Box<[u64]>, u64)>>,
}

impl SignatureCache {
    /// A cache of signatures of k values, at most max_bytes.
    pub fn new(max_bytes: usize, k: usize) -> Self {
        let entry_bytes = k * 8 + 8 + ENTRY_OVERHEAD;
        let stats = Stats {
            max_bytes: max_bytes as u64,
            ..Stats::default()
        };
        SignatureCache {
            k,
            capacity: max_bytes / entry_bytes,
            entry_bytes,
            held: Mutex::new(Held {
                lru: Lru::default(),
                stats,
            }),
        }
    }

    /// Copy the rows of the keys found into `values` (k per key) and `sizes`; the indexes
    /// of the keys not cached, in order. Each key counts a hit or a miss.
    pub fn fetch(&self, keys: &[u128], values: &mut [u64], sizes: &mut [u64]) -> Vec<usize> {
        let mut missing = Vec::new();
        let mut held = lock(&self.held);
        let k = self.k;
        for (n, &key) in keys.iter().enumerate() {
            match held.lru.get(key) {
                Some((row, size)) => {
                    values[n * k..(n + 1) * k].copy_from_slice(row);
                    sizes[n] = *size;
                }
                None => missing.push(n),
            }
        }
        held.stats.hits += (keys.len() - missing.len()) as u64;
        held.stats.misses += missing.len() as u64;
        missing
    }

    /// Store a signature, dropping the least recently used one when full.
    pub fn put(&self, key: u128, values: &[u64], shingles: u64) {
        if self.capacity == 0 {
            return;
        }
        let mut held = lock(&self.held);
        if held.lru.len() >= self.capacity && held.lru.get(key).is_none() {
            held.lru.pop_oldest();
            held.stats.evictions += 1;
        }
        held.lru.insert(key, (values.into(), shingles));
    }

    /// The counters and sizes, for metrics.
    pub fn stats(&self) -> Stats {
        let held = lock(&self.held);
        let entries = held.lru.len() as u64;
        Stats {
            entries,
            bytes: entries * self.entry_bytes as u64,
            ..held.stats
        }
    }
}

/// LRU of exact shingle sets (sorted hashes), at most max_bytes; handed out shared.
pub struct ShingleSetCache {
    max_bytes: usize,
    held: Mutex<Held<Arc<[u64]>>>,
}

impl ShingleSetCache {
    /// A cache of at most max_bytes.
    pub fn new(max_bytes: usize) -> Self {
        let stats = Stats {
            max_bytes: max_bytes as u64,
            ..Stats::default()
        };
        ShingleSetCache {
            max_bytes,
            held: Mutex::new(Held {
                lru: Lru::default(),
                stats,
            }),
        }
    }

    /// The set of the text with this key, counting a hit or a miss.
    pub fn get(&self, key: u128) -> Option<Arc<[u64]>> {
        let mut held = lock(&self.held);
        let found = held.lru.get(key).cloned();
        match found {
            Some(_) => held.stats.hits += 1,
            None => held.stats.misses += 1,
        }
        found
    }

    /// Store a set, dropping the least recently used ones to stay under max_bytes; a set
    /// larger than the whole cache is not stored.
    pub fn put(&self, key: u128, set: Arc<[u64]>) {
        let size = bytes_of(&set);
        if size > self.max_bytes {
            return;
        }
        let mut held = lock(&self.held);
        let mut bytes = held.stats.bytes as usize;
        if let Some(old) = held.lru.insert(key, set) {
            // another request shingled the same text meanwhile
            bytes -= bytes_of(&old);
        }
        // the new entry is the newest: the loop pops older ones first and stops before it
        while bytes + size > self.max_bytes {
            match held.lru.pop_oldest() {
                Some((_, gone)) => {
                    bytes -= bytes_of(&gone);
                    held.stats.evictions += 1;
                }
                None => break,
            }
        }
        held.stats.bytes = (bytes + size) as u64;
    }

    /// The counters and sizes, for metrics.
    pub fn stats(&self) -> Stats {
        let held = lock(&self.held);
        Stats {
            entries: held.lru.len() as u64,
            ..held.stats
        }
    }
}

fn bytes_of(set: &[u64]) -> usize {
    set.len() * 8 + ENTRY_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys computed by mmh3 (tests/data/gen_content_keys.py), an independent MurmurHash3.
    #[test]
    fn content_keys_are_mmh3s() {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../../../tests/data/content_keys.json")).unwrap();
        let cases = doc["cases"].as_array().unwrap();
        assert!(cases.len() > 30);
        for case in cases {
            let text = case["text"].as_str().unwrap();
            let want: u128 = case["key"].as_str().unwrap().parse().unwrap();
            assert_eq!(content_key(text), want, "{text:?}");
        }
    }

    #[test]
    fn signatures_are_copied_out_counted_and_evicted_oldest_first() {
        let k = 2;
        let cache = SignatureCache::new(2 * (k * 8 + 8 + ENTRY_OVERHEAD), k);
        cache.put(11, &[1, 1], 5);
        cache.put(22, &[2, 2], 7);
        let (mut values, mut sizes) = ([0; 6], [0; 3]);
        assert_eq!(cache.fetch(&[22, 33, 11], &mut values, &mut sizes), [1]);
        assert_eq!((values, sizes), ([2, 2, 0, 0, 1, 1], [7, 0, 5]));
        cache.put(33, &[3, 3], 9); // full: 22 is the least recently used now
        assert_eq!(cache.fetch(&[22], &mut values, &mut sizes), [0]);
        let s = cache.stats();
        assert_eq!((s.hits, s.misses, s.evictions, s.entries), (2, 2, 1, 2));
        assert_eq!(s.bytes, 2 * (2 * 8 + 8 + ENTRY_OVERHEAD) as u64);
    }

    #[test]
    fn shingle_sets_are_capped_by_bytes() {
        let cache = ShingleSetCache::new(2 * bytes_of(&[0; 3]));
        cache.put(1, Arc::from([1, 2, 3].as_slice()));
        cache.put(2, Arc::from([4, 5, 6].as_slice()));
        assert!(cache.get(1).is_some()); // 2 is now the oldest
        cache.put(3, Arc::from([7, 8, 9].as_slice()));
        assert!(cache.get(2).is_none());
        cache.put(4, Arc::from(vec![0; 1000].as_slice())); // larger than the cache
        let s = cache.stats();
        assert_eq!((s.hits, s.misses, s.evictions, s.entries), (1, 1, 1, 2));
        assert_eq!(s.bytes as usize, 2 * bytes_of(&[0; 3]));
    }
}
