//! The 200 answer as `wire::RerankResponse`: what a serde-based encoder would have to build
//! before serde_json writes it. The test below holds `write_response`'s bytes to serde_json's
//! writing of these types; `cargo bench --bench wire` times the two (docs/speed.md).

use serde_json::value::RawValue;
use serde_json::Number;

use super::Head;
use crate::doc::Page;
use crate::record::{Action, Delta, Mode};
use crate::runner::Outcome;
use crate::wire;

/// The answer `write_response` writes, as wire types (`explain` is not part of it).
pub fn answer(head: &Head, page: &Page, outcome: &Outcome) -> wire::RerankResponse {
    let experiments = head
        .exposures
        .iter()
        .map(|e| wire::Exposure {
            experiment: e.experiment.clone(),
            variant: e.variant.clone(),
            bucket: e.bucket,
            layer: e.layer.clone(),
            salt: e.salt.clone(),
            forced: e.forced.then_some(true),
        })
        .collect();
    let interleaving = head.interleaving.map(|e| wire::Interleaving {
        experiment: e.to_string(),
    });
    let documents = outcome
        .docs
        .iter()
        .zip(1..)
        .map(|(d, position)| {
            let src = page.src(d);
            let collapsed = d.collapsed.iter().map(|c| {
                let folded = &page.req.documents[c.at as usize];
                wire::Collapsed {
                    id: folded.id.to_string(),
                    url: folded.url.to_string(),
                    rule: c.rule.into(),
                }
            });
            wire::RankedDocument {
                id: src.id.to_string(),
                url: src.url.to_string(),
                position,
                original_position: d.at + 1,
                score: d.score,
                original_score: src.score,
                annotations: d.annotations.iter().map(|a| a.to_string()).collect(),
                collapsed: collapsed.collect(),
                // A RawValue is made only by parsing its text: the decoder's check again.
                attributes: RawValue::from_string(src.attributes.to_string())
                    .expect("the decoder read `attributes` as one JSON object"),
                team: outcome
                    .teams
                    .get(position as usize - 1)
                    .map(|t| t.as_str().into()),
            }
        })
        .collect();
    let removed = outcome
        .audit
        .iter()
        .filter(|r| {
            matches!(r.rec.action, Action::Remove | Action::Trim) && r.mode == Mode::Applied
        })
        .map(|r| wire::Removed {
            id: r.rec.doc_id.map(Into::into),
            rule: r.rule.into(),
            phase: r.phase,
            action: r.rec.action.as_str().into(),
            reason: r.rec.reason.to_string(),
        })
        .collect();
    let audit = outcome
        .audit
        .iter()
        .map(|r| wire::AuditRecord {
            rule: r.rule.into(),
            phase: r.phase,
            doc_id: r.rec.doc_id.map(Into::into),
            action: r.rec.action,
            reason: r.rec.reason.to_string(),
            delta: match r.rec.delta {
                Delta::None => None,
                Delta::Int(n) => Some(n.into()),
                Delta::Float(x) => Number::from_f64(x),
            },
            mode: r.mode,
            relax_to: r.rec.relax_to.map(|m| m.as_str().into()),
        })
        .collect();
    let skipped = outcome.skipped.iter().map(|s| wire::Skip {
        rule: s.rule.into(),
        phase: s.phase,
        reason: s.reason.as_str().into(),
    });
    wire::RerankResponse {
        request_id: head.request_id.into(),
        profile: head.profile.into(),
        config_version: head.config_version.into(),
        banlist_version: head.banlist_version,
        experiments,
        interleaving,
        documents,
        removed,
        fallback: outcome.fallback.as_ref().map(|f| wire::Fallback {
            rule: f.rule.into(),
            action: f.action.into(),
            reason: f.reason.to_string(),
        }),
        audit,
        skipped: (!outcome.skipped.is_empty()).then(|| skipped.collect()),
        explain: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{decode, AgeMode, Limits};
    use crate::doc::testing::SimpleCanon;
    use crate::doc::Folded;
    use crate::experiments::Exposure;
    use crate::interleave::Team;
    use crate::record::{Phase, Reason, Rec, Record};
    use crate::response::write_response;
    use crate::runner::{Fallback, Skip, SkipReason};

    fn parsed(bytes: &[u8]) -> serde_json::Value {
        serde_json::from_slice(bytes).expect("valid JSON")
    }

    /// Every member and every optional one: serde_json's writing of the wire types and the
    /// hand-written bytes are one JSON value (floats may be spelled apart: `1e16`, `1e+16`).
    #[test]
    fn the_hand_written_answer_is_what_serde_writes_of_the_wire_types() {
        let body = br#"{"request_id":"r-\"1\"","documents":[
            {"id":"a","url":"http://a.example/x","score":2.5,
             "attributes":{"z":1,"a":[true,null,{"k":"\u00e9\n"}],"price":1e16}},
            {"id":"b\\c","url":"http://b.example/","score":-0.125},
            {"id":"c","url":"http://c.example/","score":1e-7,"attributes":{}},
            {"id":"d","url":"http://d.example/","score":0}]}"#;
        let limits = Limits {
            max_documents: 10,
            max_text_chars: 100,
        };
        let req = decode(body, &limits).unwrap();
        let (page, docs) = Page::build(&req, &SimpleCanon, false);
        let mut kept = vec![docs[2].clone(), docs[0].clone()];
        kept[0].score = 3.000_000_000_000_000_4;
        kept[0].annotations = vec!["ad", "fresh"];
        kept[1].collapsed = vec![Folded {
            at: 3,
            rule: "host_collapse",
        }];
        let rec = |rule, phase, mode, rec| Record {
            rule,
            phase,
            mode,
            rec,
        };
        let shared = Reason::shared("banned [entry 7]".into());
        let audit = vec![
            rec(
                "banlist",
                Phase::PreFilter,
                Mode::Applied,
                Rec::on(&page, 1, Action::Remove, shared.clone()),
            ),
            rec(
                "spam",
                Phase::Rerank,
                Mode::Applied,
                Rec {
                    delta: Delta::Float(0.500_000_000_000_000_1),
                    ..Rec::on(&page, 2, Action::Rescore, "spam 0.9")
                },
            ),
            rec(
                "pin",
                Phase::Rerank,
                Mode::Shadow,
                Rec {
                    delta: Delta::Int(-2),
                    ..Rec::on(&page, 0, Action::Move, "pinned")
                },
            ),
            rec(
                "host_collapse",
                Phase::Diversify,
                Mode::Applied,
                Rec::on(&page, 3, Action::Collapse, "under a"),
            ),
            rec(
                "depth",
                Phase::Trim,
                Mode::Applied,
                Rec::on(&page, 1, Action::Trim, "below depth 3"),
            ),
            rec(
                "age",
                Phase::PostFilter,
                Mode::Applied,
                Rec {
                    relax_to: Some(AgeMode::Off),
                    ..Rec::of_page(Action::Fallback, "emptied")
                },
            ),
        ];
        let outcome = Outcome {
            docs: kept,
            audit,
            fallback: Some(Fallback {
                rule: "age",
                action: "relax",
                reason: "the filters emptied the page".into(),
            }),
            timings: vec![],
            skipped: vec![Skip {
                rule: "slow",
                phase: Phase::Rerank,
                reason: SkipReason::Late,
            }],
            actions: vec![],
            errors: vec![],
            trace: vec![],
            teams: vec![],
        };
        let exposures = [
            Exposure {
                experiment: "e1".into(),
                variant: "treatment".into(),
                bucket: Some(41),
                layer: Some("l".into()),
                salt: None,
                forced: false,
                unit: Some("u".into()),
                triggered: false,
            },
            Exposure {
                experiment: "e2".into(),
                variant: "control".into(),
                bucket: None,
                layer: None,
                salt: Some("s".into()),
                forced: true,
                unit: None,
                triggered: true,
            },
        ];
        let head = Head {
            request_id: "r-\"1\"",
            profile: "default",
            config_version: "v9",
            banlist_version: -1,
            exposures: &exposures,
            interleaving: Some("e\"3"),
        };
        // An interleaved page's teams, written after each document's attributes.
        let mut outcome = outcome;
        outcome.teams = (0..outcome.docs.len())
            .map(|i| {
                if i % 2 == 0 {
                    Team::Control
                } else {
                    Team::Treatment
                }
            })
            .collect();
        let mut hand: Vec<u8> = Vec::new();
        write_response(&mut hand, &head, &page, &outcome, false);
        let serde = serde_json::to_vec(&answer(&head, &page, &outcome)).unwrap();
        assert_eq!(parsed(&hand), parsed(&serde));
        // And without the members written only when set.
        let outcome = Outcome {
            fallback: None,
            skipped: vec![],
            teams: vec![],
            ..outcome
        };
        let head = Head {
            exposures: &exposures[..1],
            interleaving: None,
            ..head
        };
        let mut hand: Vec<u8> = Vec::new();
        write_response(&mut hand, &head, &page, &outcome, false);
        let serde = serde_json::to_vec(&answer(&head, &page, &outcome)).unwrap();
        let value = parsed(&hand);
        assert!(value.get("skipped").is_none());
        assert!(value.get("interleaving").is_none());
        assert!(value["documents"][0].get("team").is_none());
        assert_eq!(value, parsed(&serde));
    }
}
