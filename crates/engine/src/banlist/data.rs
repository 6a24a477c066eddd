//! One immutable snapshot of the index, and everything a reader asks of it.

use std::sync::Arc;

use super::chunks::Chunks;
use super::filter::{self, Filter, FilterEvent};
use super::names::{path_of, prefix_keys, prefix_order, suffixes, url_key, url_path, UrlPath};
use super::shard::{RowData, RowRef, Shard};
use super::summary::{self, Counts, HostSummary};
use super::table::Table;
use super::{hash_str, shard_of, summary_of, tag_of, Scope, SCOPES, SHARDS, SUMMARIES};

/// Bit set in the id code of an id that is not a plain decimal number.
pub const NAMED: u64 = 1 << 63;
pub(super) const META_CHUNK: usize = 1024;

/// What repeats across entries: interned once, a row holds its number.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Meta {
    /// Why the entry was made.
    pub reason: Box<str>,
    /// Who made it.
    pub actor: Box<str>,
    /// Where it applies, sorted; empty: everywhere.
    pub regions: Box<[Box<str>]>,
}

impl Meta {
    /// Whether an entry with this meta applies in `region`.
    #[inline]
    pub fn covers(&self, region: Option<&str>) -> bool {
        self.regions.is_empty() || region.is_some_and(|r| self.regions.iter().any(|x| &**x == r))
    }
}

/// Ids that are not plain decimals (tests, hand-made indexes): a code each.
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// Code index -> the id.
    pub names: Vec<Box<str>>,
    /// The id -> its code.
    pub codes: hashbrown::HashMap<Box<str>, u64>,
}

/// The org groups: name -> member domains, in definition order; and the reverse.
#[derive(Clone, Debug, Default)]
pub struct Groups {
    /// Every group, in the order first defined.
    pub order: Vec<(Box<str>, Vec<Box<str>>)>,
    /// A member domain -> the groups holding it.
    pub members: hashbrown::HashMap<Box<str>, Vec<Box<str>>>,
}

/// A snapshot of the whole index (see the module doc of `banlist`).
#[derive(Clone, Debug)]
pub struct IndexData {
    pub(super) shards: Vec<Arc<Shard>>,
    /// The summary of the names whose `summary::name_hash` falls in each summary table
    /// (`summary_of`; as many as there are, by type: a lookup needs no bounds check).
    pub(super) summary: Box<[Chunks; SUMMARIES]>,
    /// The sites filter: three bits for each name the summary counts (see `filter`), what a
    /// page of lookups reads of a clean site.
    pub(super) filter: Filter,
    /// Names the summary counts (its slots), and how many slots went since the filter was
    /// made (each may leave bits set: `filter`): what tells the writer to make it again.
    pub(super) slots: usize,
    pub(super) gone: usize,
    /// Times the filter was made again (since the index was made).
    pub(super) refreshed: u64,
    /// While a filter is being made again aside, what this batch told the filter (the
    /// writer's; a published snapshot holds None).
    pub(super) filter_log: Option<Vec<FilterEvent>>,
    pub(super) ids: Vec<Arc<Table<u64>>>,
    pub(super) metas: Vec<Arc<Vec<Meta>>>,
    pub(super) metas_len: usize,
    pub(super) names: Arc<Names>,
    pub(super) groups: Arc<Groups>,
    pub(super) counts: [usize; 5],
    pub(super) len: usize,
    pub(super) labels: usize,
    pub(super) next_ord: u32,
    pub(super) max_number: i64,
    /// The version of the list (its store's seq) this snapshot holds, published with it:
    /// a request reports the version of the very data it matched.
    pub(super) version: i64,
}

impl Default for IndexData {
    fn default() -> Self {
        IndexData {
            shards: vec![Arc::default(); SHARDS],
            summary: Box::new(std::array::from_fn(|_| Chunks::default())),
            filter: Filter::default(),
            slots: 0,
            gone: 0,
            refreshed: 0,
            filter_log: None,
            ids: vec![Arc::default(); SHARDS],
            metas: Vec::new(),
            metas_len: 0,
            names: Arc::default(),
            groups: Arc::default(),
            counts: [0; 5],
            len: 0,
            labels: 1,
            next_ord: 0,
            max_number: -1,
            version: 0,
        }
    }
}

