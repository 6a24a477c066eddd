//! The summary's table: `u32` slots in chunks of one cache line, a lookup compares a whole
//! chunk at once (no loop to leave at an unpredictable slot, as linear probing has), and
//! almost always reads one line. A chunk keeps its slots' top halves apart from their low
//! halves: the top 16 bits of the fifteen positions are compared in two 16-byte compares,
//! without masking, and a slot is read whole only where its top half matched (a position
//! has at least its top 16 bits).
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

/// Data slots per chunk (the 16th lane of each half is the chunk's `over`).
const SLOTS: usize = 15;
/// Chunks grow by half when the slots are this full (in 1/8ths).
const MAX_FILL_EIGHTHS: usize = 6;
/// `fit` leaves the slots this full (in 1/16ths).
const FIT_FILL_SIXTEENTHS: usize = 11;

/// Fifteen `u32` slots, each split in halves: the top 16 bits of every slot side by side
/// (`high`), then the low 16 bits (`low`), so that a lookup compares the sixteen top halves
/// in two 16-byte compares and reads a slot's low half only where its top half matched.
/// The 16th lane of each half is `over` (its low and high 16 bits).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Chunk {
    high: [u16; SLOTS + 1],
    low: [u16; SLOTS + 1],
}

const OVER: usize = SLOTS;

impl Chunk {
    /// Bit `i` set when the top half of slot `i` is that of `want` (never bit 15, `over`):
    /// the candidates a position's lookup reads in full.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn candidates(&self, want: u32) -> u32 {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi16, _mm_load_si128, _mm_movemask_epi8, _mm_packs_epi16,
            _mm_set1_epi16,
        };
        let lanes: *const __m128i = self.high.as_ptr().cast();
        // (SSE2 is part of x86_64; recent compilers call these intrinsics safe)
        #[allow(unused_unsafe)]
        // SAFETY: `high` is 32 bytes at the start of a chunk aligned to 64: two aligned
        // 16-byte loads read exactly its sixteen `u16`s.
        unsafe {
            let w = _mm_set1_epi16((want >> 16) as u16 as i16);
            let (a, b) = (
                _mm_cmpeq_epi16(_mm_load_si128(lanes), w),
                _mm_cmpeq_epi16(_mm_load_si128(lanes.add(1)), w),
            );
            // each lane's all-ones or zero narrowed to a byte, in order (saturation keeps both)
            (_mm_movemask_epi8(_mm_packs_epi16(a, b)) as u32) & ((1 << SLOTS) - 1)
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn candidates(&self, want: u32) -> u32 {
        let top = (want >> 16) as u16;
        self.high[..SLOTS]
            .iter()
            .enumerate()
            .fold(0, |bits, (i, &h)| bits | u32::from(h == top) << i)
    }

    /// Slot `i`.
    #[inline(always)]
    fn slot(&self, i: usize) -> u32 {
        u32::from(self.high[i]) << 16 | u32::from(self.low[i])
    }

    #[inline]
    fn set(&mut self, i: usize, slot: u32) {
        self.high[i] = (slot >> 16) as u16;
        self.low[i] = slot as u16;
    }

    /// The first slot with the position `want` (`mask` picks the position bits, at least
    /// the top 16), read where a top half matched.
    #[inline(always)]
    fn first(&self, want: u32, mask: u32) -> Option<u32> {
        debug_assert!(mask >> 16 == 0xffff);
        let mut found = self.candidates(want);
        while found != 0 {
            let slot = self.slot(found.trailing_zeros() as usize);
            if slot & mask == want {
                return Some(slot);
            }
            found &= found - 1;
        }
        None
    }

    #[inline]
    fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        (0..SLOTS).map(|i| self.slot(i))
    }

    #[inline]
    fn over(&self) -> u32 {
        self.slot(OVER)
    }

    #[inline]
    fn set_over(&mut self, over: u32) {
        self.set(OVER, over);
    }

    fn free(&self) -> Option<usize> {
        (0..SLOTS).find(|&i| self.slot(i) == 0)
    }
}

/// What a lookup in chunks that hold nothing reads.
static EMPTY: Chunk = Chunk {
    high: [0; SLOTS + 1],
    low: [0; SLOTS + 1],
};

/// The chunk a lookup starts at (see `Chunks::start`).
#[derive(Clone, Copy, Debug)]
pub struct Start<'a>(&'a Chunk);

impl Default for Start<'_> {
    fn default() -> Self {
        Start(&EMPTY)
    }
}

impl Start<'_> {
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

/// The chunks, and how many slots are filled. There is always a chunk: a table that holds
/// nothing shares one empty chunk with every other (`none`, copied on its first write), so
/// that a lookup's chunk is found without a test for a table with none.
#[derive(Clone, Debug)]
pub struct Chunks {
    chunks: Arc<[Chunk]>,
    filled: usize,
}

impl Default for Chunks {
    fn default() -> Self {
        Chunks {
            chunks: none(),
            filled: 0,
        }
    }
}

