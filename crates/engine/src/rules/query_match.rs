//! What the query rules (`query_pin`, `query_hide`, `query_boost`) share: the condition on
//! the request's query (`when`), matched on its normalized text, and the rule's label.
//! The documents a rule acts on (`match`) are in `query_targets`.
//!
//! Normalized text: NFKC, lower-cased, split into words at every character that is not a
//! letter, a mark or a number (Unicode general categories L, M, N), the words joined by one
//! space. `iPhone-15 PRO!` is `iphone 15 pro`; `ＩＰＨＯＮＥ` is `iphone`.

use icu_properties::props::{GeneralCategory, GeneralCategoryGroup};
use icu_properties::CodePointMapData;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

use super::Ctx;

fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    let category = CodePointMapData::<GeneralCategory>::new().get(c);
    GeneralCategoryGroup::Letter.contains(category)
        || GeneralCategoryGroup::Mark.contains(category)
        || GeneralCategoryGroup::Number.contains(category)
}

/// `text` normalized: its words, lower-cased after NFKC, joined by single spaces.
pub fn normalize(text: &str) -> String {
    let folded: String = if text.is_ascii() {
        text.to_ascii_lowercase()
    } else {
        text.nfkc().collect::<String>().to_lowercase()
    };
    let mut out = String::with_capacity(folded.len());
    for word in folded.split(|c: char| !is_word_char(c)) {
        if !word.is_empty() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(word);
        }
    }
    out
}

/// ` text `: word-bounded containment is then substring containment.
fn padded(normalized: &str) -> String {
    format!(" {normalized} ")
}

/// `when`: each condition given must hold; within one list, any item will do. None
/// given: every request of the profile.
#[derive(Deserialize, Serialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct WhenIn {
    /// The normalized query is one of these.
    #[serde(default)]
    pub query_is: Vec<String>,
    /// The normalized query holds one of these phrases, word for word.
    #[serde(default)]
    pub query_contains: Vec<String>,
    /// The normalized query holds every one of these words, in any order.
    #[serde(default)]
    pub query_words: Vec<String>,
    /// The request has one of these query classes.
    #[serde(default)]
    pub classes: Vec<String>,
    /// The query's region is one of these (ISO 3166-1 alpha-2).
    #[serde(default)]
    pub regions: Vec<String>,
}

/// The condition, its texts normalized.
pub struct When {
    is: Vec<String>,
    /// ` phrase ` each.
    contains: Vec<String>,
    /// ` word ` each, every word of every item once.
    words: Vec<String>,
    classes: Vec<String>,
    regions: Vec<String>,
    /// ` [label]` after every reason, or nothing: decided once, at load.
    suffix: String,
}

fn normalized_items(field: &str, items: &[String]) -> Result<Vec<String>, String> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let n = normalize(item);
            if n.is_empty() {
                Err(format!(
                    "when.{field}[{i}]: {item:?} has no letters or digits"
                ))
            } else {
                Ok(n)
            }
        })
        .collect()
}

impl When {
    /// Build from its parameters and the rule's `label`; Err names the item refused.
    pub fn build(w: WhenIn, label: &Option<String>) -> Result<When, String> {
        check_label(label)?;
        let is = normalized_items("query_is", &w.query_is)?;
        let contains = normalized_items("query_contains", &w.query_contains)?
            .iter()
            .map(|p| padded(p))
            .collect();
        let mut words: Vec<String> = Vec::new();
        for item in normalized_items("query_words", &w.query_words)? {
            for word in item.split(' ') {
                let word = padded(word);
                if !words.contains(&word) {
                    words.push(word);
                }
            }
        }
        let mut regions = Vec::with_capacity(w.regions.len());
        for (i, r) in w.regions.iter().enumerate() {
            let code = r.trim(); // checked before upper-casing: 'ß' upper-cases to "SS"
            if code.len() != 2 || !code.bytes().all(|b| b.is_ascii_alphabetic()) {
                return Err(format!(
                    "when.regions[{i}]: {r:?} is not an ISO 3166-1 alpha-2 code"
                ));
            }
            regions.push(code.to_ascii_uppercase());
        }
        if let Some(i) = w.classes.iter().position(|c| c.is_empty()) {
            return Err(format!("when.classes[{i}]: a class cannot be empty"));
        }
        Ok(When {
            is,
            contains,
            words,
            classes: w.classes,
            regions,
            suffix: label.as_ref().map_or(String::new(), |l| format!(" [{l}]")),
        })
    }

