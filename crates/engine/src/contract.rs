//! The /v1/rerank request as plain Rust values, its decoding with field-path errors, and
//! the JSON primitives the response is written with.
//!
//! `decode` checks everything CONTRACT.md calls bad input (types, ranges, limits, unique
//! ids, a key given twice) and names the field as a JSON path (`documents[3].score`). The
//! bounds are `wire`'s, whose types are the schema the OpenAPI document serves.
//!
//! The body is read by a hand-written scanner (`scan`), not serde: reading straight into
//! these borrowed structs in one pass, with the path kept on the stack and rendered only for
//! an error, refusing a repeated key where it stands, is what keeps a 100-document body well
//! under one `orjson.loads` of it; serde_json's derive into `wire::RerankRequest` takes
//! about four times as long and checks none of the bounds (`cargo bench --bench wire`).
//! Each document is tried first on a happy path (`fast`) that takes what rankers send and
//! words no error; whatever it does not take, the careful path reads again and names.

mod any;
mod document;
mod fast;
mod few;
mod fields;
mod number;
mod path;
pub mod py;
mod scan;
mod spelled;
mod strings;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_fast;

pub use few::Few;

use crate::fmt::quoted;
use crate::wire::{ASSIGNED_REGIONS, REGION_CHARS};

use std::borrow::Cow;

/// A string of the request: borrowed from the body when it had no escape to decode (most
/// do), so decoding a page copies and allocates none of its ids, URLs or keys.
pub type Text<'a> = Cow<'a, str>;

/// `query.age_mode`, strictest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AgeMode {
    /// `strict`
    Strict,
    /// `moderate`, the default
    Moderate,
    /// `off`
    Off,
}

impl AgeMode {
    /// Every mode, strictest first.
    pub const ALL: [AgeMode; 3] = [AgeMode::Strict, AgeMode::Moderate, AgeMode::Off];

    /// The literal as the request spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            AgeMode::Strict => "strict",
            AgeMode::Moderate => "moderate",
            AgeMode::Off => "off",
        }
    }
}

/// The query's context: classes from the intent classifier, region, age mode.
#[derive(Clone, Debug, PartialEq)]
pub struct Query<'a> {
    pub text: Text<'a>,
    pub classes: Vec<Text<'a>>,
    /// As sent (two ASCII letters once `check_page` passed it); the runner upper-cases it.
    pub region: Option<Text<'a>>,
    pub age_mode: AgeMode,
}

impl Default for Query<'_> {
    /// The query of a request that sends none.
    fn default() -> Self {
        Query {
            text: Text::Borrowed(""),
            classes: Vec::new(),
            region: None,
            age_mode: AgeMode::Moderate,
        }
    }
}

/// A precomputed MinHash signature of a document's text.
#[derive(Clone, Debug, PartialEq)]
pub struct MinHashIn {
    pub values: Vec<u64>,
    pub shingles: u64,
    pub width: u32,
    pub seed: u64,
}

/// One result of the ranker's page, as sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Document<'a> {
    pub id: Text<'a>,
    pub url: Text<'a>,
    pub score: f64,
    /// In the order the request gave them.
    pub factors: Few<(Text<'a>, f64), 4>,
    pub spam_score: f64,
    pub adult_score: f64,
    pub domain_age_days: Option<f64>,
    pub is_ad: bool,
    pub topics: Few<Text<'a>, 2>,
    /// As sent; the runner upper-cases them.
    pub blocked_regions: Few<Text<'a>, 1>,
    pub text: Option<Text<'a>>,
    pub minhash: Option<MinHashIn>,
    /// The `attributes` object as JSON text, ready to be written back; `{}` when absent.
    pub attributes: Text<'a>,
    /// The optional fields the request gave (`given::*` bits), null ones included: a
    /// Python rule is handed exactly these.
    pub given: u16,
}

