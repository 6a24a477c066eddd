//! The index's lookups against a plain model: the entries in a list, every rule of
//! `IndexData::lookup` applied by scanning it. Random batches of adds, removals and group
//! definitions over a small universe of hosts (deep ones, long ones, addresses, empty
//! labels, many entries on one name so that the summary's counts saturate), and after
//! each batch every URL is asked of both, one by one and as a page.

use std::collections::HashMap;

use super::names::{path_of, prefix_keys, suffixes, url_key};
use super::{BanIndex, Change, IndexData, NewEntry, Scope};

#[derive(Clone, Debug)]
struct Entry {
    id: String,
    scope: Scope,
    value: String,
    expires: Option<f64>,
    regions: Vec<String>,
}

#[derive(Clone, Default)]
struct Model {
    entries: Vec<Entry>, // insertion order
    groups: HashMap<String, Vec<String>>,
}

impl Model {
    fn apply(&mut self, change: &Change) {
        match change {
            Change::Add(e) => {
                self.entries.retain(|x| x.id != e.id);
                self.entries.push(Entry {
                    id: e.id.clone(),
                    scope: e.scope,
                    value: e.value.clone(),
                    expires: e.expires,
                    regions: e.regions.clone(),
                });
            }
            Change::Remove(id) => self.entries.retain(|x| x.id != *id),
            Change::Group(name, members) => {
                self.groups.insert(name.clone(), members.clone());
            }
        }
    }

    /// The first active entry (insertion order) that `keyed` accepts.
    fn first(
        &self,
        region: Option<&str>,
        now: f64,
        keyed: impl Fn(&Entry) -> bool,
    ) -> Option<&Entry> {
        self.entries.iter().find(|e| {
            let unexpired = e.expires.map_or(true, |t| t > now);
            let here =
                e.regions.is_empty() || region.is_some_and(|r| e.regions.iter().any(|x| x == r));
            unexpired && here && keyed(e)
        })
    }

    fn lookup(
        &self,
        canonical: &str,
        host: &str,
        region: Option<&str>,
        now: f64,
    ) -> Option<&Entry> {
        let first = |scope: Scope, key: &str| {
            self.first(region, now, |e| {
                e.scope == scope && scope.key_of(&e.value) == key
            })
        };
        if let Some(e) = first(Scope::Url, url_key(canonical)) {
            return Some(e);
        }
        if let Some(path) = path_of(canonical) {
            if let Some(e) = prefix_keys(host, path)
                .iter()
                .find_map(|k| first(Scope::Prefix, k))
            {
                return Some(e);
            }
        }
        if let Some(e) = first(Scope::Host, host) {
            return Some(e);
        }
        suffixes(host, usize::MAX).into_iter().find_map(|name| {
            first(Scope::Domain, name).or_else(|| {
                self.first(region, now, |e| {
                    e.scope == Scope::Org
                        && self
                            .groups
                            .get(&e.value)
                            .is_some_and(|m| m.iter().any(|d| d == name))
                })
            })
        })
    }
}

use crate::testing::Xorshift as Rng;

const LABELS: [&str; 12] = [
    "a",
    "b",
    "co",
    "uk",
    "com",
    "www",
    "xn--p1ai",
    "1",
    "2",
    "",
    "a-rather-long-label-that-passes-a-window",
    "cdn",
];
const PATHS: [&str; 7] = ["/", "/p", "/p/", "/p/x", "/p//q/", "/p?q=1", "/q/r?s"];

fn hosts(rng: &mut Rng) -> Vec<String> {
    let mut hosts: Vec<String> = ["1.2.3.4", "9.1.2.3.4", "[::1]", "localhost", "a.com"]
        .map(String::from)
        .to_vec();
    while hosts.len() < 40 {
        let labels = 1 + rng.next() as usize % 11;
        let host: Vec<&str> = (0..labels).map(|_| *rng.pick(&LABELS)).collect();
        hosts.push(host.join("."));
    }
    hosts
}

