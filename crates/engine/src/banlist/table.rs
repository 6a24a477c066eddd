//! One open-addressing table of slots (`u32` or `u64`): linear probing, deletion by backward
//! shift (no tombstones, so a table that churns never slows down), a multimap (equal keys
//! simply take more slots; the caller verifies every candidate against what it stored).
//!
//! A slot is 0 when empty. What a slot means, and the position it was placed by, is the
//! owner's business: it passes `pos_of(slot)` where the table has to move slots (growth,
//! deletion). A position is 32 well-mixed bits; its home is `pos * len >> 32`, so a table
//! may have any number of slots: it grows by half, and `fit` sizes it to what it holds (a
//! built index is not left with tables up to half empty, as doubling would leave them).

/// Slots grow at this fill (in 1/8ths): a miss walks the cluster at its home slot, so
/// clusters are kept short; growth is by half, so fill stays within 4/8 to 6/8.
const MAX_FILL_EIGHTHS: usize = 6;
/// `fit` leaves a table at this fill (in 1/16ths).
const FIT_FILL_SIXTEENTHS: usize = 11;
const MIN_SLOTS: usize = 8;

/// What a table holds: a plain integer, 0 meaning empty.
pub trait Slot: Copy + Eq + Default + std::fmt::Debug {}
impl Slot for u32 {}
impl Slot for u64 {}

/// The slots, and how many are filled.
#[derive(Clone, Debug)]
pub struct Table<S> {
    slots: Vec<S>,
    filled: usize,
}

impl<S> Default for Table<S> {
    fn default() -> Self {
        Table {
            slots: Vec::new(),
            filled: 0,
        }
    }
}

/// Where a position's probe starts in `len` slots.
#[inline]
fn home(pos: u32, len: usize) -> usize {
    ((u64::from(pos) * len as u64) >> 32) as usize
}

impl<S: Slot> Table<S> {
    /// An empty table of the size `fit` gives `n` slots: a load, which knows how many it
    /// will hold, places them all without growing it.
    pub fn with_capacity(n: usize) -> Self {
        Table {
            slots: vec![S::default(); fit_size(n)],
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
        self.slots.capacity() * std::mem::size_of::<S>()
    }

    /// The slots probed for `pos`, in probe order, up to the first empty one: the caller
    /// picks out its own (`pos_of(slot) == pos` and whatever it verifies). Two plain runs
    /// of the slots, from the home to the end and then from the start, so that no slot
    /// costs a test for the wrap or a count of the slots left.
    #[inline(always)]
    pub fn probe(&self, pos: u32) -> impl Iterator<Item = S> + '_ {
        let (before, from) = self.slots.split_at(home(pos, self.slots.len()));
        from.iter()
            .chain(before)
            .copied()
            .take_while(|&slot| slot != S::default())
    }

    /// Prefetch the home slot of `pos` (see `banlist::prefetch`).
    #[inline(always)]
    pub fn prefetch(&self, pos: u32) {
        if let Some(slot) = self.slots.get(home(pos, self.slots.len())) {
            super::prefetch(slot);
        }
    }

    /// Put `slot` (nonzero) in the first free slot from the home of `pos`.
    pub fn insert(&mut self, pos: u32, slot: S, pos_of: impl Fn(S) -> u32) {
        debug_assert!(slot != S::default());
        if (self.filled + 1) * 8 > self.slots.len() * MAX_FILL_EIGHTHS {
            let size = (self.slots.len() + self.slots.len() / 2).max(MIN_SLOTS);
            self.resize(size, &pos_of);
        }
        self.place(pos, slot);
        self.filled += 1;
    }

    fn place(&mut self, pos: u32, slot: S) {
        let len = self.slots.len();
        let mut at = home(pos, len);
        while self.slots[at] != S::default() {
            at = next(at, len);
        }
        self.slots[at] = slot;
    }

    /// Replace the slot equal to `old` (placed by `pos`) with `new`; false when absent.
    pub fn replace(&mut self, pos: u32, old: S, new: S) -> bool {
        match self.position(pos, old) {
            Some(at) => {
                self.slots[at] = new;
                true
            }
            None => false,
        }
    }

    /// Remove the slot equal to `slot` (placed by `pos`), shifting back the slots after it
    /// that may move closer to their home; false when it is not there.
    pub fn remove(&mut self, pos: u32, slot: S, pos_of: impl Fn(S) -> u32) -> bool {
        let Some(mut hole) = self.position(pos, slot) else {
            return false;
        };
        let len = self.slots.len();
        let behind = |from: usize, to: usize| {
            if to >= from {
                to - from
            } else {
                to + len - from
            }
        };
        let mut at = hole;
        loop {
            at = next(at, len);
            let slot = self.slots[at];
            if slot == S::default() {
                break;
            }
            // `slot` may fill the hole when its home is not cyclically within (hole, at]
            if behind(home(pos_of(slot), len), at) >= behind(hole, at) {
                self.slots[hole] = slot;
                hole = at;
            }
        }
        self.slots[hole] = S::default();
        self.filled -= 1;
        true
    }

