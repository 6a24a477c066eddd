//! The response body and the audit-log line, written by hand in one pass (the keys as
//! `wire::RerankResponse` declares them; tests/api/test_wire_schema.py validates real
//! answers against its schema).

pub mod as_wire;

use crate::doc::Page;
use crate::experiments::Exposure;
use crate::json::{extend_short, write_f64, write_i64, write_list, write_opt_str, write_str, Sink};
use crate::record::{same_name, Action, Delta, Mode, Record};
use crate::runner::{Outcome, Skip};

/// What the response says beyond the outcome.
pub struct Head<'a> {
    pub request_id: &'a str,
    pub profile: &'a str,
    pub config_version: &'a str,
    pub banlist_version: i64,
    pub exposures: &'a [Exposure],
    /// The interleaving experiment whose merged page this is (`Outcome::teams` set).
    pub interleaving: Option<&'a str>,
}

/// Append literal JSON text (a key with its punctuation, written as one copy).
#[inline]
fn lit<S: Sink + ?Sized>(out: &mut S, text: &[u8]) {
    out.extend_from_slice(text);
}

/// Append one of the engine's own names (a phase, action or mode: ASCII letters and `-`,
/// nothing to escape) as a JSON string.
#[inline(always)]
fn name<S: Sink + ?Sized>(out: &mut S, s: &'static str) {
    out.push(b'"');
    extend_short(out, s.as_bytes());
    out.push(b'"');
}

/// `experiments`: {experiment, variant, bucket, layer, salt[, forced]} each.
pub fn write_exposures<S: Sink + ?Sized>(out: &mut S, exposures: &[Exposure]) {
    write_list(out, exposures, |out, e| {
        lit(out, b"{\"experiment\":");
        write_str(out, &e.experiment);
        lit(out, b",\"variant\":");
        write_str(out, &e.variant);
        lit(out, b",\"bucket\":");
        match e.bucket {
            Some(b) => write_i64(out, b as i64),
            None => lit(out, b"null"),
        }
        lit(out, b",\"layer\":");
        write_opt_str(out, e.layer.as_deref());
        lit(out, b",\"salt\":");
        write_opt_str(out, e.salt.as_deref());
        if e.forced {
            out.extend_from_slice(b",\"forced\":true");
        }
        out.push(b'}');
    });
}

/// `,"interleaving":{"experiment":…}` when the page is an interleaving's merged page.
fn write_interleaving<S: Sink + ?Sized>(out: &mut S, interleaving: Option<&str>) {
    if let Some(name) = interleaving {
        lit(out, b",\"interleaving\":{\"experiment\":");
        write_str(out, name);
        out.push(b'}');
    }
}

/// The audit line's `exposures` (docs/experiments.md, "Exposure log"): one object per
/// assignment, `{unit, experiment, variant, triggered, request_id, time}` (`forced: true`
/// added for a QA-forced one), for a warehouse to join on; `time` is the line's `ts`.
pub fn write_exposure_log<S: Sink + ?Sized>(
    out: &mut S,
    exposures: &[Exposure],
    request_id: &str,
    time: f64,
) {
    write_list(out, exposures, |out, e| {
        lit(out, b"{\"unit\":");
        write_opt_str(out, e.unit.as_deref());
        lit(out, b",\"experiment\":");
        write_str(out, &e.experiment);
        lit(out, b",\"variant\":");
        write_str(out, &e.variant);
        lit(
            out,
            if e.triggered {
                b",\"triggered\":true,\"request_id\":"
            } else {
                b",\"triggered\":false,\"request_id\":"
            },
        );
        write_str(out, request_id);
        lit(out, b",\"time\":");
        write_f64(out, time);
        if e.forced {
            lit(out, b",\"forced\":true");
        }
        out.push(b'}');
    });
}

