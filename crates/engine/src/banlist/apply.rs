//! Applying a batch of changes to a snapshot's copy (the writer's side).
//!
//! Every shard a change touches is made unique with `Arc::make_mut` first: shared with the
//! published snapshot, it is copied; already copied in this batch (or never published, as
//! in a build), it is changed in place.

use std::sync::Arc;

use super::data::{id_hash, id_ref, id_slot, numeric_id, IndexData, Meta, NAMED};
use super::names::labels;
use super::shard::{key_slot, slot_tag, RowData, RowRef, MAX_METAS};
use super::summary::{self, Field, SlotChange};
use super::{hash_str, shard_of, summary_of, tag_of, Scope};

const META_CHUNK: usize = 1024;

/// An entry to add, as the stores hand it over.
#[derive(Clone, Debug)]
pub struct NewEntry {
    /// Its id (the stores' sequence number, or any other string).
    pub id: String,
    /// What it covers.
    pub scope: Scope,
    /// The canonical value for the scope.
    pub value: String,
    /// Why.
    pub reason: String,
    /// Who.
    pub actor: String,
    /// When, epoch seconds.
    pub created: f64,
    /// Until when, epoch seconds; None: for good.
    pub expires: Option<f64>,
    /// Where; empty: everywhere.
    pub regions: Vec<String>,
}

/// One change of a batch.
#[derive(Clone, Debug)]
pub enum Change {
    /// Index an entry, replacing one with the same id.
    Add(NewEntry),
    /// Drop the entry with this id, if there is one.
    Remove(String),
    /// Define or redefine an org group; entries banning it follow the new members.
    Group(String, Vec<String>),
}

/// What a writer keeps beside the snapshots: the meta interner.
#[derive(Debug, Default)]
pub struct Writer {
    metas: hashbrown::HashTable<u32>,
}

fn meta_hash(m: &Meta) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(3).hash_one(m)
}

impl Writer {
    /// Apply `changes` in order to `data` (a copy of the published snapshot, or a new one).
    pub fn apply(&mut self, data: &mut IndexData, changes: Vec<Change>) -> Result<(), String> {
        for change in changes {
            match change {
                Change::Add(entry) => self.add(data, entry)?,
                Change::Remove(id) => {
                    remove(data, &id);
                }
                Change::Group(name, domains) => set_group(data, name, domains),
            }
        }
        Ok(())
    }

    /// Give back the spare capacity of the shards this batch copied (after a large batch:
    /// what growing by doubling left over); shards shared with the last snapshot are as
    /// they were.
    pub fn settle(data: &mut IndexData) {
        for shard in data.shards.iter_mut() {
            if let Some(shard) = Arc::get_mut(shard) {
                shard.shrink();
            }
        }
        for table in data.summary.iter_mut().filter(|t| t.is_unique()) {
            table.fit(summary::slot_pos);
        }
        let shards = &data.shards;
        for table in data.ids.iter_mut() {
            if let Some(table) = Arc::get_mut(table) {
                table.fit(|slot| id_pos(shards, slot));
            }
        }
    }

    fn intern(&mut self, data: &mut IndexData, meta: Meta) -> Result<u32, String> {
        let h = meta_hash(&meta);
        // a batch refused midway leaves numbers past `metas_len` behind: never trusted
        let known = data.metas_len;
        if let Some(&i) = self
            .metas
            .find(h, |&i| (i as usize) < known && *data.meta_at(i) == meta)
        {
            return Ok(i);
        }
        let i = u32::try_from(data.metas_len)
            .ok()
            .filter(|&i| i < MAX_METAS)
            .ok_or("too many distinct reasons")?;
        if data.metas_len % META_CHUNK == 0 {
            data.metas.push(Arc::new(Vec::with_capacity(META_CHUNK)));
        }
        if let Some(last) = data.metas.last_mut() {
            Arc::make_mut(last).push(meta);
        }
        data.metas_len += 1;
        let metas = &data.metas;
        self.metas.insert_unique(h, i, |&j| {
            meta_hash(&metas[j as usize / META_CHUNK][j as usize % META_CHUNK])
        });
        Ok(i)
    }

