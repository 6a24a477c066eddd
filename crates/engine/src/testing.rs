//! Helpers shared by the crate's unit tests.

/// xorshift64: a fixed-seed stream of u64s, the same on every run (the property-style
/// tests draw their cases from it, so a failure repeats).
pub struct Xorshift(pub u64);

impl Xorshift {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.next() as usize % from.len()]
    }
}
