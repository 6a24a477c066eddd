//! `cargo bench --bench wire`: the /v1/rerank wire's hand-written paths beside serde_json
//! with wire.rs's types, the measure of whether the hand-tuned paths pay (wire.rs).
//!
//! Decoding: the engine's decoder (`contract::decode`, with its page checks) beside the same
//! with the happy path off (`contract::decode_careful`: every document read the careful
//! way, as before the happy path) and serde_json's derive into `wire::RerankRequest` (no
//! bounds checked, no field named in an error, a key given twice in `attributes` or `unit`
//! not refused).
//!
//! `cargo bench --bench wire -- decode-calls hand|careful DOCS CALLS` decodes `page(DOCS)`
//! CALLS times and nothing else: run under `valgrind --tool=callgrind` with CALLS 0 and 10,
//! the difference over ten is one decode's instructions (docs/speed.md).
//!
//! Encoding: `response::write_response` writing the 200 answer from the runner's page and
//! outcome beside `serde_json::to_writer` of the same answer as `wire::RerankResponse`,
//! both into a buffer of the size the engine reserves; once with the answer built from the
//! runner's structures each time (`response::as_wire::answer`, what a serde-based encoder
//! would do) and once of an answer built beforehand (serialization alone). Both outputs
//! are checked to be one JSON value first.
//!
//! Interleaved rounds, medians, ratios within one run; nothing here asserts a time.

use std::hint::black_box;
use std::time::Instant;

use rearrange_engine::contract::{decode, decode_careful, Limits};
use rearrange_engine::doc::{Canon, Canonical, Doc, Folded, Page};
use rearrange_engine::experiments::Exposure;
use rearrange_engine::record::{Action, Delta, Mode, Phase, Reason, Rec, Record};
use rearrange_engine::response::as_wire::answer;
use rearrange_engine::response::{write_response, Head};
use rearrange_engine::runner::Outcome;
use rearrange_engine::wire::{RerankRequest, RerankResponse};

/// A ranker's page of `n` documents: what bench/pages.py's SERPs carry (factors, scores,
/// topics, attributes), compact, as a ranker sends it.
fn page(n: usize) -> Vec<u8> {
    let docs: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"id":"doc-{i}","url":"https://www.shop{i}.example.com/catalog/item?id={i}&ref=serp","score":{score},"factors":{{"text":{t},"link":{l},"behav":0.4,"quality":0.7}},"spam_score":0.{s},"adult_score":0.0{a},"domain_age_days":{age},"is_ad":{ad},"topics":["furniture","home"],"blocked_regions":[],"attributes":{{"snippet":"a sofa of the finest kind, number {i}","price":{p}}}}}"#,
                score = 10.0 - i as f64 * 0.01,
                t = 1.0 + (i % 7) as f64 * 0.1,
                l = 2.0 + (i % 5) as f64 * 0.2,
                s = i % 10,
                a = i % 10,
                age = 30 + i * 7,
                ad = i % 9 == 0,
                p = 100 + i,
            )
        })
        .collect();
    format!(
        r#"{{"request_id":"r-1","query":{{"text":"купить диван","classes":["commercial"],"region":"RU","age_mode":"moderate"}},"unit":{{"user_id":"u-1"}},"documents":[{}]}}"#,
        docs.join(",")
    )
    .into_bytes()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The engine's URL canonicalization (the answer's page is built as a request's is).
struct UrlCanon;

impl Canon for UrlCanon {
    fn canonical_parts<'u>(&self, url: &'u str) -> Result<Canonical<'u>, String> {
        rearrange_engine::url::canonical_parts(url).map_err(|e| e.to_string())
    }

    fn registrable_domain<'h>(&self, host: &'h str) -> &'h str {
        rearrange_engine::domain::registrable_domain(host)
    }
}

