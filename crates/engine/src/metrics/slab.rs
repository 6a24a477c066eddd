//! One worker's series as a slab of atomics: an append-only table in a memory map, the
//! worker's own file in a shared directory (or anonymous memory for a single process).
//!
//! A scrape answered by any worker reads every worker's file and sums them, so the figures
//! are the whole service's (app/observability/metrics.py; prometheus_client's multiprocess mode does the
//! same for the Python series). The request path writes plain relaxed atomics into memory
//! it already owns: a new series is appended once, a known one is an offset.
//!
//! Layout, all little-endian and 8-aligned:
//! - header (64 bytes): magic `RRSLAB01`, then `used` (u64, bytes of the file in use,
//!   header included; stored with Release after an entry is complete, read with Acquire);
//! - entries, each: `len` (u32, bytes of the entry), `key_len` (u32), `values` (u32), a
//!   pad (u32), the key (UTF-8: family, RS, label values joined by US), zero-padded to 8,
//!   then `values` u64 cells. Cells are f64 bits for a counter and a histogram's sum, and
//!   u64 counts for a histogram's buckets.
//!
//! Only the owning process writes a file (behind the engine's lock), so an update is a
//! relaxed load and store, not a read-modify-write; readers in other processes load the
//! same cells atomically. A file whose worker died stays: its counts are part of the
//! service's totals until the directory is wiped at the next start.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{Mmap, MmapMut};

pub const MAGIC: &[u8; 8] = b"RRSLAB01";
pub const HEADER: usize = 64;
const ENTRY_HEADER: usize = 16;
/// The first size of a slab; it doubles when full (a config's series fill a few pages).
const INITIAL: usize = 1 << 16;

/// Separates the family from the label values in a key.
pub const FAMILY_SEP: char = '\u{1e}';

