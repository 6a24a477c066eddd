//! The documents a query rule acts on (`match`): URLs (canonical, without the scheme, as
//! a `url` ban matches), hosts, domains with their subdomains, and attribute values.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::fmt;

use schemars::JsonSchema;
use serde::de::{
    DeserializeSeed, Deserializer, Error as DeError, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::doc::{Doc, Page};
use crate::fmt::push_g;

/// The key a `url` target matches: the canonical URL without its scheme (http and https
/// alike, as a `url` ban matches).
pub fn url_key(canonical: &str) -> &str {
    canonical.find("://").map_or("", |at| &canonical[at + 3..])
}

/// The `url` key of a configured URL; Err if no browser could open it.
pub fn configured_url(field: &str, raw: &str) -> Result<String, String> {
    let canonical = crate::url::canonicalize(raw.trim())
        .map_err(|e| format!("{field}: {raw:?} cannot be opened: {e}"))?;
    Ok(url_key(&canonical).to_string())
}

fn configured_host(field: &str, raw: &str) -> Result<String, String> {
    let canonical = crate::url::canonicalize(raw.trim())
        .map_err(|e| format!("{field}: {raw:?} is not a host name: {e}"))?;
    let key = url_key(&canonical);
    let host = match key.strip_suffix('/') {
        Some(host) if !host.is_empty() && !host.contains('/') => host,
        _ => return Err(format!("{field}: {raw:?} is not a bare host name")),
    };
    if !is_host_name(host) {
        return Err(format!(
            "{field}: {host:?} is not a host name (letters, digits, '-', '_' and dots; \
             no wildcards: a domain covers every subdomain)"
        ));
    }
    Ok(host.to_string())
}

/// What a result URL's host can be (as a banlist host entry checks it): what
/// canonicalization keeps escaped ('*', spaces) is no host, and a target naming it would
/// never match.
fn is_host_name(host: &str) -> bool {
    if let Some(ip) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return !ip.is_empty()
            && ip.bytes().all(|b| {
                b.is_ascii_hexdigit() && !b.is_ascii_uppercase() || b == b':' || b == b'.'
            });
    }
    host.split('.').all(|label| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    })
}

/// A configured domain (it covers its subdomains): a host, not an IP, not a public suffix.
fn configured_domain(field: &str, raw: &str) -> Result<String, String> {
    let host = configured_host(field, raw)?;
    if host.starts_with('[') || host.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err(format!(
            "{field}: {host} is an IP address, which has no subdomains: use hosts"
        ));
    }
    if crate::domain::is_public_suffix(&host) {
        return Err(format!(
            "{field}: {host} is a public suffix: it would match every site registered under it"
        ));
    }
    Ok(host)
}

/// `match`: the documents a rule acts on; any target will do.
#[derive(Deserialize, Serialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct MatchIn {
    /// URLs (http and https alike).
    #[serde(default)]
    pub urls: Vec<String>,
    /// Bare host names.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Domains, each with its subdomains (not an IP, not a public suffix).
    #[serde(default)]
    pub domains: Vec<String>,
    /// Every key with this value (string, number or boolean) in the document's
    /// `attributes`.
    #[serde(default)]
    pub attributes: BTreeMap<String, Value>,
}

/// An attribute's value as a target wants it.
#[derive(Debug, PartialEq)]
enum Scalar {
    Bool(bool),
    Number(f64),
    Str(String),
}

impl Scalar {
    fn push_to(&self, out: &mut String) {
        match self {
            Scalar::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Scalar::Number(x) => push_g(out, *x),
            Scalar::Str(s) => out.push_str(&serde_json::to_string(s).unwrap_or_default()),
        }
    }
}

/// The targets, normalized.
pub struct Targets {
    urls: HashSet<String>,
    hosts: HashSet<String>,
    domains: Vec<String>,
    attributes: Vec<(String, Scalar)>,
    /// `"key"` of each attribute as the decoder writes it, when it needs no escape: a
    /// document whose attributes lack it is not parsed.
    quoted: Vec<Option<String>>,
    /// How `attributes` reads in a reason (`attributes tier="premium"`).
    attributes_said: String,
}

impl Targets {
    /// Build from `match`; Err names the target refused.
    pub fn build(m: MatchIn) -> Result<Targets, String> {
        let mut urls = HashSet::new();
        for (i, u) in m.urls.iter().enumerate() {
            urls.insert(configured_url(&format!("match.urls[{i}]"), u)?);
        }
        let mut hosts = HashSet::new();
        for (i, h) in m.hosts.iter().enumerate() {
            hosts.insert(configured_host(&format!("match.hosts[{i}]"), h)?);
        }
        let mut domains = Vec::new();
        for (i, d) in m.domains.iter().enumerate() {
            let d = configured_domain(&format!("match.domains[{i}]"), d)?;
            if !domains.contains(&d) {
                domains.push(d);
            }
        }
        let mut attributes = Vec::new();
        let mut quoted = Vec::new();
        for (key, v) in m.attributes {
            if key.is_empty() {
                return Err("match.attributes: a key cannot be empty".into());
            }
            let scalar = match v {
                Value::Bool(b) => Scalar::Bool(b),
                Value::Number(n) => Scalar::Number(n.as_f64().unwrap_or(f64::NAN)),
                Value::String(s) => Scalar::Str(s),
                _ => {
                    return Err(format!(
                        "match.attributes.{key}: a string, a number or a boolean"
                    ))
                }
            };
            let plain = !key.chars().any(|c| c == '"' || c == '\\' || c.is_control());
            quoted.push(plain.then(|| format!("\"{key}\"")));
            attributes.push((key, scalar));
        }
        if urls.is_empty() && hosts.is_empty() && domains.is_empty() && attributes.is_empty() {
            return Err("match: give urls, hosts, domains or attributes".into());
        }
        let mut said = String::new();
        for (i, (key, v)) in attributes.iter().enumerate() {
            said.push_str(if i == 0 { "attributes " } else { ", " });
            said.push_str(key);
            said.push('=');
            v.push_to(&mut said);
        }
        Ok(Targets {
            urls,
            hosts,
            domains,
            attributes,
            quoted,
            attributes_said: said,
        })
    }

