//! The summary's table: `u32` slots in chunks of one cache line, a lookup compares a whole
//! chunk at once (no loop to leave at an unpredictable slot, as linear probing has), and
//! almost always reads one line.
//!
//! A slot is 0 when empty; its top bits are the position it was placed by (the owner's
//! `pos_of(slot)`), its home chunk `pos * chunks >> 32`. A slot goes to the first chunk
//! from its home with a free slot; each chunk counts the slots that passed it full
//! (`over`), so a lookup goes on to the next chunk only when something did, and a removal
//! takes those counts back. No tombstones, nothing shifts.
//!
//! The chunks are one `Arc<[Chunk]>`, copied on the first write of a batch while a
//! published snapshot shares them: a lookup loads the slice's pointer from the snapshot's
//! vector of tables and then the chunk, nothing between.

use std::sync::Arc;

/// Data slots per chunk (the 16th `u32` is the chunk's `over`).
const SLOTS: usize = 15;
/// Chunks grow by half when the slots are this full (in 1/8ths).
const MAX_FILL_EIGHTHS: usize = 6;
/// `fit` leaves the slots this full (in 1/16ths).
const FIT_FILL_SIXTEENTHS: usize = 11;

/// Fifteen slots and, in the sixteenth `u32`, `over`.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Chunk([u32; SLOTS + 1]);

const OVER: usize = SLOTS;

impl Chunk {
    /// Bit `i` set when `u32` `i` of the chunk (`over` too, bit 15) has the position `want`
    /// (`mask` picks the position bits): sixteen compared at once.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn matches(&self, want: u32, mask: u32) -> u32 {
        use std::arch::x86_64::{
            __m128i, _mm_and_si128, _mm_cmpeq_epi32, _mm_load_si128, _mm_movemask_epi8,
            _mm_packs_epi16, _mm_packs_epi32, _mm_set1_epi32,
        };
        let lanes: *const __m128i = self.0.as_ptr().cast();
        // (SSE2 is part of x86_64; recent compilers call these intrinsics safe)
        #[allow(unused_unsafe)]
        // SAFETY: a chunk is 64 bytes aligned to 64: four aligned 16-byte loads read exactly
        // its sixteen `u32`s.
        unsafe {
            let (m, w) = (_mm_set1_epi32(mask as i32), _mm_set1_epi32(want as i32));
            let lane =
                |k: usize| _mm_cmpeq_epi32(_mm_and_si128(_mm_load_si128(lanes.add(k)), m), w);
            // each lane's all-ones or zero narrowed to a byte, in order (saturation keeps both)
            let bytes = _mm_packs_epi16(
                _mm_packs_epi32(lane(0), lane(1)),
                _mm_packs_epi32(lane(2), lane(3)),
            );
            _mm_movemask_epi8(bytes) as u32
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn matches(&self, want: u32, mask: u32) -> u32 {
        self.0.iter().enumerate().fold(0, |bits, (i, &slot)| {
            bits | u32::from(slot & mask == want) << i
        })
    }

    /// Whether any `u32` of the chunk (`over` too: a hint only) has the position `want`.
    #[inline(always)]
    fn may_hold(&self, want: u32, mask: u32) -> bool {
        self.matches(want, mask) != 0
    }

    /// The first slot with the position `want`, read from where `matches` found it.
    #[inline(always)]
    fn first(&self, want: u32, mask: u32) -> Option<u32> {
        let found = self.matches(want, mask) & ((1 << SLOTS) - 1);
        (found != 0).then(|| self.0[found.trailing_zeros() as usize])
    }

    /// Whether a lookup of `want` starting at this chunk finds nothing: no `u32` of it
    /// has the position, and no slot passed it full (one test of a whole cache line).
    #[inline(always)]
    fn holds_nothing(&self, want: u32, mask: u32) -> bool {
        !self.may_hold(want, mask) && self.over() == 0
    }

    #[inline]
    fn slots(&self) -> &[u32] {
        &self.0[..SLOTS]
    }

    #[inline]
    fn over(&self) -> u32 {
        self.0[OVER]
    }

    fn free(&self) -> Option<usize> {
        self.slots().iter().position(|&s| s == 0)
    }
}

/// What a lookup in chunks that hold nothing reads.
static EMPTY: Chunk = Chunk([0; SLOTS + 1]);

/// The chunk a lookup starts at (see `Chunks::start`).
#[derive(Clone, Copy, Debug)]
pub struct Start<'a>(&'a Chunk);

impl Default for Start<'_> {
    fn default() -> Self {
        Start(&EMPTY)
    }
}

impl Start<'_> {
    /// Whether the lookup of `want` (`Chunks::find`'s) surely finds nothing: nothing at
    /// its first chunk, and nothing passed it. When false it may still find nothing.
    #[inline(always)]
    pub fn holds_nothing(self, want: u32, mask: u32) -> bool {
        self.0.holds_nothing(want, mask)
    }

    /// `Chunks::find` of `want` in `chunks`, the table this lookup started in: read from
    /// this chunk, the table walked only when a slot passed it full.
    #[inline(always)]
    pub fn find(self, chunks: &Chunks, want: u32, mask: u32) -> Option<u32> {
        match self.0.first(want, mask) {
            Some(slot) => Some(slot),
            None if self.0.over() == 0 => None,
            None => chunks.find(want, mask),
        }
    }

    /// Ask the CPU to bring the chunk in.
    #[inline(always)]
    pub fn prefetch(self) {
        super::prefetch(self.0);
    }
}

