//! Applying a batch of changes to a snapshot's copy (the writer's side).
//!
//! Every shard a change touches is made unique with `Arc::make_mut` first: shared with the
//! published snapshot, it is copied; already copied in this batch (or never published, as
//! in a build), it is changed in place.

use std::sync::{mpsc, Arc};

use super::data::{id_hash, id_ref, id_slot, numeric_id, IndexData, Meta, NAMED};
use super::filter::{self, Filter, FilterEvent};
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

/// What a writer keeps beside the snapshots: the meta interner, and the sites filter being
/// made again aside, if it is.
#[derive(Debug, Default)]
pub struct Writer {
    metas: hashbrown::HashTable<u32>,
    refresh: Option<Refresh>,
    /// Why the last refresh failed (no thread could be started, or it ended without a
    /// filter), until the index takes it to count and show (`take_failure`).
    failure: Option<String>,
    /// `REFRESH_LEAST` unless a test sets fewer.
    least: Option<usize>,
    /// The next refresh thread panics (`panic_next_refresh`: the tests' failed refresh;
    /// not compiled into the shipped module).
    #[cfg(test)]
    panic_next: bool,
}

/// A sites filter being made from a snapshot on a thread of its own, and what the batches
/// published since told the filter (`FilterEvent`), in order: told to the new one before
/// it is published, so that it misses no name counted since its snapshot.
#[derive(Debug)]
struct Refresh {
    /// The filter, or why there is none (the thread's panic, caught).
    made: mpsc::Receiver<Made>,
    /// What `made` gave, once taken by `filter_ready` ahead of a publish.
    ready: Option<Made>,
    log: Vec<FilterEvent>,
}

/// Who publishes a copy ([`Writer::before_publish`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publisher {
    /// A batch of changes.
    Batch,
    /// A batch that waits for the filter being made first (tests and benches,
    /// `BanIndex::finish_refresh`).
    Waiting,
    /// The housekeeping, for a filter made (`BanIndex::publish_ready_filter`): a failed
    /// one is made again by the next batch, not by the next poll.
    Housekeeping,
}

/// What a refresh thread ends with: the filter, or the cause of its failure.
type Made = Result<Filter, String>;

/// The cause noted when a refresh thread ended without a word (its panic did not unwind).
const ENDED: &str = "the thread making the sites filter again ended without one";

impl Refresh {
    /// What its thread ended with, if it has ended: `wait`s for it when asked to.
    fn made(&mut self, wait: bool) -> Option<Made> {
        if let Some(made) = self.ready.take() {
            return Some(made);
        }
        let got = if wait {
            self.made
                .recv()
                .map_err(|_| mpsc::TryRecvError::Disconnected)
        } else {
            self.made.try_recv()
        };
        match got {
            Ok(made) => Some(made),
            Err(mpsc::TryRecvError::Empty) => None,
            Err(mpsc::TryRecvError::Disconnected) => Some(Err(ENDED.into())),
        }
    }
}

/// A caught panic's message.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Slots gone since the filter was made, as a share of those held, past which it is made
/// again: a quarter. At 10 M entries a quarter of the names gone leaves about a fifth more
/// bits set than the names held set, and a clean site's three bits all set about 1.6 times
/// as often (`filter`).
const REFRESH_SHARE: usize = 4;
/// And at least this many (a small index is not made again for every few removals).
const REFRESH_LEAST: usize = 4096;

fn meta_hash(m: &Meta) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(3).hash_one(m)
}

impl Writer {
    /// The writer of `data`, an index made whole aside (a load): its metas interned, so
    /// that an entry added later with one of them shares it.
    pub fn of_index(data: &IndexData) -> Writer {
        let mut writer = Writer::default();
        for i in 0..data.metas_len as u32 {
            let meta = data.meta_at(i);
            let h = meta_hash(meta);
            if writer.metas.find(h, |&j| data.meta_at(j) == meta).is_none() {
                writer
                    .metas
                    .insert_unique(h, i, |&j| meta_hash(data.meta_at(j)));
            }
        }
        writer
    }

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

    /// Whether the filter of `data` has had enough slots go since it was made to be made
    /// again.
    fn wants_refresh(&self, data: &IndexData) -> bool {
        let least = self.least.unwrap_or(REFRESH_LEAST);
        data.gone >= least && data.gone * REFRESH_SHARE >= data.slots
    }

    /// Make the filter again past `least` slots gone (and a quarter), not `REFRESH_LEAST`,
    /// from now on (the tests').
    #[cfg(test)]
    pub fn refresh_past(&mut self, least: usize) {
        self.least = Some(least);
    }

