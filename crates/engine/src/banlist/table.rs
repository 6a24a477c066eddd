//! One open-addressing table of `u64` slots: linear probing, deletion by backward shift (no
//! tombstones, so a table that churns never slows down), a multimap (equal keys simply take
//! more slots; the caller verifies every candidate against what it stored).
//!
//! A slot is 0 when empty. What a slot means, and the hash it was placed by, is the owner's
//! business: it passes `hash_of(slot)` where the table has to move slots (growth, deletion).

/// Slots grow at this fill (in 1/8ths): a miss walks the cluster at its home slot, so
/// clusters are kept short; the table doubles, so fill stays within 3/8 to 6/8.
const MAX_FILL_EIGHTHS: usize = 6;
const MIN_SLOTS: usize = 8;

/// The slots, and how many are filled.
#[derive(Clone, Debug, Default)]
pub struct Table {
    slots: Vec<u64>,
    filled: usize,
}

impl Table {
    /// An empty table sized to hold `items` without growing.
    pub fn with_capacity(items: usize) -> Self {
        let mut size = MIN_SLOTS;
        while size * MAX_FILL_EIGHTHS < items * 8 {
            size *= 2;
        }
        Table {
            slots: vec![0; if items == 0 { 0 } else { size }],
            filled: 0,
        }
    }

    /// How many slots are filled.
    pub fn len(&self) -> usize {
        self.filled
    }

    /// Whether no slot is filled.
    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }

    /// Bytes held by the slots.
    pub fn bytes(&self) -> usize {
        self.slots.capacity() * 8
    }

    /// The slots probed for `hash`, in probe order, up to the first empty one: the caller
    /// picks out its own (`hash_of(slot) == hash` and whatever it verifies).
    #[inline]
    pub fn probe(&self, hash: u64) -> Probe<'_> {
        let mask = self.slots.len().wrapping_sub(1);
        Probe {
            slots: &self.slots,
            mask,
            at: (hash as usize) & mask,
            left: self.slots.len(),
        }
    }

    /// Prefetch the home slot of `hash` (a lookup probes several tables; their misses overlap).
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        if self.slots.is_empty() {
            return;
        }
        let at = (hash as usize) & (self.slots.len() - 1);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint; `at` is in bounds, and no memory is read by it.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(self.slots.as_ptr().add(at).cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    }

    /// Put `slot` (nonzero) in the first free slot from the home of `hash`.
    pub fn insert(&mut self, hash: u64, slot: u64, hash_of: impl Fn(u64) -> u64) {
        debug_assert!(slot != 0);
        if (self.filled + 1) * 8 > self.slots.len() * MAX_FILL_EIGHTHS {
            self.grow(&hash_of);
        }
        let mask = self.slots.len() - 1;
        let mut at = (hash as usize) & mask;
        while self.slots[at] != 0 {
            at = (at + 1) & mask;
        }
        self.slots[at] = slot;
        self.filled += 1;
    }

    /// Replace the slot equal to `old` (placed by `hash`) with `new`; false when absent.
    pub fn replace(&mut self, hash: u64, old: u64, new: u64) -> bool {
        match self.position(hash, old) {
            Some(at) => {
                self.slots[at] = new;
                true
            }
            None => false,
        }
    }

    /// Remove the slot equal to `slot` (placed by `hash`), shifting back the slots after it
    /// that may move closer to their home; false when it is not there.
    pub fn remove(&mut self, hash: u64, slot: u64, hash_of: impl Fn(u64) -> u64) -> bool {
        let Some(mut hole) = self.position(hash, slot) else {
            return false;
        };
        let mask = self.slots.len() - 1;
        let mut at = hole;
        loop {
            at = (at + 1) & mask;
            let next = self.slots[at];
            if next == 0 {
                break;
            }
            let home = (hash_of(next) as usize) & mask;
            // `next` may fill the hole when its home is not cyclically within (hole, at]
            if (at.wrapping_sub(home) & mask) >= (at.wrapping_sub(hole) & mask) {
                self.slots[hole] = next;
                hole = at;
            }
        }
        self.slots[hole] = 0;
        self.filled -= 1;
        true
    }

    fn position(&self, hash: u64, slot: u64) -> Option<usize> {
        let mask = self.slots.len().checked_sub(1)?;
        let mut at = (hash as usize) & mask;
        loop {
            match self.slots[at] {
                0 => return None,
                s if s == slot => return Some(at),
                _ => at = (at + 1) & mask,
            }
        }
    }

    fn grow(&mut self, hash_of: &impl Fn(u64) -> u64) {
        let size = (self.slots.len() * 2).max(MIN_SLOTS);
        let old = std::mem::replace(&mut self.slots, vec![0; size]);
        let mask = size - 1;
        for slot in old.into_iter().filter(|&s| s != 0) {
            let mut at = (hash_of(slot) as usize) & mask;
            while self.slots[at] != 0 {
                at = (at + 1) & mask;
            }
            self.slots[at] = slot;
        }
    }
}

/// The slots a probe visits (see `Table::probe`).
pub struct Probe<'a> {
    slots: &'a [u64],
    mask: usize,
    at: usize,
    left: usize,
}

impl Iterator for Probe<'_> {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.left == 0 {
            return None;
        }
        let slot = self.slots[self.at];
        if slot == 0 {
            self.left = 0;
            return None;
        }
        self.at = (self.at + 1) & self.mask;
        self.left -= 1;
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // slot = hash << 16 | n: the hash is in the slot itself
    fn h(slot: u64) -> u64 {
        slot >> 16
    }

    #[test]
    fn equal_hashes_and_removal_by_backward_shift() {
        let mut t = Table::default();
        for n in 1..=40u64 {
            t.insert(5, (5 << 16) | n, h);
            t.insert(6, (6 << 16) | n, h);
        }
        assert_eq!(t.len(), 80);
        for n in (1..=40u64).step_by(2) {
            assert!(t.remove(5, (5 << 16) | n, h));
            assert!(!t.remove(5, (5 << 16) | n, h));
        }
        let mut fives: Vec<u64> = t
            .probe(5)
            .filter(|&s| h(s) == 5)
            .map(|s| s & 0xffff)
            .collect();
        fives.sort_unstable();
        assert_eq!(fives, (2..=40).step_by(2).collect::<Vec<u64>>());
        assert_eq!(t.probe(6).filter(|&s| h(s) == 6).count(), 40);
        assert!(t.replace(6, (6 << 16) | 3, (6 << 16) | 99));
        assert!(t.probe(6).any(|s| s == (6 << 16) | 99));
        assert_eq!(t.probe(1234).filter(|&s| h(s) == 1234).count(), 0);
    }

    #[test]
    fn random_inserts_and_removals_keep_every_slot_findable() {
        let mut t = Table::default();
        let mut live = std::collections::BTreeSet::new();
        let mut x: u64 = 7;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let hash = x % 512;
            let slot = (hash << 16) | (step % 3 + 1);
            if x % 3 == 0 && live.contains(&slot) {
                assert!(t.remove(hash, slot, h));
                live.remove(&slot);
            } else if !live.contains(&slot) {
                t.insert(hash, slot, h);
                live.insert(slot);
            }
        }
        assert_eq!(t.len(), live.len());
        for &slot in &live {
            assert!(t.probe(h(slot)).any(|s| s == slot));
        }
    }
}