/// The chunks, and how many slots are filled.
#[derive(Clone, Debug, Default)]
pub struct Chunks {
    chunks: Arc<[Chunk]>,
    filled: usize,
}

#[inline]
fn home(pos: u32, len: usize) -> usize {
    ((u64::from(pos) * len as u64) >> 32) as usize
}

#[inline]
fn next(at: usize, len: usize) -> usize {
    if at + 1 == len {
        0
    } else {
        at + 1
    }
}

impl Chunks {
    /// How many slots are filled.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.filled
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.chunks.len() * std::mem::size_of::<Chunk>()
    }

    /// Whether no other snapshot shares the chunks (a write would not copy them).
    pub fn is_unique(&self) -> bool {
        Arc::strong_count(&self.chunks) == 1
    }

    /// The chunks to write, copied first if another snapshot shares them.
    fn chunks_mut(&mut self) -> &mut [Chunk] {
        if Arc::get_mut(&mut self.chunks).is_none() {
            self.chunks = Arc::from(&self.chunks[..]);
        }
        Arc::get_mut(&mut self.chunks).unwrap_or(&mut [])
    }

    /// The slot whose position (`slot & mask`) is `want`, a nonzero position.
    #[inline(always)]
    pub fn find(&self, want: u32, mask: u32) -> Option<u32> {
        let len = self.chunks.len();
        if len == 0 {
            return None;
        }
        let mut at = home(want, len);
        for _ in 0..len {
            let chunk = &self.chunks[at];
            if let Some(slot) = chunk.first(want, mask) {
                return Some(slot);
            }
            if chunk.over() == 0 {
                return None;
            }
            at = next(at, len);
        }
        None
    }

    /// The chunk a lookup of `want` starts at (an empty one when there are no chunks): a
    /// page of lookups finds it once, prefetches it, and then tests it.
    #[inline(always)]
    pub fn start(&self, want: u32) -> Start<'_> {
        Start(
            self.chunks
                .get(home(want, self.chunks.len()))
                .unwrap_or(&EMPTY),
        )
    }

    /// Ask the CPU to bring in the chunk a lookup of `want` starts at (a page of lookups
    /// issues these first, so that their misses overlap).
    #[inline(always)]
    pub fn prefetch(&self, want: u32) {
        if let Some(chunk) = self.chunks.get(home(want, self.chunks.len())) {
            super::prefetch(chunk);
        }
    }

    /// Where the slot equal to `slot` (placed by `pos`) is: chunk and index.
    fn position(&self, pos: u32, slot: u32) -> Option<(usize, usize)> {
        let len = self.chunks.len();
        if len == 0 {
            return None;
        }
        let mut at = home(pos, len);
        for _ in 0..len {
            let chunk = &self.chunks[at];
            if let Some(i) = chunk.slots().iter().position(|&s| s == slot) {
                return Some((at, i));
            }
            if chunk.over() == 0 {
                return None;
            }
            at = next(at, len);
        }
        None
    }

    /// Put `slot` (nonzero, positioned `pos`) in the first chunk from its home with room.
    pub fn insert(&mut self, pos: u32, slot: u32, pos_of: impl Fn(u32) -> u32) {
        debug_assert!(slot != 0);
        if (self.filled + 1) * 8 > self.chunks.len() * SLOTS * MAX_FILL_EIGHTHS {
            let size = (self.chunks.len() + self.chunks.len().div_ceil(2)).max(1);
            self.resize(size, &pos_of);
        }
        self.place(pos, slot);
        self.filled += 1;
    }

    fn place(&mut self, pos: u32, slot: u32) {
        place(self.chunks_mut(), pos, slot);
    }
    /// Replace the slot equal to `old` (placed by `pos`) with `new`, placed by the same
    /// position; false when absent.
    pub fn replace(&mut self, pos: u32, old: u32, new: u32) -> bool {
        match self.position(pos, old) {
            Some((at, i)) => {
                self.chunks_mut()[at].0[i] = new;
                true
            }
            None => false,
        }
    }

    /// Remove the slot equal to `slot` (placed by `pos`); false when it is not there.
    pub fn remove(&mut self, pos: u32, slot: u32) -> bool {
        let Some((found, i)) = self.position(pos, slot) else {
            return false;
        };
        let chunks = self.chunks_mut();
        chunks[found].0[i] = 0;
        let len = chunks.len();
        let mut at = home(pos, len);
        while at != found {
            chunks[at].0[OVER] -= 1;
            at = next(at, len);
        }
        self.filled -= 1;
        true
    }

    /// Size the chunks to what they hold (after a large batch), at a fill short of the one
    /// they grow at.
    pub fn fit(&mut self, pos_of: impl Fn(u32) -> u32) {
        let size = match self.filled {
            0 => 0,
            n => (n * 16 / FIT_FILL_SIXTEENTHS).div_ceil(SLOTS).max(1),
        };
        if size != self.chunks.len() {
            self.resize(size, &pos_of);
        }
    }

    fn resize(&mut self, size: usize, pos_of: &impl Fn(u32) -> u32) {
        let mut chunks = vec![Chunk::default(); size];
        for chunk in self.chunks.iter() {
            for &slot in chunk.slots().iter().filter(|&&s| s != 0) {
                place(&mut chunks, pos_of(slot), slot);
            }
        }
        self.chunks = chunks.into();
    }
}

