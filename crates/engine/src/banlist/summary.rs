//! The per-name summary: one `u64` slot per name (a host, a domain, an org member) saying
//! which kinds of entries sit at that name, so that a clean host is answered by one probe
//! per name it could be banned under, and only names with something there are looked up
//! in the key tables.
//!
//! A slot is the name's tag (the low 32 bits of its [`name_hash`]) above five saturating
//! counts: host entries of the name, domain entries, url entries under it (their host
//! part), prefix entries under it, org groups holding it as a member. The name lives in the
//! summary table of shard `shard_of(name_hash)`, found by its tag (home slot `tag & mask`).
//! Names that share a shard and a tag share a slot, their counts added: the summary is a
//! filter, and every positive is verified against the stored values by the lookup that
//! follows. A count that reaches its maximum stays there (the true count is then unknown,
//! so it may only err on the side of a lookup).
//!
//! [`HostSummary`] probes a host and every parent a domain entry could be at (the parent
//! names found in one backward scan for dots); a clean host costs one hash and one probe
//! per name, and nothing else is looked at.

use super::names::is_ipv4;
use super::table::Table;

/// One count of a summary slot: its shift and width.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    shift: u32,
    max: u32,
}

/// Host entries with this value.
pub const HOST: Field = Field { shift: 0, max: 127 };
/// Domain entries with this value.
pub const DOMAIN: Field = Field { shift: 7, max: 127 };
/// Url entries whose host part is this name.
pub const URL: Field = Field { shift: 14, max: 63 };
/// Prefix entries whose host part is this name.
pub const PREFIX: Field = Field { shift: 20, max: 63 };
/// Org groups with this name as a member domain.
pub const MEMBER: Field = Field { shift: 26, max: 63 };

/// The counts of one name (all zero when the name has no slot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts(u32);

impl Counts {
    /// Whether the field's count is nonzero.
    #[inline]
    pub fn has(self, field: Field) -> bool {
        (self.0 >> field.shift) & field.max != 0
    }

    /// Url (bit 1) and prefix (bit 2) entries under the name.
    #[inline]
    pub fn under(self) -> u8 {
        u8::from(self.has(URL)) | (u8::from(self.has(PREFIX)) << 1)
    }

    fn adjust(self, field: Field, delta: i32) -> Counts {
        let v = (self.0 >> field.shift) & field.max;
        let w = match v {
            v if v == field.max => v,
            v if delta > 0 => v + 1,
            v => v.saturating_sub(1),
        };
        Counts((self.0 & !(field.max << field.shift)) | (w << field.shift))
    }
}

/// The tag a name's slot is found by (also its hash in the table).
#[inline]
fn tag(hash: u64) -> u64 {
    hash & 0xffff_ffff
}

/// The tag a slot was placed by.
#[inline]
pub fn slot_tag(slot: u64) -> u64 {
    slot >> 32
}

/// The counts in `table` for the name hashed `hash`.
#[inline]
pub fn counts(table: &Table, hash: u64) -> Counts {
    let want = tag(hash);
    table
        .probe(want)
        .find(|&slot| slot_tag(slot) == want)
        .map_or(Counts(0), |slot| Counts(slot as u32))
}

/// Count one more (`delta > 0`) or one fewer entry of `field` at the name hashed `hash`.
pub fn bump(table: &mut Table, hash: u64, field: Field, delta: i32) {
    let want = tag(hash);
    let old = table.probe(want).find(|&slot| slot_tag(slot) == want);
    let before = old.map_or(Counts(0), |slot| Counts(slot as u32));
    let after = before.adjust(field, delta);
    let slot = |c: Counts| (want << 32) | u64::from(c.0);
    match old {
        None if after.0 != 0 => table.insert(want, slot(after), slot_tag),
        Some(old) if after.0 == 0 => {
            table.remove(want, old, slot_tag);
        }
        Some(old) if after != before => {
            table.replace(want, old, slot(after));
        }
        _ => {}
    }
}

/// The hash a name is summarized under: the key tables' own (`hash_str`), so that a name
/// found in the summary is looked up in its key table without hashing it again, in the
/// same shard.
#[inline]
pub fn name_hash(name: &str) -> u64 {
    super::hash_str(name)
}

/// A name a domain entry or an org member covering a host may be at.
#[derive(Clone, Copy, Debug, Default)]
pub struct Candidate {
    /// Its hash.
    pub hash: u64,
    /// Where the name starts in the host.
    pub start: u32,
    /// Its counts (some domain entry or member).
    pub counts: Counts,
}

const FLAGGED: usize = 2;

/// What the summary says of a host: its own counts, and the names a domain entry or an org
/// member covering it could be at (`names::suffixes`) whose summary holds one.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostSummary {
    /// The host's own counts.
    pub own: Counts,
    /// The host's hash.
    pub own_hash: u64,
    flagged: [Candidate; FLAGGED],
    len: usize,
}

