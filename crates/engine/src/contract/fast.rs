//! A document read on its happy path: what a ranker sends, read with no error to word.
//!
//! `Fields::fast_document` reads a document whose strings have no escapes, whose numbers
//! are plain, whose keys are the contract's, each once, and whose values are in bounds:
//! the pages of every ranker, nearly always. It answers None at the first thing it does
//! not take (an escape, an exponent, a repeated or unknown key, a value out of bounds,
//! a wrong type, bad JSON), and `Fields::document` then reads that document again from
//! its `{` and refuses it, or takes it, naming what it finds as it always has: every 4xx
//! is the careful path's. So this path refuses nothing itself; it only has to take exactly
//! the documents the careful path takes, with the same values (the tests below hold the
//! two to that on generated and mutated bodies: `tests_fast.rs`).
//!
//! What it saves is the careful path's generality on every value: the path to name,
//! the error to build, the type to tell apart. `attributes` already in the answers'
//! spelling are kept as sent (`spelled.rs`); other `attributes` and `minhash`, rare or
//! free-form, are read by the careful path's own functions even here.

use super::document::{field_of, KEYS, START};
use super::fields::{chars_over, chars_under, Fields, FEW_KEYS};
use super::number::POW10;
use super::scan::{starts_with_key, Path, R};
use super::strings::plain_run;
use super::{given, Document, Few, Text};
use crate::wire;

