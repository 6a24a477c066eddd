//! The /v1/rerank wire, defined once: the request, the 200 answer and the error bodies as
//! types, with every bound of the contract stated here (as constants the decoder checks and
//! as schemars attributes the JSON Schemas say).
//!
//! `schemas()` is what the OpenAPI document serves for /v1/rerank (app/api/openapi.py).
//! The body is decoded by `contract`'s one-pass scanner and the answer written by
//! `response.rs`, both hand-tuned (docs/speed.md says by how much they pay); they read
//! their bounds from the constants below, and tests hold both to these schemas:
//! tests/api/test_wire_schema.py sends bodies generated from the request schema and
//! validates real answers against the response schema. The answer's types also derive
//! `Serialize`: `response::as_wire` fills them, and its test holds the hand-written bytes
//! to what serde_json writes of them (the encoder bench times the two).

use std::collections::BTreeMap;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use crate::contract::AgeMode;
use crate::record::{Action, Mode, Phase};

/// `request_id`, at most this many characters.
pub const MAX_REQUEST_ID_CHARS: usize = 256;
/// `query.text`.
pub const MAX_QUERY_TEXT_CHARS: usize = 4096;
/// Each of `query.classes`.
pub const MAX_CLASS_CHARS: usize = 64;
/// A document's `id` (at least one character).
pub const MAX_ID_CHARS: usize = 512;
/// |score| and |factor|: bounded so no sum of rule deltas can overflow to infinity.
pub const MAX_SCORE: f64 = 1e15;
/// `spam_score` and `adult_score`: a probability, in `[lo, hi]`.
pub const PROBABILITY: (f64, f64) = (0.0, 1.0);
/// `depth`: 1 to this.
pub const MAX_DEPTH: u64 = 10_000;
/// `minhash.values`: 1 to this many.
pub const MAX_MINHASH_VALUES: usize = 4096;
/// `minhash.shingles`: 0 to this.
pub const MAX_MINHASH_SHINGLES: u64 = 100_000_000;
/// `minhash.width`: 1 to this.
pub const MAX_MINHASH_WIDTH: u64 = 100;
/// `query.region` and each of `blocked_regions`: one of `ASSIGNED_REGIONS` in any case, as
/// the schema says it: per first letter, a class of the second letters that follow it
/// (`[Aa][DEFG…defg…]|…`); with a length of 2, so no trailing newline slips past a `$`.
pub fn region_pattern() -> String {
    let mut alternatives: Vec<String> = Vec::new();
    for group in ASSIGNED_REGIONS.chunk_by(|a, b| a[0] == b[0]) {
        let first = char::from(group[0][0]);
        let seconds: String = group.iter().map(|c| char::from(c[1])).collect();
        alternatives.push(format!(
            "[{first}{}][{seconds}{}]",
            first.to_ascii_lowercase(),
            seconds.to_ascii_lowercase()
        ));
    }
    format!("^(?:{})$", alternatives.join("|"))
}

