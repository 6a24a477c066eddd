//! The happy path (`fast.rs`, `spelled.rs`) held to the careful path: on generated pages,
//! valid and broken in every way the generator knows, and on those pages mutated byte by
//! byte, decoding with the happy path first gives what the careful path alone gives, the
//! same request or the same refusal.

use super::{check_page, decode_body_with, Limits};

/// xorshift64: a fixed sequence, so a failure repeats.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    fn pick<'p>(&mut self, from: &[&'p str]) -> &'p str {
        from[self.below(from.len())]
    }
}

/// Whitespace, mostly none (a ranker's compact JSON).
fn ws(r: &mut Rng) -> &'static str {
    if r.one_in(12) {
        r.pick(&[" ", "\n", "\t ", "\r\n  "])
    } else {
        ""
    }
}

/// A string literal: plain mostly, else escaped, past ASCII, empty, long or broken.
fn string(r: &mut Rng) -> String {
    let kind = if r.one_in(15) {
        r.below(14)
    } else {
        7 + r.below(7)
    };
    let body = match kind {
        0 => "caf\\u00e9 \\\"q\\\" \\\\ \\/ \\n".to_owned(),
        1 => "Москва €".to_owned(),
        2 => String::new(),
        3 => "x".repeat(r.below(600)),
        4 => "\\ud83d\\ude00 😀".to_owned(),
        5 => "bad\\x".to_owned(),
        6 => "ctl\u{1}".to_owned(),
        7 => format!(
            "https://www.shop{}.example.com/catalog/item?id=3&ref=serp",
            r.below(9)
        ),
        _ => r
            .pick(&[
                "a",
                "doc-1",
                "news",
                "text",
                "link",
                "RU",
                "de",
                "id",
                "k",
                "0123456789abcdef",
            ])
            .to_owned(),
    };
    format!("\"{body}\"")
}

/// A number in one of JSON's spellings, or one past a bound or past f64.
fn number(r: &mut Rng) -> String {
    if !r.one_in(15) {
        return format!("0.{:0w$}", r.below(10_000), w = 1 + r.below(4));
    }
    match r.below(16) {
        0 => "-0".into(),
        1 => "-0.0".into(),
        2 => format!("{}e{}", r.below(9), r.pick(&["-3", "2", "+1", "400"])),
        3 => "1E-7".into(),
        4 => "18446744073709551616".into(),
        5 => "123456789012345678".into(),
        6 => "1234567890123456789".into(),
        7 => "0.30000000000000004".into(),
        8 => "9007199254740993.5".into(),
        9 => "01".into(),
        10 => "1.".into(),
        11 => format!("-{}.{}", r.below(2000), r.below(100)),
        12 => "1e400".into(),
        13 => format!("{}", r.below(3)),
        _ => format!(
            "{}.{:0w$}",
            r.below(20),
            r.below(10_000),
            w = 1 + r.below(4)
        ),
    }
}

/// Any JSON value for `attributes`, nested, in the answer's spelling or not.
fn any(r: &mut Rng, depth: usize) -> String {
    match r.below(if depth > 3 { 6 } else { 8 }) {
        0 => "null".into(),
        1 => r.pick(&["true", "false"]).into(),
        2 | 3 => string(r),
        4 | 5 => number(r),
        6 => {
            let n = r.below(4);
            let items: Vec<String> = (0..n).map(|_| any(r, depth + 1)).collect();
            format!("[{}{}]", ws(r), items.join(&format!(",{}", ws(r))))
        }
        _ => object(r, depth + 1),
    }
}

fn object(r: &mut Rng, depth: usize) -> String {
    let n = if r.one_in(20) {
        17 + r.below(3)
    } else {
        r.below(4)
    };
    let mut keys: Vec<String> = (0..n).map(|i| format!("\"k{i}\"")).collect();
    if n > 1 && r.one_in(15) {
        keys[n - 1] = keys[r.below(n - 1)].clone();
    }
    let members: Vec<String> = keys
        .iter()
        .map(|k| format!("{k}{}:{}{}", ws(r), ws(r), any(r, depth)))
        .collect();
    format!("{{{}}}", members.join(","))
}