fn place(chunks: &mut [Chunk], pos: u32, slot: u32) {
    let len = chunks.len();
    let mut at = home(pos, len);
    loop {
        let chunk = &mut chunks[at];
        if let Some(i) = chunk.free() {
            chunk.0[i] = slot;
            return;
        }
        chunk.0[OVER] += 1;
        at = next(at, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MASK: u32 = !0xff;

    fn p(slot: u32) -> u32 {
        slot & MASK
    }

    #[test]
    fn random_inserts_removals_and_fits_keep_every_slot_findable() {
        let mut t = Chunks::default();
        let mut live = std::collections::BTreeMap::new();
        let mut x: u64 = 9;
        for step in 0..60_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // few distinct positions, crowded at the top: chunks overflow and wrap around
            let pos = if x % 5 == 0 {
                0xffff_ff00 - ((x >> 8) as u32 % 64) * 256
            } else {
                ((x >> 20) as u32 % 4000 + 1) << 12
            };
            let slot = pos | (step % 200 + 1);
            match live.get(&pos) {
                Some(&old) if x % 3 == 0 => {
                    assert!(t.remove(pos, old));
                    assert!(!t.remove(pos, old));
                    live.remove(&pos);
                }
                Some(&old) => {
                    assert!(t.replace(pos, old, slot));
                    live.insert(pos, slot);
                }
                None => {
                    t.insert(pos, slot, p);
                    live.insert(pos, slot);
                }
            }
            if step % 7000 == 0 {
                t.fit(p);
            }
            assert_eq!(t.filled, live.len());
        }
        for (&pos, &slot) in &live {
            assert_eq!(t.find(pos, MASK), Some(slot));
        }
        for pos in (1..5000u32).map(|n| (n << 12) | 0x100) {
            assert_eq!(t.find(pos, MASK), None);
        }
        // every `over` is exactly the slots that passed its chunk
        let len = t.chunks.len();
        let mut passed = vec![0u32; len];
        for (c, chunk) in t.chunks.iter().enumerate() {
            for &slot in chunk.slots().iter().filter(|&&s| s != 0) {
                let mut at = home(p(slot), len);
                while at != c {
                    passed[at] += 1;
                    at = next(at, len);
                }
            }
        }
        assert_eq!(
            passed,
            t.chunks.iter().map(|c| c.over()).collect::<Vec<_>>()
        );
        for (&pos, &slot) in &live {
            assert!(t.remove(pos, slot));
        }
        assert!(t.filled == 0 && t.chunks.iter().all(|c| c.over() == 0));
        t.fit(p);
        assert_eq!(t.bytes(), 0);
        assert_eq!(t.find(1 << 12, MASK), None);
    }

    #[test]
    fn a_write_copies_chunks_another_holds() {
        let mut t = Chunks::default();
        for n in 1..100u32 {
            t.insert(n << 12, (n << 12) | 1, p);
        }
        let mut copy = t.clone();
        assert!(!copy.is_unique());
        copy.remove(5 << 12, (5 << 12) | 1);
        copy.insert(500 << 12, (500 << 12) | 1, p);
        assert!(copy.is_unique() && t.is_unique());
        assert_eq!(t.find(5 << 12, MASK), Some((5 << 12) | 1));
        assert_eq!(t.find(500 << 12, MASK), None);
        assert_eq!(copy.find(5 << 12, MASK), None);
        assert_eq!(copy.find(500 << 12, MASK), Some((500 << 12) | 1));
    }

    #[test]
    fn a_chunk_finds_the_first_slot_a_scan_finds() {
        let mut x: u64 = 5;
        for _ in 0..20_000 {
            let mut chunk = Chunk::default();
            for slot in chunk.0.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // few positions, so that several slots share one
                *slot = (((x % 6) as u32) << 8) | (x >> 40) as u32 & 0xff;
            }
            for want in (0..6u32).map(|p| p << 8) {
                let scan = chunk.slots().iter().copied().find(|&s| s & MASK == want);
                assert_eq!(chunk.first(want, MASK), scan);
                let any = chunk.0.iter().any(|&s| s & MASK == want);
                assert_eq!(chunk.may_hold(want, MASK), any);
            }
        }
    }

    #[test]
    fn a_chunk_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Chunk>(), 64);
        assert_eq!(std::mem::align_of::<Chunk>(), 64);
    }
}