/// The ISO 3166-1 alpha-2 codes in use, upper case and sorted, Kosovo's `XK` included: the
/// list of the `iso3166` package, which the banlist API checks a ban's `regions` against
/// (tests/api/test_rerank.py holds the two equal).
pub const ASSIGNED_REGIONS: [[u8; 2]; 250] = [
    *b"AD", *b"AE", *b"AF", *b"AG", *b"AI", *b"AL", *b"AM", *b"AO", *b"AQ", *b"AR", *b"AS", *b"AT",
    *b"AU", *b"AW", *b"AX", *b"AZ", *b"BA", *b"BB", *b"BD", *b"BE", *b"BF", *b"BG", *b"BH", *b"BI",
    *b"BJ", *b"BL", *b"BM", *b"BN", *b"BO", *b"BQ", *b"BR", *b"BS", *b"BT", *b"BV", *b"BW", *b"BY",
    *b"BZ", *b"CA", *b"CC", *b"CD", *b"CF", *b"CG", *b"CH", *b"CI", *b"CK", *b"CL", *b"CM", *b"CN",
    *b"CO", *b"CR", *b"CU", *b"CV", *b"CW", *b"CX", *b"CY", *b"CZ", *b"DE", *b"DJ", *b"DK", *b"DM",
    *b"DO", *b"DZ", *b"EC", *b"EE", *b"EG", *b"EH", *b"ER", *b"ES", *b"ET", *b"FI", *b"FJ", *b"FK",
    *b"FM", *b"FO", *b"FR", *b"GA", *b"GB", *b"GD", *b"GE", *b"GF", *b"GG", *b"GH", *b"GI", *b"GL",
    *b"GM", *b"GN", *b"GP", *b"GQ", *b"GR", *b"GS", *b"GT", *b"GU", *b"GW", *b"GY", *b"HK", *b"HM",
    *b"HN", *b"HR", *b"HT", *b"HU", *b"ID", *b"IE", *b"IL", *b"IM", *b"IN", *b"IO", *b"IQ", *b"IR",
    *b"IS", *b"IT", *b"JE", *b"JM", *b"JO", *b"JP", *b"KE", *b"KG", *b"KH", *b"KI", *b"KM", *b"KN",
    *b"KP", *b"KR", *b"KW", *b"KY", *b"KZ", *b"LA", *b"LB", *b"LC", *b"LI", *b"LK", *b"LR", *b"LS",
    *b"LT", *b"LU", *b"LV", *b"LY", *b"MA", *b"MC", *b"MD", *b"ME", *b"MF", *b"MG", *b"MH", *b"MK",
    *b"ML", *b"MM", *b"MN", *b"MO", *b"MP", *b"MQ", *b"MR", *b"MS", *b"MT", *b"MU", *b"MV", *b"MW",
    *b"MX", *b"MY", *b"MZ", *b"NA", *b"NC", *b"NE", *b"NF", *b"NG", *b"NI", *b"NL", *b"NO", *b"NP",
    *b"NR", *b"NU", *b"NZ", *b"OM", *b"PA", *b"PE", *b"PF", *b"PG", *b"PH", *b"PK", *b"PL", *b"PM",
    *b"PN", *b"PR", *b"PS", *b"PT", *b"PW", *b"PY", *b"QA", *b"RE", *b"RO", *b"RS", *b"RU", *b"RW",
    *b"SA", *b"SB", *b"SC", *b"SD", *b"SE", *b"SG", *b"SH", *b"SI", *b"SJ", *b"SK", *b"SL", *b"SM",
    *b"SN", *b"SO", *b"SR", *b"SS", *b"ST", *b"SV", *b"SX", *b"SY", *b"SZ", *b"TC", *b"TD", *b"TF",
    *b"TG", *b"TH", *b"TJ", *b"TK", *b"TL", *b"TM", *b"TN", *b"TO", *b"TR", *b"TT", *b"TV", *b"TW",
    *b"TZ", *b"UA", *b"UG", *b"UM", *b"US", *b"UY", *b"UZ", *b"VA", *b"VC", *b"VE", *b"VG", *b"VI",
    *b"VN", *b"VU", *b"WF", *b"WS", *b"XK", *b"YE", *b"YT", *b"ZA", *b"ZM", *b"ZW",
];

/// The length of a region code.
pub const REGION_CHARS: usize = 2;

/// A score or a factor: finite, |x| <= `MAX_SCORE`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Score(pub f64);

impl JsonSchema for Score {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Score".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "number", "minimum": -MAX_SCORE, "maximum": MAX_SCORE,
                      "description": "finite, |x| <= 1e15"})
    }
}

/// A probability in [0, 1].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Probability(pub f64);

impl JsonSchema for Probability {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Probability".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "number", "minimum": PROBABILITY.0, "maximum": PROBABILITY.1,
                      "description": "a probability in [0, 1]"})
    }
}

/// A string enum of the engine's own names, inline where used.
fn names(names: impl IntoIterator<Item = &'static str>) -> Schema {
    let names: Vec<&str> = names.into_iter().collect();
    json_schema!({"type": "string", "enum": names})
}

macro_rules! names_schema {
    ($ty:ty, $name:literal, $all:expr) => {
        impl JsonSchema for $ty {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                $name.into()
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                names($all.into_iter().map(|v| v.as_str()))
            }
        }
    };
}

/// The engine's names written as their CONTRACT strings.
macro_rules! names_serialize {
    ($($ty:ty),*) => {$(
        impl Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    )*};
}