fn change(rng: &mut Rng, hosts: &[String], ids: usize) -> Change {
    let id = (1 + rng.next() as usize % ids).to_string();
    let host = rng.pick(hosts).clone();
    // a name of the host: itself or a parent (where domain entries and members sit)
    let names = suffixes(&host, usize::MAX);
    let name = names
        .get(rng.next() as usize % names.len().max(1))
        .map_or(host.as_str(), |n| n);
    match rng.next() % 12 {
        0 => return Change::Remove(id),
        1 => {
            let mut members: Vec<String> = (0..1 + rng.next() % 3)
                .map(|_| rng.pick(hosts))
                .flat_map(|h| suffixes(h, usize::MAX).first().map(|n| n.to_string()))
                .collect();
            members.push(name.to_string());
            members.dedup();
            return Change::Group(rng.pick(&["g", "h"]).to_string(), members);
        }
        _ => {}
    }
    let (scope, value) = match rng.next() % 6 {
        0 | 1 => (Scope::Domain, name.to_string()),
        2 => (Scope::Host, host.clone()),
        3 => (
            Scope::Url,
            format!("{host}{}", rng.pick(&["/p?q=1", "/p/x", "/"])),
        ),
        4 => (
            Scope::Prefix,
            format!("{host}{}", rng.pick(&["/p/", "/p", "/", "/p//q"])),
        ),
        _ => (Scope::Org, rng.pick(&["g", "h"]).to_string()),
    };
    Change::Add(NewEntry {
        id,
        scope,
        value,
        reason: "r".into(),
        actor: "a".into(),
        created: 0.0,
        expires: *rng.pick(&[None, None, Some(5.0), Some(50.0)]),
        regions: rng.pick(&[vec![], vec![], vec!["DE".to_string()]]).clone(),
    })
}

fn agree(data: &IndexData, model: &Model, urls: &[(String, String)]) {
    for region in [None, Some("DE"), Some("FR")] {
        for now in [1.0, 10.0, 100.0] {
            let page = super::page::spread_in_order(
                data.lookup_page(urls, |(c, h)| (c, h), region, now),
                urls.len(),
            );
            for ((canonical, host), paged) in urls.iter().zip(page) {
                let want = model.lookup(canonical, host, region, now);
                let got = data.lookup(canonical, host, region, now);
                let key = |id: String, scope: &str, value: &str| {
                    (id, scope.to_string(), value.to_string())
                };
                let want = want.map(|e| key(e.id.clone(), e.scope.name(), &e.value));
                let as_key = |h: Option<super::Hit>| h.map(|h| key(h.id_text(), h.scope, h.value));
                assert_eq!(as_key(got), want, "{canonical} {region:?} {now}");
                assert_eq!(as_key(paged), want, "page: {canonical} {region:?} {now}");
            }
        }
    }
}

#[test]
fn lookups_agree_with_a_scan_of_the_entries() {
    agree_over_random_batches(None);
}

#[test]
fn lookups_agree_while_the_sites_filter_is_made_again_aside() {
    // a filter made again from nearly every batch's snapshot, on its thread, while the
    // next batches are applied and told to it: put in by a batch when it is ready, or
    // waited for
    agree_over_random_batches(Some(2));
}

/// `agree` after each of many random batches; `refresh`: the writer makes the sites filter
/// again once that many slots have gone (and a quarter of those held).
fn agree_over_random_batches(refresh: Option<usize>) {
    let mut refreshed = 0;
    for seed in 1..=12u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let hosts = hosts(&mut rng);
        let urls: Vec<(String, String)> = hosts
            .iter()
            .flat_map(|h| {
                PATHS
                    .iter()
                    .map(move |p| (format!("https://{h}{p}"), h.clone()))
            })
            .collect();
        let index = BanIndex::empty();
        if let Some(least) = refresh {
            index.with_writer(|w| w.refresh_past(least));
        }
        let mut model = Model::default();
        // few ids on few names: names collect many entries (their counts saturate) and
        // lose them again
        let ids = [8, 40, 200][seed as usize % 3];
        for round in 0..25 {
            let batch: Vec<Change> = (0..1 + rng.next() % 40)
                .map(|_| change(&mut rng, &hosts, ids))
                .collect();
            let (before, earlier) = (index.snapshot(), model.clone());
            batch.iter().for_each(|c| model.apply(c));
            index.apply_iter(batch).expect("a batch applies");
            if refresh.is_some() && round % 2 == 1 {
                // the housekeeping's call: a filter made by now is published between batches
                index.publish_ready_filter();
            }
            let after = index.snapshot();
            agree(&after, &model, &urls);
            // the sites filter kept up by the writes sets no word the summary has no slot
            // for (it misses no name: `agree` looked every URL up through it), and the
            // snapshot a reader held keeps its own
            for data in [&after, &before] {
                assert_eq!(
                    data.filter.words_without_slots(&data.summary),
                    0,
                    "seed {seed} round {round}"
                );
                assert!(data.filter.addresses_hold());
            }
            if round % 5 == 0 {
                // the snapshot a reader held answers as it did before the batch
                agree(&before, &earlier, &urls);
            }
            if refresh.is_some() && round % 5 == 4 {
                // a filter made again and told what came since holds every name counted
                // now, and sets no word without a slot
                index.finish_refresh().expect("the writer");
                let data = index.snapshot();
                agree(&data, &model, &urls);
                assert!(data.filter.contains(&data.fresh_filter()), "seed {seed}");
                assert_eq!(data.filter.words_without_slots(&data.summary), 0);
            }
        }
        refreshed += index.snapshot().refreshed;
    }
    if refresh.is_some() {
        assert!(refreshed >= 12, "filters made again: {refreshed}");
    } else {
        assert_eq!(refreshed, 0);
    }
}

