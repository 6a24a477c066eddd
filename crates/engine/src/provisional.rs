//! PROVISIONAL: a thin serde_json decoder of the request, so the Engine runs end to end
//! before `crate::contract::decode` lands. The lead replaces the one call in engine.rs
//! with `contract::decode` and deletes this file; its error paths are only approximate.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::contract::{AgeMode, Document, FieldError, Limits, Query, Request};

fn bad(status: u16, field: impl Into<String>, problem: impl Into<String>) -> FieldError {
    FieldError {
        status,
        field: field.into(),
        problem: problem.into(),
    }
}

fn num(v: Option<&Value>, field: &str, default: f64) -> Result<f64, FieldError> {
    match v {
        None => Ok(default),
        Some(v) => v
            .as_f64()
            .ok_or_else(|| bad(422, field, "Expected `float`")),
    }
}

fn strings(v: Option<&Value>, field: &str) -> Result<Vec<String>, FieldError> {
    match v {
        None => Ok(vec![]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(String::from)
                    .ok_or_else(|| bad(422, field, "Expected `str`"))
            })
            .collect(),
        Some(_) => Err(bad(422, field, "Expected `array`")),
    }
}

fn document(i: usize, v: &Value) -> Result<Document, FieldError> {
    let at = format!("documents[{i}]");
    let o = v
        .as_object()
        .ok_or_else(|| bad(422, &at, "Expected `object`"))?;
    let s = |k: &str| -> Result<String, FieldError> {
        o.get(k)
            .and_then(Value::as_str)
            .map(String::from)
            .ok_or_else(|| bad(422, format!("{at}.{k}"), "required field is missing"))
    };
    let factors = match o.get("factors") {
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(0.0)))
            .collect(),
        _ => vec![],
    };
    Ok(Document {
        id: s("id")?,
        url: s("url")?,
        score: o
            .get("score")
            .and_then(Value::as_f64)
            .ok_or_else(|| bad(422, format!("{at}.score"), "required field is missing"))?,
        factors,
        spam_score: num(o.get("spam_score"), &format!("{at}.spam_score"), 0.0)?,
        adult_score: num(o.get("adult_score"), &format!("{at}.adult_score"), 0.0)?,
        domain_age_days: o.get("domain_age_days").and_then(Value::as_f64),
        is_ad: o.get("is_ad").and_then(Value::as_bool).unwrap_or(false),
        topics: strings(o.get("topics"), &format!("{at}.topics"))?,
        blocked_regions: strings(o.get("blocked_regions"), &format!("{at}.blocked_regions"))?,
        text: o.get("text").and_then(Value::as_str).map(String::from),
        minhash: None,
        attributes: o
            .get("attributes")
            .map_or_else(|| "{}".to_string(), |a| a.to_string()),
    })
}

/// Decode a body (approximately as `contract::decode` will).
pub fn decode(body: &[u8], limits: &Limits) -> Result<Request, FieldError> {
    let root: Value = serde_json::from_slice(body)
        .map_err(|e| bad(400, "body", format!("not valid JSON: {e}")))?;
    let o = root
        .as_object()
        .ok_or_else(|| bad(422, "body", "Expected `object`"))?;
    let empty = Map::new();
    let q = o.get("query").and_then(Value::as_object).unwrap_or(&empty);
    let age_mode = match q.get("age_mode").and_then(Value::as_str) {
        None | Some("moderate") => AgeMode::Moderate,
        Some("strict") => AgeMode::Strict,
        Some("off") => AgeMode::Off,
        Some(_) => {
            return Err(bad(
                422,
                "query.age_mode",
                "Expected `str` matching one of strict, moderate, off",
            ))
        }
    };
    let docs = o
        .get("documents")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(422, "documents", "required field is missing"))?;
    if docs.len() > limits.max_documents {
        return Err(bad(
            413,
            "documents",
            format!(
                "{} documents, over the limit of {}",
                docs.len(),
                limits.max_documents
            ),
        ));
    }
    let documents = docs
        .iter()
        .enumerate()
        .map(|(i, d)| document(i, d))
        .collect::<Result<Vec<_>, _>>()?;
    let mut seen = HashSet::new();
    for (i, d) in documents.iter().enumerate() {
        if !seen.insert(d.id.as_str()) {
            return Err(bad(
                422,
                format!("documents[{i}].id"),
                format!("duplicate id {:?}", d.id),
            ));
        }
    }
    Ok(Request {
        request_id: o
            .get("request_id")
            .and_then(Value::as_str)
            .map(String::from),
        query: Query {
            text: q
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            classes: strings(q.get("classes"), "query.classes")?,
            region: q.get("region").and_then(Value::as_str).map(String::from),
            age_mode,
        },
        unit: o
            .get("unit")
            .and_then(Value::as_object)
            .map(|u| {
                u.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default(),
        profile: o.get("profile").and_then(Value::as_str).map(String::from),
        depth: o.get("depth").and_then(Value::as_u64).map(|d| d as u32),
        documents,
    })
}