/// Where the happy path is in the body: a copy of the scanner's position that the
/// compiler keeps in a register while a document is read.
#[derive(Clone, Copy)]
pub(super) struct Cursor<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Cursor<'a> {
    /// The next byte that is not JSON whitespace, not consumed; None at the end.
    #[inline(always)]
    fn next_byte(&mut self) -> Option<u8> {
        let c = *self.buf.get(self.pos)?;
        if c > b' ' {
            return Some(c);
        }
        while let Some(&c) = self.buf.get(self.pos) {
            if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                return Some(c);
            }
            self.pos += 1;
        }
        None
    }

    /// `c` next (after whitespace), consumed.
    #[inline(always)]
    fn eat(&mut self, c: u8) -> Option<()> {
        if self.next_byte()? != c {
            return None;
        }
        self.pos += 1;
        Some(())
    }

    /// After a member of an array or object that ends at `close`: true past a `,`, false
    /// past `close`.
    #[inline(always)]
    fn more(&mut self, close: u8) -> Option<bool> {
        let c = self.next_byte()?;
        self.pos += 1;
        if c == b',' {
            Some(true)
        } else if c == close {
            Some(false)
        } else {
            None
        }
    }

    /// A string of no escapes, as sent, of `min` to `max` characters.
    #[inline(always)]
    fn plain_str(&mut self, min: usize, max: usize) -> Option<Text<'a>> {
        if self.next_byte()? != b'"' {
            return None;
        }
        let s = self.plain_key()?;
        if chars_under(s, min) || chars_over(s, max) {
            return None;
        }
        Some(Text::Borrowed(s))
    }

    /// The string at `"`: its text when it has no escape and is UTF-8.
    #[inline(always)]
    pub(super) fn plain_key(&mut self) -> Option<&'a str> {
        let buf = self.buf;
        let start = self.pos + 1;
        let (end, ascii) = plain_run(buf, start);
        if *buf.get(end)? != b'"' {
            return None;
        }
        self.pos = end + 1;
        let raw = &buf[start..end];
        if ascii {
            // SAFETY: plain_run saw only ASCII bytes.
            Some(unsafe { std::str::from_utf8_unchecked(raw) })
        } else {
            std::str::from_utf8(raw).ok()
        }
    }

    /// The digits from the position, added to `mant` (wrapping: the caller bounds the
    /// count); how many.
    #[inline(always)]
    fn digits(&mut self, mant: &mut u64) -> usize {
        let from = self.pos;
        while let Some(&b) = self.buf.get(self.pos) {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            *mant = mant.wrapping_mul(10).wrapping_add(u64::from(d));
            self.pos += 1;
        }
        self.pos - from
    }

    /// A number in `[lo, hi]` spelled plainly: an integer of up to 18 digits, or one with
    /// a fraction, 19 digits and 53 bits at most, no exponent. Its value is the careful
    /// path's (`Num::as_f64` of `Scanner::number`), by the same arithmetic: the integer
    /// converted, or the mantissa divided by an exact power of ten.
    #[inline(always)]
    fn number_in(&mut self, lo: f64, hi: f64) -> Option<f64> {
        let neg = self.next_byte()? == b'-';
        self.pos += usize::from(neg);
        let mut mant = u64::from(self.buf.get(self.pos)?.wrapping_sub(b'0'));
        if mant > 9 {
            return None;
        }
        self.pos += 1;
        let int_digits = 1 + if mant == 0 { 0 } else { self.digits(&mut mant) };
        let v = match self.buf.get(self.pos) {
            Some(b'.') => {
                self.pos += 1;
                let frac = self.digits(&mut mant);
                if frac == 0 || int_digits + frac > 19 || mant >> 53 != 0 {
                    return None;
                }
                let v = mant as f64 / POW10[frac];
                if neg {
                    -v
                } else {
                    v
                }
            }
            // An exponent, or a digit after a leading zero (malformed).
            Some(b'e' | b'E' | b'0'..=b'9') => return None,
            _ => {
                if int_digits > 18 {
                    return None;
                }
                // `-0` is the integer 0, as `as_f64` has it.
                let v = mant as f64;
                if neg && mant != 0 {
                    -v
                } else {
                    v
                }
            }
        };
        if matches!(self.buf.get(self.pos), Some(b'e' | b'E')) || v < lo || v > hi {
            return None;
        }
        Some(v)
    }

    /// `null`: consumed, true; anything else: not consumed, false.
    #[inline(always)]
    fn null(&mut self) -> Option<bool> {
        if self.next_byte()? != b'n' {
            return Some(false);
        }
        self.word(b"null")?;
        Some(true)
    }

    /// `word` next, consumed.
    #[inline(always)]
    pub(super) fn word(&mut self, word: &[u8]) -> Option<()> {
        let end = self.pos + word.len();
        if self.buf.get(self.pos..end)? != word {
            return None;
        }
        self.pos = end;
        Some(())
    }

    /// A list of strings, any length each, into `out` (empty).
    #[inline(always)]
    fn plain_strs<const N: usize>(&mut self, out: &mut Few<Text<'a>, N>) -> Option<()> {
        self.eat(b'[')?;
        if self.next_byte()? == b']' {
            self.pos += 1;
            return Some(());
        }
        loop {
            out.push(self.plain_str(0, usize::MAX)?);
            if !self.more(b']')? {
                return Some(());
            }
        }
    }

    /// `factors`: an object of scores, each key once, into `out` (empty).
    #[inline(always)]
    fn scores(&mut self, out: &mut Few<(Text<'a>, f64), 4>) -> Option<()> {
        self.eat(b'{')?;
        if self.next_byte()? == b'}' {
            self.pos += 1;
            return Some(());
        }
        loop {
            if self.next_byte()? != b'"' {
                return None;
            }
            let key = self.plain_key()?;
            // Past a few keys the careful path keeps a hash set; these are a handful.
            if out.len() == FEW_KEYS || out.iter().any(|e| e.0 == key) {
                return None;
            }
            self.eat(b':')?;
            let v = self.number_in(-wire::MAX_SCORE, wire::MAX_SCORE)?;
            out.push((Text::Borrowed(key), v));
            if !self.more(b'}')? {
                return Some(());
            }
        }
    }

    /// The next key (its colon consumed) as a field of `KEYS`: `guess` if the bytes are
    /// its, else read and looked up.
    #[inline(always)]
    fn key(&mut self, guess: usize) -> Option<usize> {
        if starts_with_key(&self.buf[self.pos..], KEYS[guess]) {
            self.pos += KEYS[guess].len();
            return Some(guess);
        }
        if self.next_byte()? != b'"' {
            return None;
        }
        let field = field_of(self.plain_key()?.as_bytes())?;
        self.eat(b':')?;
        Some(field)
    }
}

