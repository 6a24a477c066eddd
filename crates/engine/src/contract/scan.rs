//! The JSON scanner `decode` reads the body with: one pass, checking as it reads.
//!
//! It follows msgspec's decoder step by step, because the 4xx must be the one the Python
//! service gave: the first problem in the body's order wins (a wrong type early beats a
//! syntax error later), a syntax error names the same byte offset, a string is checked
//! for UTF-8 only where it is kept, a number too large for a float is refused before its
//! type is looked at.

use std::borrow::Cow;

use super::FieldError;

/// Errors are boxed inside the scanner: every step returns an `R`, and a one-word error
/// keeps those results small.
pub(crate) type R<T> = Result<T, Box<FieldError>>;

/// A refusal, boxed.
pub(crate) type Refusal = Box<FieldError>;

/// Arrays and objects within each other, the body's own object counted. msgspec stops at
/// Python's recursion limit (1000 frames, its caller's frames included), so it refuses a
/// few levels earlier, by as many frames as its caller has.
pub(crate) const MAX_DEPTH: usize = 1000;

/// msgspec keeps an int of any size where the type allows ints, up to this many characters.
const MAX_INT_CHARS: usize = 4300;

/// Where a value sits, built on the stack as the scanner descends; rendered only for an
/// error, as the Python service names fields (`documents[3].score`, `unit.team`).
#[derive(Clone, Copy)]
pub(crate) enum Path<'p> {
    Root,
    Field(&'p Path<'p>, &'static str),
    Index(&'p Path<'p>, usize),
    Key(&'p Path<'p>, &'p str),
}

impl<'p> Path<'p> {
    pub(crate) fn field(&'p self, name: &'static str) -> Path<'p> {
        Path::Field(self, name)
    }

    pub(crate) fn render(&self) -> String {
        let mut steps = Vec::new();
        let mut at = self;
        loop {
            match at {
                Path::Root => break,
                Path::Field(up, name) => {
                    steps.push(Step::Name(name));
                    at = up;
                }
                Path::Key(up, name) => {
                    steps.push(Step::Name(name));
                    at = up;
                }
                Path::Index(up, i) => {
                    steps.push(Step::Index(*i));
                    at = up;
                }
            }
        }
        let mut out = String::new();
        for step in steps.iter().rev() {
            match step {
                Step::Name(name) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(name);
                }
                Step::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
            }
        }
        if out.is_empty() {
            out.push_str("body");
        }
        out
    }
}

enum Step<'p> {
    Name(&'p str),
    Index(usize),
}

/// A number as read: an int that fits (u64, or a negative down to -2**63), a larger int
/// (kept as its digits where ints are allowed), or a float.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Num<'a> {
    Int { neg: bool, mag: u64 },
    Big(&'a [u8]),
    Float(f64),
}

impl Num<'_> {
    /// The value a float field gets: an int converts (`-0` is `0.0`, as in msgspec).
    pub(crate) fn as_f64(self) -> f64 {
        match self {
            Num::Int { neg: true, mag } if mag != 0 => -(mag as f64),
            Num::Int { mag, .. } => mag as f64,
            Num::Float(v) => v,
            // `number(.., false)` never returns Big.
            Num::Big(_) => f64::NAN,
        }
    }
}

/// A 422 naming the field.
pub(crate) fn invalid(path: &Path, problem: impl Into<String>) -> Refusal {
    Box::new(FieldError {
        status: 422,
        field: path.render(),
        problem: problem.into(),
    })
}

fn body_error(problem: String) -> Refusal {
    Box::new(FieldError {
        status: 400,
        field: "body".into(),
        problem,
    })
}

pub(crate) fn truncated() -> Refusal {
    body_error("not valid JSON: Input data was truncated".into())
}

pub(crate) fn bad_utf8() -> Refusal {
    body_error("not valid JSON: Invalid UTF-8 encoded string".into())
}

