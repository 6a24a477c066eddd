//! Word shingles and their set similarity (app/neardup/shingles.py), and the exact method's fold.
//!
//! A shingle set is a sorted, deduplicated `Vec<u64>`: intersecting two is one merge, and
//! the sizes are what Python's frozensets give, so every value is the same quotient of the
//! same two integers (an integer division in Python is correctly rounded, as f64's is).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use super::lru::KeyHasher;
use super::murmur3;
use super::unicode::Words;
use super::{Measure, Pairs, Stopped};

/// The `width`-word shingles of text, hashed (MurmurHash3 x64 128, first half, seed 0),
/// sorted and deduplicated; `words` is scratch space reused between texts.
///
/// As in Python: 1..width-1 words make one shingle of all of them; no words, none.
pub fn shingles(text: &str, width: usize, words: &mut Words) -> Vec<u64> {
    words.read(text);
    let n = words.len();
    let width = width.max(1);
    let mut out: Vec<u64> = if n == 0 {
        Vec::new()
    } else if n < width {
        vec![murmur3::x64_128(words.window(0, n), 0).0]
    } else {
        (0..=n - width)
            .map(|from| murmur3::x64_128(words.window(from, from + width), 0).0)
            .collect()
    };
    out.sort_unstable();
    out.dedup();
    out
}

/// |a ∩ b| of two sorted, deduplicated sets (the plain merge `fold` is checked against).
#[cfg(test)]
fn intersection(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut both) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                both += 1;
                i += 1;
                j += 1;
            }
        }
    }
    both
}

/// The lower-ranked set a scored against the higher b: containment is the share of a
/// inside b, Jaccard |a ∩ b| / |a ∪ b|; 0 when the denominator is.
#[cfg(test)]
fn score(measure: Measure, a: &[u64], b: &[u64]) -> f64 {
    let both = intersection(a, b);
    let over = match measure {
        Measure::Containment => a.len(),
        Measure::Jaccard => a.len() + b.len() - both,
    };
    if over == 0 {
        0.0
    } else {
        both as f64 / over as f64
    }
}

/// Each set folded under the first higher kept one it matches: (i, j, score), as
/// `shingles.fold`. Empty sets never match; `check` is called before each non-empty
/// set is compared.
///
/// The intersections with every kept set are counted at once through an index from
/// shingle to the kept sets holding it, so a set costs its size plus the shingles it
/// shares, not a merge with every kept set; the values are then the same quotients.
pub fn fold<S: AsRef<[u64]>>(
    sets: &[S],
    measure: Measure,
    threshold: f64,
    check: &mut dyn FnMut() -> Result<(), Stopped>,
) -> Result<Pairs, Stopped> {
    let mut kept: Vec<usize> = Vec::new();
    let mut holding: HashMap<u64, Vec<u32>, BuildHasherDefault<KeyHasher>> = HashMap::default();
    let mut both: Vec<usize> = Vec::new(); // |set ∩ kept[n]|
    let mut folded = Vec::new();
    for (i, set) in sets.iter().enumerate() {
        let set = set.as_ref();
        if set.is_empty() {
            continue;
        }
        check()?;
        both.clear();
        both.resize(kept.len(), 0);
        for x in set {
            for &n in holding.get(x).map_or(&[][..], Vec::as_slice) {
                both[n as usize] += 1;
            }
        }
        let leader = kept.iter().zip(&both).find_map(|(&j, &shared)| {
            let over = match measure {
                Measure::Containment => set.len(),
                Measure::Jaccard => set.len() + sets[j].as_ref().len() - shared,
            };
            let value = if over == 0 {
                0.0
            } else {
                shared as f64 / over as f64
            };
            (value >= threshold).then_some((j, value))
        });
        match leader {
            Some((j, value)) => folded.push((i, j, value)),
            None => {
                for &x in set {
                    holding.entry(x).or_default().push(kept.len() as u32);
                }
                kept.push(i);
            }
        }
    }
    Ok(folded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str, width: usize) -> Vec<u64> {
        shingles(text, width, &mut Words::default())
    }

    #[test]
    fn one_changed_last_word_width_2() {
        // {ab, bc, cd} vs {ab, bc, ce}: 2 shared of 4 in the union, 2 of 3 on each side
        let (a, b) = (set("a b c d", 2), set("a b c e", 2));
        assert_eq!((a.len(), b.len()), (3, 3));
        assert_eq!(score(Measure::Jaccard, &a, &b), 2.0 / 4.0);
        assert_eq!(score(Measure::Containment, &a, &b), 2.0 / 3.0);
    }

    #[test]
    fn short_and_empty_texts() {
        assert_eq!(set("Два слова", 10).len(), 1);
        assert_eq!(set("два СЛОВА!", 10), set("Два слова", 10));
        assert!(set(" , — ", 3).is_empty());
        assert_eq!(score(Measure::Containment, &[], &[1]), 0.0);
        assert_eq!(score(Measure::Jaccard, &[], &[]), 0.0);
    }

    #[test]
    fn folds_do_not_chain_and_empty_sets_are_passed_over() {
        // c matches folded b but not a: c stays kept
        let sets = [vec![1, 2, 3, 4], vec![], vec![3, 4, 5, 6], vec![5, 6, 7, 8]];
        let pairs = fold(&sets, Measure::Containment, 0.5, &mut || Ok(())).ok();
        assert_eq!(pairs, Some(vec![(2, 0, 0.5)]));
        let mut calls = 0;
        let stopped = fold(&sets, Measure::Jaccard, 0.5, &mut || {
            calls += 1;
            if calls > 2 {
                Err(Stopped)
            } else {
                Ok(())
            }
        });
        assert!(stopped.is_err() && calls == 3);
    }
}