/// An entry that matched, borrowed from the snapshot it was found in.
#[derive(Clone, Copy, Debug)]
pub struct Hit<'a> {
    /// The entry's id code: the id itself when it is a plain decimal (as the stores' are).
    pub id: u64,
    /// Its scope's name.
    pub scope: &'a str,
    /// Its value.
    pub value: &'a str,
    /// Where it is.
    pub at: RowRef,
    data: &'a IndexData,
}

impl Hit<'_> {
    /// The audit reason the banlist rule writes: `domain example.org banned (legal) [entry 12]`.
    pub fn describe(&self) -> String {
        let reason = &self.data.meta(self.at).reason;
        let id = self.data.id_text(self.id);
        format!(
            "{} {} banned ({reason}) [entry {id}]",
            self.scope, self.value
        )
    }

    /// The entry's id as written.
    pub fn id_text(&self) -> String {
        self.data.id_text(self.id)
    }

    /// The entry's reason.
    pub fn reason(&self) -> &str {
        &self.data.meta(self.at).reason
    }
}

/// The first key a summarized URL's lookup reads, as a page of lookups finds it ahead: its
/// scope and hash, and the row of the first key slot holding its tag (when none does, the
/// key has no row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct First {
    /// The key's scope.
    pub scope: Scope,
    /// Its `hash_str`.
    pub hash: u64,
    /// The row of the first key slot (in probe order) holding its tag.
    pub row: Option<u32>,
    /// A prefix key's: where the URL's path ends in its url key (which is `host + path +
    /// …`), so that the lookup does not find the path again.
    pub path_end: u32,
}

impl First {
    /// The row the probe for `scope`'s key hashed `hash` meets first, when this is that
    /// key: `Some(None)` when no slot holds its tag.
    #[inline]
    fn of(first: Option<First>, scope: Scope, hash: u64) -> Option<Option<u32>> {
        first
            .filter(|f| f.scope == scope && f.hash == hash)
            .map(|f| f.row)
    }
}

/// An entry that covers a URL, active or not, and the expression it covers it through.
#[derive(Clone, Debug)]
pub struct Match {
    /// Where the entry is.
    pub at: RowRef,
    /// `url …`, `prefix … covers path …`, `host …`, `domain … (…)`, `org …: member domain …`.
    pub expression: String,
}

/// The smallest-ord active row among `rows` (the first in insertion order).
#[inline(always)]
fn first_active(
    data: &IndexData,
    best: &mut Option<(u32, RowRef)>,
    at: RowRef,
    region: Option<&str>,
    now: f64,
) {
    let (ord, expires, regional) = data.shards[at.shard as usize].activity(at.row);
    if best.is_some_and(|(o, _)| o <= ord) {
        return;
    }
    let covered = match regional {
        Some(i) => data.meta_at(i).covers(region),
        None => true,
    };
    if unexpired(expires, now) && covered {
        *best = Some((ord, at));
    }
}

