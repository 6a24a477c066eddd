//! `near_duplicates` (seed 000): a document whose text is a near-duplicate of a higher one
//! folds under it. The matching (shingles, MinHash, the caches) is `crate::neardup`; this
//! file turns its pairs into folds and records.

use serde::Deserialize;

use super::{collapse, Ctx, Failure, Out, RuleResult};
use crate::contract::FieldError;
use crate::doc::Doc;
use crate::neardup::{Input, Matcher, Measure, Method, Params as MatchParams, Stats, Stopped};
use crate::record::{Action, Rec};

/// The parameters as the config loader checked them (every default filled).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub shingle_words: usize,
    pub measure: String,
    pub threshold: f64,
    pub method: String,
    pub exact_max_docs: usize,
    pub num_perm: usize,
    pub seed: u64,
    pub cache_mb: usize,
    pub exact_cache_mb: usize,
}

/// The rule: its matcher (with the caches, kept until the config is reloaded).
pub struct NearDuplicates {
    matcher: Matcher,
}

impl NearDuplicates {
    /// Build from its parameters.
    pub fn build(p: Params) -> Result<Self, String> {
        let measure = match p.measure.as_str() {
            "containment" => Measure::Containment,
            "jaccard" => Measure::Jaccard,
            other => {
                return Err(format!(
                    "measure must be containment or jaccard, not {other:?}"
                ))
            }
        };
        let method = match p.method.as_str() {
            "auto" => Method::Auto,
            "exact" => Method::Exact,
            "minhash" => Method::MinHash,
            other => {
                return Err(format!(
                    "method must be auto, exact or minhash, not {other:?}"
                ))
            }
        };
        if p.shingle_words == 0 || p.num_perm == 0 {
            return Err("shingle_words and num_perm must be >= 1".into());
        }
        Ok(NearDuplicates {
            matcher: Matcher::new(MatchParams {
                width: p.shingle_words,
                measure,
                threshold: p.threshold,
                method,
                exact_max_docs: p.exact_max_docs,
                num_perm: p.num_perm,
                seed: p.seed,
                cache_bytes: p.cache_mb << 20,
                exact_cache_bytes: p.exact_cache_mb << 20,
            }),
        })
    }

    /// The caches' counters (signature cache, shingle-set cache), for the metrics.
    pub fn cache_stats(&self) -> (Option<Stats>, Option<Stats>) {
        let stats = self.matcher.cache_stats();
        (stats.signature, stats.shingle)
    }

    /// Fold near-duplicates; `Failure::Stopped` when the deadline passes meanwhile (nothing
    /// is folded until every comparison is done), a 422 for a signature it cannot compare.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        let page = ctx.page;
        let inputs: Vec<Input<'_>> = docs
            .iter()
            .map(|d| {
                let src = page.src(d);
                Input {
                    text: src.text.as_deref(),
                    minhash: src.minhash.as_ref(),
                }
            })
            .collect();
        let comparable = inputs
            .iter()
            .filter(|i| i.text.is_some_and(|t| !t.is_empty()) || i.minhash.is_some())
            .count();
        if comparable < 2 {
            return Ok(Out::unchanged());
        }
        if let Some(refused) = self.matcher.refused(&inputs) {
            let at = docs[refused.index].at;
            return Err(Failure::Refused(FieldError {
                status: 422,
                field: format!("documents[{at}].minhash.{}", refused.field),
                problem: refused.problem,
            }));
        }
        let mut check = || ctx.check_deadline().map_err(|_| Stopped);
        let (pairs, used) = self
            .matcher
            .pairs(&inputs, &mut check)
            .map_err(|Stopped| Failure::Stopped)?;
        if pairs.is_empty() {
            return Ok(Out::unchanged());
        }
        let mut folded = Vec::with_capacity(pairs.len());
        let mut recs = Vec::with_capacity(pairs.len());
        for (i, j, value) in pairs {
            folded.push((i, j));
            let reason = self.matcher.reason(value, page.id(&docs[j]), used);
            recs.push(Rec::on(page, docs[i].at, Action::Collapse, reason));
        }
        Ok(Out {
            docs: Some(collapse(docs, &folded, "near_duplicates")),
            recs,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::{Clock, FakeClock};
    use crate::doc::testing::{docs, request, SimpleCanon};
    use crate::doc::Page;
    use crate::rules::testing::ctx;

    fn rule(measure: &str, threshold: f64) -> NearDuplicates {
        NearDuplicates::build(Params {
            shingle_words: 2,
            measure: measure.into(),
            threshold,
            method: "exact".into(),
            exact_max_docs: 30,
            num_perm: 128,
            seed: 1,
            cache_mb: 1,
            exact_cache_mb: 1,
        })
        .unwrap()
    }

    fn page_of(texts: &[&str]) -> crate::contract::Request<'static> {
        let mut documents = docs(texts.len());
        for (d, t) in documents.iter_mut().zip(texts) {
            d.text = Some(t.to_string().into());
        }
        request(documents)
    }

    #[test]
    fn a_contained_text_folds_under_the_higher_document() {
        // d2's shingles {b c, c d} all lie in d1's {a b, b c, c d, d e}: containment 1.
        let req = page_of(&["a b c d e", "b c d", "x y z"]);
        let (page, ds) = Page::build(&req, &SimpleCanon, false);
        let out = rule("containment", 0.5).apply(&ds, &ctx(&page)).unwrap();
        let kept = out.docs.unwrap();
        assert_eq!(kept.iter().map(|d| d.at).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(kept[0].collapsed[0].at, 1);
        assert_eq!(out.recs.len(), 1);
        assert_eq!(
            out.recs[0].reason,
            "containment 1.00 >= 0.5 with d1; collapsed under it"
        );
    }

    #[test]
    fn jaccard_is_symmetric_and_below_the_threshold_nothing_folds() {
        // Jaccard of {b c, c d} and {a b, b c, c d, d e} is 2/4 = 0.5 < 0.6.
        let req = page_of(&["a b c d e", "b c d"]);
        let (page, ds) = Page::build(&req, &SimpleCanon, false);
        let out = rule("jaccard", 0.6).apply(&ds, &ctx(&page)).unwrap();
        assert!(out.docs.is_none() && out.recs.is_empty());
    }

    #[test]
    fn a_passed_deadline_stops_it_with_the_page_unchanged() {
        let req = page_of(&["a b c d e", "a b c d e"]);
        let (page, ds) = Page::build(&req, &SimpleCanon, false);
        let clock = FakeClock::new();
        let mut late = ctx(&page);
        late.clock = &clock;
        late.deadline = Some(clock.now());
        clock.advance(Duration::from_millis(1));
        let result = rule("containment", 0.5).apply(&ds, &late);
        assert!(matches!(result, Err(Failure::Stopped)));
    }
}
