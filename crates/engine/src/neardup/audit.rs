//! The audit tool's side of near-duplicate matching (`rearrange dupes`, app/neardup/dupes.py): a
//! site's shingle sets held in Rust, their MinHash signatures, exact intersections of
//! candidate pairs and the shared parts of one page with others. Each call spreads its work
//! over threads; audit_py.rs releases the GIL around it. The serve-time rule uses none of
//! this.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use super::minhash::Family;
use super::shingles::shingles;
use super::unicode::Words;

/// Shingle sets of many pages, appended batch by batch: a batch is one chunk, so what is
/// held is never copied to grow.
#[derive(Default)]
pub struct Sets {
    chunks: Vec<Vec<u64>>,
    /// (chunk, start, length) of each page's sorted, deduplicated set.
    at: Vec<(u32, usize, usize)>,
}

impl Sets {
    /// How many pages are held.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// Whether no page is held.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Page i's shingle set.
    pub fn get(&self, i: usize) -> &[u64] {
        let (chunk, start, len) = self.at[i];
        &self.chunks[chunk as usize][start..start + len]
    }

    /// Shingle the texts (`width` words, as the rule does) and keep their sets; their sizes.
    pub fn add(&mut self, texts: &[String], width: usize, threads: usize) -> Vec<u32> {
        let sets = parallel(texts.len(), threads, |range| {
            let mut words = Words::default();
            texts[range]
                .iter()
                .map(|t| shingles(t, width, &mut words))
                .collect()
        });
        self.push_chunk(sets)
    }

    /// Keep the sets as one chunk; their sizes.
    fn push_chunk(&mut self, sets: Vec<Vec<u64>>) -> Vec<u32> {
        let mut chunk = Vec::with_capacity(sets.iter().map(Vec::len).sum());
        let mut sizes = Vec::with_capacity(sets.len());
        let id = self.chunks.len() as u32;
        for set in sets {
            self.at.push((id, chunk.len(), set.len()));
            sizes.push(set.len() as u32);
            chunk.extend_from_slice(&set);
        }
        self.chunks.push(chunk);
        sizes
    }

    /// Keep of each page only the shingles that `min_pages` to `max_pages` pages hold
    /// (document frequency, counted over every page held): with one-word shingles, a
    /// page's distinctive words, less those every page uses and those no other page has.
    /// The pages' new sizes.
    pub fn keep_held_by(&mut self, min_pages: usize, max_pages: usize) -> Vec<u32> {
        let mut all: Vec<u64> = self.chunks.iter().flatten().copied().collect();
        all.sort_unstable();
        let mut held: std::collections::HashMap<u64, u32> =
            std::collections::HashMap::with_capacity(all.len() / 4);
        for run in all.chunk_by(|a, b| a == b) {
            held.insert(run[0], run.len() as u32);
        }
        drop(all);
        let keep = |h: &u64| (min_pages..=max_pages).contains(&(held[h] as usize));
        let mut chunks = Vec::with_capacity(self.chunks.len());
        let mut at = Vec::with_capacity(self.at.len());
        let mut sizes = Vec::with_capacity(self.at.len());
        for (c, chunk) in self.chunks.iter().enumerate() {
            let mut kept = Vec::new();
            for &(_, start, len) in self.at.iter().filter(|&&(id, _, _)| id as usize == c) {
                let first = kept.len();
                kept.extend(chunk[start..start + len].iter().copied().filter(keep));
                at.push((c as u32, first, kept.len() - first));
                sizes.push((kept.len() - first) as u32);
            }
            kept.shrink_to_fit();
            chunks.push(kept);
        }
        self.chunks = chunks;
        self.at = at;
        sizes
    }