fn padded(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// The cell at byte `offset` of a mapping (8-aligned, inside it).
///
/// # Safety
/// `offset + 8 <= len` of the mapping starting at `base`, and `offset % 8 == 0` (the
/// mapping itself is page-aligned).
unsafe fn cell<'a>(base: *const u8, offset: usize) -> &'a AtomicU64 {
    &*(base.add(offset) as *const AtomicU64)
}

fn read_u32(bytes: &[u8], at: usize) -> usize {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize
}

enum Memory {
    File(File, MmapMut),
    Anonymous(MmapMut),
}

/// The writing side: this process's slab.
pub struct Slab {
    memory: Memory,
    /// The mapping's first byte (a cache of `memory`'s pointer: the request path reads it
    /// for every cell it touches).
    base: *const u8,
    used: usize,
}

// SAFETY: `base` points into the mapping the Slab owns and moves with it; cells are
// atomics, so another thread (behind the engine's lock) or process may touch them.
unsafe impl Send for Slab {}

impl Slab {
    /// A slab in anonymous memory: one process, nothing shared.
    pub fn anonymous() -> io::Result<Self> {
        let mut map = MmapMut::map_anon(INITIAL)?;
        init(&mut map);
        Ok(Slab {
            base: map.as_ptr(),
            memory: Memory::Anonymous(map),
            used: HEADER,
        })
    }

    /// This process's file at `path`: created, or adopted when a process that had the same
    /// id left one (its counts are kept and go on growing, so totals never go backwards).
    /// Returns the slab and the entries it already holds: (key, offset of its cells).
    pub fn open(path: &Path) -> io::Result<(Self, Vec<(String, usize)>)> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len = file.metadata()?.len() as usize;
        if len < HEADER {
            file.set_len(INITIAL as u64)?;
            // SAFETY: the file is ours; other processes only read it, through atomics.
            let mut map = unsafe { MmapMut::map_mut(&file)? };
            init(&mut map);
            let slab = Slab {
                base: map.as_ptr(),
                memory: Memory::File(file, map),
                used: HEADER,
            };
            return Ok((slab, Vec::new()));
        }
        // SAFETY: as above.
        let map = unsafe { MmapMut::map_mut(&file)? };
        let (used, entries) = parse(&map).map_err(|problem| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {problem}", path.display()),
            )
        })?;
        let entries = entries
            .map(|(key, offset, _)| (key.to_owned(), offset))
            .collect();
        let slab = Slab {
            base: map.as_ptr(),
            memory: Memory::File(file, map),
            used,
        };
        Ok((slab, entries))
    }

    fn map(&self) -> &MmapMut {
        match &self.memory {
            Memory::File(_, map) | Memory::Anonymous(map) => map,
        }
    }

    /// Append a series of `values` zeroed cells under `key`; the offset of its first cell.
    pub fn add(&mut self, key: &str, values: usize) -> io::Result<usize> {
        let len = ENTRY_HEADER + padded(key.len()) + values * 8;
        if self.used + len > self.map().len() {
            self.grow(self.used + len)?;
        }
        let at = self.used;
        let map = match &mut self.memory {
            Memory::File(_, map) | Memory::Anonymous(map) => map,
        };
        map[at..at + 4].copy_from_slice(&(len as u32).to_le_bytes());
        map[at + 4..at + 8].copy_from_slice(&(key.len() as u32).to_le_bytes());
        map[at + 8..at + 12].copy_from_slice(&(values as u32).to_le_bytes());
        map[at + ENTRY_HEADER..at + ENTRY_HEADER + key.len()].copy_from_slice(key.as_bytes());
        // The cells are zero already: a new file and a grown one are zero-filled.
        self.used += len;
        // SAFETY: the header is inside the mapping and 8-aligned.
        unsafe { cell(map.as_ptr(), 8) }.store(self.used as u64, Ordering::Release);
        Ok(at + ENTRY_HEADER + padded(key.len()))
    }

    fn grow(&mut self, needed: usize) -> io::Result<()> {
        let mut size = self.map().len() * 2;
        while size < needed {
            size *= 2;
        }
        match &mut self.memory {
            Memory::File(file, map) => {
                file.set_len(size as u64)?;
                // SAFETY: as in `open`.
                *map = unsafe { MmapMut::map_mut(&*file)? };
            }
            Memory::Anonymous(map) => {
                let mut bigger = MmapMut::map_anon(size)?;
                bigger[..self.used].copy_from_slice(&map[..self.used]);
                *map = bigger;
            }
        }
        self.base = self.map().as_ptr();
        Ok(())
    }

    /// The `n` cells of the series whose cells start at `offset`.
    pub fn cells(&self, offset: usize, n: usize) -> &[AtomicU64] {
        assert!(
            offset % 8 == 0 && offset + n * 8 <= self.used,
            "cells outside the slab"
        );
        // SAFETY: inside the used part of the mapping, 8-aligned (offsets and entries are).
        unsafe { std::slice::from_raw_parts(self.base.add(offset) as *const AtomicU64, n) }
    }

    /// Every series of this slab: (key, its cells' values).
    pub fn read(&self) -> Vec<(String, Vec<u64>)> {
        read_map(self.map()).expect("our own slab is well formed")
    }
}

/// Add `n` to the f64 held in a cell (only this process writes it: load, then store).
pub fn add_f64(cell: &AtomicU64, n: f64) {
    cell.store(
        (f64::from_bits(cell.load(Ordering::Relaxed)) + n).to_bits(),
        Ordering::Relaxed,
    );
}

