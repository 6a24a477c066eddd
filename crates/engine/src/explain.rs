//! `explain` of a response (QA): every step of the run with what it did or why it did not
//! run and the page after it, and the configured rules this profile does not have.

use crate::doc::Page;
use crate::json::{write_i64, write_list, write_opt_str, write_str};
use crate::out::Sink;
use crate::runner::{Pipeline, Trace};
use crate::spec::Config;

/// A rule of other profiles that this one does not run, with the profiles that do.
pub struct Elsewhere<'a> {
    pub rule: &'a str,
    pub phase: &'static str,
    pub profiles: Vec<&'a str>,
}

/// The rules configured in other profiles and absent from `profile`'s pipeline (by name),
/// in the order of the profiles' names and then of their steps.
pub fn not_in_profile<'a>(config: &'a Config, profile: &str) -> Vec<Elsewhere<'a>> {
    let here: Vec<&str> = config
        .profiles
        .get(profile)
        .map(|p| p.steps.iter().map(|s| s.rule.name()).collect())
        .unwrap_or_default();
    let mut others: Vec<(&'a String, &'a Pipeline)> = config
        .profiles
        .iter()
        .filter(|(name, _)| name.as_str() != profile)
        .collect();
    others.sort_by(|a, b| a.0.cmp(b.0));
    let mut found: Vec<Elsewhere<'a>> = Vec::new();
    for (name, pipeline) in others {
        for step in &pipeline.steps {
            let rule = step.rule.name();
            if here.contains(&rule) {
                continue;
            }
            let phase = step.phase.as_str();
            match found
                .iter_mut()
                .find(|e| e.rule == rule && e.phase == phase)
            {
                Some(e) if e.profiles.last() != Some(&name.as_str()) => e.profiles.push(name),
                Some(_) => {}
                None => found.push(Elsewhere {
                    rule,
                    phase,
                    profiles: vec![name],
                }),
            }
        }
    }
    found
}

/// Append `,"explain":{"steps":[…],"not_in_profile":[…]}` to a JSON object's members.
pub fn write_explain<S: Sink + ?Sized>(
    out: &mut S,
    page: &Page,
    trace: &[Trace],
    elsewhere: &[Elsewhere],
) {
    out.extend_from_slice(b",\"explain\":{\"steps\":");
    write_list(out, trace, |out, t| {
        out.extend_from_slice(b"{\"rule\":");
        write_str(out, t.rule);
        out.extend_from_slice(b",\"phase\":");
        write_str(out, t.phase.as_str());
        out.extend_from_slice(b",\"attempt\":");
        write_i64(out, t.attempt as i64);
        out.extend_from_slice(b",\"status\":");
        write_str(out, t.status);
        out.extend_from_slice(b",\"mode\":");
        write_opt_str(out, t.mode.map(|m| m.as_str()));
        out.extend_from_slice(b",\"why\":");
        write_opt_str(out, t.why.as_deref());
        out.extend_from_slice(b",\"records\":");
        write_i64(out, t.records as i64);
        out.extend_from_slice(b",\"page\":");
        match &t.page {
            None => out.extend_from_slice(b"null"),
            Some(ats) => write_list(out, ats, |out, &at| {
                write_str(out, &page.req.documents[at as usize].id)
            }),
        }
        out.push(b'}');
    });
    out.extend_from_slice(b",\"not_in_profile\":");
    write_list(out, elsewhere, |out, e| {
        out.extend_from_slice(b"{\"rule\":");
        write_str(out, e.rule);
        out.extend_from_slice(b",\"phase\":");
        write_str(out, e.phase);
        out.extend_from_slice(b",\"profiles\":");
        write_list(out, &e.profiles, |out, p| write_str(out, p));
        out.push(b'}');
    });
    out.push(b'}');
}
