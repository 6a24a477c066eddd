//! Test helpers: a default context and a rule that fails, panics or stops on purpose.

use super::{removing, Ctx, Failure, RuleResult};
use crate::clock::Monotonic;
use crate::contract::AgeMode;
use crate::doc::{Doc, Page};

/// A context with the query's defaults and no banlist.
pub fn ctx<'a>(page: &'a Page<'a>) -> Ctx<'a> {
    Ctx {
        page,
        region: None,
        age_mode: AgeMode::Moderate,
        depth: None,
        input_count: page.req.documents.len(),
        now: 1_000.0,
        banlist: None,
        quarantine: None,
        variants: &[],
        relaxed_from: None,
        deadline: None,
        clock: &Monotonic,
        profile: "default",
        explain: false,
        executor: None,
    }
}

/// What a `TestRule` does when called.
#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// Removes the first document.
    RemoveFirst,
    /// Returns a failure.
    Fail,
    /// Panics.
    Panic,
    /// Checks the deadline, then removes the first document.
    CheckDeadline,
}

/// A rule for the runner's tests.
pub struct TestRule {
    pub name: &'static str,
    pub optional: bool,
    pub behaviour: Behaviour,
}

impl TestRule {
    /// Run it.
    pub fn apply<'a>(&self, docs: &[Doc], ctx: &Ctx<'a>) -> RuleResult<'a> {
        match self.behaviour {
            Behaviour::Fail => Err(Failure::Failed("it broke".into())),
            Behaviour::Panic => panic!("test rule panicked"),
            Behaviour::CheckDeadline => {
                ctx.check_deadline()?;
                Ok(removing(ctx.page, docs, vec![(0, "first".into())]))
            }
            Behaviour::RemoveFirst if docs.is_empty() => Ok(Default::default()),
            Behaviour::RemoveFirst => Ok(removing(ctx.page, docs, vec![(0, "first".into())])),
        }
    }
}
