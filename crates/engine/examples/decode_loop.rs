//! Decode one body in a loop: `cargo run --release --example decode_loop -- BODY [N]`
//! (for perf and callgrind; the ratio to orjson is bench/contract.py's).
use rearrange_engine::contract::{decode, Limits};
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let body = std::fs::read(path).unwrap();
    let limits = Limits {
        max_documents: 1000,
        max_text_chars: 100_000,
    };
    let n: u32 = std::env::args().nth(2).map_or(5000, |s| s.parse().unwrap());
    let t = std::time::Instant::now();
    for _ in 0..n {
        let r = decode(&body, &limits).unwrap();
        std::hint::black_box(r);
    }
    println!(
        "{:.1} us per decode",
        t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
    );
}