    /// The next refresh thread panics: what a failed refresh does, for the tests.
    #[cfg(test)]
    pub fn panic_next_refresh(&mut self) {
        self.panic_next = true;
    }

    /// Why the last refresh failed, once: the index counts it and keeps the cause.
    pub fn take_failure(&mut self) -> Option<String> {
        self.failure.take()
    }

    /// Whether the filter being made again is made and waits for a publish (taken from
    /// its thread now, so that the next publish puts it in without waiting).
    /// (A refresh that failed is ready too: the publish notes the failure.)
    pub fn filter_ready(&mut self) -> bool {
        let Some(refresh) = &mut self.refresh else {
            return false;
        };
        refresh.ready = refresh.made(false);
        refresh.ready.is_some()
    }

    /// A copy of the published snapshot `current` to apply a batch to; while a filter is
    /// being made again, it notes what the batch tells the filter.
    pub fn copy(&self, current: &IndexData) -> IndexData {
        let mut data = current.clone();
        data.filter_log = self.refresh.as_ref().map(|_| Vec::new());
        data
    }

    /// Before a batch's copy is published: what it told the filter kept for the filter
    /// being made again, and that filter, once made and told all that the batches since
    /// its snapshot told the old one, put in its place. True when a filter should be made
    /// again from the snapshot about to be published ([`Writer::refresh_from`]).
    /// `by` says who publishes: whether to wait for the filter being made, and whether a
    /// failed one is started again now.
    pub fn before_publish(&mut self, data: &mut IndexData, by: Publisher) -> bool {
        let wait = by == Publisher::Waiting;
        let Some(refresh) = &mut self.refresh else {
            return self.wants_refresh(data);
        };
        refresh
            .log
            .extend(data.filter_log.take().unwrap_or_default());
        if refresh.log.len() > data.slots.max(REFRESH_LEAST) {
            // more told since its snapshot than names held (a large stream applied
            // meanwhile): the log is not kept growing; one is made from this snapshot
            // (a failure its thread already reported is still counted)
            if let Some(Err(cause)) = refresh.made(false) {
                self.failure = Some(cause);
            }
            self.refresh = None;
            return self.wants_refresh(data);
        }
        match refresh.made(wait) {
            Some(Ok(filter)) => {
                let log = std::mem::take(&mut refresh.log);
                self.refresh = None;
                self.put(data, filter, log);
                false
            }
            None => false,
            // the thread failed (it panicked): the failure counted and its cause shown,
            // and the filter made again from a batch's snapshot, this one's if it is one
            // (a failure that repeats costs a thread a batch, not one each housekeeping
            // poll)
            Some(Err(cause)) => {
                self.refresh = None;
                self.failure = Some(cause);
                by != Publisher::Housekeeping && self.wants_refresh(data)
            }
        }
    }

    /// `filter`, made from an earlier snapshot, told `log` (what every batch since told
    /// the filter) and put in place of `data`'s: it then holds every name counted now,
    /// and its words without a slot are cleared, as the old one's are. The slots gone
    /// since that snapshot may have left bits set; they are what `gone` counts now.
    fn put(&mut self, data: &mut IndexData, mut filter: Filter, log: Vec<FilterEvent>) {
        let mut gone = 0;
        for event in log {
            match event {
                FilterEvent::Set(key) => filter.set(key),
                FilterEvent::Removed(table, slot) => {
                    filter.removed(table, slot, &data.summary[table]);
                    gone += 1;
                }
            }
        }
        data.filter = filter;
        data.gone = gone;
        data.refreshed += 1;
    }

    /// Make the filter again from `snapshot` (just published) on a thread of its own; the
    /// batches after it note what they tell the filter until it is put in place. When no
    /// thread can be started (a failure, `take_failure`), the next batch tries again.
    pub fn refresh_from(&mut self, snapshot: Arc<IndexData>) {
        let (tx, made) = mpsc::channel();
        #[cfg(test)]
        let panics = std::mem::take(&mut self.panic_next);
        #[cfg(not(test))]
        let panics = false;
        let spawned = std::thread::Builder::new()
            .name("banlist-filter".into())
            .spawn(move || {
                let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    if panics {
                        panic!("the refresh a test asked to fail");
                    }
                    snapshot.fresh_filter()
                }))
                .map_err(|payload| {
                    format!(
                        "making the sites filter again panicked: {}",
                        panic_text(&*payload)
                    )
                });
                // fails only when the writer has gone: nobody waits for the filter then
                let _ = tx.send(made);
            });
        match spawned {
            Ok(_) => {
                self.refresh = Some(Refresh {
                    made,
                    ready: None,
                    log: Vec::new(),
                })
            }
            Err(e) => {
                self.failure = Some(format!(
                    "no thread could be started to make the sites filter again: {e}"
                ))
            }
        }
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
pub(super) fn summarized(scope: Scope, key: &str) -> Option<(&str, Field)> {
    match scope {
        Scope::Url => Some((host_part(key), summary::URL)),
        Scope::Prefix => Some((host_part(key), summary::PREFIX)),
        Scope::Host => Some((key, summary::HOST)),
        Scope::Domain => Some((key, summary::DOMAIN)),
        Scope::Org => None,
    }
}

