//! `attributes`: any JSON, re-written in the answers' one spelling (`json.rs`).
//!
//! The response carries `attributes` back as the value sent, written as the engine writes
//! every value: compact, floats respelled (`1E2` is `100.0`), escapes decoded (`\u00e9` is
//! `é`, `\/` is `/`), `-0` is `0`, so the same value comes back as the same bytes however
//! it was spelled. An object that gives a key twice is refused (CONTRACT.md: no last one
//! wins). Writing that while scanning costs one pass and no tree.

use foldhash::HashSet;

use super::scan::{checked, repeated, Num, Path, Scanner, R};
use crate::json::{write_f64, write_str, write_u64};

/// One member of an object being written: its key's span in the output.
#[derive(Clone, Copy)]
struct Member {
    key: (usize, usize),
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
        out.push(b'{');
        let base = self.members.len();
        let mut many = None;
        let mut first = true;
        while let Some((raw, ascii)) = s.next_key(&mut first)? {
            let key = checked(raw, ascii)?;
            if self.members.len() > base {
                out.push(b',');
            }
            let k0 = out.len();
            write_str(out, &key);
            let k1 = out.len();
            if given_before(out, &self.members[base..], (k0, k1), &mut many) {
                return Err(repeated(path, &key));
            }
            s.colon()?;
            out.push(b':');
            self.value(s, out, &Path::Key(path, &key))?;
            self.members.push(Member { key: (k0, k1) });
        }
        self.members.truncate(base);
        out.push(b'}');
        Ok(())
    }
}

fn key<'o>(out: &'o [u8], m: &Member) -> &'o [u8] {
    &out[m.key.0..m.key.1]
}

/// Keys compared one by one up to this many, then through a hash set: a body's object of a
/// million keys must not cost a million squared.
const FEW_KEYS: usize = 16;

/// Whether the key written at `at` is one of `members`' (this object's so far). Keys are
/// written canonically, so two keys are equal exactly when their bytes are.
fn given_before(
    out: &[u8],
    members: &[Member],
    at: (usize, usize),
    many: &mut Option<HashSet<Box<[u8]>>>,
) -> bool {
    let this = &out[at.0..at.1];
    if let Some(keys) = many {
        return !keys.insert(this.into());
    }
    if members.iter().any(|m| key(out, m) == this) {
        return true;
    }
    if members.len() == FEW_KEYS {
        let keys = members.iter().map(|m| key(out, m)).chain([this]);
        *many = Some(keys.map(Box::from).collect());
    }
    false
}