names_serialize!(Phase, Action, Mode);

names_schema!(Phase, "Phase", Phase::ALL);
names_schema!(Action, "Action", Action::ALL);
names_schema!(Mode, "Mode", [Mode::Applied, Mode::Shadow]);
names_schema!(AgeMode, "AgeMode", AgeMode::ALL);

/// The query's context: classes from the intent classifier, region, age mode.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Query {
    #[serde(default)]
    #[schemars(length(max = MAX_QUERY_TEXT_CHARS))]
    pub text: String,
    #[serde(default)]
    #[schemars(inner(length(max = MAX_CLASS_CHARS)))]
    pub classes: Vec<String>,
    /// An assigned ISO 3166-1 alpha-2 code, two ASCII letters in any case (`RU`, `ru`);
    /// anything else (`RUS`, `UK`) is a 422 naming `query.region`.
    #[serde(default)]
    #[schemars(length(min = REGION_CHARS, max = REGION_CHARS), regex(pattern = region_pattern()))]
    pub region: Option<String>,
    #[serde(default = "moderate")]
    #[schemars(with = "AgeMode")]
    pub age_mode: String,
}

impl Default for Query {
    /// The query of a request that sends none.
    fn default() -> Self {
        Query {
            text: String::new(),
            classes: Vec::new(),
            region: None,
            age_mode: moderate(),
        }
    }
}

fn moderate() -> String {
    AgeMode::Moderate.as_str().into()
}

/// A precomputed MinHash signature of the document's text (docs/near-duplicates.md):
/// upstream may send it instead of (or with) `text`. `values` are the k unsigned 64-bit
/// minima of the published hash family; `shingles` is the size of the shingle set.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MinHash {
    #[schemars(length(min = 1, max = MAX_MINHASH_VALUES), inner(range(max = u64::MAX)))]
    pub values: Vec<u64>,
    #[schemars(range(max = MAX_MINHASH_SHINGLES))]
    pub shingles: u64,
    #[schemars(range(min = 1, max = MAX_MINHASH_WIDTH))]
    pub width: u64,
    #[schemars(range(max = u64::MAX))]
    pub seed: u64,
}

/// One result of the ranker's page; only id, url and score are required.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Document {
    #[schemars(length(min = 1, max = MAX_ID_CHARS))]
    pub id: String,
    /// Any string: a URL a browser would open is never refused, however long or spelled,
    /// and one no browser opens (empty, no host, over `url::MAX_OPENABLE_URL_BYTES`) is
    /// removed by the banlist rule with a record naming the problem, the page served.
    pub url: String,
    pub score: Score,
    #[serde(default)]
    pub factors: BTreeMap<String, Score>,
    #[serde(default)]
    pub spam_score: Probability,
    #[serde(default)]
    pub adult_score: Probability,
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub domain_age_days: Option<f64>,
    #[serde(default)]
    pub is_ad: bool,
    #[serde(default)]
    pub topics: Vec<String>,
    /// ISO 3166-1 alpha-2 codes, as `query.region`.
    #[serde(default)]
    #[schemars(inner(length(min = REGION_CHARS, max = REGION_CHARS), regex(pattern = region_pattern())))]
    pub blocked_regions: Vec<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub minhash: Option<MinHash>,
    /// Any JSON object, returned unchanged.
    #[serde(default)]
    pub attributes: serde_json::Map<String, serde_json::Value>,
}

/// POST /v1/rerank body: the page in the ranker's order plus the query's context.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RerankRequest {
    pub documents: Vec<Document>,
    #[serde(default)]
    #[schemars(length(max = MAX_REQUEST_ID_CHARS))]
    pub request_id: Option<String>,
    #[serde(default)]
    pub query: Query,
    #[serde(default)]
    pub unit: BTreeMap<String, String>,
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_DEPTH))]
    pub depth: Option<u64>,
}

/// The variant of one experiment this request was assigned (`bucket` null: outside).
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Exposure {
    pub experiment: String,
    pub variant: String,
    pub bucket: Option<u32>,
    pub layer: Option<String>,
    pub salt: Option<String>,
    /// Present (true) only when the QA header forced the variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub forced: Option<bool>,
}