    fn add(&mut self, data: &mut IndexData, e: NewEntry) -> Result<(), String> {
        let code = match numeric_id(&e.id) {
            Some(n) => {
                data.max_number = data.max_number.max(n as i64);
                n
            }
            None => name_code(data, &e.id),
        };
        remove_code(data, code);
        if data.next_ord == u32::MAX {
            renumber(data);
        }
        let mut regions: Vec<Box<str>> =
            e.regions.into_iter().map(String::into_boxed_str).collect();
        regions.sort_unstable();
        regions.dedup();
        let regional = !regions.is_empty();
        let meta = Meta {
            reason: e.reason.into(),
            actor: e.actor.into(),
            regions: regions.into(),
        };
        let meta = self.intern(data, meta)?;
        let key = e.scope.key_of(&e.value);
        let h = hash_str(key);
        let s = shard_of(h);
        let tag = tag_of(e.scope, h);
        let ord = data.next_ord;
        let row_data = RowData {
            id: code,
            created: e.created,
            expires: e.expires.unwrap_or(f64::NAN),
            scope: e.scope,
            meta,
            regional,
            ord,
        };
        let shard = Arc::make_mut(&mut data.shards[s]);
        let row = shard
            .push(&e.value, row_data)
            .ok_or("a banlist shard is full (4 GiB of values)")?;
        shard.keys.insert(tag, key_slot(tag, row), slot_tag);
        let at = RowRef {
            shard: s as u32,
            row,
        };
        let ih = id_hash(code);
        let shards = &data.shards;
        Arc::make_mut(&mut data.ids[shard_of(ih)])
            .insert(ih as u32, id_slot(at), |slot| id_pos(shards, slot));
        if let Some((name, field)) = summarized(e.scope, key) {
            summarize(data, name, field, 1);
        }
        if e.scope == Scope::Domain {
            data.labels = data.labels.max(labels(&e.value));
        }
        data.next_ord += 1;
        data.counts[e.scope as usize] += 1;
        data.len += 1;
        Ok(())
    }
}

fn host_part(key: &str) -> &str {
    key.split('/').next().unwrap_or(key)
}

fn name_code(data: &mut IndexData, id: &str) -> u64 {
    if let Some(&code) = data.names.codes.get(id) {
        return code;
    }
    let names = Arc::make_mut(&mut data.names);
    let code = NAMED | names.names.len() as u64;
    names.names.push(id.into());
    names.codes.insert(id.into(), code);
    code
}

/// The name an entry of `scope` keyed `key` is counted at in the summary, and as what
/// (org entries are counted through their groups' members).
fn summarized(scope: Scope, key: &str) -> Option<(&str, Field)> {
    match scope {
        Scope::Url => Some((host_part(key), summary::URL)),
        Scope::Prefix => Some((host_part(key), summary::PREFIX)),
        Scope::Host => Some((key, summary::HOST)),
        Scope::Domain => Some((key, summary::DOMAIN)),
        Scope::Org => None,
    }
}

/// Count an entry (`delta` 1) or drop it (-1) at `name`, and in `BELOW` at its parents.
fn summarize(data: &mut IndexData, name: &str, field: Field, delta: i32) {
    let mut bump = |name: &str, field: Field, child: u32| {
        data.bump_summary(summary::name_hash(name), field, delta, child);
    };
    bump(name, field, 0);
    for (at, child) in summary::parents_and_children(name) {
        bump(&name[at..], summary::BELOW, child);
    }
}

impl IndexData {
    /// `summary::bump` at the name hashed `h`, the sites filter following the name and
    /// its slot.
    pub(super) fn bump_summary(&mut self, h: u64, field: Field, delta: i32, child: u32) {
        let table = summary_of(h);
        let change = summary::bump(&mut self.summary[table], h, field, delta, child);
        if delta > 0 {
            // a name sharing another's slot sets its own bits too (`filter`)
            self.filter.add(h);
        }
        if let SlotChange::Removed(slot) = change {
            self.filter.removed(table, slot, &self.summary[table]);
        }
    }
}

