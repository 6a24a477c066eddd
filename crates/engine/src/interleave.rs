//! Team-draft interleaving (Radlinski, Kurup and Joachims, "How does clickthrough data
//! reflect retrieval quality?", CIKM 2008): two profiles' finished pages merged into one,
//! each document credited to the team (profile) that picked it, so that clicks compare the
//! two rankings on the same users and queries.
//!
//! At each step the team with fewer picks picks (on equal picks a coin decides), taking its
//! highest-ranked document not already on the merged page; the merged page is as long as
//! the longer arm's page. The coins come from MurmurHash3 of a key of the experiment, its
//! salt, the unit and the query (`Coins`), so one unit and one query give one page.

use unicode_normalization::UnicodeNormalization;

use crate::doc::{Doc, Page};
use crate::experiments::murmur3_32;
use crate::record::{Action, Mode, Phase, Reason, Rec, Record};
use crate::runner::Outcome;

/// The merge's own name in audit records (a document of an arm's page not picked).
pub const INTERLEAVE_RULE: &str = "interleave";

/// The side a document of the merged page came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Team {
    Control,
    Treatment,
}

impl Team {
    /// The name the response and the impressions give.
    pub fn as_str(self) -> &'static str {
        match self {
            Team::Control => "control",
            Team::Treatment => "treatment",
        }
    }
}

/// The coin flips of one request: flip `i` (0-based) is bit `i mod 32` of
/// MurmurHash3 x86 32-bit, seed `i div 32 + 1`, of the UTF-8 bytes of
/// `"<experiment>:<salt>:<NFC unit>:<NFC query text>"` (`<salt>` empty without one);
/// a set bit lets the treatment team pick first.
pub struct Coins {
    key: Vec<u8>,
    flips: u32,
    word: u32,
}

impl Coins {
    /// The coins of `experiment` (with `salt`) for this unit value and query text.
    pub fn new(experiment: &str, salt: &str, unit: &str, query: &str) -> Self {
        let mut key =
            String::with_capacity(experiment.len() + salt.len() + unit.len() + query.len() + 3);
        key.push_str(experiment);
        key.push(':');
        key.push_str(salt);
        key.push(':');
        key.extend(unit.nfc());
        key.push(':');
        key.extend(query.nfc());
        Coins {
            key: key.into_bytes(),
            flips: 0,
            word: 0,
        }
    }

    /// The next flip: true lets the treatment team pick first.
    pub fn treatment_first(&mut self) -> bool {
        let i = self.flips;
        if i % 32 == 0 {
            self.word = murmur3_32(&self.key, i / 32 + 1);
        }
        self.flips += 1;
        self.word >> (i % 32) & 1 == 1
    }
}

/// The team-draft merge of two rankings of distinct items (`control`, `treatment`: input
/// indexes, best first): (team, item) in merged order, as long as the longer ranking.
/// `treatment_first` is asked only when both teams have as many picks and something left.
pub fn team_draft(
    control: &[u32],
    treatment: &[u32],
    treatment_first: &mut dyn FnMut() -> bool,
) -> Vec<(Team, u32)> {
    let len = control.len().max(treatment.len());
    let size = control
        .iter()
        .chain(treatment)
        .max()
        .map_or(0, |m| *m as usize + 1);
    let mut taken = vec![false; size];
    let (mut next_c, mut next_t) = (0, 0);
    let (mut picks_c, mut picks_t) = (0usize, 0usize);
    let mut merged = Vec::with_capacity(len);
    while merged.len() < len {
        while next_c < control.len() && taken[control[next_c] as usize] {
            next_c += 1;
        }
        while next_t < treatment.len() && taken[treatment[next_t] as usize] {
            next_t += 1;
        }
        let team = match (next_c < control.len(), next_t < treatment.len()) {
            (false, false) => break,
            (true, false) => Team::Control,
            (false, true) => Team::Treatment,
            _ if picks_c < picks_t => Team::Control,
            _ if picks_t < picks_c => Team::Treatment,
            _ if treatment_first() => Team::Treatment,
            _ => Team::Control,
        };
        let item = match team {
            Team::Control => {
                picks_c += 1;
                control[next_c]
            }
            Team::Treatment => {
                picks_t += 1;
                treatment[next_t]
            }
        };
        taken[item as usize] = true;
        merged.push((team, item));
    }
    merged
}