/// The one empty chunk every table that holds nothing shares.
fn none() -> Arc<[Chunk]> {
    static NONE: std::sync::OnceLock<Arc<[Chunk]>> = std::sync::OnceLock::new();
    NONE.get_or_init(|| Arc::from([Chunk::default()])).clone()
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

    /// Whether the slot `slot` (placed by `pos`) lies in its home chunk (the tests place
    /// some past it).
    #[cfg(test)]
    pub fn in_home(&self, pos: u32, slot: u32) -> bool {
        self.chunks[home(pos, self.chunks.len())]
            .slots()
            .any(|s| s == slot)
    }

    /// An empty table with room for `n` slots below the fill it grows at (a load, which
    /// knows about how many it will hold, places them without growing it).
    pub fn with_capacity(n: usize) -> Self {
        let size = (n * 8).div_ceil(SLOTS * MAX_FILL_EIGHTHS).max(1);
        Chunks {
            chunks: vec![Chunk::default(); size].into(),
            filled: 0,
        }
    }

    /// Bytes held (none for the shared empty chunk).
    pub fn bytes(&self) -> usize {
        if self.filled == 0 && Arc::ptr_eq(&self.chunks, &none()) {
            return 0;
        }
        self.chunks.len() * std::mem::size_of::<Chunk>()
    }

    /// Whether no other snapshot shares the chunks (a write would not copy them).
    pub fn is_unique(&self) -> bool {
        Arc::strong_count(&self.chunks) == 1
    }

    /// The chunks to write, copied first if another snapshot shares them.
    fn chunks_mut(&mut self) -> &mut [Chunk] {
        super::unique(&mut self.chunks)
    }

    /// The slot whose position (`slot & mask`) is `want`, a nonzero position.
    #[inline(always)]
    pub fn find(&self, want: u32, mask: u32) -> Option<u32> {
        let len = self.chunks.len();
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

    /// The chunk a lookup of `want` starts at: a page of lookups finds it once, prefetches
    /// it, and then tests it.
    #[inline(always)]
    pub fn start(&self, want: u32) -> Start<'_> {
        Start(self.home_chunk(want))
    }

    /// Ask the CPU to bring in the chunk a lookup of `want` starts at (a page of lookups
    /// issues these first, so that their misses overlap).
    #[inline(always)]
    pub fn prefetch(&self, want: u32) {
        super::prefetch(self.home_chunk(want));
    }

    /// The home chunk of `want`, without a bounds test (a clean site's lookup is a few
    /// dozen instructions, and this is on it).
    #[inline(always)]
    fn home_chunk(&self, want: u32) -> &Chunk {
        let len = self.chunks.len();
        debug_assert!(len > 0);
        // SAFETY: there is always a chunk (`Chunks`: `none`'s, or what `resize` made, never
        // empty), and `home` of a `u32` is below `len`: `want * len >> 32 < len`.
        unsafe { self.chunks.get_unchecked(home(want, len)) }
    }

    /// Where the slot equal to `slot` (placed by `pos`) is: chunk and index.
    fn position(&self, pos: u32, slot: u32) -> Option<(usize, usize)> {
        let len = self.chunks.len();
        let mut at = home(pos, len);
        for _ in 0..len {
            let chunk = &self.chunks[at];
            if let Some(i) = chunk.slots().position(|s| s == slot) {
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
                self.chunks_mut()[at].set(i, new);
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
        chunks[found].set(i, 0);
        let len = chunks.len();
        let mut at = home(pos, len);
        while at != found {
            let over = chunks[at].over() - 1;
            chunks[at].set_over(over);
            at = next(at, len);
        }
        self.filled -= 1;
        true
    }

    /// Size the chunks to what they hold (after a large batch), at a fill short of the one
    /// they grow at.
    pub fn fit(&mut self, pos_of: impl Fn(u32) -> u32) {
        let size = match self.filled {
            0 => {
                self.chunks = none();
                return;
            }
            n => (n * 16 / FIT_FILL_SIXTEENTHS).div_ceil(SLOTS).max(1),
        };
        if size != self.chunks.len() {
            self.resize(size, &pos_of);
        }
    }

    fn resize(&mut self, size: usize, pos_of: &impl Fn(u32) -> u32) {
        debug_assert!(size > 0, "a table always has a chunk");
        let mut chunks = vec![Chunk::default(); size];
        for chunk in self.chunks.iter() {
            for slot in chunk.slots().filter(|&s| s != 0) {
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
            chunk.set(i, slot);
            return;
        }
        let over = chunk.over() + 1;
        chunk.set_over(over);
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
            for slot in chunk.slots().filter(|&s| s != 0) {
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
        for _ in 0..if cfg!(miri) { 20 } else { 20_000 } {
            let mut chunk = Chunk::default();
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            // few positions, differing in the top half, the low half or both, so that
            // several slots share one and top halves match where whole positions do not
            let position = |r: u64| ((r % 3) as u32) << 16 | ((r / 3 % 2) as u32) << 8;
            for i in 0..=SLOTS {
                let r = next();
                chunk.set(i, position(r) | (r >> 40) as u32 & 0xff);
            }
            for want in (0..6u64).map(position) {
                let scan = chunk.slots().find(|&s| s & MASK == want);
                assert_eq!(chunk.first(want, MASK), scan);
                let top = chunk.slots().any(|s| s >> 16 == want >> 16);
                assert_eq!(chunk.candidates(want) != 0, top);
            }
        }
    }

    #[test]
    fn a_chunk_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Chunk>(), 64);
        assert_eq!(std::mem::align_of::<Chunk>(), 64);
    }
}