/// The position an id table's slot was placed by: its row's id's hash.
fn id_pos(shards: &[Arc<super::shard::Shard>], slot: u64) -> u32 {
    let at = id_ref(slot);
    id_hash(shards[at.shard as usize].id(at.row)) as u32
}

/// Drop the entry with this id; whether there was one.
pub fn remove(data: &mut IndexData, id: &str) -> bool {
    match data.code_of(id) {
        Some(code) => remove_code(data, code),
        None => false,
    }
}

fn remove_code(data: &mut IndexData, code: u64) -> bool {
    let Some(at) = data.find_code(code) else {
        return false;
    };
    let s = at.shard as usize;
    let (scope, key) = {
        let shard = &data.shards[s];
        let scope = shard.scope(at.row);
        (scope, scope.key_of(shard.value(at.row)).to_string())
    };
    let ih = id_hash(code);
    {
        let shards = &data.shards;
        Arc::make_mut(&mut data.ids[shard_of(ih)])
            .remove(ih as u32, id_slot(at), |slot| id_pos(shards, slot));
    }
    let tag = tag_of(scope, hash_str(&key));
    let shard = Arc::make_mut(&mut data.shards[s]);
    shard.keys.remove(tag, key_slot(tag, at.row), slot_tag);
    if let Some(last) = shard.swap_remove(at.row) {
        // the last row now sits at `at.row`: re-point its key slot and its id slot
        let moved_scope = shard.scope(at.row);
        let moved_tag = tag_of(
            moved_scope,
            hash_str(moved_scope.key_of(shard.value(at.row))),
        );
        shard.keys.replace(
            moved_tag,
            key_slot(moved_tag, last),
            key_slot(moved_tag, at.row),
        );
        let moved_code = shard.id(at.row);
        let mh = id_hash(moved_code);
        let old = id_slot(RowRef {
            shard: at.shard,
            row: last,
        });
        Arc::make_mut(&mut data.ids[shard_of(mh)]).replace(mh as u32, old, id_slot(at));
    }
    if let Some((name, field)) = summarized(scope, &key) {
        summarize(data, name, field, -1);
    }
    data.counts[scope as usize] -= 1;
    data.len -= 1;
    true
}

fn set_group(data: &mut IndexData, name: String, domains: Vec<String>) {
    // the summary counts each (member domain, group) pair once
    let mut left: Vec<Box<str>> = Vec::new();
    let mut joined: Vec<Box<str>> = Vec::new();
    let groups = Arc::make_mut(&mut data.groups);
    let name: Box<str> = name.into();
    let members: Vec<Box<str>> = domains.into_iter().map(String::into_boxed_str).collect();
    let old = match groups.order.iter_mut().find(|(n, _)| *n == name) {
        Some((_, slot)) => std::mem::replace(slot, members.clone()),
        None => {
            groups.order.push((name.clone(), members.clone()));
            Vec::new()
        }
    };
    for domain in old {
        if let Some(names) = groups.members.get_mut(&domain) {
            let had = names.len();
            names.retain(|n| *n != name);
            if names.len() < had {
                left.push(domain.clone());
            }
            if names.is_empty() {
                groups.members.remove(&domain);
            }
        }
    }
    for domain in members {
        data.labels = data.labels.max(labels(&domain));
        let names = groups.members.entry(domain.clone()).or_default();
        if !names.contains(&name) {
            names.push(name.clone());
            joined.push(domain);
        }
    }
    for domain in left {
        summarize(data, &domain, summary::MEMBER, -1);
    }
    for domain in joined {
        summarize(data, &domain, summary::MEMBER, 1);
    }
}

/// Give every row a new insertion order 0, 1, … keeping their order (the counter is full).
fn renumber(data: &mut IndexData) {
    let rows = data.all_rows();
    for (ord, at) in rows.iter().enumerate() {
        Arc::make_mut(&mut data.shards[at.shard as usize]).set_ord(at.row, ord as u32);
    }
    data.next_ord = rows.len() as u32;
}