    /// True when the condition holds for the request.
    pub fn holds(&self, ctx: &Ctx) -> bool {
        self.check(ctx, false).is_some()
    }

    /// What of the request met the condition, as the records say it (`when query is
    /// "iphone 15", region RU`, or `on every query`); None when it does not hold.
    pub fn matched(&self, ctx: &Ctx) -> Option<String> {
        self.check(ctx, true)
    }

    /// `matched`, saying nothing (an empty string) unless `say`.
    fn check(&self, ctx: &Ctx, say: bool) -> Option<String> {
        let query = &ctx.page.req.query;
        // the cheap conditions first; the records name the query's first
        let class = if self.classes.is_empty() {
            None
        } else {
            Some(
                query
                    .classes
                    .iter()
                    .find(|c| self.classes.iter().any(|k| k == *c))?,
            )
        };
        let region = if self.regions.is_empty() {
            None
        } else {
            Some(ctx.region.filter(|r| self.regions.iter().any(|x| x == r))?)
        };
        let mut parts: Vec<String> = Vec::new();
        if !(self.is.is_empty() && self.contains.is_empty() && self.words.is_empty()) {
            let text = normalize(&query.text);
            if !self.is.is_empty() {
                let hit = self.is.iter().find(|v| **v == text)?;
                if say {
                    parts.push(format!("query is \"{hit}\""));
                }
            }
            let line = padded(&text);
            if !self.contains.is_empty() {
                let hit = self.contains.iter().find(|p| line.contains(p.as_str()))?;
                if say {
                    parts.push(format!("query contains \"{}\"", hit.trim()));
                }
            }
            if !self.words.is_empty() {
                if !self.words.iter().all(|w| line.contains(w.as_str())) {
                    return None;
                }
                if say {
                    let listed: Vec<String> = (self.words.iter())
                        .map(|w| format!("\"{}\"", w.trim()))
                        .collect();
                    parts.push(format!("query has {}", listed.join(", ")));
                }
            }
        }
        if say {
            parts.extend(class.map(|c| format!("class {c}")));
            parts.extend(region.map(|r| format!("region {r}")));
        }
        Some(if !say {
            String::new()
        } else if parts.is_empty() {
            format!("on every query{}", self.suffix)
        } else {
            format!("when {}{}", parts.join(", "), self.suffix)
        })
    }
}

/// Check a rule's `label`: 1 to 64 of ASCII letters, digits and `_ . : -`.
fn check_label(label: &Option<String>) -> Result<(), String> {
    match label {
        Some(l)
            if l.is_empty()
                || l.len() > 64
                || !l
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b)) =>
        {
            Err(format!(
                "label: {l:?} is not 1 to 64 of letters, digits and _ . : -"
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_case_width_and_punctuation() {
        assert_eq!(normalize("  iPhone-15   PRO! "), "iphone 15 pro");
        assert_eq!(normalize("ＩＰＨＯＮＥ"), "iphone");
        assert_eq!(normalize("Купить ДИВАН, недорого"), "купить диван недорого");
        assert_eq!(normalize("«ёлка»—2027"), "ёлка 2027");
        assert_eq!(normalize("!!!"), "");
    }

    #[test]
    fn refuses_items_without_words_and_bad_regions() {
        let w = WhenIn {
            query_contains: vec!["ok".into(), "?!".into()],
            ..WhenIn::default()
        };
        assert_eq!(
            When::build(w, &None).err().unwrap(),
            "when.query_contains[1]: \"?!\" has no letters or digits"
        );
        for bad in ["RUS", "ß", "ＲＵ"] {
            // 'ß' upper-cases to "SS": the code is checked as written
            let w = WhenIn {
                regions: vec![bad.into()],
                ..WhenIn::default()
            };
            assert!(When::build(w, &None)
                .err()
                .unwrap()
                .starts_with("when.regions[0]"));
        }
        let w = WhenIn {
            regions: vec![" ru".into()],
            ..WhenIn::default()
        };
        assert!(When::build(w, &None).is_ok());
    }
}
