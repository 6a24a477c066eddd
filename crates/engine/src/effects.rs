//! What a rule did (or would have done) to the top of the page: position moves and top-10
//! churn, per rule call, for the metrics. Pages are compared as sequences of request
//! indices (a document's identity).

use foldhash::{HashMap, HashMapExt};

use crate::doc::Doc;

/// The window of the per-rule position and churn figures: what a user sees first.
pub const TOP: usize = 10;

/// (moves, churn): position changes (new − old) of the documents in the top 10 after,
/// and how many of them were not in the top 10 before.
pub type Effect = (Vec<i64>, usize);

/// The request indices of `docs`, stably sorted by score, best first.
pub fn by_score(docs: &[Doc]) -> Vec<u32> {
    let mut order: Vec<&Doc> = docs.iter().collect();
    order.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    order.into_iter().map(|d| d.at).collect()
}

/// The request indices of `docs` in page order.
pub fn ats(docs: &[Doc]) -> Vec<u32> {
    docs.iter().map(|d| d.at).collect()
}

/// Outside rerank: the order of what is kept is kept, so the old positions are found by
/// one forward walk.
pub fn effect(before: &[u32], after: &[u32]) -> Effect {
    if after.len() == before.len() {
        return (Vec::new(), 0);
    }
    let top = &after[..after.len().min(TOP)];
    if top == &before[..top.len().min(before.len())] {
        return (Vec::new(), 0);
    }
    let (mut moves, mut churn, mut j) = (Vec::new(), 0, 0);
    let n = before.len();
    for (i, d) in top.iter().enumerate() {
        while j < n && before[j] != *d {
            j += 1;
        }
        if j == n {
            let index: HashMap<u32, usize> =
                before.iter().enumerate().map(|(k, b)| (*b, k)).collect();
            return tally(top, |d| index.get(&d).copied());
        }
        if j >= TOP {
            churn += 1;
        }
        if j != i {
            moves.push(i as i64 - j as i64);
        }
        j += 1;
    }
    (moves, churn)
}

/// (moves, churn) of the top 10 between two pages already sorted by score.
pub fn compare_ranked(before: &[u32], after: &[u32]) -> Effect {
    let top = &after[..after.len().min(TOP)];
    if before.len() >= top.len() && top == &before[..top.len()] {
        return (Vec::new(), 0);
    }
    let mut old: HashMap<u32, usize> = HashMap::with_capacity(top.len());
    for (j, d) in before.iter().enumerate() {
        if top.contains(d) {
            old.entry(*d).or_insert(j);
            if old.len() == top.len() {
                break;
            }
        }
    }
    tally(top, |d| old.get(&d).copied())
}

fn tally(top: &[u32], old: impl Fn(u32) -> Option<usize>) -> Effect {
    let (mut moves, mut churn) = (Vec::new(), 0);
    for (i, d) in top.iter().enumerate() {
        let j = old(*d).unwrap_or(TOP);
        if j >= TOP {
            churn += 1;
        }
        if j != i {
            moves.push(i as i64 - j as i64);
        }
    }
    (moves, churn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removal_in_the_top_moves_the_rest_up_and_brings_one_in() {
        let before: Vec<u32> = (0..12).collect();
        let after: Vec<u32> = (1..12).collect();
        let (moves, churn) = effect(&before, &after);
        assert_eq!(moves, vec![-1; 10]);
        assert_eq!(churn, 1);
        assert_eq!(effect(&before, &before[..5]), (vec![], 0));
    }

    #[test]
    fn ranked_pages_compare_by_position() {
        let before: Vec<u32> = (0..12).collect();
        let mut after = before.clone();
        after.swap(0, 11);
        let (moves, churn) = compare_ranked(&before, &after);
        assert_eq!(moves, vec![-11]);
        assert_eq!(churn, 1);
    }
}