/// An interleaved page as served, for the feedback store (app/experiments/impressions.py):
/// each document's id and team in served order. `at` is epoch seconds.
pub struct Impression {
    pub request_id: String,
    pub experiment: String,
    pub unit: String,
    pub at: f64,
    pub teams: Vec<(String, &'static str)>,
}

/// An impression as Python takes it: (request_id, experiment, unit, at, [(id, team)]).
pub type ImpressionTuple = (String, String, String, f64, Vec<(String, &'static str)>);

impl Impression {
    /// As `ImpressionTuple`.
    pub fn into_tuple(self) -> ImpressionTuple {
        (
            self.request_id,
            self.experiment,
            self.unit,
            self.at,
            self.teams,
        )
    }
}

/// A record that removes its document from the page (`removed` of the response).
fn removes(r: &Record) -> bool {
    matches!(r.rec.action, Action::Remove | Action::Trim) && r.mode == Mode::Applied
}

/// A removal by a filter (pre-filter or post-filter): bans, safe search, T&S rules.
fn filters(r: &Record) -> bool {
    r.rec.action == Action::Remove
        && r.mode == Mode::Applied
        && matches!(r.phase, Phase::PreFilter | Phase::PostFilter)
}

/// What `merge` gives the request to serve.
pub enum Merged<'a> {
    /// The merged page, each served document's team in its `teams`.
    Page(Outcome<'a>),
    /// Either arm answered with a fallback, or the two arms' filters together left nothing
    /// to merge: the control arm's outcome, served alone.
    Control(Outcome<'a>),
}

/// The merged page of an interleaving experiment from the two arms' outcomes, or the
/// control arm's alone when either arm answered with a fallback or nothing is left to
/// merge.
///
/// A document that either arm's filters removed is taken from neither: every document
/// served passed the filters of both profiles. The audit keeps, for each document, the
/// records of the arm that served it (the control arm's for a document not served),
/// a filter's removal by the treatment arm that explains a document the control arm
/// kept, and an `interleave` trim record for any other document not on the merged page
/// nor folded under one of it. Both arms' timings, action counts, failures and skips are
/// kept.
pub fn merge<'a>(
    experiment: &str,
    control: Outcome<'a>,
    treatment: Outcome<'a>,
    page: &Page<'a>,
    coins: &mut Coins,
) -> Merged<'a> {
    let inputs = page.req.documents.len();
    if control.fallback.is_some() || treatment.fallback.is_some() {
        return Merged::Control(control);
    }
    let mut filtered = vec![false; inputs];
    let mut control_removed = vec![false; inputs];
    for r in &control.audit {
        if let Some(at) = r.rec.at {
            filtered[at as usize] |= filters(r);
            control_removed[at as usize] |= removes(r);
        }
    }
    for r in treatment.audit.iter().filter(|r| filters(r)) {
        if let Some(at) = r.rec.at {
            filtered[at as usize] = true;
        }
    }
    let arm = |o: &Outcome| -> Vec<u32> {
        o.docs
            .iter()
            .map(|d| d.at)
            .filter(|at| !filtered[*at as usize])
            .collect()
    };
    let (ranked_c, ranked_t) = (arm(&control), arm(&treatment));
    let picked = team_draft(&ranked_c, &ranked_t, &mut || coins.treatment_first());
    if picked.is_empty() && !control.docs.is_empty() {
        // Each arm's filters removed what the other served (say safe search in one, a
        // spam ban in the other): an empty merged page would be an answer with nothing
        // on it and no fallback, so the control page is served alone, as to a unit
        // outside the experiment.
        return Merged::Control(control);
    }
    let mut served: Vec<Option<Team>> = vec![None; inputs];
    for (team, at) in &picked {
        served[*at as usize] = Some(*team);
    }
    let doc_of = |o: &Outcome, at: u32| -> Doc {
        o.docs
            .iter()
            .find(|d| d.at == at)
            .cloned()
            .expect("picked from this arm's page")
    };
    // A document is shown once: not in a fold when it is served itself, nor in two folds;
    // and one either arm's filters removed is not shown folded either (its URL is on the
    // page all the same). `fold_team`: the team whose document a kept fold is shown under.
    let mut folded = vec![false; inputs];
    let mut fold_team: Vec<Option<Team>> = vec![None; inputs];
    let mut docs = Vec::with_capacity(picked.len());
    let mut teams = Vec::with_capacity(picked.len());
    for (team, at) in &picked {
        let mut doc = match team {
            Team::Control => doc_of(&control, *at),
            Team::Treatment => doc_of(&treatment, *at),
        };
        doc.collapsed.retain(|f| {
            let at = f.at as usize;
            let keep = served[at].is_none() && !folded[at] && !filtered[at];
            folded[at] = true;
            if keep {
                fold_team[at] = Some(*team);
            }
            keep
        });
        docs.push(doc);
        teams.push(*team);
    }
    let mut audit = Vec::with_capacity(control.audit.len() + treatment.audit.len());
    audit.extend(control.audit.into_iter().filter(|r| {
        r.rec
            .at
            .map_or(true, |at| served[at as usize] != Some(Team::Treatment))
    }));
    audit.extend(treatment.audit.into_iter().filter(|r| {
        r.rec.at.is_some_and(|at| {
            let at = at as usize;
            served[at] == Some(Team::Treatment)
                || (served[at].is_none() && !control_removed[at] && filters(r))
                // a fold shown under a treatment document: the collapse that put it there
                || (fold_team[at] == Some(Team::Treatment) && r.rec.action == Action::Collapse)
        })
    }));
    // Every document sent is on the page, folded under one of it, or in `removed`: one
    // that neither the served documents nor a removal kept above accounts for (not
    // picked, or folded under a document not picked) gets a trim record of its own.
    let mut explained = folded;
    for at in served
        .iter()
        .enumerate()
        .filter_map(|(at, t)| t.map(|_| at))
    {
        explained[at] = true;
    }
    for r in audit.iter().filter(|r| removes(r)) {
        if let Some(at) = r.rec.at {
            explained[at as usize] = true;
        }
    }
    if explained.iter().any(|e| !e) {
        let reason = Reason::shared(format!(
            "team-draft interleaving of experiment {experiment}: not on the merged page"
        ));
        for at in (0..inputs as u32).filter(|at| !explained[*at as usize]) {
            audit.push(Record {
                rule: INTERLEAVE_RULE,
                phase: Phase::PostFilter,
                mode: Mode::Applied,
                rec: Rec::on(page, at, Action::Trim, reason.clone()),
            });
        }
    }
    // one entry for a rule both arms skipped, as the response says it
    let mut skipped = control.skipped;
    for s in treatment.skipped {
        let said = skipped.iter().any(|k| {
            k.rule == s.rule && k.phase == s.phase && k.reason.as_str() == s.reason.as_str()
        });
        if !said {
            skipped.push(s);
        }
    }
    let mut timings = control.timings;
    timings.extend(treatment.timings);
    let mut actions = control.actions;
    actions.extend(treatment.actions);
    let mut errors = control.errors;
    errors.extend(treatment.errors);
    let mut trace = control.trace;
    trace.extend(treatment.trace);
    Merged::Page(Outcome {
        docs,
        audit,
        fallback: None,
        timings,
        skipped,
        actions,
        errors,
        trace,
        teams,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Xorshift;

    /// The paper's algorithm written plainly from its pseudo-code (Radlinski et al. 2008,
    /// Algorithm 2), extended as the module says: when one team has nothing left, the
    /// other goes on until the longer ranking's length.
    fn reference(a: &[u32], b: &[u32], coins: &[bool]) -> Vec<(Team, u32)> {
        let mut out: Vec<(Team, u32)> = Vec::new();
        let (mut ta, mut tb) = (0, 0);
        let mut flips = coins.iter();
        let has = |out: &Vec<(Team, u32)>, x: u32| out.iter().any(|(_, y)| *y == x);
        while out.len() < a.len().max(b.len()) {
            let next_a = a.iter().copied().find(|x| !has(&out, *x));
            let next_b = b.iter().copied().find(|x| !has(&out, *x));
            let a_turn = match (next_a, next_b) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                _ => ta < tb || (ta == tb && !*flips.next().unwrap()),
            };
            if a_turn {
                ta += 1;
                out.push((Team::Control, next_a.unwrap()));
            } else {
                tb += 1;
                out.push((Team::Treatment, next_b.unwrap()));
            }
        }
        out
    }

    /// A random ranking of `len` items out of `pool` (a Fisher–Yates shuffle's prefix).
    fn ranking(rng: &mut Xorshift, pool: u32, len: usize) -> Vec<u32> {
        let mut items: Vec<u32> = (0..pool).collect();
        for i in (1..items.len()).rev() {
            items.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
        items.truncate(len);
        items
    }

    #[test]
    fn the_merge_is_the_papers_on_random_rankings() {
        let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let pool = 1 + (rng.next() % 12) as u32;
            let (la, lb) = (
                rng.next() % (pool as u64 + 1),
                rng.next() % (pool as u64 + 1),
            );
            let a = ranking(&mut rng, pool, la as usize);
            let b = ranking(&mut rng, pool, lb as usize);
            let coins: Vec<bool> = (0..64).map(|_| rng.next() & 1 == 1).collect();
            let mut given = coins.iter();
            let merged = team_draft(&a, &b, &mut || *given.next().unwrap());
            assert_eq!(merged, reference(&a, &b, &coins), "{a:?} {b:?}");
            assert_eq!(merged.len(), a.len().max(b.len()).min(pool as usize));
            // Each team's picks keep its own ranking's order, and come from it.
            for (team, arm) in [(Team::Control, &a), (Team::Treatment, &b)] {
                let mine: Vec<usize> = merged
                    .iter()
                    .filter(|(t, _)| *t == team)
                    .map(|(_, x)| arm.iter().position(|y| y == x).expect("from its arm"))
                    .collect();
                assert!(mine.windows(2).all(|w| w[0] < w[1]), "{merged:?}");
            }
        }
    }

    #[test]
    fn teams_stay_within_one_pick_while_both_have_documents() {
        let mut rng = Xorshift(42);
        for _ in 0..500 {
            let n = 1 + (rng.next() % 20) as u32;
            let a = ranking(&mut rng, n, n as usize);
            let b = ranking(&mut rng, n, n as usize); // the same documents: neither runs out early
            let mut coins = Coins::new("exp", "", &format!("u-{}", rng.next()), "q");
            let merged = team_draft(&a, &b, &mut || coins.treatment_first());
            let (mut c, mut t) = (0i64, 0i64);
            for (team, _) in &merged {
                match team {
                    Team::Control => c += 1,
                    Team::Treatment => t += 1,
                }
                assert!((c - t).abs() <= 1, "{merged:?}");
            }
            // The prefix of each merged page starts with one arm's top document.
            assert!(merged[0].1 == a[0] || merged[0].1 == b[0]);
        }
    }

    #[test]
    fn coins_are_the_documented_hash_bits() {
        let mut coins = Coins::new("spam_v8", "s1", "u-1", "купить диван");
        let key = "spam_v8:s1:u-1:купить диван".as_bytes();
        let (w1, w2) = (murmur3_32(key, 1), murmur3_32(key, 2));
        let flips: Vec<bool> = (0..40).map(|_| coins.treatment_first()).collect();
        let expected: Vec<bool> = (0..40)
            .map(|i| {
                if i < 32 {
                    w1 >> i & 1 == 1
                } else {
                    w2 >> (i - 32) & 1 == 1
                }
            })
            .collect();
        assert_eq!(flips, expected);
        // NFD input is the NFC key: "é" composed or not gives the same coins.
        let mut nfd = Coins::new("e", "", "e\u{301}", "");
        let mut nfc = Coins::new("e", "", "\u{e9}", "");
        assert!((0..64).all(|_| nfd.treatment_first() == nfc.treatment_first()));
    }

    #[test]
    fn one_ranking_empty_gives_the_other() {
        let merged = team_draft(&[], &[3, 1, 2], &mut || panic!("no tie to break"));
        assert_eq!(
            merged,
            vec![
                (Team::Treatment, 3),
                (Team::Treatment, 1),
                (Team::Treatment, 2)
            ]
        );
        assert!(team_draft(&[], &[], &mut || true).is_empty());
    }
}
