//! Entries picked by what T&S knows of them (who, why, what scope, what value, when): the
//! filtered page of `GET /v1/banlist/entries` and the matches of a bulk removal.
//!
//! One pass over the rows: what a row's meta decides (actor, reason) is decided once per
//! meta, not per row, so a pass over 1 M rows costs milliseconds, where making each entry
//! in Python to test it would cost seconds.

use super::data::{numeric_id, unexpired, IndexData, NAMED};
use super::shard::RowRef;
use super::Scope;

/// What an entry must be to be picked: every field given must hold.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Its scope.
    pub scope: Option<Scope>,
    /// Who made it, exactly.
    pub actor: Option<String>,
    /// Words its reason holds, in any case (lowercased here).
    pub reason_contains: Option<String>,
    /// How its written value ends.
    pub value_suffix: Option<String>,
    /// Made before this time (epoch seconds, exclusive).
    pub created_before: Option<f64>,
    /// Made at or after this time.
    pub created_after: Option<f64>,
    /// Expires before this time (exclusive; an entry without an expiry never does).
    pub expires_before: Option<f64>,
}

/// A page of picked entries: up to `limit` rows after the id asked, whether more follow,
/// and how many the selection picks in all (on every page alike).
pub struct Picked {
    /// The rows, in id order (numbers by number, then other ids by string).
    pub rows: Vec<RowRef>,
    /// More picked rows follow the page.
    pub more: bool,
    /// Rows picked, before and after the page too.
    pub total: usize,
}

impl IndexData {
    /// Up to `limit` entries active at `now` that `sel` picks, after id `after` in the
    /// order `page` lists them, and how many it picks in all.
    pub fn select(&self, sel: &Selection, after: Option<&str>, limit: usize, now: f64) -> Picked {
        let metas = self.metas_picked(sel);
        let after_number = after.map(|a| numeric_id(a).map_or(-1, |n| n as i64));
        let mut numbers: Vec<(u64, RowRef)> = Vec::new();
        let mut named: Vec<(&str, RowRef)> = Vec::new();
        let mut total = 0;
        for (s, shard) in self.shards.iter().enumerate() {
            for row in 0..shard.len() as u32 {
                let data = shard.data(row);
                if !unexpired(data.expires, now)
                    || !metas.as_ref().map_or(true, |m| m[data.meta as usize])
                    || !sel.scope.map_or(true, |scope| scope == data.scope)
                    || !sel.created_before.map_or(true, |t| data.created < t)
                    || !sel.created_after.map_or(true, |t| data.created >= t)
                    || !sel.expires_before.map_or(true, |t| data.expires < t)
                    || !sel
                        .value_suffix
                        .as_deref()
                        .map_or(true, |end| shard.value(row).ends_with(end))
                {
                    continue;
                }
                total += 1;
                let at = RowRef {
                    shard: s as u32,
                    row,
                };
                if data.id & NAMED == 0 {
                    // a number follows any number below it, and no name
                    if after_number.map_or(true, |n| n >= 0 && data.id as i64 > n) {
                        numbers.push((data.id, at));
                    }
                } else {
                    let name = self.name_of(data.id);
                    if after.map_or(true, |a| after_number != Some(-1) || name > a) {
                        named.push((name, at));
                    }
                }
            }
        }
        let want = limit.saturating_add(1);
        let mut rows = smallest(numbers, want);
        if rows.len() < want {
            rows.extend(smallest(named, want - rows.len()));
        }
        let more = rows.len() > limit;
        rows.truncate(limit);
        Picked { rows, more, total }
    }

    /// Whether each meta's actor and reason are what `sel` asks (None: it asks neither).
    fn metas_picked(&self, sel: &Selection) -> Option<Vec<bool>> {
        if sel.actor.is_none() && sel.reason_contains.is_none() {
            return None;
        }
        let words = sel.reason_contains.as_deref().map(str::to_lowercase);
        Some(
            (0..self.metas_len as u32)
                .map(|i| {
                    let meta = self.meta_at(i);
                    sel.actor.as_deref().map_or(true, |a| *meta.actor == *a)
                        && words
                            .as_deref()
                            .map_or(true, |w| meta.reason.to_lowercase().contains(w))
                })
                .collect(),
        )
    }