/// `audit`: the CONTRACT's record objects (`relax_to` only when set). With `marks`, the
/// offset in `out` just after each record's `doc_id` is pushed to it: where the audit-log
/// line puts the document's `url` and `host` (`write_audit_line`).
pub fn write_audit<S: Sink + ?Sized>(
    out: &mut S,
    audit: &[Record],
    mut marks: Option<&mut Vec<usize>>,
) {
    // A rule's records follow one another: its `{"rule":…,"phase":…` is copied from the
    // record before, and so is `,"action":…,"reason":…` when the reason is one shared text.
    let mut last: Option<(&Record, std::ops::Range<usize>, std::ops::Range<usize>)> = None;
    write_list(out, audit, |out, r| {
        let start = out.len();
        match &last {
            Some((prev, head, _)) if prev.phase == r.phase && same_name(prev.rule, r.rule) => {
                out.extend_from_within(head.clone())
            }
            _ => {
                lit(out, b"{\"rule\":");
                write_str(out, r.rule);
                lit(out, b",\"phase\":");
                name(out, r.phase.as_str());
            }
        }
        let head = start..out.len();
        lit(out, b",\"doc_id\":");
        write_opt_str(out, r.rec.doc_id);
        if let Some(marks) = marks.as_deref_mut() {
            marks.push(out.len());
        }
        let start = out.len();
        match &last {
            Some((prev, _, said))
                if prev.rec.action == r.rec.action && prev.rec.reason.is_same(&r.rec.reason) =>
            {
                out.extend_from_within(said.clone())
            }
            _ => {
                lit(out, action_then_reason(r.rec.action));
                write_str(out, &r.rec.reason);
            }
        }
        last = Some((r, head, start..out.len()));
        match r.rec.delta {
            Delta::None => lit(out, b",\"delta\":null"),
            Delta::Int(n) => {
                lit(out, b",\"delta\":");
                write_i64(out, n)
            }
            Delta::Float(x) => {
                lit(out, b",\"delta\":");
                write_f64(out, x)
            }
        }
        match r.rec.relax_to {
            None => lit(out, mode_to_end(r.mode)),
            Some(m) => {
                lit(out, b",\"mode\":");
                name(out, r.mode.as_str());
                lit(out, b",\"relax_to\":");
                name(out, m.as_str());
                out.push(b'}');
            }
        }
    });
}

/// `,"action":"<action>","reason":` as one literal: a record's names are the engine's own,
/// so their JSON is known beforehand (`name` would write each in three steps).
fn action_then_reason(action: Action) -> &'static [u8] {
    match action {
        Action::Remove => b",\"action\":\"remove\",\"reason\":",
        Action::Rescore => b",\"action\":\"rescore\",\"reason\":",
        Action::Move => b",\"action\":\"move\",\"reason\":",
        Action::Collapse => b",\"action\":\"collapse\",\"reason\":",
        Action::Trim => b",\"action\":\"trim\",\"reason\":",
        Action::Annotate => b",\"action\":\"annotate\",\"reason\":",
        Action::Fallback => b",\"action\":\"fallback\",\"reason\":",
        Action::Backfill => b",\"action\":\"backfill\",\"reason\":",
    }
}

/// `,"mode":"<mode>"}`, the end of a record without `relax_to`, as one literal.
fn mode_to_end(mode: Mode) -> &'static [u8] {
    match mode {
        Mode::Applied => b",\"mode\":\"applied\"}",
        Mode::Shadow => b",\"mode\":\"shadow\"}",
    }
}

/// `skipped`: {rule, phase, reason} each.
pub fn write_skipped<S: Sink + ?Sized>(out: &mut S, skipped: &[Skip]) {
    write_list(out, skipped, |out, s| {
        lit(out, b"{\"rule\":");
        write_str(out, s.rule);
        lit(out, b",\"phase\":");
        name(out, s.phase.as_str());
        lit(out, b",\"reason\":");
        write_str(out, s.reason.as_str());
        out.push(b'}');
    });
}

/// Where the 200 body's audit tail (`audit` and `skipped`, the part the audit-log line
/// repeats) lies, so the line copies those bytes instead of writing them again.
pub struct Tail {
    pub range: std::ops::Range<usize>,
    /// Offsets in the body just after each audit record's `doc_id` (only when asked for).
    pub marks: Vec<usize>,
}

