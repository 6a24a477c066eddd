//! The MinHash path of `Matcher::pairs` (tests/reference/neardup.py `Matcher.minhash_pairs`).
//!
//! A document's signature comes from the request, else from the cache by the text's
//! content key, else it is computed from the text and cached. Agreements between all
//! signatures are counted at once, Jaccard and containment estimated from them, and each
//! document folded under the first kept higher one it matches, as the exact path does.

use std::collections::HashMap;

use super::cache::content_key;
use super::minhash::{agreements, containment_from};
use super::unicode::Words;
use super::{shingles, Matcher, Measure, Pairs, Stopped, HITS_PER_CHECK};

type Check<'c> = dyn FnMut() -> Result<(), Stopped> + 'c;

impl Matcher {
    pub(super) fn minhash_pairs(
        &self,
        docs: &[super::Input<'_>],
        check: &mut Check<'_>,
    ) -> Result<Pairs, Stopped> {
        let k = self.p.num_perm;
        let mut rows: Vec<u64> = Vec::new();
        let mut sizes: Vec<u64> = Vec::new();
        let mut place: Vec<usize> = Vec::new(); // the document of each row
        let mut texts: Vec<(usize, &str)> = Vec::new(); // (row, text) to sign
        for (i, d) in docs.iter().enumerate() {
            if let Some(s) = d.minhash {
                if self.incompatible(s).is_some() {
                    continue; // `refused` names it; here it matches nothing
                }
                rows.extend_from_slice(&s.values);
                sizes.push(s.shingles);
            } else if let Some(text) = d.text() {
                texts.push((place.len(), text));
                rows.resize(rows.len() + k, 0);
                sizes.push(0);
            } else {
                continue;
            }
            place.push(i);
        }
        if place.len() < 2 {
            return Ok(Vec::new());
        }
        self.text_signatures(&texts, &mut rows, &mut sizes, check)?;
        if sizes.contains(&0) {
            // texts without words (and signatures saying so) match nothing
            let mut kept = 0;
            for r in 0..place.len() {
                if sizes[r] > 0 {
                    rows.copy_within(r * k..(r + 1) * k, kept * k);
                    sizes[kept] = sizes[r];
                    place[kept] = place[r];
                    kept += 1;
                }
            }
            rows.truncate(kept * k);
            sizes.truncate(kept);
            place.truncate(kept);
            if kept < 2 {
                return Ok(Vec::new());
            }
        }
        let agree = agreements(&rows, place.len(), k, check)?;
        let hits: Vec<(usize, usize, f64)> = agree
            .into_iter()
            .filter_map(|(i, j, count)| {
                let jac = f64::from(count) / k as f64;
                let value = match self.p.measure {
                    Measure::Containment => containment_from(jac, sizes[i], sizes[j]),
                    Measure::Jaccard => jac,
                };
                (value >= self.p.threshold).then_some((i, j, value))
            })
            .collect();
        let mut folded = vec![false; place.len()];
        let mut out = Vec::new();
        for block in hits.chunks(HITS_PER_CHECK) {
            check()?;
            for &(i, j, value) in block {
                if folded[i] || folded[j] {
                    continue; // i already placed, or j is not kept
                }
                folded[i] = true;
                out.push((place[i], place[j], value));
            }
        }
        Ok(out)
    }

    /// Fill the rows of texts from the cache, else sign them (and cache them); `check`
    /// before each text signed. What was signed before a stop stays cached.
    fn text_signatures(
        &self,
        texts: &[(usize, &str)],
        rows: &mut [u64],
        sizes: &mut [u64],
        check: &mut Check<'_>,
    ) -> Result<(), Stopped> {
        if texts.is_empty() {
            return Ok(());
        }
        let k = self.p.num_perm;
        let mut keys = Vec::new();
        let missing: Vec<usize> = match &self.signatures {
            None => (0..texts.len()).collect(),
            Some(cache) => {
                keys = texts.iter().map(|&(_, t)| content_key(t)).collect();
                let mut values = vec![0; texts.len() * k];
                let mut found = vec![0; texts.len()];
                let missing = cache.fetch(&keys, &mut values, &mut found);
                for (n, &(row, _)) in texts.iter().enumerate() {
                    rows[row * k..(row + 1) * k].copy_from_slice(&values[n * k..(n + 1) * k]);
                    sizes[row] = found[n];
                }
                missing
            }
        };
        let mut done: HashMap<&str, usize> = HashMap::new(); // a text twice is signed once
        let mut words = Words::default();
        for n in missing {
            check()?;
            let (row, text) = texts[n];
            let first = *done.entry(text).or_insert(row);
            if first != row {
                rows.copy_within(first * k..(first + 1) * k, row * k);
                sizes[row] = sizes[first];
                continue;
            }
            let set = shingles::shingles(text, self.p.width, &mut words);
            self.family.sign(&set, &mut rows[row * k..(row + 1) * k]);
            sizes[row] = set.len() as u64;
            if let Some(cache) = &self.signatures {
                cache.put(keys[n], &rows[row * k..(row + 1) * k], sizes[row]);
            }
        }
        Ok(())
    }
}
