//! The JSON scanner `decode` reads the body with: one pass, checking as it reads. The
//! first problem in the body's order is the one refused (a wrong type early beats a syntax
//! error later); a syntax error names its byte offset; a string is checked for UTF-8 where
//! it is kept.

use std::borrow::Cow;

pub(crate) use super::number::Num;
use super::path::body_error;
pub(crate) use super::path::{checked, invalid, repeated, truncated, utf8, Path, Refusal, R};

/// Arrays and objects within each other, the body's own object counted: the scanner and
/// `attributes`' writer recurse, so the depth is bounded well inside the stack.
pub(crate) const MAX_DEPTH: usize = 1000;

/// A key `Scanner::next_key_or` read.
pub(crate) enum Key<'a> {
    /// The guessed key, its colon consumed.
    Guessed,
    /// Another key, its escapes decoded; its colon is still to read.
    Read(Cow<'a, [u8]>),
}

/// The position in the body and the nesting depth.
pub(crate) struct Scanner<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
    depth: usize,
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Scanner {
            buf,
            pos: 0,
            depth: 0,
        }
    }

    /// A 400: the body is not JSON, at the current byte.
    pub(crate) fn malformed(&self, what: &str) -> Refusal {
        body_error(format!("not valid JSON: {what} at byte {}", self.pos))
    }

    /// The next byte that is not whitespace, not consumed.
    #[inline(always)]
    pub(crate) fn peek(&mut self) -> R<u8> {
        // Compact JSON (what a ranker sends) has no whitespace: one compare decides.
        if let Some(&c) = self.buf.get(self.pos) {
            if c > b' ' {
                return Ok(c);
            }
        }
        while let Some(&c) = self.buf.get(self.pos) {
            if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                return Ok(c);
            }
            self.pos += 1;
        }
        Err(truncated())
    }

    /// After the top-level value: only whitespace may follow.
    pub(crate) fn finish(&mut self) -> R<()> {
        while let Some(&c) = self.buf.get(self.pos) {
            self.pos += 1;
            if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                return Err(self.malformed("trailing characters"));
            }
        }
        Ok(())
    }

    /// Where the scanner is and how deep, to come back to with `back_to`.
    pub(crate) fn mark(&self) -> (usize, usize) {
        (self.pos, self.depth)
    }

    /// Back to a `mark`.
    pub(crate) fn back_to(&mut self, (pos, depth): (usize, usize)) {
        self.pos = pos;
        self.depth = depth;
    }

    /// Past the `]` or `}` of what `open` stepped into: one level up.
    pub(crate) fn step_out(&mut self) {
        self.depth -= 1;
    }

    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(body_error(
                "JSON nested too deeply (arrays and objects within each other, about a \
                 thousand levels)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// `null`, `true` or `false`: the first byte is known, `rest` must follow.
    pub(crate) fn literal(&mut self, rest: &[u8]) -> R<()> {
        self.pos += 1;
        let end = self.pos + rest.len();
        if end > self.buf.len() {
            return Err(truncated());
        }
        let ok = &self.buf[self.pos..end] == rest;
        self.pos = end;
        if ok {
            Ok(())
        } else {
            Err(self.malformed("invalid character"))
        }
    }

    /// The error for a value of the wrong type at a byte `c`. A scalar is read first (so a
    /// malformed one is a 400 for the body), an array or object not at all.
    #[cold]
    pub(crate) fn wrong_type(&mut self, c: u8, expected: &str, path: &Path) -> Refusal {
        let got = match c {
            b'[' => "an array",
            b'{' => "an object",
            b'"' => match self.string() {
                Ok(_) => "a string",
                Err(e) => return e,
            },
            b'n' | b't' | b'f' => {
                let (rest, got): (&[u8], _) = match c {
                    b'n' => (b"ull", "null"),
                    b't' => (b"rue", "true"),
                    _ => (b"alse", "false"),
                };
                if let Err(e) = self.literal(rest) {
                    return e;
                }
                got
            }
            _ => match self.number(path, true) {
                Ok(_) => "a number",
                Err(e) => return e,
            },
        };
        invalid(path, format!("expected {expected}, got {got}"))
    }

    /// At `[` or `{`: step in.
    pub(crate) fn open(&mut self) -> R<()> {
        self.pos += 1;
        self.enter()
    }

    /// In an array: is there another element (then the scanner is at it)?
    #[inline(always)]
    pub(crate) fn next_element(&mut self, first: &mut bool) -> R<bool> {
        let c = self.peek()?;
        if c == b']' {
            self.pos += 1;
            self.depth -= 1;
            return Ok(false);
        }
        if c == b',' && !*first {
            self.pos += 1;
            if self.peek()? == b']' {
                return Err(self.malformed("trailing comma in array"));
            }
        } else if *first {
            *first = false;
        } else {
            return Err(self.malformed("expected ',' or ']'"));
        }
        Ok(true)
    }

    /// In an object: the next key (escapes decoded, UTF-8 not yet checked, whether it is
    /// all ASCII), or None at `}`.
    #[inline(always)]
    pub(crate) fn next_key(&mut self, first: &mut bool) -> R<Option<(Cow<'a, [u8]>, bool)>> {
        if !self.key_start(first)? {
            return Ok(None);
        }
        self.string_ascii().map(Some)
    }

    /// `next_key` with a guess: `guess` is a key as it would be sent, with its quotes and
    /// its colon (`"url":`). When the body has exactly those bytes next, they are consumed
    /// and the answer is `Key::Guessed`; otherwise the key is read as `next_key` reads it
    /// (its colon not consumed). Either way the result is the one `next_key` then `colon`
    /// would give: the guess only matches a key without escapes and a colon right after it.
    #[inline(always)]
    pub(crate) fn next_key_or(&mut self, first: &mut bool, guess: &[u8]) -> R<Option<Key<'a>>> {
        if !self.key_start(first)? {
            return Ok(None);
        }
        if starts_with_key(&self.buf[self.pos..], guess) {
            self.pos += guess.len();
            return Ok(Some(Key::Guessed));
        }
        self.string().map(|raw| Some(Key::Read(raw)))
    }

    /// Up to the next key's opening quote (true), or past the object's `}` (false).
    #[inline(always)]
    fn key_start(&mut self, first: &mut bool) -> R<bool> {
        let mut c = self.peek()?;
        if c == b'}' {
            self.pos += 1;
            self.depth -= 1;
            return Ok(false);
        }
        if c == b',' && !*first {
            self.pos += 1;
            c = self.peek()?;
        } else if *first {
            *first = false;
        } else {
            return Err(self.malformed("expected ',' or '}'"));
        }
        match c {
            b'"' => Ok(true),
            b'}' => Err(self.malformed("trailing comma in object")),
            _ => Err(self.malformed("object keys must be strings")),
        }
    }

    /// The `:` after a key.
    #[inline(always)]
    pub(crate) fn colon(&mut self) -> R<()> {
        if self.peek()? != b':' {
            return Err(self.malformed("expected ':'"));
        }
        self.pos += 1;
        Ok(())
    }
}

