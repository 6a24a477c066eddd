//! `attributes`: any JSON, re-written as msgspec writes what it decoded.
//!
//! The response carries `attributes` back, and today's bytes are msgspec's encoding of the
//! Python value it decoded, not the text as sent: compact, floats respelled (`1E2` is
//! `100.0`), escapes decoded (`\u00e9` is `é`, `\/` is `/`), `-0` is `0`, and an object
//! with a repeated key keeps the first key's place and the last key's value, as a dict
//! does. Writing that while scanning costs one pass and no tree.

use foldhash::{HashSet, HashSetExt};

use super::scan::{checked, Num, Path, Scanner, R};
use crate::json::{write_f64, write_str, write_u64};

/// One member of an object being written: its key's and its whole span in the output.
#[derive(Clone, Copy)]
struct Member {
    key: (usize, usize),
    end: usize,
}

/// Writes values of type Any; `members` is a stack shared by the objects being written.
pub(crate) struct AnyWriter {
    members: Vec<Member>,
}

impl AnyWriter {
    pub(crate) fn new() -> Self {
        AnyWriter {
            members: Vec::new(),
        }
    }

    /// The value at the scanner, written to `out`.
    pub(crate) fn value(&mut self, s: &mut Scanner, out: &mut Vec<u8>, path: &Path) -> R<()> {
        match s.peek()? {
            b'n' => {
                s.literal(b"ull")?;
                out.extend_from_slice(b"null");
            }
            b't' => {
                s.literal(b"rue")?;
                out.extend_from_slice(b"true");
            }
            b'f' => {
                s.literal(b"alse")?;
                out.extend_from_slice(b"false");
            }
            b'"' => {
                let text = s.str()?;
                write_str(out, &text);
            }
            b'[' => {
                s.open()?;
                out.push(b'[');
                let mut first = true;
                let mut i = 0;
                while s.next_element(&mut first)? {
                    if i > 0 {
                        out.push(b',');
                    }
                    self.value(s, out, &Path::Index(path, i))?;
                    i += 1;
                }
                out.push(b']');
            }
            b'{' => self.object(s, out, path)?,
            _ => match s.number(path, true)? {
                Num::Int { neg, mag } => {
                    if neg && mag != 0 {
                        out.push(b'-');
                    }
                    write_u64(out, mag);
                }
                Num::Big(digits) => out.extend_from_slice(digits),
                Num::Float(v) => write_f64(out, v),
            },
        }
        Ok(())
    }

    /// An object at `{`, keys as str (as `dict[str, Any]` decodes them).
    pub(crate) fn object(&mut self, s: &mut Scanner, out: &mut Vec<u8>, path: &Path) -> R<()> {
        s.open()?;
        let start = out.len();
        out.push(b'{');
        let base = self.members.len();
        let mut first = true;
        while let Some((raw, ascii)) = s.next_key(&mut first)? {
            let key = checked(raw, ascii)?;
            if self.members.len() > base {
                out.push(b',');
            }
            let k0 = out.len();
            write_str(out, &key);
            let k1 = out.len();
            s.colon()?;
            out.push(b':');
            self.value(s, out, &Path::Key(path, &key))?;
            self.members.push(Member {
                key: (k0, k1),
                end: out.len(),
            });
        }
        if has_repeats(out, &self.members[base..]) {
            fold_repeats(out, start, &self.members[base..]);
        }
        self.members.truncate(base);
        out.push(b'}');
        Ok(())
    }
}

fn key<'o>(out: &'o [u8], m: &Member) -> &'o [u8] {
    &out[m.key.0..m.key.1]
}

/// Keys are written canonically, so two keys are equal exactly when their bytes are.
fn has_repeats(out: &[u8], members: &[Member]) -> bool {
    if members.len() < 2 {
        return false;
    }
    if members.len() <= 16 {
        return members
            .iter()
            .enumerate()
            .any(|(i, a)| members[..i].iter().any(|b| key(out, a) == key(out, b)));
    }
    let mut seen = HashSet::with_capacity(members.len());
    !members.iter().all(|m| seen.insert(key(out, m)))
}

/// Rewrite the object's members (after its `{` at `start`) as a dict holds them.
#[cold]
fn fold_repeats(out: &mut Vec<u8>, start: usize, members: &[Member]) {
    let written = out[start..].to_vec();
    let at = |p: usize| p - start;
    let mut order: Vec<usize> = Vec::new(); // index of the first member of each key
    let mut last: Vec<usize> = Vec::new(); // index of its last member
    for (i, m) in members.iter().enumerate() {
        let k = &written[at(m.key.0)..at(m.key.1)];
        match order
            .iter()
            .position(|&j| &written[at(members[j].key.0)..at(members[j].key.1)] == k)
        {
            Some(slot) => last[slot] = i,
            None => {
                order.push(i);
                last.push(i);
            }
        }
    }
    out.truncate(start + 1);
    for (n, &i) in last.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        let m = &members[i];
        out.extend_from_slice(&written[at(m.key.0)..at(m.end)]);
    }
}
