//! `attributes` sent already in the answers' one spelling, taken as the body's own bytes.
//!
//! The careful path (`any.rs`) writes `attributes` back compact, escapes decoded, numbers
//! respelled, refusing a key given twice. A ranker's attributes are most often already in
//! that form (compact, plain strings, integers, floats in their shortest spelling): then
//! the text written would be the text sent, and the happy path keeps the sent bytes, with
//! no buffer to grow and no copy. Anything else (whitespace, an escape, a float spelled
//! otherwise, `-0`, a key twice, deep nesting, bad JSON) answers None and the careful
//! path writes (or refuses) the value.

use super::fast::Cursor;
use super::fields::FEW_KEYS;
use super::scan::{Num, Path, Scanner};
use crate::json::write_f64;

/// Objects and arrays within `attributes` taken on this path; deeper ones go the careful
/// way, which counts them against the body's own limit.
const SPELLED_DEPTH: usize = 32;

impl<'a> Cursor<'a> {
    /// The object at `{` as sent, when the careful path would write exactly these bytes.
    /// `floats` is room to respell a float in.
    pub(super) fn spelled_object(&mut self, floats: &mut Vec<u8>) -> Option<&'a str> {
        let start = self.pos;
        self.object_spelled(0, floats)?;
        let text = &self.buf[start..self.pos];
        // SAFETY: every string in `text` was checked to be UTF-8 (`plain_key`) and every
        // other byte is JSON syntax, ASCII; so the whole is UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(text) })
    }

    /// The byte at the position, with no whitespace skipped (a space is not the spelling).
    #[inline(always)]
    fn at(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    fn object_spelled(&mut self, depth: usize, floats: &mut Vec<u8>) -> Option<()> {
        if depth == SPELLED_DEPTH {
            return None;
        }
        self.pos += 1;
        if self.at()? == b'}' {
            self.pos += 1;
            return Some(());
        }
        let mut keys: [&str; FEW_KEYS] = [""; FEW_KEYS];
        let mut n = 0;
        loop {
            if self.at()? != b'"' {
                return None;
            }
            let key = self.plain_key()?;
            if n == FEW_KEYS || keys[..n].contains(&key) {
                return None;
            }
            keys[n] = key;
            n += 1;
            if self.at()? != b':' {
                return None;
            }
            self.pos += 1;
            self.value_spelled(depth, floats)?;
            let c = self.at()?;
            self.pos += 1;
            match c {
                b',' => {}
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    fn value_spelled(&mut self, depth: usize, floats: &mut Vec<u8>) -> Option<()> {
        match self.at()? {
            b'"' => self.plain_key().map(|_| ()),
            b'{' => self.object_spelled(depth + 1, floats),
            b'[' => {
                if depth + 1 == SPELLED_DEPTH {
                    return None;
                }
                self.pos += 1;
                if self.at()? == b']' {
                    self.pos += 1;
                    return Some(());
                }
                loop {
                    self.value_spelled(depth + 1, floats)?;
                    let c = self.at()?;
                    self.pos += 1;
                    match c {
                        b',' => {}
                        b']' => return Some(()),
                        _ => return None,
                    }
                }
            }
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            _ => self.number_spelled(floats),
        }
    }

    /// A number read by the careful reader, kept when `any.rs` would write it as sent: an
    /// integer but `-0` (written `0`), a float whose shortest spelling is the one sent.
    fn number_spelled(&mut self, floats: &mut Vec<u8>) -> Option<()> {
        let mut s = Scanner::new(self.buf);
        s.pos = self.pos;
        let num = s.number(&Path::Root, true).ok()?;
        let sent = &self.buf[self.pos..s.pos];
        match num {
            Num::Int { neg: true, mag: 0 } => return None,
            Num::Int { .. } | Num::Big(_) => {}
            Num::Float(v) => {
                floats.clear();
                write_f64(floats, v);
                if floats.as_slice() != sent {
                    return None;
                }
            }
        }
        self.pos = s.pos;
        Some(())
    }
}
