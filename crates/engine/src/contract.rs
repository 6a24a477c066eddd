//! The /v1/rerank request as plain Rust values, its decoding with field-path errors, and
//! the JSON primitives the response is written with.
//!
//! `decode` checks everything CONTRACT.md calls bad input (types, ranges, limits, unique
//! ids) and names the field the way the Python service always has (`documents[3].score`).

/// `query.age_mode`, strictest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AgeMode {
    Strict,
    Moderate,
    Off,
}

impl AgeMode {
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
pub struct Query {
    pub text: String,
    pub classes: Vec<String>,
    /// As sent; the runner upper-cases it.
    pub region: Option<String>,
    pub age_mode: AgeMode,
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
pub struct Document {
    pub id: String,
    pub url: String,
    pub score: f64,
    /// In the order the request gave them.
    pub factors: Vec<(String, f64)>,
    pub spam_score: f64,
    pub adult_score: f64,
    pub domain_age_days: Option<f64>,
    pub is_ad: bool,
    pub topics: Vec<String>,
    /// As sent; the runner upper-cases them.
    pub blocked_regions: Vec<String>,
    pub text: Option<String>,
    pub minhash: Option<MinHashIn>,
    /// The `attributes` object as JSON text, ready to be written back; `{}` when absent.
    pub attributes: String,
}

/// POST /v1/rerank body.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub request_id: Option<String>,
    pub query: Query,
    /// `unit` in the request's order.
    pub unit: Vec<(String, String)>,
    pub profile: Option<String>,
    pub depth: Option<u32>,
    pub documents: Vec<Document>,
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
