//! Phases, modes and audit records: what a rule did (or would have done) to one document.

use std::rc::Rc;

use crate::contract::AgeMode;
use crate::doc::Page;

/// The six phases, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    PreFilter,
    Rerank,
    Diversify,
    Trim,
    Annotate,
    PostFilter,
}

impl Phase {
    /// Every phase in run order.
    pub const ALL: [Phase; 6] = [
        Phase::PreFilter,
        Phase::Rerank,
        Phase::Diversify,
        Phase::Trim,
        Phase::Annotate,
        Phase::PostFilter,
    ];

    /// The CONTRACT's name (`pre-filter`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::PreFilter => "pre-filter",
            Phase::Rerank => "rerank",
            Phase::Diversify => "diversify",
            Phase::Trim => "trim",
            Phase::Annotate => "annotate",
            Phase::PostFilter => "post-filter",
        }
    }

    /// The phase of a CONTRACT name.
    pub fn parse(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// Its place in run order (0 to 5).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// `applied` (the page changed) or `shadow` (computed, not applied).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    Applied,
    Shadow,
}

impl Mode {
    /// The CONTRACT's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Applied => "applied",
            Mode::Shadow => "shadow",
        }
    }

    /// 0 for applied, 1 for shadow (metrics arrays).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// An audit record's `action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Remove,
    Rescore,
    Move,
    Collapse,
    Trim,
    Annotate,
    Fallback,
    /// A trimmed document put back after a post-filter removal (the runner's `backfill`).
    Backfill,
}

impl Action {
    /// Every action, in the order of `index`.
    pub const ALL: [Action; 8] = [
        Action::Remove,
        Action::Rescore,
        Action::Move,
        Action::Collapse,
        Action::Trim,
        Action::Annotate,
        Action::Fallback,
        Action::Backfill,
    ];

    /// The CONTRACT's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Remove => "remove",
            Action::Rescore => "rescore",
            Action::Move => "move",
            Action::Collapse => "collapse",
            Action::Trim => "trim",
            Action::Annotate => "annotate",
            Action::Fallback => "fallback",
            Action::Backfill => "backfill",
        }
    }

    /// The action of a CONTRACT name.
    pub fn parse(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// Its place in `ALL`.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// `delta`: a score change (float), a position change (int), or null.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Delta {
    None,
    Int(i64),
    Float(f64),
}

/// An audit record's `reason`. Most are written for their one record; some are one text
/// that many records give (every fold under one host, every document below the depth),
/// and those share one allocation instead of each copying it; fixed ones borrow a literal.
#[derive(Clone)]
pub struct Reason(Text);

#[derive(Clone)]
enum Text {
    Fixed(&'static str),
    Own(String),
    Shared(Rc<str>),
}

impl Reason {
    /// A text the records that give it share: cloning it copies no bytes.
    pub fn shared(text: String) -> Self {
        Reason(Text::Shared(text.into()))
    }

    /// The same text by identity: one literal or one shared allocation (a cheap test that
    /// says nothing of equal texts in two allocations).
    pub fn is_same(&self, other: &Reason) -> bool {
        match (&self.0, &other.0) {
            (Text::Fixed(a), Text::Fixed(b)) => std::ptr::eq(*a, *b),
            (Text::Shared(a), Text::Shared(b)) => Rc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Text::Fixed(s) => s,
            Text::Own(s) => s,
            Text::Shared(s) => s,
        }
    }
}

impl std::ops::Deref for Reason {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<String> for Reason {
    fn from(text: String) -> Self {
        Reason(Text::Own(text))
    }
}

impl From<&'static str> for Reason {
    fn from(text: &'static str) -> Self {
        Reason(Text::Fixed(text))
    }
}

impl std::fmt::Debug for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Reason {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<str> for Reason {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// What a rule reports about one document; the runner stamps rule, phase and mode.
#[derive(Clone, Debug, PartialEq)]
pub struct Rec<'a> {
    pub doc_id: Option<&'a str>,
    /// The document's index in the request (the audit-log line gives its URL and host).
    pub at: Option<u32>,
    pub action: Action,
    pub reason: Reason,
    pub delta: Delta,
    /// Only on a `fallback` asking the runner to rerun with a milder age mode.
    pub relax_to: Option<AgeMode>,
}

impl<'a> Rec<'a> {
    /// A record without a delta about the request's document `at`.
    pub fn on(page: &Page<'a>, at: u32, action: Action, reason: impl Into<Reason>) -> Self {
        Rec {
            doc_id: Some(page.id_at(at)),
            at: Some(at),
            ..Rec::of_page(action, reason)
        }
    }

    /// A record about the page as a whole (a fallback), naming no document.
    pub fn of_page(action: Action, reason: impl Into<Reason>) -> Self {
        Rec {
            doc_id: None,
            at: None,
            action,
            reason: reason.into(),
            delta: Delta::None,
            relax_to: None,
        }
    }
}

/// Two rule names equal: a name seen again in a run is mostly the very `&str` the rule
/// or the runner holds, so its address and length are compared before its bytes.
#[inline]
pub fn same_name(a: &str, b: &str) -> bool {
    std::ptr::eq(a, b) || a == b
}

/// One audit record as the response writes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Record<'a> {
    pub rule: &'a str,
    pub phase: Phase,
    pub mode: Mode,
    pub rec: Rec<'a>,
}
