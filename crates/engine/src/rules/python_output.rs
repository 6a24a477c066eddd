//! The runner's check of what a Python rule returned (CONTRACT.md "Python rules"): the
//! page and records as `Doc`s and `Rec`s, or the refusal worded as the Python runner
//! (tests/reference/plugins.py `PythonRule.checked`) words it, check for check in the same order.
//!
//! Where that check runs Python (a repr, a float conversion, a hash), this runs the same
//! Python, so an exception it raises is the same `raised ...` failure.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use super::{Ctx, Failure, Out, RuleResult};
use crate::doc::Doc;
use crate::fmt::quoted;
use crate::record::{Action, Delta, Phase, Reason, Rec};

/// The request's own bound on scores: sums of deltas stay finite.
const MAX_SCORE: f64 = 1e15;

fn refused<'a>(problem: String) -> PyResult<RuleResult<'a>> {
    Ok(Err(Failure::Failed(format!(
        "returned output the runner refuses: {problem}"
    ))))
}

fn type_name(v: &Bound<PyAny>) -> PyResult<String> {
    Ok(v.get_type().name()?.to_string())
}

/// `repr(v)`, None for a missing key (`dict.get` answers None).
fn repr(v: &Option<Bound<PyAny>>) -> PyResult<String> {
    Ok(match v {
        Some(v) => v.repr()?.to_string_lossy().into_owned(),
        None => "None".into(),
    })
}

fn get<'py>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(d.get_item(key)?.filter(|v| !v.is_none()))
}

/// The place in `docs` of an id the rule gave, if it is a string of the input.
fn place(index: &HashMap<&str, usize>, id: &Option<Bound<PyAny>>) -> Option<usize> {
    let s = id.as_ref()?.cast::<PyString>().ok()?;
    index.get(s.to_str().ok()?).copied()
}

fn is_number(v: &Bound<PyAny>) -> bool {
    !v.is_instance_of::<PyBool>() && (v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>())
}

