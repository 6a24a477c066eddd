//! The index's string hash: rapidhash's construction (folded 64x64->128 multiplies over
//! words read little-endian, its secrets), written out so that the short names a lookup
//! hashes (a site, a host, a url key) are hashed in line with no call: up to 16 bytes in
//! two reads and one multiply, each further 16 bytes one multiply more. foldhash, which this
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

/// The length, over every bit of a word (folded in with an xor, a small number would
/// cancel against the bytes beside it: `abc` and `ab` read the same first and middle
/// bytes, and differ by as much in the last as in the length). Not on the multiplies'
/// path: it waits for no read.
#[inline(always)]
fn spread(len: usize) -> u64 {
    (len as u64).wrapping_mul(S2)
}

/// The hash of `bytes`: one folded multiply for up to 16 bytes, two side by side for up to
/// 32, one more in a row per 16 bytes past that.
///
/// A lookup's first step hashes every URL's site, and its next read waits for the hash: the
/// multiplies in a row are most of that wait. rapidhash folds the two words of a short
/// name once more after its multiply (two in a row for up to 16 bytes, three for up to 32);
/// the banlist bench's page went from 2.15x to 2.05x the floor when each name lost one
/// of them, and a test of the spread of shards, tags and homes (below) holds as before.
/// foldhash, the floor's hasher, folds a short key once as well.
#[inline(always)]
pub fn hash(bytes: &[u8]) -> u64 {
    let len = bytes.len();
    if len <= 16 {
        let (a, b) = if len >= 8 {
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
        };
        return mix(a ^ S1, b ^ SEED ^ spread(len));
    }
    // 16 bytes a round, folded into the seed, then the last 16 with it (a name of up to
    // 32 bytes, most sites and hosts, takes its one round with no loop)
    let mut seed = SEED ^ spread(len);
    if len <= 32 {
        // the first 16 bytes and the last 16 (overlapping below 32) folded apart, side by
        // side: one multiply in a row, as for a short name
        let head = mix(word(bytes, 0) ^ S2, word(bytes, 8) ^ seed);
        let tail = mix(word(bytes, len - 16) ^ S1, word(bytes, len - 8) ^ S0);
        return head ^ tail;
    }
    let mut at = 0;
    while len - at > 16 {
        seed = mix(word(bytes, at) ^ S2, word(bytes, at + 8) ^ seed);
        at += 16;
    }
    mix(seed ^ word(bytes, len - 16) ^ S1, word(bytes, len - 8) ^ S0)
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
        // names as a banlist holds them, differing in a few digits, short and long (one
        // multiply, two, and a round more): the shard (top 10 bits), a key table's home
        // (the top of bits 0 to 31), a summary table's home (the top of bits 19 to 50,
        // `summary::pos`), and the bits the sites filter draws its masks from (bits 0 to
        // 7, 8 to 15 and 24 to 31, `filter`) spread as a random function's would
        let n = 200_000;
        let names: [fn(u32) -> String; 3] = [
            |i| format!("s{i}.com"),
            |i| format!("shop{i}.example"),
            |i| {
                format!(
                    "www.s{i}-{:x}.example/p/{i}.html",
                    i.wrapping_mul(2_654_435_761)
                )
            },
        ];
        for name in names {
            let mut shards = vec![0u32; 1024];
            let mut homes = vec![0u32; 1024];
            let mut summary_homes = vec![0u32; 1024];
            let mut masks = [vec![0u32; 256], vec![0u32; 256], vec![0u32; 256]];
            for i in 0..n {
                let h = hash(name(i).as_bytes());
                shards[(h >> 54) as usize] += 1;
                homes[((h as u32) >> 22) as usize] += 1;
                summary_homes[((h >> 19) as u32 >> 22) as usize] += 1;
                masks[0][(h & 0xff) as usize] += 1;
                masks[1][((h >> 8) & 0xff) as usize] += 1;
                masks[2][((h as u32) >> 24) as usize] += 1;
            }
            let chi = |counts: &[u32]| -> f64 {
                let mean = f64::from(n) / counts.len() as f64;
                counts
                    .iter()
                    .map(|&c| (f64::from(c) - mean).powi(2) / mean)
                    .sum()
            };
            for counts in [&shards, &homes, &summary_homes] {
                // chi-square over 1023 degrees of freedom: about 1023, sd about 45
                let chi = chi(counts);
                assert!(chi < 1300.0, "{}: {chi}", name(0));
            }
            for counts in &masks {
                // over 255 degrees of freedom: about 255, sd about 23
                let chi = chi(counts);
                assert!(chi < 370.0, "{}: {chi}", name(0));
            }
        }
    }
}
