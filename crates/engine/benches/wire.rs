//! `cargo bench --bench wire`: decoding a /v1/rerank body with the engine's hand-written
//! decoder (`contract::decode`, with its page checks) beside serde_json's derive into the
//! wire's types (`wire::RerankRequest`, no bounds checked, no field named in an error, a
//! key given twice in `attributes` or `unit` not refused): the measure of whether the
//! hand-tuned path pays (wire.rs). Interleaved rounds, medians, ratios within one run;
//! nothing here asserts a time.

use std::hint::black_box;
use std::time::Instant;

use rearrange_engine::contract::{decode, Limits};
use rearrange_engine::wire::RerankRequest;

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

fn main() {
    let limits = Limits {
        max_documents: 1000,
        max_text_chars: 100_000,
    };
    println!("documents  hand µs  serde µs  serde/hand");
    for n in [20, 100, 500] {
        let body = page(n);
        assert!(decode(&body, &limits).is_ok());
        assert!(serde_json::from_slice::<RerankRequest>(&body).is_ok());
        let reps = 20_000 / n;
        let (mut hand, mut serde) = (Vec::new(), Vec::new());
        for _ in 0..41 {
            let t = Instant::now();
            for _ in 0..reps {
                black_box(decode(black_box(&body), &limits).is_ok());
            }
            hand.push(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
            let t = Instant::now();
            for _ in 0..reps {
                black_box(serde_json::from_slice::<RerankRequest>(black_box(&body)).is_ok());
            }
            serde.push(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
        }
        let (h, s) = (median(hand), median(serde));
        println!("{n:>9}  {h:>7.1}  {s:>8.1}  {:>10.2}", s / h);
    }
}
