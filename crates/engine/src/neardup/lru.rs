//! A least-recently-used map from 128-bit content keys, for the caches (cache.rs).
//!
//! Entries live in one Vec linked by indexes (no allocation per entry beyond the value);
//! the keys are already MurmurHash3 outputs, so the index hashes them by taking 64 bits.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const NONE: u32 = u32::MAX;

/// Hashes a u128 key by its low 64 bits, a u64 as itself: the keys are MurmurHash3
/// outputs, uniformly distributed already.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u128(&mut self, key: u128) {
        self.0 = key as u64;
    }
    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
}

struct Node<V> {
    key: u128,
    value: Option<V>, // None in a free slot
    newer: u32,
    older: u32,
}

/// The map: `get` makes an entry the most recently used, `pop_oldest` takes the least.
pub struct Lru<V> {
    index: HashMap<u128, u32, BuildHasherDefault<KeyHasher>>,
    nodes: Vec<Node<V>>,
    free: Vec<u32>,
    newest: u32,
    oldest: u32,
}

impl<V> Default for Lru<V> {
    fn default() -> Self {
        Lru {
            index: HashMap::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            newest: NONE,
            oldest: NONE,
        }
    }
}

impl<V> Lru<V> {
    /// The number of entries.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// The value of key, made the most recently used.
    pub fn get(&mut self, key: u128) -> Option<&mut V> {
        let at = *self.index.get(&key)?;
        self.unlink(at);
        self.link_newest(at);
        self.nodes[at as usize].value.as_mut()
    }

    /// Store key → value as the most recently used; the value it replaces, if any.
    pub fn insert(&mut self, key: u128, value: V) -> Option<V> {
        if let Some(&at) = self.index.get(&key) {
            self.unlink(at);
            self.link_newest(at);
            return self.nodes[at as usize].value.replace(value);
        }
        let node = Node {
            key,
            value: Some(value),
            newer: NONE,
            older: NONE,
        };
        let at = match self.free.pop() {
            Some(at) => {
                self.nodes[at as usize] = node;
                at
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.index.insert(key, at);
        self.link_newest(at);
        None
    }

    /// Remove and return the least recently used entry.
    pub fn pop_oldest(&mut self) -> Option<(u128, V)> {
        let at = self.oldest;
        if at == NONE {
            return None;
        }
        self.unlink(at);
        self.free.push(at);
        let node = &mut self.nodes[at as usize];
        self.index.remove(&node.key);
        Some((node.key, node.value.take()?))
    }

    fn unlink(&mut self, at: u32) {
        let (newer, older) = {
            let n = &self.nodes[at as usize];
            (n.newer, n.older)
        };
        match newer {
            NONE => self.newest = older,
            _ => self.nodes[newer as usize].older = older,
        }
        match older {
            NONE => self.oldest = newer,
            _ => self.nodes[older as usize].newer = newer,
        }
    }

    fn link_newest(&mut self, at: u32) {
        let old_newest = self.newest;
        {
            let n = &mut self.nodes[at as usize];
            n.newer = NONE;
            n.older = old_newest;
        }
        match old_newest {
            NONE => self.oldest = at,
            _ => self.nodes[old_newest as usize].newer = at,
        }
        self.newest = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_recently_used_goes_first() {
        let mut lru = Lru::default();
        lru.insert(1, "a");
        lru.insert(2, "b");
        lru.insert(3, "c");
        assert_eq!(lru.get(1).copied(), Some("a")); // 2 is now the oldest
        assert_eq!(lru.pop_oldest(), Some((2, "b")));
        assert_eq!(lru.insert(3, "C"), Some("c")); // 1 is now the oldest
        lru.insert(4, "d"); // reuses 2's slot
        assert_eq!(lru.pop_oldest().map(|(k, _)| k), Some(1));
        assert_eq!(lru.pop_oldest().map(|(k, _)| k), Some(3));
        assert_eq!(lru.pop_oldest().map(|(k, _)| k), Some(4));
        assert!(lru.pop_oldest().is_none() && lru.len() == 0);
        assert!(lru.get(2).is_none());
    }
}