fn domain(i: usize) -> Change {
    Change::Add(NewEntry {
        id: i.to_string(),
        scope: Scope::Domain,
        value: format!("s{i}.example"),
        reason: "r".into(),
        actor: "a".into(),
        created: 0.0,
        expires: None,
        regions: Vec::new(),
    })
}

#[test]
fn the_sites_filter_is_made_again_once_a_quarter_of_its_names_have_gone() {
    let removals = |ids: std::ops::Range<usize>| ids.map(|i| Change::Remove(i.to_string()));
    let refreshed = |index: &BanIndex| {
        // (what a batch now would find: a filter being made is waited for first)
        index.finish_refresh().expect("the writer");
        index.snapshot().refreshed
    };
    // a quarter of the names, but fewer than `REFRESH_LEAST`; then that many
    let index = BanIndex::empty();
    index.apply_iter((0..8000).map(domain)).expect("a build");
    index.apply_iter(removals(0..4095)).expect("removals");
    assert_eq!((index.snapshot().gone, refreshed(&index)), (4095, 0));
    index.apply_iter(removals(4095..4096)).expect("a removal");
    // what comes while the filter is made is told to it too
    index.apply_iter((8000..8010).map(domain)).expect("adds");
    assert_eq!(refreshed(&index), 1);
    let data = index.snapshot();
    // exactly the filter of the names counted now: nothing went since its snapshot
    assert!(data.filter == data.fresh_filter());
    assert_eq!((data.gone, data.slots), (0, 3914));
    for i in (4096..8010).step_by(7) {
        let host = format!("www.s{i}.example");
        let hit = data.lookup(&format!("https://{host}/"), &host, None, 1.0);
        assert_eq!(hit.map(|h| h.id), Some(i as u64));
    }
    // more than `REFRESH_LEAST`, but less than a quarter of the names held; then a quarter
    let index = BanIndex::empty();
    index.apply_iter((0..30_000).map(domain)).expect("a build");
    index.apply_iter(removals(0..5000)).expect("removals");
    assert_eq!((index.snapshot().gone, refreshed(&index)), (5000, 0));
    index.apply_iter(removals(5000..6000)).expect("removals");
    assert_eq!(refreshed(&index), 1);
    assert_eq!(index.snapshot().gone, 0);
}