    /// Size the table to what it holds (after a large batch), at a fill short of the one it
    /// grows at; nothing moves when it is already about that size.
    pub fn fit(&mut self, pos_of: impl Fn(S) -> u32) {
        let size = fit_size(self.filled);
        if size != self.slots.len() {
            self.resize(size, &pos_of);
        }
    }

    fn position(&self, pos: u32, slot: S) -> Option<usize> {
        let len = self.slots.len();
        if len == 0 {
            return None;
        }
        let mut at = home(pos, len);
        loop {
            match self.slots[at] {
                s if s == S::default() => return None,
                s if s == slot => return Some(at),
                _ => at = next(at, len),
            }
        }
    }

    fn resize(&mut self, size: usize, pos_of: &impl Fn(S) -> u32) {
        let old = std::mem::replace(&mut self.slots, vec![S::default(); size]);
        for slot in old.into_iter().filter(|&s| s != S::default()) {
            self.place(pos_of(slot), slot);
        }
    }
}

/// The slots `fit` gives a table holding `filled`.
fn fit_size(filled: usize) -> usize {
    if filled == 0 {
        0
    } else {
        (filled * 16 / FIT_FILL_SIXTEENTHS + 1).max(MIN_SLOTS)
    }
}

#[inline]
fn next(at: usize, len: usize) -> usize {
    if at + 1 == len {
        0
    } else {
        at + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // slot = pos | n (n < 2^16): the position is in the slot itself
    fn p(slot: u64) -> u32 {
        (slot as u32) & !0xffff
    }

    fn at(pos: u32, n: u64) -> u64 {
        u64::from(pos) | n
    }

    #[test]
    fn equal_positions_and_removal_by_backward_shift() {
        let (five, six) = (5 << 16, 6 << 16);
        let mut t = Table::default();
        for n in 1..=40u64 {
            t.insert(five, at(five, n), p);
            t.insert(six, at(six, n), p);
        }
        assert_eq!(t.len(), 80);
        for n in (1..=40u64).step_by(2) {
            assert!(t.remove(five, at(five, n), p));
            assert!(!t.remove(five, at(five, n), p));
        }
        let mut fives: Vec<u64> = t
            .probe(five)
            .filter(|&s| p(s) == five)
            .map(|s| s & 0xffff)
            .collect();
        fives.sort_unstable();
        assert_eq!(fives, (2..=40).step_by(2).collect::<Vec<u64>>());
        assert_eq!(t.probe(six).filter(|&s| p(s) == six).count(), 40);
        assert!(t.replace(six, at(six, 3), at(six, 99)));
        assert!(t.probe(six).any(|s| s == at(six, 99)));
        assert_eq!(
            t.probe(1234 << 16).filter(|&s| p(s) == 1234 << 16).count(),
            0
        );
    }

    #[test]
    fn random_inserts_removals_and_fits_keep_every_slot_findable() {
        let mut t: Table<u64> = Table::default();
        let mut live = std::collections::BTreeSet::new();
        let mut x: u64 = 7;
        for step in 0..40_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // few distinct positions, some at the very top: clusters wrap around the end
            let pos = ((x % 512) as u32) << 23 | (u32::from(x % 7 == 0) * 0xff00_0000);
            let pos = pos & !0xffff;
            let slot = at(pos, step % 3 + 1);
            if x % 3 == 0 && live.contains(&slot) {
                assert!(t.remove(pos, slot, p));
                live.remove(&slot);
            } else if !live.contains(&slot) {
                t.insert(pos, slot, p);
                live.insert(slot);
            }
            if step % 5000 == 0 {
                t.fit(p);
                assert!(t.bytes() <= (live.len() * 16 / 11 + 1).max(8) * 8);
            }
            assert_eq!(t.len(), live.len());
        }
        for &slot in &live {
            assert!(t.probe(p(slot)).any(|s| s == slot));
        }
        // every slot in the probe of its position, before the first empty one
        for &slot in &live {
            assert_eq!(t.probe(p(slot)).filter(|&s| s == slot).count(), 1);
        }
        for slot in live.clone() {
            assert!(t.remove(p(slot), slot, p));
        }
        assert!(t.is_empty());
        t.fit(p);
        assert_eq!(t.bytes(), 0);
        assert_eq!(t.probe(5 << 16).count(), 0);
    }

    #[test]
    fn u32_slots() {
        let mut t: Table<u32> = Table::default();
        let q = |s: u32| s & !0xff;
        for n in 1..=200u32 {
            t.insert(n << 8, (n << 8) | 1, q);
        }
        t.fit(q);
        assert_eq!(t.bytes(), (200 * 16 / 11 + 1) * 4);
        assert!((1..=200u32).all(|n| t.probe(n << 8).any(|s| s == (n << 8) | 1)));
    }
}