impl IndexData {
    /// How many entries.
    /// The version of the list this snapshot holds (`BanIndex.apply(version=)`).
    pub fn version(&self) -> i64 {
        self.version
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries per scope, in [`SCOPES`] order.
    pub fn counts(&self) -> [usize; 5] {
        self.counts
    }

    /// The org groups.
    pub fn groups(&self) -> &Groups {
        &self.groups
    }

    /// The value and fields of a row.
    pub fn row(&self, at: RowRef) -> (&str, RowData) {
        let shard = &self.shards[at.shard as usize];
        (shard.value(at.row), shard.data(at.row))
    }

    /// The meta of a row.
    #[inline]
    pub fn meta(&self, at: RowRef) -> &Meta {
        let i = self.shards[at.shard as usize].meta(at.row) as usize;
        &self.metas[i / META_CHUNK][i % META_CHUNK]
    }

    /// The meta numbered `i` (writers check whether an interned meta is still the same).
    pub fn meta_at(&self, i: u32) -> &Meta {
        let i = i as usize;
        &self.metas[i / META_CHUNK][i % META_CHUNK]
    }

    /// Unexpired at `now`, and global or covering `region`.
    #[inline]
    pub fn active(&self, at: RowRef, region: Option<&str>, now: f64) -> bool {
        let expires = self.shards[at.shard as usize].expires(at.row);
        unexpired(expires, now) && self.meta(at).covers(region)
    }

    /// An id code as the id's text.
    pub fn id_text(&self, code: u64) -> String {
        if code & NAMED != 0 {
            let i = (code & !NAMED) as usize;
            self.names
                .names
                .get(i)
                .map(|n| n.to_string())
                .unwrap_or_default()
        } else {
            code.to_string()
        }
    }

    /// The code of an id, if the index has ever seen it (numeric ids always have one).
    pub fn code_of(&self, id: &str) -> Option<u64> {
        match numeric_id(id) {
            Some(n) => Some(n),
            None => self.names.codes.get(id).copied(),
        }
    }

    /// Where the entry with this id code is.
    pub fn find_code(&self, code: u64) -> Option<RowRef> {
        let h = id_hash(code);
        self.ids[shard_of(h)]
            .probe(h as u32)
            .map(id_ref)
            .find(|at| self.shards[at.shard as usize].id(at.row) == code)
    }

    /// Where the entry with this id is.
    pub fn find(&self, id: &str) -> Option<RowRef> {
        self.find_code(self.code_of(id)?)
    }

    /// Rows of `scope` keyed exactly `key`, in insertion order.
    pub fn rows_for(&self, scope: Scope, key: &str) -> Vec<RowRef> {
        let h = hash_str(key);
        let s = shard_of(h);
        let shard = &self.shards[s];
        let mut rows: Vec<RowRef> = shard
            .rows(scope, key, tag_of(scope, h))
            .map(|row| RowRef {
                shard: s as u32,
                row,
            })
            .collect();
        rows.sort_unstable_by_key(|at| shard.ord(at.row));
        rows
    }

    #[inline]
    fn best_of(
        &self,
        scope: Scope,
        key: &str,
        region: Option<&str>,
        now: f64,
    ) -> Option<(u32, RowRef)> {
        self.best_hashed(scope, key, hash_str(key), false, region, now)
    }

    /// `best_hashed`, given what a page of lookups found of the key ahead (`First::of`):
    /// no row when no slot holds its tag, and when at most one row has the key and the
    /// first slot holding its tag is that key's, that row without probing again.
    #[inline]
    pub(super) fn best_known(
        &self,
        scope: Scope,
        key: &str,
        (h, known): (u64, Option<Option<u32>>),
        single: bool,
        region: Option<&str>,
        now: f64,
    ) -> Option<(u32, RowRef)> {
        match known {
            Some(None) => None,
            Some(Some(row)) if single && self.shards[shard_of(h)].is_keyed(row, scope, key) => {
                let mut best = None;
                let at = RowRef {
                    shard: shard_of(h) as u32,
                    row,
                };
                first_active(self, &mut best, at, region, now);
                best
            }
            _ => self.best_hashed(scope, key, h, single, region, now),
        }
    }

    /// The first active row of `scope` keyed `key`, hashed `h`; `single`: the summary says
    /// there is at most one such row (the probe stops at it).
    #[inline]
    fn best_hashed(
        &self,
        scope: Scope,
        key: &str,
        h: u64,
        single: bool,
        region: Option<&str>,
        now: f64,
    ) -> Option<(u32, RowRef)> {
        let s = shard_of(h);
        let mut best = None;
        if single {
            let row = self.shards[s].first_row(scope, key, tag_of(scope, h))?;
            let at = RowRef {
                shard: s as u32,
                row,
            };
            first_active(self, &mut best, at, region, now);
            return best;
        }
        self.shards[s].each_row(scope, key, tag_of(scope, h), |row| {
            let at = RowRef {
                shard: s as u32,
                row,
            };
            first_active(self, &mut best, at, region, now);
        });
        best
    }

    /// Whether url (bit 1) and prefix (bit 2) entries lie under `host`.
    pub fn under(&self, host: &str) -> u8 {
        self.summary(summary::name_hash(host)).under()
    }

    /// The summary of the name hashed `h` (see `summary`).
    #[inline(always)]
    fn summary(&self, h: u64) -> Counts {
        summary::counts(&self.summary[summary_of(h)], h)
    }

    /// The summaries of `host` and of the names a domain or org entry covering it could be at.
    #[inline]
    fn host_summary(&self, host: &str) -> HostSummary {
        HostSummary::of(host, self.labels, &self.summary[..])
    }

    /// The names a domain or org ban of this host is looked up under, most specific first.
    pub fn domain_keys<'h>(&self, host: &'h str) -> Vec<&'h str> {
        suffixes(host, self.labels)
    }

    /// The first active host, domain or org entry covering `host` (the host's own first,
    /// then each parent's domain entries, then its org entries), and whether url or
    /// prefix entries lie under the host.
    pub fn host_verdict(
        &self,
        host: &str,
        region: Option<&str>,
        now: f64,
    ) -> (Option<RowRef>, bool) {
        let names = self.host_summary(host);
        (
            self.covering(host, &names, None, region, now),
            names.own.under() != 0,
        )
    }

    /// Only the names whose summary holds something are looked up in the key tables (and
    /// verified there).
    fn covering(
        &self,
        host: &str,
        names: &HostSummary,
        first: Option<First>,
        region: Option<&str>,
        now: f64,
    ) -> Option<RowRef> {
        if names.own.has(summary::HOST) {
            // the walk hashed the host when it read its counts
            let h = names.own_hash;
            if let Some((_, at)) = self.best_known(
                Scope::Host,
                host,
                (h, First::of(first, Scope::Host, h)),
                names.own.single(summary::HOST),
                region,
                now,
            ) {
                return Some(at);
            }
        }
        if names.no_parents() {
            return None;
        }
        match names.flagged() {
            Some(list) => list.into_iter().find_map(|c| {
                let known = First::of(first, Scope::Domain, c.hash);
                self.parent_entry(&host[c.start as usize..], c, known, region, now)
            }),
            None => suffixes(host, self.labels).into_iter().find_map(|name| {
                let hash = summary::name_hash(name);
                let counts = self.summary(hash);
                let c = summary::Candidate {
                    start: 0,
                    counts,
                    hash,
                };
                self.parent_entry(name, c, None, region, now)
            }),
        }
    }

    /// The first active domain entry of `name`, else its first active org entry; `known`:
    /// what a page found ahead of the domain key (`First::of`).
    fn parent_entry(
        &self,
        name: &str,
        c: summary::Candidate,
        known: Option<Option<u32>>,
        region: Option<&str>,
        now: f64,
    ) -> Option<RowRef> {
        if c.counts.has(summary::DOMAIN) {
            // the walk hashed the name when it read its counts
            if let Some((_, at)) = self.best_known(
                Scope::Domain,
                name,
                (c.hash, known),
                c.counts.single(summary::DOMAIN),
                region,
                now,
            ) {
                return Some(at);
            }
        }
        if c.counts.has(summary::MEMBER) && self.counts[Scope::Org as usize] > 0 {
            let groups = self.groups.members.get(name)?;
            let best = groups
                .iter()
                .filter_map(|group| self.best_of(Scope::Org, group, region, now))
                .min_by_key(|(ord, _)| *ord);
            return best.map(|(_, at)| at);
        }
        None
    }

    /// The first active url entry of the URL, else its most specific active prefix entry;
    /// nothing is looked at when no url or prefix entry lies under `host`.
    pub fn match_url(
        &self,
        canonical: &str,
        host: &str,
        region: Option<&str>,
        now: f64,
    ) -> Option<RowRef> {
        let own = self.summary(summary::name_hash(host));
        self.match_under(canonical, host, own, None, region, now)
    }

    /// `first`: the first url or prefix key the lookup reads, as a page of lookups found it
    /// (see [`First`]).
    #[inline]
    fn match_under(
        &self,
        canonical: &str,
        host: &str,
        own: Counts,
        first: Option<First>,
        region: Option<&str>,
        now: f64,
    ) -> Option<RowRef> {
        let under = own.under();
        if under == 0 {
            return None;
        }
        // at most one url (prefix) entry under the host: at most one row per key
        let single = |scope: Scope| match scope {
            Scope::Url => own.single(summary::URL),
            _ => own.single(summary::PREFIX),
        };
        // the first key's rows when the page has looked for its tag
        let known = |scope: Scope, key: &str| match first {
            Some(f) if f.scope == scope => {
                let h = (f.hash, Some(f.row));
                self.best_known(scope, key, h, single(scope), region, now)
            }
            _ => self.best_hashed(scope, key, hash_str(key), single(scope), region, now),
        };
        if under & 1 != 0 {
            if let Some((_, at)) = known(Scope::Url, url_key(canonical)) {
                return Some(at);
            }
        }
        if under & 2 != 0 {
            // the keys are prefixes of the url key when it is `host + path + …` (always, for
            // a canonical URL and its own host)
            let UrlPath {
                whole,
                path,
                sliced,
            } = match first {
                Some(f) if f.scope == Scope::Prefix => {
                    let whole = url_key(canonical);
                    UrlPath {
                        whole,
                        path: whole.get(host.len()..f.path_end as usize),
                        sliced: true,
                    }
                }
                _ => url_path(canonical, host),
            };
            let path = path?;
            let mut key = String::new();
            // the first key is the one the page found ahead (`first_key`, in this order)
            for (k, len) in prefix_order(path, single(Scope::Prefix)).enumerate() {
                let key: &str = if sliced {
                    &whole[..host.len() + len]
                } else {
                    key.clear();
                    key.push_str(host);
                    key.push_str(&path[..len]);
                    &key
                };
                let found = if k == 0 && sliced {
                    known(Scope::Prefix, key)
                } else {
                    let (single, h) = (single(Scope::Prefix), hash_str(key));
                    self.best_hashed(Scope::Prefix, key, h, single, region, now)
                };
                if let Some((_, at)) = found {
                    return Some(at);
                }
            }
        }
        None
    }

    /// The most specific active entry for a canonical URL: url, prefix, host, domain, org.
    pub fn match_any(
        &self,
        canonical: &str,
        host: &str,
        region: Option<&str>,
        now: f64,
    ) -> Option<RowRef> {
        let names = self.host_summary(host);
        if names.is_clean() {
            return None;
        }
        self.match_summarized(canonical, host, &names, None, region, now)
    }

    /// `match_any` once the summary of the host's names holds something.
    pub(super) fn match_summarized(
        &self,
        canonical: &str,
        host: &str,
        names: &HostSummary,
        first: Option<First>,
        region: Option<&str>,
        now: f64,
    ) -> Option<RowRef> {
        self.match_under(canonical, host, names.own, first, region, now)
            .or_else(|| self.covering(host, names, first, region, now))
    }

    /// The entry the banlist rule removes a document for: the host's (or a parent's) host,
    /// domain or org entry, overridden by a more specific url or prefix entry under the
    /// host; region-scoped entries only in their regions; expired entries never.
    pub fn lookup(
        &self,
        canonical: &str,
        host: &str,
        region: Option<&str>,
        now: f64,
    ) -> Option<Hit<'_>> {
        self.match_any(canonical, host, region, now)
            .map(|at| self.hit(at))
    }

    /// The [`Hit`] of `row`, found by the tag of `scope`'s key `key` hashed `h` in its shard
    /// `on` (`shards[shard_of(h)]`), when the summary says at most one row has the key
    /// (`single`), the row is that key's, and it is active: `best_known`'s answer, the row
    /// read once.
    #[inline(always)]
    pub(super) fn single_hit<'a>(
        &'a self,
        on: &'a Shard,
        (scope, key, h): (Scope, &str, u64),
        row: u32,
        region: Option<&str>,
        now: f64,
    ) -> Option<Hit<'a>> {
        let shard = shard_of(h);
        let (id, expires, regional, value) = on.keyed_hit(row, scope, key)?;
        let covered = match regional {
            Some(i) => self.meta_at(i).covers(region),
            None => true,
        };
        (unexpired(expires, now) && covered).then(|| Hit {
            id,
            scope: scope.name(),
            value,
            at: RowRef {
                shard: shard as u32,
                row,
            },
            data: self,
        })
    }

    /// The row as a [`Hit`].
    #[inline]
    pub fn hit(&self, at: RowRef) -> Hit<'_> {
        let (id, scope, value) = self.shards[at.shard as usize].hit_parts(at.row);
        Hit {
            id,
            scope: scope.name(),
            value,
            at,
            data: self,
        }
    }

    /// Every entry, active or not, whose value covers the URL, with the expression.
    pub fn explain(&self, canonical: &str, host: &str) -> Vec<Match> {
        let mut out = Vec::new();
        let key = url_key(canonical);
        for at in self.rows_for(Scope::Url, key) {
            out.push(Match {
                at,
                expression: format!("url {key}"),
            });
        }
        if self.under(host) & 2 != 0 {
            if let Some(path) = path_of(canonical) {
                for key in prefix_keys(host, path) {
                    for at in self.rows_for(Scope::Prefix, &key) {
                        let value = self.shards[at.shard as usize].value(at.row);
                        out.push(Match {
                            at,
                            expression: format!("prefix {value} covers path {path}"),
                        });
                    }
                }
            }
        }
        for at in self.rows_for(Scope::Host, host) {
            out.push(Match {
                at,
                expression: format!("host {host}"),
            });
        }
        for suffix in suffixes(host, self.labels) {
            let how = if suffix == host {
                "the domain itself".to_string()
            } else {
                format!("a parent of {host}")
            };
            for at in self.rows_for(Scope::Domain, suffix) {
                out.push(Match {
                    at,
                    expression: format!("domain {suffix} ({how})"),
                });
            }
            if let Some(names) = self.groups.members.get(suffix) {
                let mut rows: Vec<RowRef> = names
                    .iter()
                    .flat_map(|n| self.rows_for(Scope::Org, n))
                    .collect();
                rows.sort_unstable_by_key(|at| self.shards[at.shard as usize].ord(at.row));
                for at in rows {
                    let name = self.shards[at.shard as usize].value(at.row);
                    out.push(Match {
                        at,
                        expression: format!("org {name}: member domain {suffix} ({how})"),
                    });
                }
            }
        }
        out
    }

    /// Every row, in insertion order (oldest first).
    pub fn all_rows(&self) -> Vec<RowRef> {
        self.rows_where(|_, _| true)
    }

    /// Rows for which `keep(shard, row)` holds, in insertion order.
    pub fn rows_where(&self, keep: impl Fn(&Shard, u32) -> bool) -> Vec<RowRef> {
        let mut rows: Vec<(u32, RowRef)> = Vec::new();
        for (s, shard) in self.shards.iter().enumerate() {
            for row in 0..shard.len() as u32 {
                if keep(shard, row) {
                    rows.push((
                        shard.ord(row),
                        RowRef {
                            shard: s as u32,
                            row,
                        },
                    ));
                }
            }
        }
        rows.sort_unstable_by_key(|(ord, _)| *ord);
        rows.into_iter().map(|(_, at)| at).collect()
    }

    /// Entries expired at `now`, oldest first.
    pub fn expired(&self, now: f64) -> Vec<RowRef> {
        let mut rows: Vec<(u32, RowRef)> = Vec::new();
        for (s, shard) in self
            .shards
            .iter()
            .enumerate()
            .filter(|(_, sh)| sh.expiring > 0)
        {
            for row in 0..shard.len() as u32 {
                if shard.expires(row) <= now {
                    rows.push((
                        shard.ord(row),
                        RowRef {
                            shard: s as u32,
                            row,
                        },
                    ));
                }
            }
        }
        rows.sort_unstable_by_key(|(ord, _)| *ord);
        rows.into_iter().map(|(_, at)| at).collect()
    }

    /// How many entries are unexpired at `now`.
    pub fn active_count(&self, now: f64) -> usize {
        let gone: usize = self
            .shards
            .iter()
            .filter(|sh| sh.expiring > 0)
            .map(|sh| {
                (0..sh.len() as u32)
                    .filter(|&r| sh.expires(r) <= now)
                    .count()
            })
            .sum();
        self.len - gone
    }

    /// Up to `limit` unexpired entries after id `after`, and whether more follow: numeric
    /// ids by number, then the other ids by string.
    pub fn page(&self, after: Option<&str>, limit: usize, now: f64) -> (Vec<RowRef>, bool) {
        let want = limit + 1;
        let number = after
            .map(|a| numeric_id(a).map_or(-1, |n| n as i64))
            .unwrap_or(-1);
        let mut rows = if after.is_none() || number >= 0 {
            self.numbered(number, want, now)
        } else {
            Vec::new()
        };
        if rows.len() < want {
            let mut named: Vec<(&str, RowRef)> = self
                .names
                .codes
                .iter()
                .filter(|(name, _)| {
                    after.is_none() || number >= 0 || after.is_some_and(|a| &***name > a)
                })
                .filter_map(|(name, &code)| Some((&**name, self.find_code(code)?)))
                .filter(|(_, at)| unexpired(self.shards[at.shard as usize].expires(at.row), now))
                .collect();
            named.sort_unstable_by(|a, b| a.0.cmp(b.0));
            rows.extend(named.into_iter().take(want - rows.len()).map(|(_, at)| at));
        }
        let more = rows.len() > limit;
        rows.truncate(limit);
        (rows, more)
    }

    fn numbered(&self, after: i64, want: usize, now: f64) -> Vec<RowRef> {
        let live = |at: RowRef| unexpired(self.shards[at.shard as usize].expires(at.row), now);
        let mut rows = Vec::new();
        let (mut n, mut budget) = (after + 1, 8 * want + 1024);
        while n <= self.max_number && rows.len() < want && budget > 0 {
            if let Some(at) = self.find_code(n as u64).filter(|&at| live(at)) {
                rows.push(at);
            }
            n += 1;
            budget -= 1;
        }
        if budget > 0 {
            return rows;
        }
        // wide gaps: one pass over the ids instead
        let mut found: Vec<(u64, RowRef)> = Vec::new();
        for (s, shard) in self.shards.iter().enumerate() {
            for row in 0..shard.len() as u32 {
                let id = shard.id(row);
                let at = RowRef {
                    shard: s as u32,
                    row,
                };
                if id & NAMED == 0 && id as i64 > after && live(at) {
                    found.push((id, at));
                }
            }
        }
        found.sort_unstable_by_key(|(id, _)| *id);
        found.into_iter().take(want).map(|(_, at)| at).collect()
    }

    /// Bytes the snapshot's own structures hold (capacities; the allocator's overhead aside).
    pub fn bytes(&self) -> usize {
        let shards: usize = self.shards.iter().map(|s| s.bytes()).sum();
        let summary: usize = self.summary.iter().map(|t| t.bytes()).sum();
        let ids: usize = self.ids.iter().map(|t| t.bytes()).sum();
        shards + summary + self.filter.bytes() + ids + self.metas_len * std::mem::size_of::<Meta>()
    }

    /// The share of the sites filter's bits that are set: what decides how often a clean
    /// site goes on from its three bits to its summary probe (all three set).
    pub fn filter_fill(&self) -> f64 {
        self.filter.count() as f64 / (1u64 << filter::BITS) as f64
    }

    /// The scope counts as (name, count) pairs.
    pub fn named_counts(&self) -> impl Iterator<Item = (&'static str, usize)> + '_ {
        SCOPES.iter().map(|s| (s.name(), self.counts[*s as usize]))
    }
}