/// The names an entry of `field` at `name` is counted at, and as what: `name` itself as
/// `field` (None), then each parent in `BELOW` with the `child_pair` of the label below it
/// on the way to `name`.
pub(super) fn counted_names(
    name: &str,
    field: Field,
) -> impl Iterator<Item = (&str, Field, Option<u16>)> {
    std::iter::once((name, field, None)).chain(
        summary::parents_and_children(name)
            .map(move |(at, child)| (&name[at..], summary::BELOW, Some(child))),
    )
}

/// Count an entry (`delta` 1) or drop it (-1) at `name`, and in `BELOW` at its parents.
fn summarize(data: &mut IndexData, name: &str, field: Field, delta: i32) {
    for (at, field, child) in counted_names(name, field) {
        data.bump_summary(summary::name_hash(at), field, delta, child);
    }
}

impl IndexData {
    /// `summary::bump` at the name hashed `h`, the sites filter following the name and
    /// its slot (and told in `filter_log` too while a filter is made again aside); `below`:
    /// for `BELOW`, the `child_pair` of the label below the name that the entry lies under
    /// (None for the other fields).
    pub(super) fn bump_summary(&mut self, h: u64, field: Field, delta: i32, below: Option<u16>) {
        let table = summary_of(h);
        let child = below.map_or(0, summary::pair_bit);
        let change = summary::bump(&mut self.summary[table], h, field, delta, child);
        let mut told = |event| {
            if let Some(log) = &mut self.filter_log {
                log.push(event);
            }
        };
        if delta > 0 {
            // a name sharing another's slot sets its own bits too (`filter`), and those of a
            // domain entry or member, or of the label below it that an entry lies under
            let key = filter::counted_key(h, field, below);
            self.filter.set(key);
            told(FilterEvent::Set(key));
        }
        match change {
            SlotChange::Added => self.slots += 1,
            SlotChange::Removed(slot) => {
                self.filter.removed(table, slot, &self.summary[table]);
                told(FilterEvent::Removed(table, slot));
                self.slots -= 1;
                self.gone += 1;
            }
            SlotChange::Kept => {}
        }
    }

    /// A sites filter made from the names counted now, as a build of the index would make
    /// it: each entry's names (`summarize`'s) and each org member's, without the bits that
    /// names gone since the filter was made may have left (`Filter::removed`).
    pub fn fresh_filter(&self) -> Filter {
        let mut filter = Filter::default();
        let mut add = |name: &str, field: Field| {
            for (at, field, child) in counted_names(name, field) {
                filter.set(filter::counted_key(summary::name_hash(at), field, child));
            }
        };
        for shard in &self.shards {
            for row in 0..shard.len() as u32 {
                let scope = shard.scope(row);
                if let Some((name, field)) = summarized(scope, scope.key_of(shard.value(row))) {
                    add(name, field);
                }
            }
        }
        // a member domain is listed while a group holds it (`set_group`)
        for domain in self.groups.members.keys() {
            add(domain, summary::MEMBER);
        }
        filter
    }
}

/// The position an id table's slot was placed by: its row's id's hash.
pub(super) fn id_pos(shards: &[Arc<super::shard::Shard>], slot: u64) -> u32 {
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

pub(super) fn set_group(data: &mut IndexData, name: String, domains: Vec<String>) {
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
    // a member the new definition keeps stays as it is counted, not taken out and put back
    // (its slot would count as gone, and the sites filter be made again sooner)
    let kept: hashbrown::HashSet<Box<str>> = members.iter().cloned().collect();
    for domain in old.iter().filter(|d| !kept.contains(*d)) {
        if let Some(names) = groups.members.get_mut(domain) {
            let had = names.len();
            names.retain(|n| *n != name);
            if names.len() < had {
                left.push(domain.clone());
            }
            if names.is_empty() {
                groups.members.remove(domain);
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