/// `publish_ready_filter` until it publishes (its thread has ended), for up to a minute.
fn publish_when_made(index: &BanIndex) {
    for _ in 0..60_000 {
        if index.publish_ready_filter() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    panic!("no sites filter was made in a minute");
}

#[test]
fn a_filter_made_again_is_published_without_waiting_for_a_batch() {
    let index = BanIndex::empty();
    index.with_writer(|w| w.refresh_past(2));
    index.apply_iter((0..40).map(domain)).expect("a build");
    // nothing is being made: nothing to publish
    assert!(!index.publish_ready_filter());
    index
        .apply_iter((0..10).map(|i| Change::Remove(i.to_string())))
        .expect("removals");
    assert_eq!(index.snapshot().refreshed, 0);
    // no batch comes: the housekeeping's call publishes it once it is made
    publish_when_made(&index);
    let data = index.snapshot();
    assert_eq!((data.refreshed, data.gone), (1, 0));
    assert!(data.filter == data.fresh_filter());
    assert!(!index.publish_ready_filter());
    assert_eq!(index.refresh_failures().0, 0);
}

/// An index of 40 domains, 10 of them removed, whose filter is being made again (past 2
/// slots gone) by a thread that panics.
fn failing_refresh() -> BanIndex {
    let index = BanIndex::empty();
    index.with_writer(|w| {
        w.refresh_past(2);
        w.panic_next_refresh();
    });
    index.apply_iter((0..40).map(domain)).expect("a build");
    index
        .apply_iter((0..10).map(|i| Change::Remove(i.to_string())))
        .expect("removals");
    index
}

#[test]
fn a_refresh_that_fails_is_counted_with_its_cause_and_tried_again() {
    let index = failing_refresh();
    assert_eq!(index.refresh_failures(), (0, None));
    // its thread panics: the publish that finds it ended counts the failure, with the
    // panic's message
    publish_when_made(&index);
    let (failures, cause) = index.refresh_failures();
    assert_eq!(failures, 1);
    let cause = cause.expect("a cause");
    assert!(
        cause.contains("panicked: the refresh a test asked to fail"),
        "{cause}"
    );
    assert_eq!(index.snapshot().refreshed, 0);
    // the housekeeping does not start another (a failure that repeats would cost a thread
    // each poll); the next batch does, and it is made
    assert!(!index.publish_ready_filter());
    index
        .apply_iter([Change::Remove("10".into())])
        .expect("a removal");
    publish_when_made(&index);
    let data = index.snapshot();
    assert_eq!((data.refreshed, data.gone), (1, 0));
    assert!(data.filter == data.fresh_filter());
    // the count stays; the lookups answer as ever
    assert_eq!(index.refresh_failures().0, 1);
    for i in 0..40 {
        let host = format!("s{i}.example");
        let hit = data.lookup(&format!("https://{host}/"), &host, None, 1.0);
        assert_eq!(hit.map(|h| h.id), (i > 10).then_some(i as u64), "{host}");
    }
}

#[test]
fn a_batch_that_finds_a_refresh_failed_makes_it_again_at_once() {
    let index = failing_refresh();
    // the thread has ended (taken, not yet published) before any poll came
    for _ in 0..60_000 {
        if index.with_writer(|w| w.filter_ready()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    index
        .apply_iter([Change::Remove("10".into())])
        .expect("a removal");
    assert_eq!(index.refresh_failures().0, 1);
    // that batch started another, which is made
    publish_when_made(&index);
    let data = index.snapshot();
    assert_eq!((data.refreshed, data.gone), (1, 0));
    assert!(data.filter == data.fresh_filter());
}

#[test]
fn a_forged_summary_slot_is_verified_like_any_other() {
    let index = BanIndex::empty();
    index
        .apply_iter(vec![Change::Add(NewEntry {
            id: "1".into(),
            scope: Scope::Domain,
            value: "evil.com".into(),
            reason: "r".into(),
            actor: "a".into(),
            created: 0.0,
            expires: None,
            regions: vec![],
        })])
        .expect("applies");
    let mut data = IndexData::clone(&index.snapshot());
    // clean.com's slot claims everything: a domain entry, members, entries below it on the
    // way to each host asked
    let h = super::summary::name_hash("clean.com");
    for field in [
        super::summary::DOMAIN,
        super::summary::MEMBER,
        super::summary::URL,
        super::summary::PREFIX,
        super::summary::HOST,
    ] {
        data.bump_summary(h, field, 1, None);
    }
    for label in ["www", "b"] {
        let pair = super::summary::child_pair(label.as_bytes());
        data.bump_summary(h, super::summary::BELOW, 1, Some(pair));
    }
    for host in ["clean.com", "www.clean.com", "a.b.clean.com"] {
        let url = format!("http://{host}/p/x");
        assert!(data.lookup(&url, host, None, 1.0).is_none(), "{host}");
        let page = data.lookup_page(&[(url.as_str(), host)], |&(c, h)| (c, h), None, 1.0);
        assert!(page.is_empty());
    }
    let hit = data.lookup("http://a.evil.com/", "a.evil.com", None, 1.0);
    assert_eq!(hit.map(|h| h.id), Some(1));
}

#[test]
fn a_group_redefined_takes_out_only_the_members_it_drops() {
    let index = BanIndex::empty();
    let group = |members: &[&str]| {
        Change::Group("g".into(), members.iter().map(|m| m.to_string()).collect())
    };
    index
        .apply_iter([group(&["a.example", "b.example"])])
        .expect("a group");
    assert_eq!((index.snapshot().slots, index.snapshot().gone), (2, 0));
    // a.example is kept as it was: only b.example's slot goes
    index
        .apply_iter([group(&["a.example", "c.example"])])
        .expect("a group");
    assert_eq!((index.snapshot().slots, index.snapshot().gone), (2, 1));
}