/// The 200 body; returns where its audit tail lies (`marked`: with each record's mark).
pub fn write_response<S: Sink + ?Sized>(
    out: &mut S,
    head: &Head,
    page: &Page,
    outcome: &Outcome,
    marked: bool,
) -> Tail {
    lit(out, b"{\"request_id\":");
    write_str(out, head.request_id);
    lit(out, b",\"profile\":");
    write_str(out, head.profile);
    lit(out, b",\"config_version\":");
    write_str(out, head.config_version);
    lit(out, b",\"banlist_version\":");
    write_i64(out, head.banlist_version);
    lit(out, b",\"experiments\":");
    write_exposures(out, head.exposures);
    write_interleaving(out, head.interleaving);
    lit(out, b",\"documents\":");
    write_list(out, outcome.docs.iter().enumerate(), |out, (i, d)| {
        let src = page.src(d);
        lit(out, b"{\"id\":");
        write_str(out, &src.id);
        lit(out, b",\"url\":");
        write_str(out, &src.url);
        lit(out, b",\"position\":");
        write_i64(out, i as i64 + 1);
        lit(out, b",\"original_position\":");
        write_i64(out, d.at as i64 + 1);
        lit(out, b",\"score\":");
        write_f64(out, d.score);
        lit(out, b",\"original_score\":");
        write_f64(out, src.score);
        lit(out, b",\"annotations\":");
        write_list(out, &d.annotations, |out, a| write_str(out, a));
        lit(out, b",\"collapsed\":");
        write_list(out, &d.collapsed, |out, c| {
            let folded = &page.req.documents[c.at as usize];
            lit(out, b"{\"id\":");
            write_str(out, &folded.id);
            lit(out, b",\"url\":");
            write_str(out, &folded.url);
            lit(out, b",\"rule\":");
            write_str(out, c.rule);
            out.push(b'}');
        });
        lit(out, b",\"attributes\":");
        out.extend_from_slice(src.attributes.as_bytes());
        if let Some(team) = outcome.teams.get(i) {
            lit(out, b",\"team\":");
            name(out, team.as_str());
        }
        out.push(b'}');
    });
    lit(out, b",\"removed\":");
    let removed = outcome.audit.iter().filter(|r| {
        matches!(r.rec.action, Action::Remove | Action::Trim) && r.mode == Mode::Applied
    });
    // A filter's removals mostly give one rule, phase, action and shared reason: after
    // the first, those bytes are copied from the record before instead of written again.
    let mut last: Option<(&Record, std::ops::Range<usize>)> = None;
    write_list(out, removed, |out, r| {
        lit(out, b"{\"id\":");
        write_opt_str(out, r.rec.doc_id);
        if let Some((prev, at)) = &last {
            if same_removal(prev, r) {
                out.extend_from_within(at.clone());
                return;
            }
        }
        let start = out.len();
        lit(out, b",\"rule\":");
        write_str(out, r.rule);
        lit(out, b",\"phase\":");
        name(out, r.phase.as_str());
        lit(out, b",\"action\":");
        name(out, r.rec.action.as_str());
        lit(out, b",\"reason\":");
        write_str(out, &r.rec.reason);
        out.push(b'}');
        last = Some((r, start..out.len()));
    });
    lit(out, b",\"fallback\":");
    match &outcome.fallback {
        None => lit(out, b"null"),
        Some(f) => {
            lit(out, b"{\"rule\":");
            write_str(out, f.rule);
            lit(out, b",\"action\":");
            write_str(out, f.action);
            lit(out, b",\"reason\":");
            write_str(out, &f.reason);
            out.push(b'}');
        }
    }
    lit(out, b",");
    let start = out.len();
    let mut marks = Vec::with_capacity(if marked { outcome.audit.len() } else { 0 });
    write_audit_tail(out, outcome, marked.then_some(&mut marks));
    let range = start..out.len();
    out.push(b'}');
    Tail { range, marks }
}

/// Whether `b`'s `removed` entry after its id is `a`'s: the same rule, phase, action and
/// reason (the reason by identity, the rule's name by address first).
fn same_removal(a: &Record, b: &Record) -> bool {
    a.phase == b.phase
        && a.rec.action == b.rec.action
        && a.rec.reason.is_same(&b.rec.reason)
        && same_name(a.rule, b.rule)
}