/// A document folded under the one it is listed in.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Collapsed {
    pub id: String,
    pub url: String,
    pub rule: String,
}

/// A document of the answered page; positions are 1-based.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RankedDocument {
    pub id: String,
    pub url: String,
    #[schemars(range(min = 1))]
    pub position: u32,
    #[schemars(range(min = 1))]
    pub original_position: u32,
    pub score: f64,
    pub original_score: f64,
    pub annotations: Vec<String>,
    pub collapsed: Vec<Collapsed>,
    // The document's `attributes` as it came, written back unchanged (key order kept).
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub attributes: Box<serde_json::value::RawValue>,
    /// On an interleaved page only: the profile whose page the document came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Team")]
    pub team: Option<String>,
}

/// The side of an interleaving a document was picked by.
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // a schema only: the writer spells the names
pub enum Team {
    Control,
    Treatment,
}

/// The interleaving experiment whose team-draft merge of two profiles' pages this is.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Interleaving {
    pub experiment: String,
}

/// A document an applied rule removed or trimmed.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Removed {
    pub id: Option<String>,
    pub rule: String,
    pub phase: Phase,
    #[schemars(with = "RemovedAction")]
    pub action: String,
    pub reason: String,
}

/// `removed`'s action: `remove` or `trim`.
struct RemovedAction;

impl JsonSchema for RemovedAction {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RemovedAction".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        names([Action::Remove.as_str(), Action::Trim.as_str()])
    }
}

/// What the post-filter did when filters emptied the page.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fallback {
    pub rule: String,
    pub action: String,
    pub reason: String,
}

/// One thing a rule did; `delta`: score change (rescore), position change (move).
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    pub rule: String,
    pub phase: Phase,
    pub doc_id: Option<String>,
    pub action: Action,
    pub reason: String,
    // A float for a score change, an integer for a position change (as `Number` writes).
    #[schemars(with = "Option<f64>")]
    pub delta: Option<serde_json::Number>,
    pub mode: Mode,
    /// The fallback's milder age mode, only on its record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "AgeMode")]
    pub relax_to: Option<String>,
}

/// A rule that did not run to completion (`deadline`, or `error` under `on_error: open`).
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Skip {
    pub rule: String,
    pub phase: Phase,
    pub reason: String,
}

/// What a step of the run did, as explain reports it (docs/explain.md).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Applied,
    Shadow,
    NoMatch,
    Disabled,
    OutsideWindow,
    NotApplicable,
    Skipped,
}

/// One step of the run as explain reports it.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainedStep {
    pub rule: String,
    pub phase: Phase,
    /// 1; 2 for the rerun after a relax.
    #[schemars(range(min = 1))]
    pub attempt: u32,
    pub status: StepStatus,
    pub mode: Option<Mode>,
    pub why: Option<String>,
    pub records: u32,
    /// Document ids after the step; null if it did not run.
    pub page: Option<Vec<String>>,
}

/// A rule other profiles run and this one does not.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Elsewhere {
    pub rule: String,
    pub phase: Phase,
    pub profiles: Vec<String>,
}

/// `explain`, with `X-Rearrange-Explain: true`: every step, and the rules of other
/// profiles this one lacks.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Explain {
    pub steps: Vec<ExplainedStep>,
    pub not_in_profile: Vec<Elsewhere>,
}

/// POST /v1/rerank 200: the page after every phase, with removals and the audit.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RerankResponse {
    pub request_id: String,
    pub profile: String,
    pub config_version: String,
    pub banlist_version: i64,
    pub experiments: Vec<Exposure>,
    /// Present only on an interleaved page (its documents then carry `team`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Interleaving")]
    pub interleaving: Option<Interleaving>,
    pub documents: Vec<RankedDocument>,
    pub removed: Vec<Removed>,
    pub fallback: Option<Fallback>,
    pub audit: Vec<AuditRecord>,
    /// Present only when a rule was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<Skip>")]
    pub skipped: Option<Vec<Skip>>,
    /// Present only when asked (X-Rearrange-Explain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Explain")]
    pub explain: Option<Explain>,
}

