//! `near_duplicates` (seed 000): a document whose text is a near-duplicate of a higher one
//! folds under it. The matching (shingles, MinHash, the caches) is `crate::neardup`; this
//! file turns its pairs into folds and records.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Failure, Out, RuleResult, collapse};
use crate::contract::FieldError;
use crate::doc::Doc;
use crate::neardup::{Input, Matcher, Measure, Method, Params as MatchParams, Stats, Stopped};
use crate::record::{Action, Phase, Rec};

/// A document whose text is a near-duplicate of a higher one folds under it (seed 000).
/// Small pages compare exact shingle sets; larger ones, or pages whose documents bring
/// MinHash signatures, compare signatures. Optional: skipped, or stopped midway, once the
/// request's deadline passes.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// Words per shingle.
    #[schemars(range(min = 1, max = 100))]
    pub shingle_words: usize,
    /// `containment` or `jaccard`.
    #[schemars(regex(pattern = r"^(containment|jaccard)$"))]
    pub measure: String,
    /// The similarity at which a document folds (> 0).
    #[schemars(range(max = 1.0), extend("exclusiveMinimum" = 0))]
    pub threshold: f64,
    /// `auto` (exact up to exact_max_docs documents with text, MinHash above or
    /// with a precomputed signature), `exact` or `minhash`.
    #[schemars(regex(pattern = r"^(auto|exact|minhash)$"))]
    pub method: String,
    /// Documents with text up to which `auto` compares exact shingle sets.
    #[schemars(range(max = 100000))]
    pub exact_max_docs: usize,
    /// MinHash permutations.
    #[schemars(range(min = 16, max = 1024))]
    pub num_perm: usize,
    /// The MinHash family seed.
    pub seed: u64,
    /// The signature cache (MB); 0 turns it off.
    #[schemars(range(max = 65536))]
    pub cache_mb: usize,
    /// The exact method's shingle-set cache (MB); 0 turns it off.
    #[schemars(range(max = 65536))]
    pub exact_cache_mb: usize,
}

/// Measured by bench/near_duplicates.py (docs/near-duplicates.md#the-switch): with 300-word
/// texts and a cold cache, MinHash overtakes exact pairs at about this many documents with
/// text.
pub const EXACT_MAX_DOCS: usize = 30;

impl Default for Params {
    fn default() -> Self {
        Params {
            shingle_words: 10,
            measure: "containment".into(),
            threshold: 0.5,
            method: "auto".into(),
            exact_max_docs: EXACT_MAX_DOCS,
            num_perm: 128,
            seed: 1,
            cache_mb: 64,
            exact_cache_mb: 32,
        }
    }
}

/// The rule: its matcher (with the caches, kept until the config is reloaded).
pub struct NearDuplicates {
    matcher: Matcher,
}

impl Builtin for NearDuplicates {
    const NAME: &'static str = "near_duplicates";
    const PHASES: &'static [Phase] = &[Phase::Diversify];
    const OPTIONAL: bool = true;
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        let measure = match p.measure.as_str() {
            "containment" => Measure::Containment,
            "jaccard" => Measure::Jaccard,
            other => {
                return Err(format!(
                    "measure: must be containment or jaccard, not {other:?}"
                ))
            }
        };
        let method = match p.method.as_str() {
            "auto" => Method::Auto,
            "exact" => Method::Exact,
            "minhash" => Method::MinHash,
            other => {
                return Err(format!(
                    "method: must be auto, exact or minhash, not {other:?}"
                ))
            }
        };
        for (field, x, lo, hi) in [
            ("shingle_words", p.shingle_words, 1, 100),
            ("exact_max_docs", p.exact_max_docs, 0, 100_000),
            ("num_perm", p.num_perm, 16, 1024),
            ("cache_mb", p.cache_mb, 0, 65_536),
            ("exact_cache_mb", p.exact_cache_mb, 0, 65_536),
        ] {
            if !(lo..=hi).contains(&x) {
                return Err(format!("{field}: {x} is outside [{lo}, {hi}]"));
            }
        }
        if !(p.threshold > 0.0 && p.threshold <= 1.0) {
            return Err(format!("threshold: {} is outside (0, 1]", p.threshold));
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

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        NearDuplicates::apply(self, docs, ctx)
    }
}

impl NearDuplicates {
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