/// A value for a document's field: of its type mostly, sometimes not.
fn field(r: &mut Rng, name: &str) -> String {
    if r.one_in(40) {
        return any(r, 3);
    }
    match name {
        "id" | "url" => string(r),
        "score" | "spam_score" | "adult_score" => number(r),
        "domain_age_days" | "text" if r.one_in(4) => "null".into(),
        "domain_age_days" => number(r),
        "text" => string(r),
        "is_ad" if r.one_in(10) => r.pick(&["tru", "null", "1"]).into(),
        "is_ad" => r.pick(&["true", "false"]).into(),
        "topics" | "blocked_regions" => {
            let items: Vec<String> = (0..r.below(4)).map(|_| string(r)).collect();
            format!("[{}]", items.join(","))
        }
        "factors" => {
            let mut names = vec!["text", "link", "behav", "quality"];
            names.truncate(r.below(5));
            if r.one_in(20) {
                names.push("link");
            }
            let items: Vec<String> = names
                .iter()
                .map(|n| format!("\"{n}\":{}", number(r)))
                .collect();
            format!("{{{}}}", items.join(","))
        }
        "minhash" if r.one_in(3) => "null".into(),
        "minhash" if r.one_in(3) => r
            .pick(&[
                r#"{"values":[],"shingles":3,"width":2,"seed":7}"#,
                r#"{"values":[1],"seed":1,"seed":2}"#,
            ])
            .into(),
        "minhash" => r#"{"values":[1,2],"shingles":3,"width":2,"seed":7}"#.into(),
        _ => object(r, 3),
    }
}

const FIELDS: [&str; 13] = [
    "id",
    "url",
    "score",
    "factors",
    "spam_score",
    "adult_score",
    "domain_age_days",
    "is_ad",
    "topics",
    "blocked_regions",
    "text",
    "minhash",
    "attributes",
];

/// A page: documents of one field order mostly (a ranker's), sometimes shuffled, with a
/// field left out, given twice, unknown or escaped now and then.
fn page(r: &mut Rng) -> String {
    let mut order: Vec<&str> = FIELDS
        .iter()
        .enumerate()
        .filter(|&(i, _)| i < 3 || !r.one_in(3))
        .map(|(_, &f)| f)
        .collect();
    let docs: Vec<String> = (0..r.below(6))
        .map(|_| {
            let mut names = order.clone();
            if r.one_in(5) && !names.is_empty() {
                let (a, b) = (r.below(names.len()), r.below(names.len()));
                names.swap(a, b);
            }
            if r.one_in(20) && !names.is_empty() {
                names.remove(r.below(names.len()));
            }
            if r.one_in(20) && !names.is_empty() {
                names.push(names[r.below(names.len())]);
            }
            if r.one_in(30) {
                names.push(r.pick(&["extra", "sc\\u006fre", "URL"]));
            }
            let members: Vec<String> = names
                .iter()
                .map(|n| format!("{}\"{n}\"{}:{}{}", ws(r), ws(r), ws(r), field(r, n)))
                .collect();
            format!("{{{}}}", members.join(&format!(",{}", ws(r))))
        })
        .collect();
    if r.one_in(4) {
        order.reverse();
    }
    format!(
        "{{\"request_id\":\"r\",\"query\":{{\"region\":\"RU\"}},\"documents\":[{}{}]}}{}",
        ws(r),
        docs.join(&format!(",{}", ws(r))),
        ws(r)
    )
}

/// `body` with one change: a byte dropped, changed or added, the end cut, a run repeated.
fn mutate(r: &mut Rng, body: &[u8]) -> Vec<u8> {
    let mut b = body.to_vec();
    let at = r.below(b.len().max(1));
    match r.below(5) {
        0 => {
            b.remove(at.min(b.len() - 1));
        }
        1 => b[at] = b"\"\\{}[],:01-.eE tnfu\x01\xc3"[r.below(21)],
        2 => b.insert(at, b"\"\\{}[],: 9"[r.below(10)]),
        3 => b.truncate(at),
        _ => {
            let end = (at + 1 + r.below(12)).min(b.len());
            let run = b[at..end].to_vec();
            b.splice(at..at, run);
        }
    }
    b
}