/// `"audit":[...]` and, when a rule was skipped, `,"skipped":[...]`: the end of both the
/// response and the audit line.
fn write_audit_tail<S: Sink + ?Sized>(
    out: &mut S,
    outcome: &Outcome,
    marks: Option<&mut Vec<usize>>,
) {
    lit(out, b"\"audit\":");
    write_audit(out, &outcome.audit, marks);
    if !outcome.skipped.is_empty() {
        lit(out, b",\"skipped\":");
        write_skipped(out, &outcome.skipped);
    }
}

/// The audit-log line (without its newline): ts, request_id, profile, config_version,
/// banlist_version, experiments, exposures? (with an assignment), interleaving?,
/// query{text, region}, audit, skipped?, forced_by?.
///
/// The line's audit records are the response's with the document's `url` (as the request
/// gave it) and `host` (canonical, as the banlist matched it; null for a URL no browser
/// could open) after `doc_id`, both null on a record naming no document: what a T&S search
/// of the log by site needs. `body` and `tail` are the response and where `write_response`
/// said its audit tail lies; the records' bytes are copied from it, not written again.
#[allow(clippy::too_many_arguments)]
pub fn write_audit_line<S: Sink + ?Sized>(
    out: &mut S,
    head: &Head,
    ts: f64,
    query: (&str, Option<&str>),
    page: &Page,
    outcome: &Outcome,
    body: &[u8],
    tail: &Tail,
    forced_by: Option<&str>,
) {
    lit(out, b"{\"ts\":");
    write_f64(out, ts);
    lit(out, b",\"request_id\":");
    write_str(out, head.request_id);
    lit(out, b",\"profile\":");
    write_str(out, head.profile);
    lit(out, b",\"config_version\":");
    write_str(out, head.config_version);
    lit(out, b",\"banlist_version\":");
    write_i64(out, head.banlist_version);
    lit(out, b",\"experiments\":");
    write_exposures(out, head.exposures);
    if !head.exposures.is_empty() {
        lit(out, b",\"exposures\":");
        write_exposure_log(out, head.exposures, head.request_id, ts);
    }
    write_interleaving(out, head.interleaving);
    lit(out, b",\"query\":");
    lit(out, b"{\"text\":");
    write_str(out, query.0);
    lit(out, b",\"region\":");
    write_opt_str(out, query.1);
    out.push(b'}');
    out.push(b',');
    // A document's `,"url":…,"host":…` is written at its first record and copied from
    // there for the others (a document has a record or three on most pages).
    let mut written: Vec<(usize, usize)> = vec![(0, 0); page.req.documents.len()];
    let mut from = tail.range.start;
    for (r, &mark) in outcome.audit.iter().zip(&tail.marks) {
        out.extend_from_slice(&body[from..mark]);
        from = mark;
        let Some(at) = r.rec.at.map(|at| at as usize) else {
            lit(out, b",\"url\":null,\"host\":null");
            continue;
        };
        let (start, end) = written[at];
        if end > start {
            out.extend_from_within(start..end);
            continue;
        }
        let start = out.len();
        lit(out, b",\"url\":");
        write_str(out, &page.req.documents[at].url);
        lit(out, b",\"host\":");
        match page.meta[at].url_problem {
            None => write_str(out, page.host_at(at as u32)),
            Some(_) => lit(out, b"null"),
        }
        written[at] = (start, out.len());
    }
    out.extend_from_slice(&body[from..tail.range.end]);
    if let Some(actor) = forced_by {
        lit(out, b",\"forced_by\":");
        write_str(out, actor);
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::testing::{docs, request, SimpleCanon};
    use crate::record::{Phase, Reason, Rec};
    use crate::runner::Outcome;

    /// The literals an audit record is written with spell each action and mode as its
    /// name does, in the record's JSON.
    #[test]
    fn record_literals_spell_the_names() {
        for a in Action::ALL {
            let want = format!(",\"action\":\"{}\",\"reason\":", a.as_str());
            assert_eq!(action_then_reason(a), want.as_bytes());
        }
        for m in [Mode::Applied, Mode::Shadow] {
            let want = format!(",\"mode\":\"{}\"}}", m.as_str());
            assert_eq!(mode_to_end(m), want.as_bytes());
        }
    }

    /// `removed` copies a record's tail from the one before only when rule, phase, action
    /// and reason are the same: a shared reason, a literal, and equal texts apart.
    #[test]
    fn removed_entries_copy_only_what_they_repeat() {
        let req = request(docs(7));
        let (page, _) = crate::doc::Page::build(&req, &SimpleCanon, false);
        let shared = Reason::shared("banned \"x\"".to_string());
        let rec = |rule: &'static str, phase, at, action, reason: Reason| Record {
            rule,
            phase,
            mode: Mode::Applied,
            rec: Rec::on(&page, at, action, reason),
        };
        let owned = String::from("banlist");
        let audit = vec![
            rec(
                "banlist",
                Phase::PreFilter,
                0,
                Action::Remove,
                shared.clone(),
            ),
            rec(
                "banlist",
                Phase::PreFilter,
                1,
                Action::Remove,
                shared.clone(),
            ),
            // Equal text, another allocation: written again, the same bytes.
            rec(
                "banlist",
                Phase::PreFilter,
                2,
                Action::Remove,
                Reason::shared("banned \"x\"".into()),
            ),
            rec(
                "banlist",
                Phase::PostFilter,
                3,
                Action::Remove,
                "unopenable".into(),
            ),
            rec(
                "spam_ban",
                Phase::PostFilter,
                4,
                Action::Remove,
                shared.clone(),
            ),
            rec(
                "depth",
                Phase::Trim,
                5,
                Action::Trim,
                "below the depth".into(),
            ),
            rec(
                "depth",
                Phase::Trim,
                6,
                Action::Trim,
                "below the depth".into(),
            ),
        ];
        let mut audit = audit;
        // The same name at another address.
        audit[1].rule = Box::leak(owned.into_boxed_str());
        let outcome = Outcome {
            docs: vec![],
            audit,
            fallback: None,
            timings: vec![],
            skipped: vec![],
            actions: vec![],
            errors: vec![],
            trace: vec![],
            teams: vec![],
        };
        let head = Head {
            request_id: "r",
            profile: "p",
            config_version: "c",
            banlist_version: 1,
            exposures: &[],
            interleaving: None,
        };
        let mut out: Vec<u8> = Vec::new();
        write_response(&mut out, &head, &page, &outcome, false);
        let text = String::from_utf8(out).unwrap();
        let from = text.find("\"removed\":").unwrap() + "\"removed\":".len();
        let to = text.find(",\"fallback\":").unwrap();
        let entry = |id: &str, rule: &str, phase: &str, action: &str, reason: &str| {
            format!(
                "{{\"id\":\"{id}\",\"rule\":\"{rule}\",\"phase\":\"{phase}\",\
                 \"action\":\"{action}\",\"reason\":\"{reason}\"}}"
            )
        };
        let banned = "banned \\\"x\\\"";
        let want = [
            entry("d1", "banlist", "pre-filter", "remove", banned),
            entry("d2", "banlist", "pre-filter", "remove", banned),
            entry("d3", "banlist", "pre-filter", "remove", banned),
            entry("d4", "banlist", "post-filter", "remove", "unopenable"),
            entry("d5", "spam_ban", "post-filter", "remove", banned),
            entry("d6", "depth", "trim", "trim", "below the depth"),
            entry("d7", "depth", "trim", "trim", "below the depth"),
        ];
        assert_eq!(&text[from..to], format!("[{}]", want.join(",")));
        // The audit records copy the same parts, each written as it always was.
        let records: Vec<String> = want
            .iter()
            .map(|e| {
                let v = e.trim_start_matches("{\"id\":\"").trim_end_matches("\"}");
                let (id, rest) = v.split_once("\",\"rule\":\"").unwrap();
                let (rule, rest) = rest.split_once("\",\"phase\":\"").unwrap();
                let (phase, tail) = rest.split_once("\",").unwrap();
                format!(
                    "{{\"rule\":\"{rule}\",\"phase\":\"{phase}\",\"doc_id\":\"{id}\",{tail}\",\
                     \"delta\":null,\"mode\":\"applied\"}}"
                )
            })
            .collect();
        let from = text.find("\"audit\":").unwrap() + "\"audit\":".len();
        assert_eq!(
            &text[from..text.len() - 1],
            format!("[{}]", records.join(","))
        );
    }
}