    /// What target `doc` is, as a record says it (`host shop.example`), or None.
    pub fn hit(&self, page: &Page, doc: &Doc) -> Option<String> {
        if !self.urls.is_empty() {
            let key = url_key(page.canonical(doc));
            if self.urls.contains(key) {
                return Some(format!("url {key}"));
            }
        }
        let host = page.host(doc);
        if !host.is_empty() {
            if self.hosts.contains(host) {
                return Some(format!("host {host}"));
            }
            for d in &self.domains {
                let under = host.len() > d.len()
                    && host.ends_with(d.as_str())
                    && host.as_bytes()[host.len() - d.len() - 1] == b'.';
                if host == d || under {
                    return Some(format!("domain {d}"));
                }
            }
        }
        if !self.attributes.is_empty() && self.attributes_hold(attributes_of(page, doc)) {
            return Some(self.attributes_said.clone());
        }
        None
    }

    fn attributes_hold(&self, text: &str) -> bool {
        let absent = self
            .quoted
            .iter()
            .any(|q| q.as_ref().is_some_and(|q| !text.contains(q.as_str())));
        if absent {
            return false;
        }
        let mut de = serde_json::Deserializer::from_str(text);
        Holds(&self.attributes)
            .deserialize(&mut de)
            .unwrap_or(false)
    }
}

/// Reads an `attributes` object for the wanted keys only, true when each has its value:
/// nothing is allocated for a key without an escape, and other values are skipped.
struct Holds<'w>(&'w [(String, Scalar)]);

impl<'de> DeserializeSeed<'de> for Holds<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<bool, D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Holds<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut met = 0;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match self.0.iter().find(|(k, _)| *k == *key) {
                Some((_, want)) => {
                    if !map.next_value_seed(Is(want))? {
                        return Ok(false);
                    }
                    met += 1;
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        // the decoder wrote each key once
        Ok(met == self.0.len())
    }
}

/// Whether one value is the scalar wanted (same JSON type; numbers by value).
struct Is<'w>(&'w Scalar);

impl<'de> DeserializeSeed<'de> for Is<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<bool, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Is<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: DeError>(self, v: bool) -> Result<bool, E> {
        Ok(matches!(self.0, Scalar::Bool(b) if *b == v))
    }

    fn visit_u64<E: DeError>(self, v: u64) -> Result<bool, E> {
        self.visit_f64(v as f64)
    }

    fn visit_i64<E: DeError>(self, v: i64) -> Result<bool, E> {
        self.visit_f64(v as f64)
    }

    fn visit_f64<E: DeError>(self, v: f64) -> Result<bool, E> {
        Ok(matches!(self.0, Scalar::Number(x) if *x == v))
    }

    fn visit_str<E: DeError>(self, v: &str) -> Result<bool, E> {
        Ok(matches!(self.0, Scalar::Str(s) if s == v))
    }

    fn visit_unit<E: DeError>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

/// The document's `attributes` as JSON text (the decoder's writing of them).
fn attributes_of<'p>(page: &'p Page, doc: &Doc) -> &'p str {
    &page.src(doc).attributes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_need_one_and_refuse_what_no_browser_opens() {
        assert!(Targets::build(MatchIn::default()).is_err());
        let m = MatchIn {
            urls: vec!["http://[::1".into()],
            ..MatchIn::default()
        };
        assert!(Targets::build(m)
            .err()
            .unwrap()
            .starts_with("match.urls[0]: \"http://[::1\" cannot be opened"));
        let m = MatchIn {
            hosts: vec!["shop.example/a".into()],
            ..MatchIn::default()
        };
        assert!(Targets::build(m).is_err());
    }

    #[test]
    fn attributes_compare_by_type() {
        let mut attributes = BTreeMap::new();
        attributes.insert("verified".to_string(), Value::Bool(true));
        attributes.insert("tier".to_string(), Value::from(1));
        let t = Targets::build(MatchIn {
            attributes,
            ..MatchIn::default()
        })
        .unwrap();
        assert!(t.attributes_hold(r#"{"verified":true,"tier":1.0}"#));
        assert!(!t.attributes_hold(r#"{"verified":1,"tier":1}"#));
        assert!(!t.attributes_hold(r#"{"verified":true}"#));
        assert!(!t.attributes_hold(r#"{"x":{"verified":true,"tier":1}}"#));
        assert!(t.attributes_hold(r#"{"x":[{"tier":2}],"verified":true,"tier":1}"#));
        assert!(!t.attributes_hold(r#"{"verified":true,"tier":"1"}"#));
        assert!(!t.attributes_hold(r#"{"verified":null,"tier":1}"#));
        assert_eq!(t.attributes_said, "attributes tier=1, verified=true");
        // a key the decoder writes escaped is looked for without the substring test
        let mut attributes = BTreeMap::new();
        attributes.insert("say \"hi\"".to_string(), Value::from("é"));
        let t = Targets::build(MatchIn {
            attributes,
            ..MatchIn::default()
        })
        .unwrap();
        assert!(t.attributes_hold(r#"{"say \"hi\"":"é"}"#));
        assert!(!t.attributes_hold(r#"{"say \"hi\"":"e"}"#));
    }
}