/// Every refusal of every route: `field` names what was wrong (a JSON path such as
/// `documents[3].score`, a query parameter, `body`, `Authorization`), `problem` says why.
/// Some routes add fields (`errors`, `refused`, `serving`, `write_id`: docs/api.md).
#[derive(JsonSchema)]
pub struct ErrorBody {
    /// invalid_request (4xx) or error (5xx); not_durable (503) for a write no Redis
    /// replica confirmed in time.
    pub error: String,
    pub field: Option<String>,
    pub problem: String,
}

/// POST /v1/rerank 503: a rule whose `on_error` is `closed` failed; no page is served.
#[derive(JsonSchema)]
pub struct RuleFailed {
    #[schemars(with = "RuleFailedError")]
    pub error: String,
    pub rule: String,
    pub phase: Phase,
    pub problem: String,
}

/// `rule_failed`, RuleFailed's `error`.
struct RuleFailedError;

impl JsonSchema for RuleFailedError {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RuleFailedError".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "const": "rule_failed"})
    }
}

/// Where the schemas refer to each other: the OpenAPI document's components.
pub const REF_PREFIX: &str = "#/components/schemas/";

/// The JSON Schemas (draft 2020-12, as OpenAPI 3.1 takes them) of RerankRequest (as it is
/// read: fields with a default optional), RerankResponse, ErrorBody, RuleFailed (as they are
/// written: every field present unless it is skipped when empty) and every type they name,
/// by name, referring to each other as `#/components/schemas/NAME`.
pub fn schemas() -> serde_json::Map<String, serde_json::Value> {
    let generator = |contract| {
        let mut settings = schemars::generate::SchemaSettings::draft2020_12();
        settings.definitions_path = "/components/schemas".into();
        settings.meta_schema = None;
        settings.contract = contract;
        settings.into_generator()
    };
    let mut read = generator(schemars::generate::Contract::Deserialize);
    read.subschema_for::<RerankRequest>();
    let mut written = generator(schemars::generate::Contract::Serialize);
    written.subschema_for::<RerankResponse>();
    written.subschema_for::<ErrorBody>();
    written.subschema_for::<RuleFailed>();
    let mut all = read.take_definitions(true);
    all.extend(written.take_definitions(true));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schemas_name_every_type_and_refer_only_to_each_other() {
        let all = schemas();
        for name in [
            "RerankRequest",
            "RerankResponse",
            "ErrorBody",
            "RuleFailed",
            "Document",
        ] {
            assert!(all.contains_key(name), "{name}");
        }
        let text = serde_json::to_string(&all).unwrap();
        for (at, _) in text.match_indices("\"$ref\":\"") {
            let rest = &text[at + 8..];
            let target = &rest[..rest.find('"').unwrap()];
            let name = target.strip_prefix(REF_PREFIX).expect(target);
            assert!(all.contains_key(name), "{target}");
        }
        let doc = &all["Document"];
        assert_eq!(doc["required"], serde_json::json!(["id", "url", "score"]));
        assert_eq!(doc["additionalProperties"], false);
        assert_eq!(doc["properties"]["id"]["maxLength"], MAX_ID_CHARS);
        assert_eq!(all["Score"]["maximum"], MAX_SCORE);
        let region = &all["Query"]["properties"]["region"];
        assert_eq!(region["pattern"], region_pattern());
        assert_eq!(region["maxLength"], REGION_CHARS);
    }

    /// The request types read what the decoder reads (a full document, the defaults).
    #[test]
    fn the_request_types_read_a_full_body() {
        let body = r#"{"documents":[{"id":"a","url":"http://a.example/","score":2.5,
            "factors":{"text":1},"spam_score":0.25,"adult_score":0,"domain_age_days":30,
            "is_ad":true,"topics":["news"],"blocked_regions":["de"],"text":"t",
            "minhash":{"values":[1,2],"shingles":3,"width":2,"seed":7},
            "attributes":{"k":[1,"x"]}}],"query":{"region":"RU"},"depth":3}"#;
        let req: RerankRequest = serde_json::from_str(body).unwrap();
        assert_eq!(req.documents[0].score, Score(2.5));
        assert_eq!(req.query.age_mode, "moderate");
        assert!(crate::contract::decode(
            body.as_bytes(),
            &crate::contract::Limits {
                max_documents: 10,
                max_text_chars: 10,
            }
        )
        .is_ok());
    }
}