/// Check the rule's `result` against its input `docs` in `phase`. Ok(Err(..)): refused;
/// Err: Python raised while checking.
pub fn check<'a>(
    ctx: &Ctx<'a>,
    docs: &[Doc],
    phase: Phase,
    result: &Bound<PyAny>,
) -> PyResult<RuleResult<'a>> {
    let pair = result.is_instance_of::<PyTuple>() || result.is_instance_of::<PyList>();
    if !pair || result.len()? != 2 {
        let kind = type_name(result)?;
        return refused(format!("returned {kind}, not (documents, records)"));
    }
    let (out, raw) = (result.get_item(0)?, result.get_item(1)?);
    let (Ok(out), Ok(raw)) = (out.cast::<PyList>(), raw.cast::<PyList>()) else {
        return refused("documents and records must both be lists".into());
    };
    let page = ctx.page;
    let index: HashMap<&str, usize> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| (page.id(d), i))
        .collect();
    // The new page as (place in `docs`, score).
    let mut new: Vec<(usize, f64)> = Vec::with_capacity(out.len());
    let mut kept = vec![false; docs.len()];
    for (i, item) in out.iter().enumerate() {
        let Ok(item) = item.cast::<PyDict>() else {
            let kind = type_name(&item)?;
            return refused(format!("documents[{i}] is a {kind}, not a dict"));
        };
        let id = item.get_item("id")?;
        let Some(at) = place(&index, &id) else {
            let id = repr(&id)?;
            return refused(format!("documents[{i}]: id {id} was not in its input"));
        };
        if std::mem::replace(&mut kept[at], true) {
            let id = repr(&id)?;
            return refused(format!("documents[{i}]: id {id} appears twice"));
        }
        let score = item.get_item("score")?;
        let value = match &score {
            // float(score), as math.isfinite converts it (an int past floats raises).
            Some(s) if is_number(s) => Some(s.extract::<f64>()?),
            _ => None,
        };
        let before = docs[at].score;
        match value {
            Some(x) if x.is_finite() && x.abs() <= MAX_SCORE => {
                // An equal score (-0.0 for 0.0, 3 for 3.0) leaves the document as it was.
                new.push((at, if x == before { before } else { x }));
            }
            _ => {
                let (id, score) = (page.id(&docs[at]), repr(&score)?);
                return refused(format!(
                    "documents[{i}] {id}: score {score} is not a finite number within ±1e+15"
                ));
            }
        }
    }
    let mut recs: Vec<Rec<'a>> = Vec::with_capacity(raw.len());
    // (place, action) → the last record saying it, as a dict keyed on them keeps it.
    let mut said: HashMap<(usize, Action), usize> = HashMap::new();
    for (j, item) in raw.iter().enumerate() {
        let Ok(rec) = item.cast::<PyDict>() else {
            let kind = type_name(&item)?;
            return refused(format!("records[{j}] is a {kind}, not a dict"));
        };
        let mut extra: Vec<Bound<PyString>> = Vec::new();
        for key in rec.keys() {
            let known = key
                .cast::<PyString>()
                .ok()
                .and_then(|k| k.to_str().ok().map(|k| k.to_owned()))
                .is_some_and(|k| matches!(k.as_str(), "doc_id" | "action" | "reason" | "delta"));
            if !known {
                extra.push(key.str()?);
            }
        }
        if !extra.is_empty() {
            extra.sort_by_key(|k| k.to_string_lossy().into_owned());
            let first = extra[0].repr()?.to_string_lossy().into_owned();
            return refused(format!(
                "records[{j}]: unknown key {first} (a record has doc_id, action, reason, delta)"
            ));
        }
        let doc_id = rec.get_item("doc_id")?;
        let (action, reason, delta) = (
            rec.get_item("action")?,
            rec.get_item("reason")?,
            get(rec, "delta")?,
        );
        let Some(at) = place(&index, &doc_id) else {
            let id = repr(&doc_id)?;
            return refused(format!("records[{j}]: doc_id {id} was not in its input"));
        };
        if let Some(a) = &action {
            a.hash()?; // `in` a frozenset hashes it: TypeError for a list, as there
        }
        let name = action
            .as_ref()
            .and_then(|a| a.cast::<PyString>().ok())
            .and_then(|a| a.to_str().ok().map(str::to_owned));
        let action = match name.as_deref() {
            Some("move") => Action::Move,
            Some("remove") => Action::Remove,
            Some("rescore") => Action::Rescore,
            Some("trim") => Action::Trim,
            _ => {
                let action = repr(&action)?;
                return refused(format!(
                    "records[{j}]: action {action} is not one a Python rule takes \
                     (move, remove, rescore, trim)"
                ));
            }
        };
        let Some(reason) = reason.as_ref().and_then(|r| r.cast::<PyString>().ok()) else {
            return refused(format!("records[{j}]: reason must be a string"));
        };
        let delta = match &delta {
            None => Delta::None,
            Some(v) => {
                let number = if !is_number(v) {
                    None
                } else if v.is_instance_of::<PyInt>() {
                    // Written as an integer: one past 64 bits has no JSON form here.
                    v.extract::<i64>().ok().map(Delta::Int)
                } else {
                    Some(v.extract::<f64>()?)
                        .filter(|x| x.is_finite())
                        .map(Delta::Float)
                };
                let Some(number) = number else {
                    let delta = repr(&Some(v.clone()))?;
                    return refused(format!(
                        "records[{j}]: delta {delta} is not a finite number or null"
                    ));
                };
                number
            }
        };
        said.insert((at, action), recs.len());
        recs.push(Rec {
            delta,
            ..Rec::on(
                page,
                docs[at].at,
                action,
                reason.to_string_lossy().into_owned(),
            )
        });
    }
    for (i, doc) in docs.iter().enumerate() {
        if !kept[i]
            && !said.contains_key(&(i, Action::Remove))
            && !said.contains_key(&(i, Action::Trim))
        {
            let id = quoted(page.id(doc));
            return refused(format!("removed {id} without a remove or trim record"));
        }
    }
    for &(at, score) in &new {
        let before = docs[at].score;
        if score != before {
            let Some(&r) = said.get(&(at, Action::Rescore)) else {
                let id = quoted(page.id(&docs[at]));
                return refused(format!("rescored {id} without a rescore record"));
            };
            if recs[r].delta == Delta::None {
                recs[r].delta = Delta::Float(score - before);
            }
        }
    }
    if phase == Phase::Rerank {
        // The stable sort by score after rerank orders the page; a rerank rule's own
        // order is not kept (the built-in ones never reorder either).
        new.sort_by_key(|&(at, _)| at);
    } else {
        let mut before = vec![0usize; docs.len()];
        let mut k = 0;
        for (i, &kept) in kept.iter().enumerate() {
            if kept {
                before[i] = k;
                k += 1;
            }
        }
        for (after, &(at, _)) in new.iter().enumerate() {
            let delta = after as i64 - before[at] as i64;
            if delta != 0 {
                let Some(&r) = said.get(&(at, Action::Move)) else {
                    let id = quoted(page.id(&docs[at]));
                    return refused(format!("moved {id} without a move record"));
                };
                if recs[r].delta == Delta::None {
                    recs[r].delta = Delta::Int(delta);
                }
            }
        }
    }
    // Documents collapsed under a dropped one go with it, each with its own record.
    let mut along = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        if kept[i] || doc.collapsed.is_empty() {
            continue;
        }
        let r = said
            .get(&(i, Action::Remove))
            .or_else(|| said.get(&(i, Action::Trim)));
        let Some(&r) = r else { continue };
        let rec = &recs[r];
        let verb = if rec.action == Action::Trim {
            "trimmed"
        } else {
            "removed"
        };
        let why = Reason::shared(format!(
            "collapsed under {}, {verb} with it: {}",
            page.id(doc),
            rec.reason
        ));
        for c in &doc.collapsed {
            along.push(Rec::on(page, c.at, rec.action, why.clone()));
        }
    }
    recs.extend(along);
    let unchanged = new.len() == docs.len()
        && new
            .iter()
            .enumerate()
            .all(|(i, &(at, score))| at == i && score == docs[i].score);
    let docs = (!unchanged).then(|| {
        new.into_iter()
            .map(|(at, score)| Doc {
                score,
                ..docs[at].clone()
            })
            .collect()
    });
    Ok(Ok(Out { docs, recs }))
}