/// Bytes of a string, checked to be UTF-8 (msgspec checks only the strings it keeps).
pub(crate) fn utf8(bytes: Cow<'_, [u8]>) -> R<Cow<'_, str>> {
    match bytes {
        Cow::Borrowed(b) => std::str::from_utf8(b)
            .map(Cow::Borrowed)
            .map_err(|_| bad_utf8()),
        Cow::Owned(v) => String::from_utf8(v).map(Cow::Owned).map_err(|_| bad_utf8()),
    }
}

/// A string's bytes as str: ASCII needs no check, the rest is checked to be UTF-8.
#[inline]
pub(crate) fn checked(raw: Cow<'_, [u8]>, as_sent: bool) -> R<Cow<'_, str>> {
    match raw {
        // SAFETY: every byte is ASCII, so the bytes are UTF-8.
        Cow::Borrowed(b) if as_sent && b.is_ascii() => {
            Ok(Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(b) }))
        }
        raw => utf8(raw),
    }
}

/// Exact powers of ten for the fast float path.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The position in the body and the nesting depth.
pub(crate) struct Scanner<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
    depth: usize,
}

/// The bytes that end a plain run inside a string: `"`, `\` and control characters.
const SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

#[inline]
fn special(b: u8) -> bool {
    SPECIAL[b as usize]
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
        body_error(format!(
            "not valid JSON: JSON is malformed: {what} (byte {})",
            self.pos
        ))
    }

    /// The next byte that is not whitespace, not consumed.
    #[inline(always)]
    pub(crate) fn peek(&mut self) -> R<u8> {
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

    /// A string at `"`: its bytes with the escapes decoded (borrowed when it has none).
    pub(crate) fn string(&mut self) -> R<Cow<'a, [u8]>> {
        self.string_ascii().map(|(s, _)| s)
    }

    /// `string`, and whether it is as sent (then `checked` looks at the bytes themselves).
    #[inline(always)]
    pub(crate) fn string_ascii(&mut self) -> R<(Cow<'a, [u8]>, bool)> {
        let buf = self.buf;
        self.pos += 1;
        let start = self.pos;
        let i = plain_run(buf, self.pos);
        self.pos = i;
        match buf.get(i) {
            None => Err(truncated()),
            Some(b'"') => {
                self.pos += 1;
                Ok((Cow::Borrowed(&buf[start..i]), true))
            }
            Some(_) => self.string_escaped(start).map(|v| (Cow::Owned(v), false)),
        }
    }

    /// A string that is kept: checked to be UTF-8.
    #[inline]
    pub(crate) fn str(&mut self) -> R<Cow<'a, str>> {
        let (raw, ascii) = self.string_ascii()?;
        checked(raw, ascii)
    }

    #[cold]
    fn string_escaped(&mut self, start: usize) -> R<Vec<u8>> {
        let buf = self.buf;
        let mut out = buf[start..self.pos].to_vec();
        loop {
            match buf[self.pos] {
                b'"' => {
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    self.pos += 1;
                    let Some(&c) = buf.get(self.pos) else {
                        return Err(truncated());
                    };
                    self.pos += 1;
                    match c {
                        b'n' => out.push(b'\n'),
                        b'"' => out.push(b'"'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'u' => {
                            let c = self.unicode_escape()?;
                            let mut tmp = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
                        }
                        _ => return Err(self.malformed("invalid escape character in string")),
                    }
                }
                _ => return Err(self.malformed("invalid character")),
            }
            let from = self.pos;
            while self.pos < buf.len() && !special(buf[self.pos]) {
                self.pos += 1;
            }
            out.extend_from_slice(&buf[from..self.pos]);
            if self.pos == buf.len() {
                return Err(truncated());
            }
        }
    }

    fn hex4(&mut self) -> R<u32> {
        if self.buf.len() - self.pos < 4 {
            return Err(truncated());
        }
        let mut cp = 0u32;
        for _ in 0..4 {
            let c = self.buf[self.pos];
            self.pos += 1;
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => return Err(self.malformed("invalid character in unicode escape")),
            };
            cp = (cp << 4) | u32::from(d);
        }
        Ok(cp)
    }

    fn unicode_escape(&mut self) -> R<char> {
        let cp = self.hex4()?;
        let cp = match cp {
            0xDC00..=0xDFFF => return Err(self.malformed("invalid utf-16 surrogate pair")),
            0xD800..=0xDBFF => {
                if self.buf.len() - self.pos < 6 {
                    return Err(truncated());
                }
                if &self.buf[self.pos..self.pos + 2] != b"\\u" {
                    return Err(self.malformed("unexpected end of escaped utf-16 surrogate pair"));
                }
                self.pos += 2;
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return Err(self.malformed("invalid utf-16 surrogate pair"));
                }
                0x10000 + (((cp - 0xD800) << 10) | (low - 0xDC00))
            }
            cp => cp,
        };
        // Surrogates are handled above, so every value left is a char.
        char::from_u32(cp).ok_or_else(|| self.malformed("invalid utf-16 surrogate pair"))
    }

    /// A number. `ints` says whether the type takes ints: there an int too large for u64
    /// is kept as digits (`Big`); elsewhere it is read as a float, as msgspec does. A float
    /// past f64's range is refused here, whatever the type.
    #[inline(always)]
    pub(crate) fn number(&mut self, path: &Path, ints: bool) -> R<Num<'a>> {
        let buf = self.buf;
        let end = buf.len();
        let start = self.pos;
        let mut p = start;
        let neg = buf[p] == b'-';
        if neg {
            p += 1;
            if p == end {
                self.pos = p;
                return Err(self.malformed("invalid number"));
            }
        }
        let int_start = p;
        let mut mant: u64 = 0;
        if buf[p] == b'0' {
            p += 1;
            if p < end && buf[p].is_ascii_digit() {
                self.pos = p;
                return Err(self.malformed("invalid number"));
            }
        } else {
            while p < end && buf[p].is_ascii_digit() {
                mant = mant.wrapping_mul(10).wrapping_add(u64::from(buf[p] - b'0'));
                p += 1;
            }
            if p == int_start {
                self.pos = p;
                return Err(self.malformed("invalid character"));
            }
        }
        let int_digits = p - int_start;
        let mut is_float = false;
        let mut frac_digits = 0usize;
        let mut exp: i64 = 0;
        if p < end && buf[p] == b'.' {
            is_float = true;
            p += 1;
            let from = p;
            while p < end && buf[p].is_ascii_digit() {
                mant = mant.wrapping_mul(10).wrapping_add(u64::from(buf[p] - b'0'));
                p += 1;
            }
            if p == from {
                self.pos = p;
                return Err(self.malformed("invalid number"));
            }
            frac_digits = p - from;
        }
        if p < end && (buf[p] == b'e' || buf[p] == b'E') {
            is_float = true;
            p += 1;
            if p == end {
                self.pos = p;
                return Err(self.malformed("invalid number"));
            }
            let mut sign = 1;
            if buf[p] == b'+' {
                p += 1;
            } else if buf[p] == b'-' {
                sign = -1;
                p += 1;
            }
            let from = p;
            while p < end && buf[p].is_ascii_digit() {
                if exp < 10_000 {
                    exp = exp * 10 + i64::from(buf[p] - b'0');
                }
                p += 1;
            }
            if p == from {
                self.pos = p;
                return Err(self.malformed("invalid number"));
            }
            exp *= sign;
        }
        self.pos = p;
        let text = &buf[start..p];
        if !is_float {
            let fits = int_digits < 20 || (int_digits == 20 && fits_u64(&buf[int_start..p]));
            if fits && (!neg || mant <= 1 << 63) {
                return Ok(Num::Int { neg, mag: mant });
            }
            if ints {
                if text.len() > MAX_INT_CHARS {
                    return Err(invalid(path, "Integer value out of range"));
                }
                return Ok(Num::Big(text));
            }
        }
        let exp10 = exp - frac_digits as i64;
        let v = if is_float
            && int_digits + frac_digits <= 19
            && mant >> 53 == 0
            && (-22..=22).contains(&exp10)
        {
            // Both the mantissa and the power of ten are exact doubles: one rounding.
            let m = mant as f64;
            let v = if exp10 >= 0 {
                m * POW10[exp10 as usize]
            } else {
                m / POW10[(-exp10) as usize]
            };
            if neg {
                -v
            } else {
                v
            }
        } else {
            // The literal is ASCII JSON number syntax, which Rust's parser accepts.
            std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.parse::<f64>().ok())
                .unwrap_or(f64::INFINITY)
        };
        if v.is_infinite() {
            return Err(invalid(path, "Number out of range"));
        }
        Ok(Num::Float(v))
    }

    /// The error for a value of the wrong type at a byte `c`: msgspec reads a scalar first
    /// (so a malformed one is a 400), an array or object not at all.
    #[cold]
    pub(crate) fn wrong_type(&mut self, c: u8, expected: &str, path: &Path, ints: bool) -> Refusal {
        let got = match c {
            b'[' => "array",
            b'{' => "object",
            b'"' => match self.string() {
                Ok(_) => "str",
                Err(e) => return e,
            },
            b'n' | b't' | b'f' => {
                let (rest, got): (&[u8], _) = match c {
                    b'n' => (b"ull", "null"),
                    b't' => (b"rue", "bool"),
                    _ => (b"alse", "bool"),
                };
                if let Err(e) = self.literal(rest) {
                    return e;
                }
                got
            }
            _ => match self.number(path, ints) {
                Ok(Num::Float(_)) => "float",
                Ok(_) => "int",
                Err(e) => return e,
            },
        };
        invalid(path, format!("Expected `{expected}`, got `{got}`"))
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
        let mut c = self.peek()?;
        if c == b'}' {
            self.pos += 1;
            self.depth -= 1;
            return Ok(None);
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
            b'"' => self.string_ascii().map(Some),
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

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The end of the run of plain bytes from `i`: at the first special byte, or the end.
/// Eight bytes a step, the first special byte of a word found exactly by the has-zero-byte
/// trick.
#[inline(always)]
fn plain_run(buf: &[u8], mut i: usize) -> usize {
    while let Some(word) = buf.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        let v = u64::from_le_bytes(w);
        // Each test is exact at its first byte (a borrow only spills into higher bytes),
        // so the lowest hit is the first special byte.
        let quote = v ^ (ONES * u64::from(b'"'));
        let slash = v ^ (ONES * u64::from(b'\\'));
        let control = v.wrapping_sub(ONES * 0x20) & !v;
        let quote = quote.wrapping_sub(ONES) & !quote;
        let slash = slash.wrapping_sub(ONES) & !slash;
        let hits = (control | quote | slash) & HIGHS;
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < buf.len() && !special(buf[i]) {
        i += 1;
    }
    i
}

/// Does a 20-digit integer fit in u64?
fn fits_u64(digits: &[u8]) -> bool {
    digits
        .iter()
        .try_fold(0u64, |acc, &d| {
            acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })
        .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time run finder against a byte loop, on bytes rich in specials.
    #[test]
    fn plain_run_finds_the_first_special_byte() {
        let alphabet = [
            b'a', b'"', b'\\', 0x01, 0x1f, 0x20, 0x7f, 0x80, 0xc3, 0xff, b'0',
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 48) as usize;
            let buf: Vec<u8> = (0..len)
                .map(|k| alphabet[((seed >> (k % 60)) as usize + k * 7) % alphabet.len()])
                .collect();
            let start = (seed as usize >> 5) % (len + 1);
            let end = (start..len).find(|&i| special(buf[i])).unwrap_or(len);
            assert_eq!(plain_run(&buf, start), end, "{buf:?} from {start}");
        }
    }

    #[test]
    fn paths_render_as_the_python_service_names_fields() {
        let root = Path::Root;
        let docs = root.field("documents");
        let third = Path::Index(&docs, 3);
        let attrs = third.field("attributes");
        let x = Path::Key(&attrs, "x");
        let y = Path::Index(&x, 1);
        assert_eq!(y.render(), "documents[3].attributes.x[1]");
        assert_eq!(root.render(), "body");
    }
}
