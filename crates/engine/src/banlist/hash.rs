//! The index's string hash: rapidhash's construction (folded 64x64->128 multiplies over
//! words read little-endian), written out so that the short names a lookup hashes (a
//! site, a host, a url key) are hashed in line with no call: up to 16 bytes in two reads
//! and two multiplies, each further 16 bytes one multiply more. foldhash, which this
//! replaced, calls out of line past 16 bytes, and most sites and keys are longer.
//!
//! The seed is fixed: the same name always lands in the same shard and slot.

/// rapidhash's secrets.
const S0: u64 = 0x2d35_8dcc_aa6c_78a5;
const S1: u64 = 0x8bb8_4b93_962e_acc9;
const S2: u64 = 0x4b33_a62e_d433_d4a3;
/// The seed, already mixed as rapidhash mixes its seed (`mix(seed ^ S0, S1)`).
const SEED: u64 = mix(0x5EED_BA11 ^ S0, S1);

/// The 128-bit product of `a` and `b`, as (low, high) words.
#[inline(always)]
const fn mum(a: u64, b: u64) -> (u64, u64) {
    let r = (a as u128) * (b as u128);
    (r as u64, (r >> 64) as u64)
}

/// The 128-bit product of `a` and `b`, folded to 64 bits.
#[inline(always)]
const fn mix(a: u64, b: u64) -> u64 {
    let (lo, hi) = mum(a, b);
    lo ^ hi
}

#[inline(always)]
fn word(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(w)
}

#[inline(always)]
fn half(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0; 4];
    w.copy_from_slice(&bytes[at..at + 4]);
    u64::from(u32::from_le_bytes(w))
}

/// The hash of `bytes`.
#[inline(always)]
pub fn hash(bytes: &[u8]) -> u64 {
    let len = bytes.len();
    let mut seed = SEED ^ len as u64;
    let (a, b) = if len <= 16 {
        if len >= 8 {
            (word(bytes, 0), word(bytes, len - 8))
        } else if len >= 4 {
            (half(bytes, 0) << 32 | half(bytes, len - 4), 0)
        } else if len > 0 {
            let (first, mid, last) = (bytes[0], bytes[len / 2], bytes[len - 1]);
            (
                u64::from(first) << 56 | u64::from(mid) << 32 | u64::from(last),
                0,
            )
        } else {
            (0, 0)
        }
    } else if len <= 32 {
        seed = mix(word(bytes, 0) ^ S2, word(bytes, 8) ^ seed);
        (word(bytes, len - 16), word(bytes, len - 8))
    } else {
        let mut at = 0;
        while len - at > 16 {
            seed = mix(word(bytes, at) ^ S2, word(bytes, at + 8) ^ seed);
            at += 16;
        }
        (word(bytes, len - 16), word(bytes, len - 8))
    };
    let (lo, hi) = mum(a ^ S1, b ^ seed);
    mix(lo ^ S0 ^ len as u64, hi ^ S1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_and_the_length_change_the_hash() {
        // names of every length up to past three rounds, each byte flipped in turn, and the
        // same bytes one longer: no two of them share 32 low bits or the top 10 (the tag
        // and the shard the index uses)
        let mut seen = std::collections::HashSet::new();
        let mut count = 0;
        for len in 0..64 {
            let base: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            let mut names = vec![base.clone()];
            for at in 0..len {
                for bit in [0x01, 0x20, 0x80] {
                    let mut name = base.clone();
                    name[at] ^= bit;
                    names.push(name);
                }
            }
            for name in names {
                count += 1;
                assert!(seen.insert(hash(&name)), "{name:?}");
            }
        }
        let tags: std::collections::HashSet<u32> = seen.iter().map(|&h| h as u32).collect();
        assert_eq!(tags.len(), count);
    }

    #[test]
    fn tags_and_shards_spread_evenly_over_similar_names() {
        // names as a banlist holds them, differing in a few digits: the shard (top 10 bits),
        // a key table's home (the top of bits 0 to 31) and a summary table's home (the top
        // of bits 19 to 50, `summary::pos`) spread as a random function's would
        let n = 200_000;
        let mut shards = vec![0u32; 1024];
        let mut homes = vec![0u32; 1024];
        let mut summary_homes = vec![0u32; 1024];
        for i in 0..n {
            let name = format!("shop{i}.example");
            let h = hash(name.as_bytes());
            shards[(h >> 54) as usize] += 1;
            homes[((h as u32) >> 22) as usize] += 1;
            summary_homes[((h >> 19) as u32 >> 22) as usize] += 1;
        }
        let mean = f64::from(n) / 1024.0;
        for counts in [&shards, &homes, &summary_homes] {
            // chi-square over 1023 degrees of freedom: about 1023, sd about 45
            let chi: f64 = counts
                .iter()
                .map(|&c| (f64::from(c) - mean).powi(2) / mean)
                .sum();
            assert!(chi < 1300.0, "{chi}");
        }
    }
}