/// Not expired at `now`: the expiry is NaN (never) or later (`not expires <= now`).
#[inline]
pub fn unexpired(expires: f64, now: f64) -> bool {
    !matches!(
        expires.partial_cmp(&now),
        Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
    )
}

/// `columns.numeric_id`: a plain decimal of at most 18 digits without a leading zero.
pub fn numeric_id(id: &str) -> Option<u64> {
    let b = id.as_bytes();
    if b.is_empty()
        || b.len() > 18
        || !b.iter().all(u8::is_ascii_digit)
        || (b[0] == b'0' && b.len() > 1)
    {
        return None;
    }
    id.parse().ok()
}

/// The hash an id code is placed by in the id tables.
#[inline]
pub fn id_hash(code: u64) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x1D5).hash_one(code)
}

const ID_SHIFT: u32 = 40;

/// An id table's slot for a row.
#[inline]
pub fn id_slot(at: RowRef) -> u64 {
    (u64::from(at.shard) << ID_SHIFT) | (u64::from(at.row) + 1)
}

/// The row an id table's slot points at.
#[inline]
pub fn id_ref(slot: u64) -> RowRef {
    RowRef {
        shard: (slot >> ID_SHIFT) as u32,
        row: ((slot & ((1 << ID_SHIFT) - 1)) - 1) as u32,
    }
}