/// Both paths on `body`: the same request, or the same refusal, page checks included.
fn agree(body: &[u8]) -> (bool, usize, usize) {
    let limits = Limits {
        max_documents: 8,
        max_text_chars: 300,
    };
    let (fast, taken) = decode_body_with(body, true);
    let (careful, _) = decode_body_with(body, false);
    let text = String::from_utf8_lossy(body);
    let docs = match (&fast, &careful) {
        (Ok(f), Ok(c)) => {
            // Debug, not ==, so that -0.0 and 0.0 differ.
            assert_eq!(
                format!("{:?}", f.request),
                format!("{:?}", c.request),
                "{text}"
            );
            assert_eq!(
                check_page(f, &limits, |_, _| Ok(())),
                check_page(c, &limits, |_, _| Ok(())),
                "{text}"
            );
            f.request.documents.len()
        }
        (Err(f), Err(c)) => {
            assert_eq!(f, c, "{text}");
            0
        }
        _ => panic!(
            "{text}: happy path {:?}, careful {:?}",
            fast.map(|_| ()),
            careful.map(|_| ())
        ),
    };
    (fast.is_ok(), taken, docs)
}

#[test]
fn the_happy_path_reads_every_page_as_the_careful_path_does() {
    let mut r = Rng(0x853c_49e6_748f_ea9b);
    let (mut decoded, mut taken, mut docs, mut refused) = (0, 0, 0, 0);
    for _ in 0..10_000 {
        let body = page(&mut r);
        let (ok, t, n) = agree(body.as_bytes());
        decoded += usize::from(ok);
        refused += usize::from(!ok);
        taken += if ok { t } else { 0 };
        docs += n;
        for _ in 0..4 {
            let broken = mutate(&mut r, body.as_bytes());
            agree(&broken);
        }
    }
    // Both outcomes are common, and the happy path took part of the documents decoded
    // (the rest it handed on: escapes, exponents, fields out of bounds).
    assert!(
        decoded > 1_000 && refused > 1_000,
        "{decoded} decoded, {refused} refused"
    );
    assert!(
        taken > docs / 2 && docs > 2_000,
        "{taken} of {docs} documents"
    );
}

/// A compact page as a ranker sends it is taken whole by the happy path, `attributes`
/// kept as sent when already in the answers' spelling and respelled when not.
#[test]
fn a_ranker_s_page_is_taken_on_the_happy_path() {
    let doc = |i: usize, attributes: &str| {
        format!(
            r#"{{"id":"d{i}","url":"https://a.example/{i}","score":{i}.25,"factors":{{"text":1.5,"link":0}},"spam_score":0.031,"adult_score":0,"domain_age_days":8400,"is_ad":false,"topics":["news","q&a"],"blocked_regions":["DE"],"text":null,"attributes":{attributes}}}"#
        )
    };
    let spelled = r#"{"k":[1,-2,"x",{"y":null}],"p":19.99,"big":18446744073709551616}"#;
    let respelled = r#"{"k": 1,"p":1E2,"z":-0,"e":"\u00e9"}"#;
    let body = format!(
        r#"{{"documents":[{},{},{}]}}"#,
        doc(1, spelled),
        doc(2, respelled),
        doc(3, "{}")
    );
    let (got, taken) = decode_body_with(body.as_bytes(), true);
    let docs = got.expect("decoded").request.documents;
    assert_eq!(taken, 3);
    assert!(matches!(docs[0].attributes, std::borrow::Cow::Borrowed(_)));
    assert_eq!(docs[0].attributes, spelled);
    assert_eq!(docs[1].attributes, r#"{"k":1,"p":100.0,"z":0,"e":"é"}"#);
    assert_eq!(
        docs[0].factors,
        vec![("text".into(), 1.5), ("link".into(), 0.0)]
    );
    assert_eq!(docs[0].given, 0b10_1111_1111 & !(1 << 8));
    agree(body.as_bytes());
}