impl HostSummary {
    /// Summarize `host` and its parents of at most `limit` labels (`counts` gives a name's
    /// counts by its hash), probing each name as its hash is ready.
    #[inline]
    pub fn of(host: &str, limit: usize, counts: impl Fn(u64) -> Counts) -> Self {
        let bytes = host.as_bytes();
        let mut out = HostSummary {
            own_hash: name_hash(host),
            ..HostSummary::default()
        };
        out.own = counts(out.own_hash);
        if host.starts_with('[') || is_ipv4(host) {
            out.note(0, out.own_hash, out.own);
            return out;
        }
        // the k-th dot from the end starts the parent of k labels (1: the TLD, skipped)
        let (mut found, mut pos) = (0, bytes.len());
        while found < limit {
            match bytes[..pos].iter().rposition(|&b| b == b'.') {
                Some(dot) => {
                    found += 1;
                    pos = dot;
                    if found >= 2 {
                        let h = name_hash(&host[dot + 1..]);
                        out.note(dot as u32 + 1, h, counts(h));
                    }
                }
                None => {
                    out.note(0, out.own_hash, out.own);
                    break;
                }
            }
        }
        out
    }

    #[inline]
    fn note(&mut self, start: u32, hash: u64, counts: Counts) {
        if counts.has(DOMAIN) || counts.has(MEMBER) {
            if let Some(slot) = self.flagged.get_mut(self.len) {
                *slot = Candidate {
                    start,
                    hash,
                    counts,
                };
            }
            self.len += 1;
        }
    }

    /// The candidates whose summary holds a domain entry or a member, most specific first;
    /// None when there are more than are kept (the caller then walks every candidate).
    #[inline]
    pub fn flagged(&self) -> Option<impl Iterator<Item = Candidate> + '_> {
        self.flagged
            .get(..self.len)
            .map(|list| list.iter().rev().copied())
    }

    /// Whether no candidate name may hold a domain entry or a member.
    #[inline]
    pub fn no_parents(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::super::names::suffixes;
    use super::*;

    #[test]
    fn one_pass_flags_exactly_the_candidates_holding_something() {
        let hosts = [
            "a.b.c.d",
            "shop12345.example.com",
            "x",
            "c.d",
            "1.2.3.4",
            "[::1]",
            "very-long-label-of-a-host.sub.domain.example.co.uk",
            "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u",
            "",
            ".",
            "a..b",
        ];
        for host in hosts {
            for limit in [1, 2, 3, 9, 17, 40] {
                let candidates = suffixes(host, limit);
                for (i, pick) in candidates.iter().enumerate() {
                    // a domain entry at one candidate, a member at the next
                    let mut t = Table::default();
                    bump(&mut t, name_hash(pick), DOMAIN, 1);
                    let member = candidates.get(i + 1);
                    if let Some(m) = member {
                        bump(&mut t, name_hash(m), MEMBER, 1);
                    }
                    bump(&mut t, name_hash(host), HOST, 1);
                    let summary = HostSummary::of(host, limit, |h| counts(&t, h));
                    assert!(summary.own.has(HOST), "{host} {limit}");
                    let flagged: Vec<(&str, bool, bool)> = summary
                        .flagged()
                        .map(|list| {
                            list.map(|c| {
                                let name = &host[c.start as usize..];
                                assert_eq!(c.hash, name_hash(name));
                                (name, c.counts.has(DOMAIN), c.counts.has(MEMBER))
                            })
                            .collect()
                        })
                        .unwrap_or_default();
                    let want: Vec<(&str, bool, bool)> = candidates
                        .iter()
                        .filter(|c| *c == pick || Some(*c) == member)
                        .map(|c| (*c, c == pick, Some(c) == member))
                        .collect();
                    assert_eq!(flagged, want, "{host} {limit}");
                }
                let t = Table::default();
                assert!(HostSummary::of(host, limit, |h| counts(&t, h)).no_parents());
            }
        }
        // more flagged candidates than are kept: the caller walks them all
        let mut t = Table::default();
        let host = "a.b.c.d.e.f.g";
        for name in suffixes(host, 9) {
            bump(&mut t, name_hash(name), DOMAIN, 1);
        }
        assert!(HostSummary::of(host, 9, |h| counts(&t, h))
            .flagged()
            .is_none());
    }

    #[test]
    fn counts_saturate_and_slots_go_when_empty() {
        let mut t = Table::default();
        let h = name_hash("example.com");
        bump(&mut t, h, URL, 1);
        bump(&mut t, h, HOST, 1);
        assert_eq!(counts(&t, h).under(), 1);
        assert!(counts(&t, h).has(HOST) && !counts(&t, h).has(DOMAIN));
        bump(&mut t, h, URL, -1);
        bump(&mut t, h, HOST, -1);
        assert_eq!(t.len(), 0);
        for _ in 0..70 {
            bump(&mut t, h, PREFIX, 1);
        }
        for _ in 0..80 {
            bump(&mut t, h, PREFIX, -1);
        }
        // past its maximum the count is unknown: it stays
        assert_eq!(counts(&t, h).under(), 2);
        assert_eq!(counts(&t, name_hash("example.org")), Counts::default());
    }
}