/// What a default-like profile does to `page(n)`: the banlist removes one document in 20
/// (one shared reason), spam demotion rescores the half with spam_score >= 0.5, a
/// freshness boost one in five, one pin moves a document, host collapse folds one in 50
/// under the document before, ads are annotated; two experiments exposed.
fn outcome<'a>(page: &Page<'a>, docs: &[Doc]) -> Outcome<'a> {
    let mut audit = Vec::new();
    let mut kept = Vec::new();
    let banned = Reason::shared("host banned [entry 4711]: counterfeit goods".into());
    let record = |rule, phase, rec| Record {
        rule,
        phase,
        mode: Mode::Applied,
        rec,
    };
    for d in docs {
        let at = d.at;
        let i = at as usize;
        if i % 20 == 3 {
            let rec = Rec::on(page, at, Action::Remove, banned.clone());
            audit.push(record("banlist", Phase::PreFilter, rec));
            continue;
        }
        let mut d = d.clone();
        if i % 10 >= 5 {
            let delta = -0.25 * (i % 10) as f64 / 9.0;
            d.score += delta;
            let reason = format!("spam_score 0.{} above 0.5", i % 10);
            let rec = Rec {
                delta: Delta::Float(delta),
                ..Rec::on(page, at, Action::Rescore, reason)
            };
            audit.push(record("spam_demotion", Phase::Rerank, rec));
        }
        if i % 5 == 1 {
            d.score += 0.1;
            let rec = Rec {
                delta: Delta::Float(0.1),
                ..Rec::on(page, at, Action::Rescore, "fresh: under 30 days")
            };
            audit.push(record("freshness_boost", Phase::Rerank, rec));
        }
        if i == 7 {
            let rec = Rec {
                delta: Delta::Int(-5),
                ..Rec::on(page, at, Action::Move, "pinned to position 3")
            };
            audit.push(record("pin", Phase::Rerank, rec));
        }
        if i % 50 == 9 {
            let under: &mut Doc = kept.last_mut().expect("a document before");
            under.collapsed.push(Folded {
                at,
                rule: "host_collapse",
            });
            let reason = format!("same host as {}", page.id(under));
            let rec = Rec::on(page, at, Action::Collapse, reason);
            audit.push(record("host_collapse", Phase::Diversify, rec));
            continue;
        }
        if i % 9 == 0 {
            d.annotations.push("ad");
            let rec = Rec::on(page, at, Action::Annotate, "is_ad");
            audit.push(record("ad_label", Phase::Annotate, rec));
        }
        kept.push(d);
    }
    Outcome {
        docs: kept,
        audit,
        fallback: None,
        timings: vec![],
        skipped: vec![],
        actions: vec![],
        errors: vec![],
        trace: vec![],
        teams: vec![],
    }
}

fn exposures() -> Vec<Exposure> {
    let exposure = |experiment: &str, variant: &str, bucket| Exposure {
        experiment: experiment.into(),
        variant: variant.into(),
        bucket: Some(bucket),
        layer: Some("ranking".into()),
        salt: Some(format!("{experiment}-2026")),
        forced: false,
        unit: Some("u-1".into()),
        triggered: false,
    };
    vec![
        exposure("spam_threshold", "treatment", 4417),
        exposure("fresh_boost", "control", 812),
    ]
}

