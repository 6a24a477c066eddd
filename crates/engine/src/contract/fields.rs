//! The request's objects field by field, with the types and bounds of `wire`.

use std::borrow::Cow;

use super::any::AnyWriter;
use super::document::FieldOrder;
use super::scan::{checked, invalid, repeated, utf8, Num, Path, Refusal, Scanner, R};
use super::{AgeMode, Few, Query, Request, Text};
use crate::wire;

/// The body's own keys.
const REQUEST_KEYS: [&str; 6] = [
    "documents",
    "request_id",
    "query",
    "unit",
    "profile",
    "depth",
];
/// `query`'s keys.
const QUERY_KEYS: [&str; 4] = ["text", "classes", "region", "age_mode"];

/// Decodes one body; `any` writes `attributes`.
pub(crate) struct Fields<'a> {
    pub(crate) s: Scanner<'a>,
    pub(super) any: AnyWriter,
    /// The order of a document's keys, as the last document sent them.
    pub(super) order: FieldOrder,
    /// Whether a document is tried on its happy path first (`fast`); the tests turn it off
    /// to hold the two paths to each other.
    pub(super) fast: bool,
    /// Room to respell a float of `attributes` in (`spelled.rs`).
    pub(super) floats: Vec<u8>,
    /// Documents the happy path took, for the tests.
    #[cfg(test)]
    pub(super) taken: usize,
}

pub(super) fn missing(path: &Path, name: &str) -> Refusal {
    invalid(&Path::Key(path, name), "required field is missing")
}

/// Marks `key` given in an object whose known keys are `names` (bit i for `names[i]`),
/// refusing one given before; an unknown key is the caller's to refuse. Checked as soon as
/// the key is read, so a repeat is refused where it stands in the body.
pub(super) fn once(seen: &mut u16, names: &[&str], key: &[u8], object: &Path) -> R<()> {
    if let Some(i) = names.iter().position(|n| n.as_bytes() == key) {
        if *seen & (1 << i) != 0 {
            return Err(repeated(object, names[i]));
        }
        *seen |= 1 << i;
    }
    Ok(())
}

/// A map's keys compared one by one up to this many, then through a hash set: a body's
/// object of a million keys must not cost a million squared.
pub(super) const FEW_KEYS: usize = 16;

pub(super) fn chars_over(s: &str, max: usize) -> bool {
    s.len() > max && s.chars().count() > max
}

pub(super) fn chars_under(s: &str, min: usize) -> bool {
    // A char is at most 4 bytes: only a short string needs counting.
    s.len() < min * 4 && s.chars().count() < min
}

impl<'a> Fields<'a> {
    pub(crate) fn new(body: &'a [u8]) -> Self {
        Fields {
            s: Scanner::new(body),
            any: AnyWriter::new(),
            order: FieldOrder::new(),
            fast: true,
            floats: Vec::new(),
            #[cfg(test)]
            taken: 0,
        }
    }

    pub(super) fn unknown(&self, path: &Path, key: Cow<'_, [u8]>) -> Refusal {
        match utf8(key) {
            Ok(k) => invalid(&Path::Key(path, &k), "unknown field"),
            Err(e) => e,
        }
    }

    /// `{` expected (or null where `nullable`): true at `{`, false after a null.
    pub(super) fn object_or_null(
        &mut self,
        path: &Path,
        expected: &str,
        nullable: bool,
    ) -> R<bool> {
        let c = self.s.peek()?;
        if c == b'{' {
            self.s.open()?;
            return Ok(true);
        }
        if nullable && c == b'n' {
            self.s.literal(b"ull")?;
            return Ok(false);
        }
        Err(self.s.wrong_type(c, expected, path))
    }

    pub(super) fn array(&mut self, path: &Path) -> R<()> {
        let c = self.s.peek()?;
        if c != b'[' {
            return Err(self.s.wrong_type(c, "an array", path));
        }
        self.s.open()
    }