    /// Add, for each text (page `first + n` of `words`), the unordered pairs of its words
    /// that its set in `words` holds, met within `window` words of each other: a rewrite
    /// that reorders sentences and swaps a third of the words keeps many such pairs of its
    /// template's distinctive words, where two unrelated pages share almost none. Each pair
    /// is hashed from its two words' hashes; the sets' sizes.
    pub fn add_cooccurring(
        &mut self,
        texts: &[String],
        words: &Sets,
        first: usize,
        window: usize,
        threads: usize,
    ) -> Vec<u32> {
        let sets = parallel(texts.len(), threads, |range| {
            let mut scratch = Words::default();
            range
                .map(|n| {
                    let mine = words.get(first + n);
                    scratch.read(&texts[n]);
                    let kept: Vec<(usize, u64)> = (0..scratch.len())
                        .map(|i| (i, super::murmur3::x64_128(scratch.window(i, i + 1), 0).0))
                        .filter(|(_, h)| mine.binary_search(h).is_ok())
                        .collect();
                    let mut pairs = Vec::new();
                    for (k, &(at, a)) in kept.iter().enumerate() {
                        for &(_, b) in kept[k + 1..].iter().take_while(|(to, _)| to - at <= window)
                        {
                            if a != b {
                                pairs.push(pair_hash(a.min(b), a.max(b)));
                            }
                        }
                    }
                    pairs.sort_unstable();
                    pairs.dedup();
                    pairs
                })
                .collect()
        });
        self.push_chunk(sets)
    }

    /// The k-value signatures of pages `pages`, row after row.
    pub fn sign(&self, pages: Range<usize>, family: &Family, k: usize, threads: usize) -> Vec<u64> {
        let first = pages.start;
        parallel(pages.len(), threads, |range| {
            let mut out = vec![0; range.len() * k];
            for (row, i) in out.chunks_exact_mut(k).zip(range) {
                family.sign(self.get(first + i), row);
            }
            out
        })
    }

    /// |a_n ∩ b_n| for each pair n.
    pub fn intersections(&self, a: &[u32], b: &[u32], threads: usize) -> Vec<u32> {
        parallel(a.len().min(b.len()), threads, |range| {
            range
                .map(|n| intersection(self.get(a[n] as usize), self.get(b[n] as usize)) as u32)
                .collect()
        })
    }

    /// For each page of `others`, one byte per shingle of page i: 1 where the other page
    /// holds it too (rows in the order of `others`, i's set in ascending hash order).
    pub fn shared(&self, i: usize, others: &[u32]) -> Vec<u8> {
        let mine = self.get(i);
        let mut out = vec![0u8; mine.len() * others.len()];
        for (row, &o) in out.chunks_exact_mut(mine.len().max(1)).zip(others) {
            mark(mine, self.get(o as usize), row);
        }
        out
    }
}

/// Text the listed pages share, by who shares it: `Postings::of`.
#[derive(Debug, Default, PartialEq)]
pub struct Postings {
    /// For each listed page, how many of its shingles no other listed page holds.
    pub unique: Vec<u32>,
    /// Shingles held by the very same pages (at least `min_pages` of them), grouped by
    /// that list of pages: a notice quoted word for word by twelve pages is one group.
    pub groups: Vec<Group>,
}

/// Shingles that exactly the pages `pages` (indexes into the list, ascending) hold.
#[derive(Debug, Default, PartialEq)]
pub struct Group {
    pub pages: Vec<u32>,
    pub shingles: Vec<u64>,
}

impl Postings {
    /// Every shingle of the listed pages (`pages[i]` is a page of `sets`) with the pages
    /// holding it, found by sorting (shingle, page) pairs: 16 bytes a shingle while it runs.
    /// Groups of fewer than `min_shingles` shingles are dropped.
    pub fn of(sets: &Sets, pages: &[u32], min_pages: usize, min_shingles: usize) -> Self {
        let total = pages.iter().map(|&p| sets.get(p as usize).len()).sum();
        let mut all: Vec<(u64, u32)> = Vec::with_capacity(total);
        for (i, &p) in pages.iter().enumerate() {
            all.extend(sets.get(p as usize).iter().map(|&h| (h, i as u32)));
        }
        all.sort_unstable();
        let mut unique = vec![0u32; pages.len()];
        let mut groups: Vec<Group> = Vec::new();
        // Groups by their list of pages: a hash of the list, then the list compared.
        let mut by_pages: std::collections::HashMap<u64, Vec<usize>> = Default::default();
        let mut start = 0;
        while start < all.len() {
            let shingle = all[start].0;
            let mut end = start + 1;
            while end < all.len() && all[end].0 == shingle {
                end += 1;
            }
            let holders = &all[start..end];
            if holders.len() == 1 {
                unique[holders[0].1 as usize] += 1;
            } else if holders.len() >= min_pages.max(2) {
                let key = holders.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &(_, p)| {
                    (h ^ u64::from(p)).wrapping_mul(0x0100_0000_01b3)
                });
                let same = by_pages.entry(key).or_default();
                let found = same.iter().copied().find(|&g| {
                    groups[g].pages.len() == holders.len()
                        && groups[g]
                            .pages
                            .iter()
                            .zip(holders)
                            .all(|(&a, &(_, b))| a == b)
                });
                let g = found.unwrap_or_else(|| {
                    groups.push(Group {
                        pages: holders.iter().map(|&(_, p)| p).collect(),
                        shingles: Vec::new(),
                    });
                    same.push(groups.len() - 1);
                    groups.len() - 1
                });
                groups[g].shingles.push(shingle);
            }
            start = end;
        }
        groups.retain(|g| g.shingles.len() >= min_shingles.max(1));
        Postings { unique, groups }
    }
}

