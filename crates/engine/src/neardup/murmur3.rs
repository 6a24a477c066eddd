//! MurmurHash3 x64 128 (Austin Appleby's reference `MurmurHash3_x64_128`), as `mmh3` computes
//! it: the shingle hash is its first 64 bits with seed 0 (app/neardup/shingles.py), and the caches'
//! content key all 128 (tests/reference/sigcache.py).

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

fn mix1(k: u64) -> u64 {
    k.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

fn mix2(k: u64) -> u64 {
    k.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

/// (h1, h2) of `data` with `seed`: `mmh3.hash64(data, seed, signed=False)`.
pub fn x64_128(data: &[u8], seed: u32) -> (u64, u64) {
    let mut h1 = u64::from(seed);
    let mut h2 = u64::from(seed);
    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let (lo, hi) = block.split_at(8);
        let k1 = u64::from_le_bytes(lo.try_into().unwrap_or([0; 8]));
        let k2 = u64::from_le_bytes(hi.try_into().unwrap_or([0; 8]));
        h1 ^= mix1(k1);
        h1 = h1.rotate_left(27).wrapping_add(h2);
        h1 = h1.wrapping_mul(5).wrapping_add(0x52dc_e729);
        h2 ^= mix2(k2);
        h2 = h2.rotate_left(31).wrapping_add(h1);
        h2 = h2.wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut buf = [0u8; 16];
        buf[..tail.len()].copy_from_slice(tail);
        let k1 = u64::from_le_bytes(buf[..8].try_into().unwrap_or([0; 8]));
        let k2 = u64::from_le_bytes(buf[8..].try_into().unwrap_or([0; 8]));
        if tail.len() > 8 {
            h2 ^= mix2(k2);
        }
        h1 ^= mix1(k1);
    }
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// `mmh3.hash128(data, seed=0, signed=False)`: h2 in the high half, h1 in the low.
pub fn hash128(data: &[u8]) -> u128 {
    let (h1, h2) = x64_128(data, 0);
    (u128::from(h2) << 64) | u128::from(h1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // mmh3.hash64(b"", signed=False), mmh3.hash64(b"hello", signed=False),
        // and a 21-byte input that takes a full block and a tail past 8 bytes
        assert_eq!(x64_128(b"", 0), (0, 0));
        assert_eq!(
            x64_128(b"hello", 0),
            (14688674573012802306, 6565844092913065241)
        );
        assert_eq!(
            x64_128(b"The quick brown fox j", 0),
            (2376096228224225128, 6415606665779475150)
        );
    }
}
