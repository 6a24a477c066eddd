//! What a rule did (or would have done) to the top of the page: position moves and top-10
//! churn, per rule call, for the metrics. Pages are compared as sequences of request
//! indices (a document's identity).

use foldhash::HashMap;
#[cfg(test)]
use foldhash::HashMapExt;

use crate::doc::Doc;

/// The window of the per-rule position and churn figures: what a user sees first.
pub const TOP: usize = 10;

/// (moves, churn): position changes (new − old) of the documents in the top 10 after,
/// and how many of them were not in the top 10 before.
pub type Effect = (Vec<i64>, usize);

/// In rerank: what a rescore did to the top of the page as it will be sorted, i.e.
/// `compare_ranked(&by_score(before), &by_score(after))` without sorting either page: only
/// the top of `after` and the sorted positions of those documents in `before` are needed.
pub fn rescored(before: &[Doc], after: &[Doc]) -> Effect {
    let top = top_by_score(after);
    if top == top_by_score(before)[..top.len().min(before.len())] && before.len() >= top.len() {
        return (Vec::new(), 0);
    }
    tally(&top, |d| {
        let at = before.iter().position(|x| x.at == d)?;
        Some(sorted_position(before, at))
    })
}

/// `by_score(docs)[..TOP]`: one pass that keeps the best `TOP` (a later document of an
/// equal score goes after the earlier one, as the stable sort puts it). Scores are finite
/// (the decoder refuses others, and a Python rule's output is checked).
fn top_by_score(docs: &[Doc]) -> Vec<u32> {
    let mut top: Vec<(f64, u32)> = Vec::with_capacity(TOP + 1);
    for d in docs {
        if top.len() == TOP && d.score <= top[TOP - 1].0 {
            continue;
        }
        let at = top.partition_point(|&(s, _)| s >= d.score);
        top.insert(at, (d.score, d.at));
        top.truncate(TOP);
    }
    top.into_iter().map(|(_, at)| at).collect()
}

/// The position `docs[i]` takes when `docs` is stably sorted by score, best first.
fn sorted_position(docs: &[Doc], i: usize) -> usize {
    let s = docs[i].score;
    let higher = docs.iter().filter(|d| d.score > s).count();
    higher + docs[..i].iter().filter(|d| d.score == s).count()
}

/// The request indices of `docs`, stably sorted by score, best first (with
/// `compare_ranked`, the reference `rescored` is tested against).
#[cfg(test)]
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
#[cfg(test)]
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

    /// Documents d0..d(n-1), document i scored `score(i)`.
    fn page(n: u32, mut score: impl FnMut(u32) -> f64) -> Vec<Doc> {
        (0..n)
            .map(|at| Doc {
                at,
                score: score(at),
                annotations: Vec::new(),
                collapsed: Vec::new(),
            })
            .collect()
    }

    /// A rescore's effect as the runner judges it in rerank: both pages sorted by score
    /// (`rescored`, checked here against sorting both, its reference).
    fn resorted(before: &[Doc], after: &[Doc]) -> Effect {
        let reference = compare_ranked(&by_score(before), &by_score(after));
        assert_eq!(rescored(before, after), reference);
        reference
    }

    #[test]
    fn rescored_agrees_with_sorting_both_pages() {
        let mut rng = crate::testing::Xorshift(0x853c_49e6_748f_ea9b);
        let mut next = move || rng.next();
        for _ in 0..20_000 {
            let n = (next() % 30) as u32;
            // few distinct scores, so ties (and their order) matter
            let levels = 1 + next() % 8;
            let before = page(n, |_| (next() % levels) as f64);
            let mut after = before.clone();
            for d in after.iter_mut() {
                if next() % 3 == 0 {
                    d.score = (next() % levels) as f64 - 0.5 * (next() % 2) as f64;
                }
            }
            resorted(&before, &after);
        }
    }

    #[test]
    fn a_document_lifted_into_the_top_pushes_the_rest_down_and_churns_one() {
        let before = page(12, |i| 100.0 - i as f64);
        let mut after = before.clone();
        after[11].score = 200.0;
        let (moves, churn) = resorted(&before, &after);
        assert_eq!((moves[0], moves.len(), churn), (-11, 10, 1)); // d11 in, the rest down 1
        let removed: Vec<u32> = (1..12).collect();
        let (moves, churn) = effect(&ats(&before), &removed);
        assert_eq!((moves, churn), (vec![-1; 10], 1)); // d10 enters at 10th place
    }

    #[test]
    fn outside_rerank_the_walk_survives_a_reorder() {
        let before: Vec<u32> = (0..15).collect();
        assert_eq!(effect(&before, &before), (vec![], 0)); // labels: nothing moved
        let collapsed: Vec<u32> = [0, 1].into_iter().chain(4..15).collect();
        assert_eq!(effect(&before, &collapsed), (vec![-2; 8], 2)); // the rest up two
        let reordered: Vec<u32> = (0..14).rev().collect(); // the full index is used
        let (moves, churn) = effect(&before, &reordered);
        assert_eq!((moves[0], churn), (-13, 4));
    }

    #[test]
    fn a_trim_a_removal_below_the_top_or_a_fold_into_a_leader_moves_no_leader() {
        let before: Vec<u32> = (0..15).collect();
        assert_eq!(effect(&before, &before[..10]), (vec![], 0));
        let below: Vec<u32> = (0..12).chain(13..15).collect();
        assert_eq!(effect(&before, &below), (vec![], 0));
        // d1 folded under d0: the leader stays first, the rest move up one
        let folded: Vec<u32> = [0].into_iter().chain(2..15).collect();
        assert_eq!(effect(&before, &folded), (vec![-1; 9], 1));
    }

    #[test]
    fn a_rescore_that_leaves_the_sorted_top_as_it_was_moved_nothing() {
        let before = page(12, |i| 100.0 - i as f64);
        let mut demoted = before.clone();
        demoted[11].score = 0.5; // already last: stays last
        assert_eq!(resorted(&before, &demoted), (vec![], 0));
        let mut lifted = before.clone();
        lifted[10].score = 95.5;
        // d10 to 6th, d5..d8 down one, d9 out of the top
        assert_eq!(resorted(&before, &lifted), (vec![-5, 1, 1, 1, 1], 1));
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
