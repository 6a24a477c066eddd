//! `empty_result_fallback`: if filters emptied a non-empty page, relax the age mode once
//! (never past `min_age_mode`) or say that nothing safe was found.
//!
//! The runner reruns the pipeline on the original documents when a record carries
//! `relax_to`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Builtin, Ctx, Out, RuleResult};
use crate::contract::AgeMode;
use crate::doc::Doc;
use crate::record::{Action, Phase, Rec};

/// If filters emptied a non-empty page: relax the age mode once, or say nothing safe was
/// found. `relax` steps one age mode milder (strict -> moderate -> off) but never past
/// `min_age_mode`, and the runner reruns the pipeline on the original documents.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// `relax` or `message`.
    #[schemars(regex(pattern = r"^(relax|message)$"))]
    #[serde(default = "relax")]
    pub strategy: String,
    /// The mildest age mode `relax` may reach: `strict`, `moderate` or `off`.
    #[schemars(regex(pattern = r"^(strict|moderate|off)$"))]
    #[serde(default = "moderate")]
    pub min_age_mode: String,
}

fn relax() -> String {
    "relax".into()
}
fn moderate() -> String {
    "moderate".into()
}

impl Default for Params {
    fn default() -> Self {
        Params {
            strategy: relax(),
            min_age_mode: moderate(),
        }
    }
}

/// How every fallback reason starts: the page the filters emptied.
pub fn emptied(count: usize) -> String {
    format!("filters removed all {count} documents")
}

/// The rule (applies to requests that had documents).
pub struct EmptyResultFallback {
    relax: bool,
    floor: AgeMode,
}

impl Builtin for EmptyResultFallback {
    const NAME: &'static str = "empty_result_fallback";
    const PHASES: &'static [Phase] = &[Phase::PostFilter];
    const IDLE: &'static str = "the request had no documents";
    type Params = Params;

    fn build(p: Params) -> Result<Self, String> {
        let relax = match p.strategy.as_str() {
            "relax" => true,
            "message" => false,
            other => return Err(format!("strategy: must be relax or message, not {other:?}")),
        };
        let floor =
            age_mode(&p.min_age_mode).ok_or("min_age_mode: must be strict, moderate or off")?;
        Ok(EmptyResultFallback { relax, floor })
    }

    fn run<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        Ok(self.apply(docs, ctx))
    }

    fn applies(&self, ctx: &Ctx) -> bool {
        ctx.input_count > 0
    }
}

fn age_mode(name: &str) -> Option<AgeMode> {
    match name {
        "strict" => Some(AgeMode::Strict),
        "moderate" => Some(AgeMode::Moderate),
        "off" => Some(AgeMode::Off),
        _ => None,
    }
}

impl EmptyResultFallback {
    /// One step milder than `mode`, unless that passes the floor.
    pub fn milder(&self, mode: AgeMode) -> Option<AgeMode> {
        if mode < self.floor {
            Some(match mode {
                AgeMode::Strict => AgeMode::Moderate,
                _ => AgeMode::Off,
            })
        } else {
            None
        }
    }

    /// A fallback record when the page is empty.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> Out<'a> {
        if !docs.is_empty() {
            return Out::unchanged();
        }
        let removed = format!(
            "{} under age_mode {}",
            emptied(ctx.input_count),
            ctx.age_mode.as_str()
        );
        let milder = self
            .milder(ctx.age_mode)
            .filter(|_| self.relax && ctx.relaxed_from.is_none());
        let rec = match milder {
            Some(m) => Rec {
                relax_to: Some(m),
                ..Rec::of_page(
                    Action::Fallback,
                    format!("{removed}; reran with age_mode {}", m.as_str()),
                )
            },
            None => Rec::of_page(
                Action::Fallback,
                format!("{removed}; nothing safe was found"),
            ),
        };
        Out {
            docs: None,
            recs: vec![rec],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::testing::{docs, request, SimpleCanon};
    use crate::doc::Page;
    use crate::rules::testing::ctx;

    #[test]
    fn relaxes_one_step_never_past_the_floor() {
        let req = request(docs(3));
        let (page, _) = Page::build(&req, &SimpleCanon, false);
        let rule = EmptyResultFallback::build(Params::default()).unwrap();
        let mut c = ctx(&page);
        c.age_mode = AgeMode::Strict;
        let out = rule.apply(&[], &c);
        assert_eq!(out.recs[0].relax_to, Some(AgeMode::Moderate));
        assert_eq!(
            out.recs[0].reason,
            "filters removed all 3 documents under age_mode strict; reran with age_mode moderate"
        );
        c.age_mode = AgeMode::Moderate;
        let out = rule.apply(&[], &c);
        assert_eq!(out.recs[0].relax_to, None);
        assert_eq!(
            out.recs[0].reason,
            "filters removed all 3 documents under age_mode moderate; nothing safe was found"
        );
        let off = EmptyResultFallback::build(Params {
            min_age_mode: "off".into(),
            ..Params::default()
        })
        .unwrap();
        assert_eq!(off.milder(AgeMode::Moderate), Some(AgeMode::Off));
        c.relaxed_from = Some(AgeMode::Strict);
        assert_eq!(off.apply(&[], &c).recs[0].relax_to, None);
    }
}