impl<'a> Fields<'a> {
    /// The document at the scanner into `d` (as `empty_document` made it), the scanner past
    /// it; None when the careful path must read it (the scanner and `d` then hold whatever
    /// was read: the caller puts both back).
    #[inline(never)]
    pub(super) fn fast_document(&mut self, d: &mut Document<'a>) -> Option<()> {
        let mut at = Cursor {
            buf: self.s.buf,
            pos: self.s.pos,
        };
        if at.next_byte()? != b'{' {
            return None;
        }
        // Stepped into as the careful path does: `attributes` counts its depth from here.
        self.s.pos = at.pos;
        self.s.open().ok()?;
        at.pos = self.s.pos;
        let mut prev = START;
        let mut seen = 0u16;
        loop {
            if seen != 0 && !at.more(b'}')? {
                break;
            }
            let field = at.key(self.order.0[prev] as usize)?;
            if seen & (1 << field) != 0 {
                return None;
            }
            seen |= 1 << field;
            self.order.0[prev] = field as u8;
            prev = field;
            match field {
                0 => d.id = at.plain_str(1, wire::MAX_ID_CHARS)?,
                1 => d.url = at.plain_str(0, usize::MAX)?,
                2 => d.score = at.number_in(-wire::MAX_SCORE, wire::MAX_SCORE)?,
                3 => at.scores(&mut d.factors)?,
                4 => d.spam_score = at.number_in(wire::PROBABILITY.0, wire::PROBABILITY.1)?,
                5 => d.adult_score = at.number_in(wire::PROBABILITY.0, wire::PROBABILITY.1)?,
                6 => {
                    if !at.null()? {
                        d.domain_age_days = Some(at.number_in(0.0, f64::MAX)?);
                    }
                }
                7 => {
                    d.is_ad = match at.next_byte()? {
                        b't' => at.word(b"true").map(|_| true)?,
                        _ => at.word(b"false").map(|_| false)?,
                    }
                }
                8 => at.plain_strs(&mut d.topics)?,
                9 => at.plain_strs(&mut d.blocked_regions)?,
                10 => {
                    if !at.null()? {
                        d.text = Some(at.plain_str(0, usize::MAX)?);
                    }
                }
                // The rare and the free-form, when not as the answer spells it: the
                // careful path's own readers; whatever they refuse, the careful path
                // refuses again with its field named.
                11 => {
                    at.pos =
                        self.careful(at.pos, |f| f.minhash(&Path::Root).map(|m| d.minhash = m))?;
                }
                _ => {
                    if at.next_byte()? != b'{' {
                        return None;
                    }
                    let sent = at.pos;
                    if let Some(text) = at.spelled_object(&mut self.floats) {
                        d.attributes = Text::Borrowed(text);
                    } else {
                        at.pos = self.careful(sent, |f| {
                            f.attributes(&Path::Root).map(|a| d.attributes = a)
                        })?;
                    }
                }
            }
        }
        // id, url and score are required; the optional fields given are the rest.
        if seen & 0b111 != 0b111 {
            return None;
        }
        d.given = given_bits(seen);
        self.s.pos = at.pos;
        self.s.step_out();
        Some(())
    }
}

impl Fields<'_> {
    /// `read` by the careful path from `pos`: the position after it, or None if it refused.
    #[inline(never)]
    fn careful(&mut self, pos: usize, read: impl FnOnce(&mut Self) -> R<()>) -> Option<usize> {
        self.s.pos = pos;
        read(self).ok()?;
        Some(self.s.pos)
    }
}

/// `Document::given` from the fields seen (bit i for `KEYS[i]`): the optional fields, in
/// the same order, are `given`'s bits.
#[inline(always)]
fn given_bits(seen: u16) -> u16 {
    const _: () = assert!(given::FACTORS == 1 && given::ATTRIBUTES == 1 << 9);
    seen >> 3
}