/// One hash for an unordered pair of word hashes (given smaller first): MurmurHash3's
/// 64-bit finalizer over the two mixed, so pairs sharing a word spread apart.
fn pair_hash(a: u64, b: u64) -> u64 {
    let mut h = a ^ b.rotate_left(31).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// |a ∩ b| of two sorted, deduplicated sets.
fn intersection(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut both) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        both += usize::from(x == y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
    both
}

/// `row[n] = 1` where `a[n]` is in `b` (both sorted, deduplicated).
fn mark(a: &[u64], b: &[u64], row: &mut [u8]) {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        row[i] = u8::from(x == y);
        i += usize::from(x <= y);
        j += usize::from(y <= x);
    }
}

/// f over 0..n cut into pieces, run on up to `threads` threads, the outputs concatenated in
/// order. Pieces are handed out as threads come free, so uneven pages balance out.
fn parallel<R: Send>(
    n: usize,
    threads: usize,
    f: impl Fn(Range<usize>) -> Vec<R> + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, 256).min(n.max(1));
    if threads == 1 {
        return f(0..n);
    }
    let step = n.div_ceil(threads * 8).max(1);
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, Vec<R>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let start = next.fetch_add(step, Ordering::Relaxed);
                if start >= n {
                    break;
                }
                let out = f(start..(start + step).min(n));
                done.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((start, out));
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(PoisonError::into_inner);
    done.sort_unstable_by_key(|(start, _)| *start);
    done.into_iter().flat_map(|(_, out)| out).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(list: &[&str]) -> Vec<String> {
        list.iter().map(|t| (*t).to_owned()).collect()
    }

    #[test]
    fn sets_are_the_rules_shingles_and_sizes_whatever_the_threads() {
        let pages = texts(&["a b c d e", "a b c d f", "", "x y", "a b c d e f g"]);
        let mut one = Sets::default();
        let mut many = Sets::default();
        assert_eq!(one.add(&pages, 2, 1), vec![4, 4, 0, 1, 6]);
        assert_eq!(many.add(&pages[..2], 2, 3), vec![4, 4]);
        assert_eq!(many.add(&pages[2..], 2, 3), vec![0, 1, 6]);
        for (i, text) in pages.iter().enumerate() {
            let set = shingles(text, 2, &mut Words::default());
            assert_eq!(one.get(i), &set[..]);
            assert_eq!(many.get(i), &set[..]);
        }
    }

    #[test]
    fn intersections_and_shared_parts() {
        let mut sets = Sets::default();
        sets.add(&texts(&["a b c d e", "a b c d f", "e f g"]), 2, 2);
        // {ab bc cd de} {ab bc cd df} {ef fg}
        assert_eq!(sets.intersections(&[0, 0, 1], &[1, 2, 0], 2), vec![3, 0, 3]);
        let shared = sets.shared(0, &[1, 2]);
        assert_eq!(shared.len(), 8);
        assert_eq!(shared[..4].iter().map(|&x| u32::from(x)).sum::<u32>(), 3);
        assert_eq!(&shared[4..], &[0, 0, 0, 0]);
        let de = shingles("d e", 2, &mut Words::default())[0];
        let at = sets.get(0).iter().position(|&x| x == de).unwrap_or(9);
        assert_eq!(shared[at], 0);
    }

    #[test]
    fn signatures_match_one_page_at_a_time() {
        let mut sets = Sets::default();
        let pages = texts(&["one two three four", "five six seven", "one two three five"]);
        sets.add(&pages, 2, 1);
        let family = Family::new(8, 1);
        let rows = sets.sign(1..3, &family, 8, 2);
        for (row, i) in rows.chunks_exact(8).zip(1..3) {
            let mut alone = vec![0; 8];
            family.sign(sets.get(i), &mut alone);
            assert_eq!(row, &alone[..]);
        }
    }

    #[test]
    fn postings_group_shingles_by_the_pages_that_hold_them() {
        let mut sets = Sets::default();
        // 0 and 2 quote "n o t e" (3 shingles of 2 words); 1 and 3 are one template.
        sets.add(
            &texts(&["a b n o t e", "x y z w", "n o t e c d", "x y z w v", "q r"]),
            2,
            2,
        );
        let found = Postings::of(&sets, &[0, 1, 2, 3, 4], 2, 1);
        let words = |t: &str| shingles(t, 2, &mut Words::default());
        let mut note = words("n o t e");
        note.sort_unstable();
        let mut template = words("x y z w");
        template.sort_unstable();
        let mut groups: Vec<_> = found
            .groups
            .iter()
            .map(|g| (g.pages.clone(), g.shingles.clone()))
            .collect();
        groups.sort();
        assert_eq!(groups, vec![(vec![0, 2], note), (vec![1, 3], template)]);
        // a b, b n | e c, c d | - | w v | q r
        assert_eq!(found.unique, vec![2, 0, 2, 1, 1]);
        // a list of some pages only, and groups cut by their size and pages
        let some = Postings::of(&sets, &[3, 1], 2, 4);
        assert!(some.groups.is_empty());
        assert_eq!(some.unique, vec![1, 0]);
        assert!(Postings::of(&sets, &[0, 1, 2, 3], 3, 1).groups.is_empty());
    }

    #[test]
    fn keeping_the_words_some_pages_hold() {
        let mut sets = Sets::default();
        sets.add(&texts(&["the cat sat", "the dog sat"]), 1, 1);
        sets.add(&texts(&["the cat ran", "a fox"]), 1, 1);
        // the: 3 pages, cat: 2, sat: 2, dog, ran, a, fox: 1
        assert_eq!(sets.keep_held_by(2, 2), vec![2, 1, 1, 0]);
        let word = |w: &str| shingles(w, 1, &mut Words::default())[0];
        let mut both = [word("cat"), word("sat")];
        both.sort_unstable();
        assert_eq!(sets.get(0), &both[..]);
        assert_eq!(sets.get(1), &[word("sat")]);
        assert_eq!(sets.get(2), &[word("cat")]);
        assert!(sets.get(3).is_empty());
    }

    #[test]
    fn cooccurring_pairs_of_the_words_kept_within_a_window() {
        let mut words = Sets::default();
        let pages = texts(&["a x b y c", "c b a", "a b"]);
        words.add(&pages, 1, 1);
        words.keep_held_by(2, 3); // a, b, c: x and y are one page's
        let mut pairs = Sets::default();
        assert_eq!(pairs.add_cooccurring(&pages[..1], &words, 0, 2, 1), vec![2]); // ab, bc
        assert_eq!(
            pairs.add_cooccurring(&pages[1..], &words, 1, 2, 2),
            vec![3, 1]
        );
        // "c b a" holds ab, bc and ca (two apart); "a x b y c" has no ca within two words
        let (first, second) = (pairs.get(0), pairs.get(1));
        assert_eq!(intersection(first, second), 2);
        assert_eq!(intersection(second, pairs.get(2)), 1);
    }

    #[test]
    fn parallel_keeps_the_order() {
        let out = parallel(1000, 3, |r| r.map(|x| x * 2).collect());
        assert_eq!(out, (0..1000).map(|x| x * 2).collect::<Vec<_>>());
        assert!(parallel(0, 4, |r| r.collect::<Vec<usize>>()).is_empty());
    }
}