/// Add 1 to the count held in a cell.
pub fn add_one(cell: &AtomicU64) {
    cell.store(cell.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

fn init(map: &mut MmapMut) {
    map[..8].copy_from_slice(MAGIC);
    map[8..16].copy_from_slice(&(HEADER as u64).to_le_bytes());
}

/// The `used` length and the entries (key, offset of its cells, number of cells) of a
/// mapped slab, or what is wrong with it.
fn parse(map: &[u8]) -> Result<(usize, impl Iterator<Item = (&str, usize, usize)>), String> {
    if map.len() < HEADER || &map[..8] != MAGIC {
        return Err("not a metrics slab (bad magic)".into());
    }
    // SAFETY: the header is inside the mapping and 8-aligned.
    let used = unsafe { cell(map.as_ptr(), 8) }.load(Ordering::Acquire) as usize;
    if used < HEADER || used > map.len() || used % 8 != 0 {
        return Err(format!("used length {used} outside the file"));
    }
    let mut entries = Vec::new();
    let mut at = HEADER;
    while at < used {
        if at + ENTRY_HEADER > used {
            return Err(format!("an entry header cut at byte {at}"));
        }
        let (len, key_len, values) = (
            read_u32(map, at),
            read_u32(map, at + 4),
            read_u32(map, at + 8),
        );
        if len != ENTRY_HEADER + padded(key_len) + values * 8 || at + len > used {
            return Err(format!("a malformed entry at byte {at}"));
        }
        let key = std::str::from_utf8(&map[at + ENTRY_HEADER..at + ENTRY_HEADER + key_len])
            .map_err(|_| format!("a key that is not UTF-8 at byte {at}"))?;
        entries.push((key, at + ENTRY_HEADER + padded(key_len), values));
        at += len;
    }
    Ok((used, entries.into_iter()))
}

fn read_map(map: &[u8]) -> Result<Vec<(String, Vec<u64>)>, String> {
    let (_, entries) = parse(map)?;
    Ok(entries
        .map(|(key, offset, values)| {
            let cells = (0..values)
                // SAFETY: parse checked that the cells lie inside `used`.
                .map(|i| unsafe { cell(map.as_ptr(), offset + i * 8) }.load(Ordering::Relaxed))
                .collect();
            (key.to_owned(), cells)
        })
        .collect())
}

/// Every series of another process's slab file.
pub fn read_file(path: &Path) -> Result<Vec<(String, Vec<u64>)>, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    // SAFETY: read-only; the writer changes cells only through atomics and appends entries
    // before publishing `used`.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| e.to_string())?;
    read_map(&map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grown_file_keeps_its_series_and_a_reader_sees_them() {
        let dir = std::env::temp_dir().join(format!("slab-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("engine_1.slab");
        let _ = std::fs::remove_file(&path);
        let (mut slab, adopted) = Slab::open(&path).unwrap();
        assert!(adopted.is_empty());
        let first = slab.add("c\u{1e}a", 1).unwrap();
        add_f64(&slab.cells(first, 1)[0], 2.5);
        // Past the initial size: the slab doubles and keeps what it held.
        let key = "h\u{1e}".to_owned() + &"x".repeat(1000);
        let mut last = 0;
        for _ in 0..100 {
            last = slab.add(&key, 12).unwrap();
        }
        add_one(&slab.cells(last, 12)[3]);
        let read = read_file(&path).unwrap();
        assert_eq!(read.len(), 101);
        assert_eq!(read[0], ("c\u{1e}a".to_owned(), vec![2.5f64.to_bits()]));
        assert_eq!(read[100].1[3], 1);
        drop(slab);
        // A process with the same id adopts the file and goes on counting.
        let (slab, adopted) = Slab::open(&path).unwrap();
        assert_eq!(adopted.len(), 101);
        assert_eq!(adopted[0], ("c\u{1e}a".to_owned(), first));
        add_f64(&slab.cells(first, 1)[0], 1.0);
        assert_eq!(read_file(&path).unwrap()[0].1, vec![3.5f64.to_bits()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_that_is_not_a_slab_is_refused_with_its_problem() {
        let dir = std::env::temp_dir().join(format!("slab-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("engine_2.slab");
        std::fs::write(&path, vec![7u8; 4096]).unwrap();
        assert!(read_file(&path).unwrap_err().contains("bad magic"));
        assert!(Slab::open(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_anonymous_slab_grows_in_memory() {
        let mut slab = Slab::anonymous().unwrap();
        let offsets: Vec<usize> = (0..5000)
            .map(|i| slab.add(&format!("k{i}"), 2).unwrap())
            .collect();
        add_one(&slab.cells(offsets[4999], 2)[1]);
        let read = slab.read();
        assert_eq!(read.len(), 5000);
        assert_eq!(read[4999].1, vec![0, 1]);
    }
}