/// The bits of `Document::given`, one per optional field, in the contract's field order.
pub mod given {
    /// `factors`
    pub const FACTORS: u16 = 1;
    /// `spam_score`
    pub const SPAM_SCORE: u16 = 1 << 1;
    /// `adult_score`
    pub const ADULT_SCORE: u16 = 1 << 2;
    /// `domain_age_days`
    pub const DOMAIN_AGE_DAYS: u16 = 1 << 3;
    /// `is_ad`
    pub const IS_AD: u16 = 1 << 4;
    /// `topics`
    pub const TOPICS: u16 = 1 << 5;
    /// `blocked_regions`
    pub const BLOCKED_REGIONS: u16 = 1 << 6;
    /// `text`
    pub const TEXT: u16 = 1 << 7;
    /// `minhash`
    pub const MINHASH: u16 = 1 << 8;
    /// `attributes`
    pub const ATTRIBUTES: u16 = 1 << 9;
}

/// POST /v1/rerank body.
#[derive(Clone, Debug, PartialEq)]
pub struct Request<'a> {
    pub request_id: Option<Text<'a>>,
    pub query: Query<'a>,
    /// `unit` in the request's order.
    pub unit: Vec<(Text<'a>, Text<'a>)>,
    pub profile: Option<Text<'a>>,
    pub depth: Option<u32>,
    pub documents: Vec<Document<'a>>,
}

/// Bad input: the HTTP status (400, 413, 422), the field's path and the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub status: u16,
    pub field: String,
    pub problem: String,
}

/// The limits a body is checked against (from the service's settings).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_documents: usize,
    pub max_text_chars: usize,
}

/// A decoded body whose page checks (`check_page`) are still to run.
#[derive(Debug)]
pub struct Decoded<'a> {
    /// The request as sent.
    pub request: Request<'a>,
}

/// Decode and type-check a body, then check the page against `limits` (URLs are checked by
/// the caller).
pub fn decode<'a>(body: &'a [u8], limits: &Limits) -> Result<Request<'a>, FieldError> {
    let decoded = decode_body(body)?;
    check_page(&decoded, limits, |_, _| Ok(()))?;
    Ok(decoded.request)
}

/// Decode and type-check a body: JSON syntax, nesting, types, bounds, unknown, missing and
/// repeated fields.
pub fn decode_body(body: &[u8]) -> Result<Decoded<'_>, FieldError> {
    decode_body_as(body, true)
}

/// `decode` with every document read by the careful path alone, the happy path off: what
/// `cargo bench --bench wire` measures the happy path against.
#[doc(hidden)]
pub fn decode_careful<'a>(body: &'a [u8], limits: &Limits) -> Result<Request<'a>, FieldError> {
    let decoded = decode_body_as(body, false)?;
    check_page(&decoded, limits, |_, _| Ok(()))?;
    Ok(decoded.request)
}

fn decode_body_as(body: &[u8], fast: bool) -> Result<Decoded<'_>, FieldError> {
    let mut f = fields::Fields::new(body);
    f.fast = fast;
    let request = f.request().map_err(|e| *e)?;
    f.s.finish().map_err(|e| *e)?;
    Ok(Decoded { request })
}

/// `decode_body` with each document read on its happy path first (`fast`) or by the
/// careful path alone, and how many documents the happy path took.
#[cfg(test)]
fn decode_body_with(body: &[u8], fast: bool) -> (Result<Decoded<'_>, FieldError>, usize) {
    let mut f = fields::Fields::new(body);
    f.fast = fast;
    let request = f.request().and_then(|r| f.s.finish().map(|_| r));
    (
        request.map(|request| Decoded { request }).map_err(|e| *e),
        f.taken,
    )
}

