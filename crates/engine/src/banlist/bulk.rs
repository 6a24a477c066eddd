//! The tables an index derives from its entries, made all at once for shards already
//! filled (a load): the id tables, the summary and the sites filter.
//!
//! A build by batches inserts into each as every entry comes, growing the tables by half
//! and rehashing them over and over, and then sizes them to what they hold (`settle`).
//! Here the id tables are sized first (a count of each table's ids) and filled once; the
//! summary's tables grow as a batch's would but each is sized to what it holds at the end
//! (a summary slot merges the names that share it, so its count is only known then). Each
//! is made on two threads, each owning half of the tables (and, for the summary, the
//! sites filter's segments of its tables), reading every row and skipping the names that
//! fall in the other half: the tables hold the same slots, and the filter the same bits,
//! as a build by batches gives them (the order of inserts only moves slots within a probe).

use std::sync::Arc;
use std::time::Instant;

use super::apply::{counted_names, id_pos, summarized};
use super::chunks::Chunks;
use super::data::{id_hash, id_slot, IndexData};
use super::filter::{self, SEGMENT_WORDS, TABLES_PER_SEGMENT};
use super::shard::{RowRef, Shard};
use super::summary::{self, Field, SlotChange};
use super::table::Table;
use super::{both, shard_of, summary_of, unique, SHARDS, SUMMARIES};

/// Make the id tables, then the summary and the sites filter, of `data`, whose shards hold
/// every entry and whose tables are empty: the seconds each took.
/// `names`: how many names the entries count in the summary (`counted_names`), what its
/// tables are sized by.
pub fn tables(data: &mut IndexData, names: usize) -> [f64; 2] {
    let started = Instant::now();
    ids(data);
    let ids = started.elapsed().as_secs_f64();
    let started = Instant::now();
    summary(data, names);
    [ids, started.elapsed().as_secs_f64()]
}

fn ids(data: &mut IndexData) {
    let shards = &data.shards;
    let mut counts = vec![0usize; SHARDS];
    for shard in shards.iter() {
        for row in 0..shard.len() as u32 {
            counts[shard_of(id_hash(shard.id(row)))] += 1;
        }
    }
    let (low, high) = data.ids.split_at_mut(SHARDS / 2);
    let fill = |tables: &mut [Arc<Table<u64>>], first: usize| {
        let mut own: Vec<Table<u64>> = counts[first..first + tables.len()]
            .iter()
            .map(|&n| Table::with_capacity(n))
            .collect();
        // a batch at a time, each slot's home prefetched first (as `summarize` does)
        let mut batch: Vec<(usize, u32, u64)> = Vec::with_capacity(BATCH);
        let place = |batch: &mut Vec<(usize, u32, u64)>, own: &mut [Table<u64>]| {
            for &(t, pos, slot) in batch.iter() {
                own[t].insert(pos, slot, |slot| id_pos(shards, slot));
            }
            batch.clear();
        };
        for (s, shard) in shards.iter().enumerate() {
            for row in 0..shard.len() as u32 {
                let h = id_hash(shard.id(row));
                let Some(t) = shard_of(h).checked_sub(first).filter(|&t| t < own.len()) else {
                    continue;
                };
                own[t].prefetch(h as u32);
                let at = RowRef {
                    shard: s as u32,
                    row,
                };
                batch.push((t, h as u32, id_slot(at)));
                if batch.len() == BATCH {
                    place(&mut batch, &mut own);
                }
            }
        }
        place(&mut batch, &mut own);
        for (table, made) in tables.iter_mut().zip(own) {
            *table = Arc::new(made);
        }
    };
    both(|| fill(low, 0), || fill(high, SHARDS / 2));
}

fn summary(data: &mut IndexData, names: usize) {
    let shards = &data.shards[..];
    // each table sized for its share of the names, a little over (names that share a slot
    // take one: `fit` gives back what is left over)
    let share = names / SUMMARIES + names / SUMMARIES / 8 + 16;
    let (low, high) = data.summary.split_at_mut(SUMMARIES / 2);
    let ((low_words, low_slots), (high_words, high_slots)) = both(
        || summarize(shards, low, 0, share),
        || summarize(shards, high, SUMMARIES / 2, share),
    );
    data.filter.put_segments(0, low_words);
    let half = SUMMARIES / 2 / TABLES_PER_SEGMENT;
    data.filter.put_segments(half, high_words);
    data.slots += low_slots + high_slots;
}

/// Names counted a batch at a time, their summary chunks and filter words prefetched
/// first, so that their cache misses overlap (as a page of lookups does).
const BATCH: usize = 32;

/// A name to count: its table (of a half), hash, field and label below; its filter word
/// (of a half) and bits.
type Counted = (usize, u64, Field, Option<u16>, usize, u64);

/// Count every entry's names that fall in `tables` (the summary's, from table `first` on,
/// each sized for `share` slots) and set their bits in the sites filter's segments of
/// those tables, written in place; those segments and the slots made.
fn summarize(
    shards: &[Arc<Shard>],
    tables: &mut [Chunks],
    first: usize,
    share: usize,
) -> (Vec<Arc<[u64]>>, usize) {
    let per_table = SEGMENT_WORDS / TABLES_PER_SEGMENT;
    let mut segments = filter::fresh_segments(tables.len() / TABLES_PER_SEGMENT);
    let mut words: Vec<&mut [u64]> = segments.iter_mut().map(unique).collect();
    for table in tables.iter_mut() {
        *table = Chunks::with_capacity(share);
    }
    let mut slots = 0;
    let mut batch: Vec<Counted> = Vec::with_capacity(BATCH);
    for shard in shards {
        for row in 0..shard.len() as u32 {
            let scope = shard.scope(row);
            let Some((name, field)) = summarized(scope, scope.key_of(shard.value(row))) else {
                continue;
            };
            for (at, field, below) in counted_names(name, field) {
                let h = summary::name_hash(at);
                let Some(t) = summary_of(h)
                    .checked_sub(first)
                    .filter(|&t| t < tables.len())
                else {
                    continue;
                };
                let (word, mask) = filter::counted_key(h, field, below).parts();
                let word = word - first * per_table;
                summary::prefetch(&tables[t], h);
                super::prefetch(&words[word / SEGMENT_WORDS][word % SEGMENT_WORDS]);
                batch.push((t, h, field, below, word, mask));
                if batch.len() == BATCH {
                    slots += count(&mut batch, tables, &mut words);
                }
            }
        }
    }
    slots += count(&mut batch, tables, &mut words);
    drop(words);
    for table in tables.iter_mut() {
        table.fit(summary::slot_pos);
    }
    (segments, slots)
}

/// Count the names of `batch` (and empty it): the slots made.
fn count(batch: &mut Vec<Counted>, tables: &mut [Chunks], words: &mut [&mut [u64]]) -> usize {
    let mut slots = 0;
    for &(t, h, field, below, word, mask) in batch.iter() {
        let child = below.map_or(0, summary::pair_bit);
        if summary::bump(&mut tables[t], h, field, 1, child) == SlotChange::Added {
            slots += 1;
        }
        words[word / SEGMENT_WORDS][word % SEGMENT_WORDS] |= mask;
    }
    batch.clear();
    slots
}
