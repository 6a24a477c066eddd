//! The response body and the audit-log line, written as msgspec wrote the Python
//! service's dicts and Structs (same keys, same order, same spelling of numbers).

use crate::doc::Page;
use crate::experiments::Exposure;
use crate::json::{write_f64, write_str};
use crate::record::{Action, Delta, Mode, Record};
use crate::runner::{Outcome, Skip};

/// What the response says beyond the outcome.
pub struct Head<'a> {
    pub request_id: &'a str,
    pub profile: &'a str,
    pub config_version: &'a str,
    pub banlist_version: i64,
    pub exposures: &'a [Exposure],
}

fn key(out: &mut Vec<u8>, k: &str) {
    write_str(out, k);
    out.push(b':');
}

fn opt_str(out: &mut Vec<u8>, v: Option<&str>) {
    match v {
        Some(s) => write_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

fn int(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(n.to_string().as_bytes());
}

fn list<T>(
    out: &mut Vec<u8>,
    items: impl IntoIterator<Item = T>,
    mut each: impl FnMut(&mut Vec<u8>, T),
) {
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        each(out, item);
    }
    out.push(b']');
}

/// `experiments`: {experiment, variant, bucket, layer, salt[, forced]} each.
pub fn write_exposures(out: &mut Vec<u8>, exposures: &[Exposure]) {
    list(out, exposures, |out, e| {
        out.push(b'{');
        key(out, "experiment");
        write_str(out, &e.experiment);
        out.push(b',');
        key(out, "variant");
        write_str(out, &e.variant);
        out.push(b',');
        key(out, "bucket");
        match e.bucket {
            Some(b) => int(out, b as i64),
            None => out.extend_from_slice(b"null"),
        }
        out.push(b',');
        key(out, "layer");
        opt_str(out, e.layer.as_deref());
        out.push(b',');
        key(out, "salt");
        opt_str(out, e.salt.as_deref());
        if e.forced {
            out.extend_from_slice(b",\"forced\":true");
        }
        out.push(b'}');
    });
}

/// `audit`: the CONTRACT's record objects (`relax_to` only when set).
pub fn write_audit(out: &mut Vec<u8>, audit: &[Record]) {
    list(out, audit, |out, r| {
        out.push(b'{');
        key(out, "rule");
        write_str(out, r.rule);
        out.push(b',');
        key(out, "phase");
        write_str(out, r.phase.as_str());
        out.push(b',');
        key(out, "doc_id");
        opt_str(out, r.rec.doc_id);
        out.push(b',');
        key(out, "action");
        write_str(out, r.rec.action.as_str());
        out.push(b',');
        key(out, "reason");
        write_str(out, &r.rec.reason);
        out.push(b',');
        key(out, "delta");
        match r.rec.delta {
            Delta::None => out.extend_from_slice(b"null"),
            Delta::Int(n) => int(out, n),
            Delta::Float(x) => write_f64(out, x),
        }
        out.push(b',');
        key(out, "mode");
        write_str(out, r.mode.as_str());
        if let Some(m) = r.rec.relax_to {
            out.push(b',');
            key(out, "relax_to");
            write_str(out, m.as_str());
        }
        out.push(b'}');
    });
}

/// `skipped`: {rule, phase, reason} each.
pub fn write_skipped(out: &mut Vec<u8>, skipped: &[Skip]) {
    list(out, skipped, |out, s| {
        out.push(b'{');
        key(out, "rule");
        write_str(out, s.rule);
        out.push(b',');
        key(out, "phase");
        write_str(out, s.phase.as_str());
        out.push(b',');
        key(out, "reason");
        write_str(out, s.reason);
        out.push(b'}');
    });
}

/// The 200 body.
pub fn write_response(out: &mut Vec<u8>, head: &Head, page: &Page, outcome: &Outcome) {
    out.push(b'{');
    key(out, "request_id");
    write_str(out, head.request_id);
    out.push(b',');
    key(out, "profile");
    write_str(out, head.profile);
    out.push(b',');
    key(out, "config_version");
    write_str(out, head.config_version);
    out.push(b',');
    key(out, "banlist_version");
    int(out, head.banlist_version);
    out.push(b',');
    key(out, "experiments");
    write_exposures(out, head.exposures);
    out.push(b',');
    key(out, "documents");
    list(out, outcome.docs.iter().enumerate(), |out, (i, d)| {
        let src = page.src(d);
        out.push(b'{');
        key(out, "id");
        write_str(out, &src.id);
        out.push(b',');
        key(out, "url");
        write_str(out, &src.url);
        out.push(b',');
        key(out, "position");
        int(out, i as i64 + 1);
        out.push(b',');
        key(out, "original_position");
        int(out, d.at as i64 + 1);
        out.push(b',');
        key(out, "score");
        write_f64(out, d.score);
        out.push(b',');
        key(out, "original_score");
        write_f64(out, src.score);
        out.push(b',');
        key(out, "annotations");
        list(out, &d.annotations, |out, a| write_str(out, a));
        out.push(b',');
        key(out, "collapsed");
        list(out, &d.collapsed, |out, c| {
            let folded = &page.req.documents[c.at as usize];
            out.push(b'{');
            key(out, "id");
            write_str(out, &folded.id);
            out.push(b',');
            key(out, "url");
            write_str(out, &folded.url);
            out.push(b',');
            key(out, "rule");
            write_str(out, c.rule);
            out.push(b'}');
        });
        out.push(b',');
        key(out, "attributes");
        out.extend_from_slice(src.attributes.as_bytes());
        out.push(b'}');
    });
    out.push(b',');
    key(out, "removed");
    let removed = outcome.audit.iter().filter(|r| {
        matches!(r.rec.action, Action::Remove | Action::Trim) && r.mode == Mode::Applied
    });
    list(out, removed, |out, r| {
        out.push(b'{');
        key(out, "id");
        opt_str(out, r.rec.doc_id);
        out.push(b',');
        key(out, "rule");
        write_str(out, r.rule);
        out.push(b',');
        key(out, "phase");
        write_str(out, r.phase.as_str());
        out.push(b',');
        key(out, "action");
        write_str(out, r.rec.action.as_str());
        out.push(b',');
        key(out, "reason");
        write_str(out, &r.rec.reason);
        out.push(b'}');
    });
    out.push(b',');
    key(out, "fallback");
    match &outcome.fallback {
        None => out.extend_from_slice(b"null"),
        Some(f) => {
            out.push(b'{');
            key(out, "rule");
            write_str(out, f.rule);
            out.push(b',');
            key(out, "action");
            write_str(out, f.action);
            out.push(b',');
            key(out, "reason");
            write_str(out, &f.reason);
            out.push(b'}');
        }
    }
    out.push(b',');
    key(out, "audit");
    write_audit(out, &outcome.audit);
    if !outcome.skipped.is_empty() {
        out.push(b',');
        key(out, "skipped");
        write_skipped(out, &outcome.skipped);
    }
    out.push(b'}');
}

/// The audit-log line (without its newline): ts, request_id, profile, config_version,
/// banlist_version, experiments, query{text, region}, audit, skipped?, forced_by?.
pub fn write_audit_line(
    out: &mut Vec<u8>,
    head: &Head,
    ts: f64,
    query: (&str, Option<&str>),
    outcome: &Outcome,
    forced_by: Option<&str>,
) {
    out.push(b'{');
    key(out, "ts");
    write_f64(out, ts);
    out.push(b',');
    key(out, "request_id");
    write_str(out, head.request_id);
    out.push(b',');
    key(out, "profile");
    write_str(out, head.profile);
    out.push(b',');
    key(out, "config_version");
    write_str(out, head.config_version);
    out.push(b',');
    key(out, "banlist_version");
    int(out, head.banlist_version);
    out.push(b',');
    key(out, "experiments");
    write_exposures(out, head.exposures);
    out.push(b',');
    key(out, "query");
    out.push(b'{');
    key(out, "text");
    write_str(out, query.0);
    out.push(b',');
    key(out, "region");
    opt_str(out, query.1);
    out.push(b'}');
    out.push(b',');
    key(out, "audit");
    write_audit(out, &outcome.audit);
    if !outcome.skipped.is_empty() {
        out.push(b',');
        key(out, "skipped");
        write_skipped(out, &outcome.skipped);
    }
    if let Some(actor) = forced_by {
        out.push(b',');
        key(out, "forced_by");
        write_str(out, actor);
    }
    out.push(b'}');
}