fn decoding(limits: &Limits) {
    println!(
        "decode  documents  bytes  hand µs  ns/byte  careful µs  careful/hand  serde µs  \
         serde/hand"
    );
    for n in [20, 100, 500] {
        let body = page(n);
        let hand = decode(&body, limits).expect("decoded");
        assert_eq!(
            format!("{hand:?}"),
            format!("{:?}", decode_careful(&body, limits).expect("decoded"))
        );
        assert!(serde_json::from_slice::<RerankRequest>(&body).is_ok());
        let reps = 20_000 / n;
        let (mut hand, mut careful, mut serde) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..41 {
            let t = Instant::now();
            for _ in 0..reps {
                black_box(decode(black_box(&body), limits).is_ok());
            }
            hand.push(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
            let t = Instant::now();
            for _ in 0..reps {
                black_box(decode_careful(black_box(&body), limits).is_ok());
            }
            careful.push(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
            let t = Instant::now();
            for _ in 0..reps {
                black_box(serde_json::from_slice::<RerankRequest>(black_box(&body)).is_ok());
            }
            serde.push(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
        }
        let (h, c, s) = (median(hand), median(careful), median(serde));
        let bytes = body.len();
        println!(
            "{n:>17}  {bytes:>5}  {h:>7.1}  {:>7.2}  {c:>10.1}  {:>12.2}  {s:>8.1}  {:>10.2}",
            h * 1e3 / bytes as f64,
            c / h,
            s / h
        );
    }
}

/// `decode-calls hand|careful DOCS CALLS`: CALLS decodes of `page(DOCS)` and nothing else,
/// for callgrind to count.
fn decode_calls(args: &[String], limits: &Limits) {
    let [how, docs, calls] = args else {
        panic!("decode-calls hand|careful DOCS CALLS");
    };
    let body = page(docs.parse().expect("DOCS"));
    let decoder = match how.as_str() {
        "hand" => decode,
        "careful" => decode_careful,
        _ => panic!("hand or careful, not {how}"),
    };
    for _ in 0..calls.parse::<usize>().expect("CALLS") {
        black_box(decoder(black_box(&body), limits).is_ok());
    }
}

fn encoding(limits: &Limits) {
    println!(
        "encode  documents  records  hand µs  serde µs  serde/hand  \
         serde-only µs  serde-only/hand"
    );
    let exposures = exposures();
    for n in [20, 100, 500] {
        let body = page(n);
        let req = decode(&body, limits).unwrap();
        let (page, docs) = Page::build(&req, &UrlCanon, false);
        let outcome = outcome(&page, &docs);
        let head = Head {
            request_id: "r-1",
            profile: "default",
            config_version: "2026-12-06T04:00:00Z-3f9a",
            banlist_version: 1_733_456_789_012,
            exposures: &exposures,
            interleaving: None,
        };
        // What engine.rs reserves for the answer.
        let size = 512 + body.len() + 192 * outcome.audit.len();
        let hand_bytes = || {
            let mut out = Vec::with_capacity(size);
            write_response(&mut out, &head, &page, &outcome, false);
            out
        };
        let serde_bytes = |wire: &RerankResponse| {
            let mut out = Vec::with_capacity(size);
            serde_json::to_writer(&mut out, wire).unwrap();
            out
        };
        let built = answer(&head, &page, &outcome);
        let value = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).unwrap();
        assert_eq!(value(&hand_bytes()), value(&serde_bytes(&built)));
        let reps = 20_000 / n;
        let (mut hand, mut serde, mut only) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..41 {
            let t = Instant::now();
            for _ in 0..reps {
                black_box(hand_bytes());
            }
            hand.push(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
            let t = Instant::now();
            for _ in 0..reps {
                black_box(serde_bytes(&answer(&head, &page, black_box(&outcome))));
            }
            serde.push(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
            let t = Instant::now();
            for _ in 0..reps {
                black_box(serde_bytes(black_box(&built)));
            }
            only.push(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
        }
        let (h, s, o) = (median(hand), median(serde), median(only));
        let records = outcome.audit.len();
        println!(
            "{n:>17}  {records:>7}  {h:>7.1}  {s:>8.1}  {:>10.2}  {o:>13.1}  {:>15.2}",
            s / h,
            o / h
        );
    }
}

fn main() {
    let limits = Limits {
        max_documents: 1000,
        max_text_chars: 100_000,
    };
    // `cargo bench` adds `--bench`.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if args.first().map(String::as_str) == Some("decode-calls") {
        return decode_calls(&args[1..], &limits);
    }
    decoding(&limits);
    encoding(&limits);
}