    #[inline(always)]
    pub(super) fn string(
        &mut self,
        path: &Path,
        expected: &str,
        min: usize,
        max: usize,
    ) -> R<Text<'a>> {
        let c = self.s.peek()?;
        if c != b'"' {
            return Err(self.s.wrong_type(c, expected, path));
        }
        let s = self.s.str()?;
        if chars_under(&s, min) {
            return Err(invalid(path, format!("must be at least {min} characters")));
        }
        if chars_over(&s, max) {
            return Err(invalid(path, format!("must be at most {max} characters")));
        }
        Ok(s)
    }

    pub(super) fn opt_string(
        &mut self,
        path: &Path,
        min: usize,
        max: usize,
    ) -> R<Option<Text<'a>>> {
        if self.s.peek()? == b'n' {
            self.s.literal(b"ull")?;
            return Ok(None);
        }
        self.string(path, "a string or null", min, max).map(Some)
    }

    /// A number in `[lo, hi]`.
    #[inline(always)]
    pub(super) fn float(&mut self, path: &Path, expected: &str, lo: f64, hi: f64) -> R<f64> {
        let c = self.s.peek()?;
        if !(c == b'-' || c.is_ascii_digit()) {
            return Err(self.s.wrong_type(c, expected, path));
        }
        let v = self.s.number(path, false)?.as_f64();
        if v < lo || v > hi {
            return Err(out_of(path, lo, hi));
        }
        Ok(v)
    }

    /// A score or a factor: |x| <= `wire::MAX_SCORE`.
    #[inline(always)]
    pub(super) fn score(&mut self, path: &Path) -> R<f64> {
        self.float(path, "a number", -wire::MAX_SCORE, wire::MAX_SCORE)
    }

    #[inline(always)]
    pub(super) fn probability(&mut self, path: &Path) -> R<f64> {
        self.float(path, "a number", wire::PROBABILITY.0, wire::PROBABILITY.1)
    }

    /// An integer in `[lo, hi]`.
    pub(super) fn int(&mut self, path: &Path, expected: &str, lo: u64, hi: u64) -> R<u64> {
        let c = self.s.peek()?;
        if !(c == b'-' || c.is_ascii_digit()) {
            return Err(self.s.wrong_type(c, expected, path));
        }
        match self.s.number(path, true)? {
            Num::Int { neg: false, mag } if (lo..=hi).contains(&mag) => Ok(mag),
            Num::Int { neg: true, mag: 0 } if lo == 0 => Ok(0),
            Num::Float(_) => Err(invalid(
                path,
                format!("expected {expected}, got a number with a fraction or exponent"),
            )),
            _ => Err(out_of(path, lo, hi)),
        }
    }

    pub(super) fn bool(&mut self, path: &Path) -> R<bool> {
        match self.s.peek()? {
            b't' => self.s.literal(b"rue").map(|_| true),
            b'f' => self.s.literal(b"alse").map(|_| false),
            c => Err(self.s.wrong_type(c, "true or false", path)),
        }
    }

    pub(super) fn strings<const N: usize>(
        &mut self,
        path: &Path,
        min: usize,
        max: usize,
    ) -> R<Few<Text<'a>, N>> {
        self.array(path)?;
        // A list of topics or regions is short: it stays inline, allocating nothing.
        let mut out = Few::new();
        let mut first = true;
        while self.s.next_element(&mut first)? {
            let at = Path::Index(path, out.len());
            out.push(self.string(&at, "a string", min, max)?);
        }
        Ok(out)
    }

    /// A `dict[str, T]`: entries in the body's order; a key given twice is refused.
    pub(super) fn map<T>(
        &mut self,
        path: &Path,
        mut value: impl FnMut(&mut Self, &Path) -> R<T>,
    ) -> R<Few<(Text<'a>, T), 4>> {
        if !self.object_or_null(path, "an object", false)? {
            return Ok(Few::new());
        }
        let mut out: Few<(Text<'a>, T), 4> = Few::new();
        let mut many: Option<foldhash::HashSet<Text<'a>>> = None;
        let mut first = true;
        while let Some((raw, ascii)) = self.s.next_key(&mut first)? {
            let key = checked(raw, ascii)?;
            let again = match &mut many {
                Some(keys) => !keys.insert(key.clone()),
                None => out.iter().any(|e| e.0 == key),
            };
            if again {
                return Err(repeated(path, &key));
            }
            if many.is_none() && out.len() == FEW_KEYS {
                many = Some(
                    out.iter()
                        .map(|e| e.0.clone())
                        .chain([key.clone()])
                        .collect(),
                );
            }
            self.s.colon()?;
            let v = value(self, &Path::Key(path, &key))?;
            out.push((key, v));
        }
        Ok(out)
    }

    /// The whole body.
    pub(crate) fn request(&mut self) -> R<Request<'a>> {
        let root = Path::Root;
        self.object_or_null(&root, "an object", false)?;
        let mut documents = None;
        let mut req = Request {
            request_id: None,
            query: Query::default(),
            unit: Vec::new(),
            profile: None,
            depth: None,
            documents: Vec::new(),
        };
        let mut first = true;
        let mut seen = 0;
        while let Some((key, _)) = self.s.next_key(&mut first)? {
            once(&mut seen, &REQUEST_KEYS, &key, &root)?;
            self.s.colon()?;
            match &*key {
                b"documents" => documents = Some(self.documents(&root.field("documents"))?),
                b"request_id" => {
                    req.request_id =
                        self.opt_string(&root.field("request_id"), 0, wire::MAX_REQUEST_ID_CHARS)?
                }
                b"query" => req.query = self.query(&root.field("query"))?,
                b"unit" => {
                    req.unit = self
                        .map(&root.field("unit"), |f, p| {
                            f.string(p, "a string", 0, usize::MAX)
                        })?
                        .into_vec()
                }
                b"profile" => {
                    req.profile = self.opt_string(&root.field("profile"), 0, usize::MAX)?
                }
                b"depth" => req.depth = self.depth(&root.field("depth"))?,
                _ => return Err(self.unknown(&root, key)),
            }
        }
        let Some(docs) = documents else {
            return Err(missing(&root, "documents"));
        };
        req.documents = docs;
        Ok(req)
    }

    fn depth(&mut self, path: &Path) -> R<Option<u32>> {
        if self.s.peek()? == b'n' {
            self.s.literal(b"ull")?;
            return Ok(None);
        }
        // Bounded to 1..=MAX_DEPTH, so it fits.
        let depth = self.int(path, "an integer or null", 1, wire::MAX_DEPTH)?;
        Ok(Some(depth as u32))
    }

    fn query(&mut self, path: &Path) -> R<Query<'a>> {
        self.object_or_null(path, "an object", false)?;
        let mut q = Query::default();
        let mut first = true;
        let mut seen = 0;
        while let Some((key, _)) = self.s.next_key(&mut first)? {
            once(&mut seen, &QUERY_KEYS, &key, path)?;
            self.s.colon()?;
            match &*key {
                b"text" => {
                    q.text = self.string(
                        &path.field("text"),
                        "a string",
                        0,
                        wire::MAX_QUERY_TEXT_CHARS,
                    )?
                }
                b"classes" => {
                    q.classes = self
                        .strings::<4>(&path.field("classes"), 0, wire::MAX_CLASS_CHARS)?
                        .into_vec()
                }
                // Checked to be a code by `check_page`.
                b"region" => q.region = self.opt_string(&path.field("region"), 0, usize::MAX)?,
                b"age_mode" => q.age_mode = self.age_mode(&path.field("age_mode"))?,
                _ => return Err(self.unknown(path, key)),
            }
        }
        Ok(q)
    }

    fn age_mode(&mut self, path: &Path) -> R<AgeMode> {
        let c = self.s.peek()?;
        if c != b'"' {
            return Err(self.s.wrong_type(c, "a string", path));
        }
        let raw = self.s.string()?;
        if let Some(mode) = AgeMode::ALL
            .into_iter()
            .find(|m| m.as_str().as_bytes() == &*raw)
        {
            return Ok(mode);
        }
        utf8(raw)?;
        let modes: Vec<&str> = AgeMode::ALL.iter().map(|m| m.as_str()).collect();
        Err(invalid(
            path,
            format!("must be one of {}", modes.join(", ")),
        ))
    }
}

/// A number outside `[lo, hi]`.
#[cold]
fn out_of(path: &Path, lo: impl std::fmt::Display, hi: impl std::fmt::Display) -> Refusal {
    invalid(path, format!("must be between {lo} and {hi}"))
}