/// The checks types cannot make: the query's region, the document limit (413), then per
/// document in order a repeated id, text over the limit (413), its regions, and whatever
/// `each` refuses (the caller's URL check).
pub fn check_page(
    decoded: &Decoded<'_>,
    limits: &Limits,
    mut each: impl FnMut(usize, &Document<'_>) -> Result<(), FieldError>,
) -> Result<(), FieldError> {
    if let Some(region) = &decoded.request.query.region {
        check_region(region, || "query.region".into())?;
    }
    let docs = &decoded.request.documents;
    if docs.len() > limits.max_documents {
        return Err(FieldError {
            status: 413,
            field: "documents".into(),
            problem: format!(
                "{} documents, over the limit of {}",
                docs.len(),
                limits.max_documents
            ),
        });
    }
    let repeat = first_repeat(docs);
    for (i, d) in docs.iter().enumerate() {
        if let Some((at, first)) = repeat {
            if at == i {
                return Err(FieldError {
                    status: 422,
                    field: format!("documents[{i}].id"),
                    problem: format!(
                        "duplicate id {} (first at documents[{first}])",
                        quoted(&d.id)
                    ),
                });
            }
        }
        if let Some(text) = &d.text {
            if text.len() > limits.max_text_chars {
                let n = text.chars().count();
                if n > limits.max_text_chars {
                    return Err(FieldError {
                        status: 413,
                        field: format!("documents[{i}].text"),
                        problem: format!(
                            "{n} characters, over the limit of {}",
                            limits.max_text_chars
                        ),
                    });
                }
            }
        }
        for (j, region) in d.blocked_regions.iter().enumerate() {
            check_region(region, || format!("documents[{i}].blocked_regions[{j}]"))?;
        }
        each(i, d)?;
    }
    Ok(())
}

/// `query.region` is an ISO 3166-1 alpha-2 code in any case (CONTRACT.md): two ASCII
/// letters. Anything else (` RU`, `RUS`, `ru-RU`, fullwidth `ＲＵ`) is refused, never
/// served without the region's bans: no spelling of it is guessed at. A document's
/// `blocked_regions` are held to the same (one spelled ` RU` would never match).
///
/// Two letters that name no country (`UK`, `EU`, `XX`) are refused as well: the United
/// Kingdom's bans are under `GB`, and a page asked for `UK` would be served without them.
fn check_region(region: &str, field: impl FnOnce() -> String) -> Result<(), FieldError> {
    let problem = if region.len() == REGION_CHARS && region.bytes().all(|b| b.is_ascii_alphabetic())
    {
        let b = region.as_bytes();
        let code = [b[0].to_ascii_uppercase(), b[1].to_ascii_uppercase()];
        if ASSIGNED_REGIONS.binary_search(&code).is_ok() {
            return Ok(());
        }
        let hint = if &code == b"UK" {
            " (the United Kingdom is GB)"
        } else {
            ""
        };
        format!(
            "{} is not an assigned ISO 3166-1 alpha-2 code{hint}",
            quoted(&region.to_ascii_uppercase())
        )
    } else {
        format!(
            "{} is not an ISO 3166-1 alpha-2 code (two letters, such as RU, in any case)",
            quoted(region)
        )
    };
    Err(FieldError {
        status: 422,
        field: field(),
        problem,
    })
}

/// The first document whose id an earlier one has, and that earlier one's index.
fn first_repeat(docs: &[Document<'_>]) -> Option<(usize, usize)> {
    let mut seen = std::collections::HashMap::with_capacity_and_hasher(
        docs.len(),
        std::hash::BuildHasherDefault::<IdHasher>::default(),
    );
    for (i, d) in docs.iter().enumerate() {
        // One probe a document: the entry is the first's, or where this one goes.
        match seen.entry(&*d.id) {
            std::collections::hash_map::Entry::Occupied(first) => return Some((i, *first.get())),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(i);
            }
        }
    }
    None
}

/// A multiply-rotate hash (FxHash's) over eight bytes a step, for the repeated-id check:
/// ids are short and the table lives for one call, so SipHash's protection against chosen
/// collisions buys nothing a page could exploit beyond its own document limit.
#[derive(Default)]
struct IdHasher(u64);

impl IdHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_u8(&mut self, b: u8) {
        self.add(u64::from(b));
    }
}