/// `rest.starts_with(key)` for a key of a few to 24 bytes, compared as two or three
/// overlapping words (no call to memcmp); a longer or shorter key as a slice.
#[inline(always)]
pub(super) fn starts_with_key(rest: &[u8], key: &[u8]) -> bool {
    let n = key.len();
    if rest.len() < n {
        return false;
    }
    let word = |b: &[u8], at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let half = |b: &[u8], at: usize| {
        let mut w = [0u8; 4];
        w.copy_from_slice(&b[at..at + 4]);
        u32::from_le_bytes(w)
    };
    match n {
        8..=24 => {
            word(rest, 0) == word(key, 0)
                && word(rest, n - 8) == word(key, n - 8)
                && (n <= 16 || word(rest, 8) == word(key, 8))
        }
        4..=7 => half(rest, 0) == half(key, 0) && half(rest, n - 4) == half(key, n - 4),
        _ => &rest[..n] == key,
    }
}

#[cfg(test)]
mod tests {
    use super::starts_with_key;

    /// The word compare against the slice's, for every key length to 30 and a difference
    /// at every place (or none), with the body shorter, as long and longer.
    #[test]
    fn keys_are_compared_as_starts_with_does() {
        for n in 0..30 {
            let key: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            for at in 0..=n {
                for extra in [0usize, 1, 9] {
                    let mut body = key.clone();
                    body.extend(std::iter::repeat(b'"').take(extra));
                    if at < n {
                        body[at] ^= 0x20;
                    }
                    for cut in [body.len(), n.saturating_sub(1)] {
                        let rest = &body[..cut.min(body.len())];
                        assert_eq!(
                            starts_with_key(rest, &key),
                            rest.starts_with(&key),
                            "{key:?} in {rest:?}"
                        );
                    }
                }
            }
        }
    }
}