    /// The id a named (not plain decimal) id code stands for.
    fn name_of(&self, code: u64) -> &str {
        self.names
            .names
            .get((code & !NAMED) as usize)
            .map_or("", |n| &**n)
    }
}

/// The rows of the `want` smallest keys, in key order (all of them when fewer).
fn smallest<K: Ord + Copy>(mut keyed: Vec<(K, RowRef)>, want: usize) -> Vec<RowRef> {
    if keyed.len() > want && want > 0 {
        keyed.select_nth_unstable_by_key(want - 1, |(k, _)| *k);
    }
    keyed.truncate(want);
    keyed.sort_unstable_by_key(|(k, _)| *k);
    keyed.into_iter().map(|(_, at)| at).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::banlist::apply::{Change, NewEntry};
    use crate::banlist::BanIndex;

    fn entry(id: &str, scope: &str, value: &str, reason: &str, actor: &str) -> NewEntry {
        NewEntry {
            id: id.into(),
            scope: Scope::parse(scope).unwrap_or(Scope::Host),
            value: value.into(),
            reason: reason.into(),
            actor: actor.into(),
            created: id.parse::<f64>().unwrap_or(1000.0),
            expires: None,
            regions: Vec::new(),
        }
    }

    fn index(entries: Vec<NewEntry>) -> std::sync::Arc<IndexData> {
        let index = BanIndex::empty();
        index
            .apply_changes(entries.into_iter().map(Change::Add).collect())
            .unwrap_or_default();
        index.snapshot()
    }

    fn ids(data: &IndexData, picked: &Picked) -> Vec<String> {
        picked
            .rows
            .iter()
            .map(|&at| data.id_text(data.row(at).1.id))
            .collect()
    }

    #[test]
    fn pages_numbers_by_number_then_names_by_name_and_counts_every_pick() {
        let data = index(vec![
            entry("10", "host", "a.camp.example", "Campaign 7", "alice"),
            entry("2", "host", "b.camp.example", "campaign 7", "alice"),
            entry("zeta", "host", "c.camp.example", "CAMPAIGN 7", "alice"),
            entry("alpha", "host", "d.camp.example", "campaign 7", "alice"),
            entry("3", "host", "e.other.example", "campaign 7", "alice"),
            entry("4", "domain", "f.camp.example", "campaign 7", "bob"),
        ]);
        let sel = Selection {
            actor: Some("alice".into()),
            reason_contains: Some("campaign".into()),
            value_suffix: Some(".camp.example".into()),
            ..Selection::default()
        };
        let first = data.select(&sel, None, 2, 2000.0);
        assert_eq!(ids(&data, &first), ["2", "10"]);
        assert!(first.more);
        assert_eq!(first.total, 4);
        let next = data.select(&sel, Some("10"), 2, 2000.0);
        assert_eq!(ids(&data, &next), ["alpha", "zeta"]);
        assert!(!next.more);
        let last = data.select(&sel, Some("alpha"), 2, 2000.0);
        assert_eq!(ids(&data, &last), ["zeta"]);
        assert_eq!(last.total, 4);
    }

    #[test]
    fn times_bound_creation_and_expiry_and_expired_entries_are_never_picked() {
        let mut expiring = entry("5", "url", "x.example/a", "r", "a");
        expiring.expires = Some(3000.0);
        let mut gone = entry("6", "url", "x.example/b", "r", "a");
        gone.expires = Some(1500.0);
        let data = index(vec![
            entry("1", "url", "x.example/c", "r", "a"),
            expiring,
            gone,
        ]);
        let soon = Selection {
            expires_before: Some(4000.0),
            ..Selection::default()
        };
        assert_eq!(ids(&data, &data.select(&soon, None, 10, 2000.0)), ["5"]);
        let made = Selection {
            created_after: Some(5.0),
            created_before: Some(6.0),
            scope: Some(Scope::Url),
            ..Selection::default()
        };
        assert_eq!(ids(&data, &data.select(&made, None, 10, 2000.0)), ["5"]);
        assert_eq!(data.select(&made, None, 0, 2000.0).total, 1);
    }
}
