//! The request's objects field by field, with msgspec's types, constraints and messages.

use std::borrow::Cow;

use super::any::AnyWriter;
use super::pyrepr::py_repr;
use super::scan::{checked, invalid, utf8, Num, Path, Refusal, Scanner, R};
use super::{AgeMode, Document, MinHashIn, Query, Request};

/// A minhash value or seed past u64: msgspec keeps it (a Python int), the page check
/// refuses it; `(document index, field path)`.
pub(crate) type Oversize = (usize, String);

/// Decodes one body; `any` writes `attributes`.
pub(crate) struct Fields<'a> {
    pub(crate) s: Scanner<'a>,
    any: AnyWriter,
}

fn missing(path: &Path, name: &str) -> Refusal {
    invalid(&Path::Key(path, name), "required field is missing")
}

fn chars_over(s: &str, max: usize) -> bool {
    s.len() > max && s.chars().count() > max
}

fn chars_under(s: &str, min: usize) -> bool {
    // A char is at most 4 bytes: only a short string needs counting.
    s.len() < min * 4 && s.chars().count() < min
}

impl<'a> Fields<'a> {
    pub(crate) fn new(body: &'a [u8]) -> Self {
        Fields {
            s: Scanner::new(body),
            any: AnyWriter::new(),
        }
    }

    fn unknown(&self, path: &Path, key: Cow<'_, [u8]>) -> Refusal {
        match utf8(key) {
            Ok(k) => invalid(&Path::Key(path, &k), "unknown field"),
            Err(e) => e,
        }
    }

    /// `{` expected (or null where `nullable`): true at `{`, false after a null.
    fn object_or_null(&mut self, path: &Path, expected: &str, nullable: bool) -> R<bool> {
        let c = self.s.peek()?;
        if c == b'{' {
            self.s.open()?;
            return Ok(true);
        }
        if nullable && c == b'n' {
            self.s.literal(b"ull")?;
            return Ok(false);
        }
        Err(self.s.wrong_type(c, expected, path, false))
    }

    fn array(&mut self, path: &Path) -> R<()> {
        let c = self.s.peek()?;
        if c != b'[' {
            return Err(self.s.wrong_type(c, "array", path, false));
        }
        self.s.open()
    }

    #[inline(always)]
    fn string(&mut self, path: &Path, expected: &str, min: usize, max: usize) -> R<String> {
        let c = self.s.peek()?;
        if c != b'"' {
            return Err(self.s.wrong_type(c, expected, path, false));
        }
        let s = self.s.str()?.into_owned();
        if chars_under(&s, min) {
            return Err(invalid(path, format!("Expected `str` of length >= {min}")));
        }
        if chars_over(&s, max) {
            return Err(invalid(path, format!("Expected `str` of length <= {max}")));
        }
        Ok(s)
    }

    fn opt_string(&mut self, path: &Path, min: usize, max: usize) -> R<Option<String>> {
        if self.s.peek()? == b'n' {
            self.s.literal(b"ull")?;
            return Ok(None);
        }
        self.string(path, "str | null", min, max).map(Some)
    }

    /// A float in `[lo, hi]`; `lo_s`/`hi_s` are the bounds as Python's repr spells them.
    #[inline(always)]
    fn float(
        &mut self,
        path: &Path,
        expected: &str,
        lo: (f64, &str),
        hi: Option<(f64, &str)>,
    ) -> R<f64> {
        let c = self.s.peek()?;
        if !(c == b'-' || c.is_ascii_digit()) {
            return Err(self.s.wrong_type(c, expected, path, false));
        }
        let v = self.s.number(path, false)?.as_f64();
        if v < lo.0 {
            return Err(invalid(path, format!("Expected `float` >= {}", lo.1)));
        }
        if let Some((hi, hi_s)) = hi {
            if v > hi {
                return Err(invalid(path, format!("Expected `float` <= {hi_s}")));
            }
        }
        Ok(v)
    }

    #[inline(always)]
    fn score(&mut self, path: &Path) -> R<f64> {
        self.float(
            path,
            "float",
            (-1e15, "-1000000000000000.0"),
            Some((1e15, "1000000000000000.0")),
        )
    }

    #[inline(always)]
    fn probability(&mut self, path: &Path) -> R<f64> {
        self.float(path, "float", (0.0, "0.0"), Some((1.0, "1.0")))
    }

    /// An int in `[lo, hi]`; `Ok(None)` for a positive int past u64 that no bound refuses.
    fn int(&mut self, path: &Path, expected: &str, lo: i64, hi: Option<i64>) -> R<Option<u64>> {
        let c = self.s.peek()?;
        if !(c == b'-' || c.is_ascii_digit()) {
            return Err(self.s.wrong_type(c, expected, path, true));
        }
        let (below, above, v) = match self.s.number(path, true)? {
            Num::Int { neg, mag } => {
                let v = if neg {
                    -i128::from(mag)
                } else {
                    i128::from(mag)
                };
                let above = hi.is_some_and(|hi| v > i128::from(hi));
                (v < i128::from(lo), above, Some(mag))
            }
            Num::Big(d) => (d[0] == b'-', d[0] != b'-' && hi.is_some(), None),
            Num::Float(_) => {
                return Err(invalid(path, format!("Expected `{expected}`, got `float`")))
            }
        };
        if below {
            return Err(invalid(path, format!("Expected `int` >= {lo}")));
        }
        if above {
            let hi = hi.unwrap_or_default();
            return Err(invalid(path, format!("Expected `int` <= {hi}")));
        }
        Ok(v)
    }

    fn bool(&mut self, path: &Path) -> R<bool> {
        match self.s.peek()? {
            b't' => self.s.literal(b"rue").map(|_| true),
            b'f' => self.s.literal(b"alse").map(|_| false),
            c => Err(self.s.wrong_type(c, "bool", path, false)),
        }
    }

    fn strings(&mut self, path: &Path, min: usize, max: usize) -> R<Vec<String>> {
        self.array(path)?;
        let mut out = Vec::new();
        let mut first = true;
        while self.s.next_element(&mut first)? {
            let at = Path::Index(path, out.len());
            out.push(self.string(&at, "str", min, max)?);
        }
        Ok(out)
    }

    /// A `dict[str, T]`: entries in first-key order, a repeated key's last value kept.
    fn map<T>(
        &mut self,
        path: &Path,
        mut value: impl FnMut(&mut Self, &Path) -> R<T>,
    ) -> R<Vec<(String, T)>> {
        if !self.object_or_null(path, "object", false)? {
            return Ok(Vec::new());
        }
        let mut out: Vec<(String, T)> = Vec::with_capacity(4);
        let mut first = true;
        while let Some((raw, ascii)) = self.s.next_key(&mut first)? {
            let key = checked(raw, ascii)?.into_owned();
            self.s.colon()?;
            let v = value(self, &Path::Key(path, &key))?;
            out.push((key, v));
        }
        dedupe(&mut out);
        Ok(out)
    }

    /// The whole body.
    pub(crate) fn request(&mut self) -> R<(Request, Vec<Oversize>)> {
        let root = Path::Root;
        self.object_or_null(&root, "object", false)?;
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
        while let Some((key, _)) = self.s.next_key(&mut first)? {
            self.s.colon()?;
            match &*key {
                b"documents" => documents = Some(self.documents(&root.field("documents"))?),
                b"request_id" => {
                    req.request_id = self.opt_string(&root.field("request_id"), 0, 256)?
                }
                b"query" => req.query = self.query(&root.field("query"))?,
                b"unit" => {
                    req.unit = self.map(&root.field("unit"), |f, p| {
                        f.string(p, "str", 0, usize::MAX)
                    })?
                }
                b"profile" => {
                    req.profile = self.opt_string(&root.field("profile"), 0, usize::MAX)?
                }
                b"depth" => req.depth = self.depth(&root.field("depth"))?,
                _ => return Err(self.unknown(&root, key)),
            }
        }
        let Some((docs, oversize)) = documents else {
            return Err(missing(&root, "documents"));
        };
        req.documents = docs;
        Ok((req, oversize))
    }

    fn depth(&mut self, path: &Path) -> R<Option<u32>> {
        if self.s.peek()? == b'n' {
            self.s.literal(b"ull")?;
            return Ok(None);
        }
        // Bounded to 1..=10000, so it fits.
        Ok(self
            .int(path, "int | null", 1, Some(10_000))?
            .map(|v| v as u32))
    }

    fn query(&mut self, path: &Path) -> R<Query> {
        self.object_or_null(path, "object", false)?;
        let mut q = Query::default();
        let mut first = true;
        while let Some((key, _)) = self.s.next_key(&mut first)? {
            self.s.colon()?;
            match &*key {
                b"text" => q.text = self.string(&path.field("text"), "str", 0, 4096)?,
                b"classes" => q.classes = self.strings(&path.field("classes"), 0, 64)?,
                b"region" => q.region = self.opt_string(&path.field("region"), 1, 16)?,
                b"age_mode" => q.age_mode = self.age_mode(&path.field("age_mode"))?,
                _ => return Err(self.unknown(path, key)),
            }
        }
        Ok(q)
    }

    fn age_mode(&mut self, path: &Path) -> R<AgeMode> {
        let c = self.s.peek()?;
        if c != b'"' {
            return Err(self.s.wrong_type(c, "str", path, false));
        }
        let raw = self.s.string()?;
        match &*raw {
            b"strict" => Ok(AgeMode::Strict),
            b"moderate" => Ok(AgeMode::Moderate),
            b"off" => Ok(AgeMode::Off),
            _ => Err(invalid(
                path,
                format!("Invalid enum value {}", py_repr(&utf8(raw)?)),
            )),
        }
    }

    fn documents(&mut self, path: &Path) -> R<(Vec<Document>, Vec<Oversize>)> {
        self.array(path)?;
        // Sized from the body (a document is rarely under 128 bytes), so the page is not
        // moved as it grows.
        let mut docs = Vec::with_capacity(((self.s.buf.len() - self.s.pos) / 128).min(1024));
        let mut oversize = Vec::new();
        let mut first = true;
        while self.s.next_element(&mut first)? {
            let i = docs.len();
            // Filled in place: a Document is a few hundred bytes, not worth moving twice.
            docs.push(empty_document());
            if let Some(field) = self.document(&Path::Index(path, i), &mut docs[i])? {
                oversize.push((i, field));
            }
        }
        Ok((docs, oversize))
    }

    fn document(&mut self, path: &Path, d: &mut Document) -> R<Option<String>> {
        self.object_or_null(path, "object", false)?;
        let (mut id, mut url, mut score) = (None, None, None);
        let mut big = None;
        let mut first = true;
        while let Some((key, _)) = self.s.next_key(&mut first)? {
            self.s.colon()?;
            match &*key {
                b"id" => id = Some(self.string(&path.field("id"), "str", 1, 512)?),
                b"url" => url = Some(self.string(&path.field("url"), "str", 1, 8192)?),
                b"score" => score = Some(self.score(&path.field("score"))?),
                b"factors" => d.factors = self.map(&path.field("factors"), |f, p| f.score(p))?,
                b"spam_score" => d.spam_score = self.probability(&path.field("spam_score"))?,
                b"adult_score" => d.adult_score = self.probability(&path.field("adult_score"))?,
                b"domain_age_days" => {
                    let p = path.field("domain_age_days");
                    d.domain_age_days = if self.s.peek()? == b'n' {
                        self.s.literal(b"ull")?;
                        None
                    } else {
                        Some(self.float(&p, "float | null", (0.0, "0.0"), None)?)
                    };
                }
                b"is_ad" => d.is_ad = self.bool(&path.field("is_ad"))?,
                b"topics" => d.topics = self.strings(&path.field("topics"), 0, usize::MAX)?,
                b"blocked_regions" => {
                    d.blocked_regions = self.strings(&path.field("blocked_regions"), 1, 16)?
                }
                b"text" => d.text = self.opt_string(&path.field("text"), 0, usize::MAX)?,
                b"minhash" => (d.minhash, big) = self.minhash(&path.field("minhash"))?,
                b"attributes" => d.attributes = self.attributes(&path.field("attributes"))?,
                _ => return Err(self.unknown(path, key)),
            }
        }
        d.id = id.ok_or_else(|| missing(path, "id"))?;
        d.url = url.ok_or_else(|| missing(path, "url"))?;
        d.score = score.ok_or_else(|| missing(path, "score"))?;
        if d.attributes.is_empty() {
            d.attributes.push_str("{}");
        }
        Ok(big)
    }

    fn attributes(&mut self, path: &Path) -> R<String> {
        let c = self.s.peek()?;
        if c != b'{' {
            return Err(self.s.wrong_type(c, "object", path, false));
        }
        let mut out = Vec::new();
        self.any.object(&mut self.s, &mut out, path)?;
        // Written from str values and ASCII syntax only.
        String::from_utf8(out).map_err(|_| super::scan::bad_utf8())
    }

    fn minhash(&mut self, path: &Path) -> R<(Option<MinHashIn>, Option<String>)> {
        if !self.object_or_null(path, "object | null", true)? {
            return Ok((None, None));
        }
        let (mut values, mut shingles, mut width, mut seed) = (None, None, None, None);
        let (mut big_value, mut big_seed) = (None, None);
        let mut first = true;
        while let Some((key, _)) = self.s.next_key(&mut first)? {
            self.s.colon()?;
            match &*key {
                b"values" => {
                    let p = path.field("values");
                    let (v, big) = self.values(&p)?;
                    values = Some(v);
                    big_value = big.map(|i| Path::Index(&p, i).render());
                }
                b"shingles" => {
                    shingles =
                        Some(self.int(&path.field("shingles"), "int", 0, Some(100_000_000))?)
                }
                b"width" => width = Some(self.int(&path.field("width"), "int", 1, Some(100))?),
                b"seed" => {
                    let p = path.field("seed");
                    let v = self.int(&p, "int", 0, None)?;
                    big_seed = v.is_none().then(|| p.render());
                    seed = Some(v.unwrap_or(u64::MAX));
                }
                _ => return Err(self.unknown(path, key)),
            }
        }
        let values = values.ok_or_else(|| missing(path, "values"))?;
        let shingles = shingles.ok_or_else(|| missing(path, "shingles"))?;
        let width = width.ok_or_else(|| missing(path, "width"))?;
        let seed = seed.ok_or_else(|| missing(path, "seed"))?;
        let m = MinHashIn {
            values,
            // Both bounded, so both are Some and fit.
            shingles: shingles.unwrap_or_default(),
            width: width.unwrap_or_default() as u32,
            seed,
        };
        Ok((Some(m), big_value.or(big_seed)))
    }

    /// `values`: u64s, 1 to 4096 of them; the index of the first past u64, if any.
    fn values(&mut self, path: &Path) -> R<(Vec<u64>, Option<usize>)> {
        self.array(path)?;
        let mut out = Vec::new();
        let mut big = None;
        let mut first = true;
        while self.s.next_element(&mut first)? {
            let at = Path::Index(path, out.len());
            let v = self.int(&at, "int", 0, None)?;
            if v.is_none() && big.is_none() {
                big = Some(out.len());
            }
            out.push(v.unwrap_or(u64::MAX));
        }
        if out.is_empty() {
            return Err(invalid(path, "Expected `array` of length >= 1"));
        }
        if out.len() > 4096 {
            return Err(invalid(path, "Expected `array` of length <= 4096"));
        }
        Ok((out, big))
    }
}

fn empty_document() -> Document {
    Document {
        id: String::new(),
        url: String::new(),
        score: 0.0,
        factors: Vec::new(),
        spam_score: 0.0,
        adult_score: 0.0,
        domain_age_days: None,
        is_ad: false,
        topics: Vec::new(),
        blocked_regions: Vec::new(),
        text: None,
        minhash: None,
        attributes: String::new(),
    }
}

/// A dict's entries: a repeated key keeps its first place and takes the last value.
fn dedupe<T>(entries: &mut Vec<(String, T)>) {
    let n = entries.len();
    if n < 2 {
        return;
    }
    let repeats = if n <= 16 {
        (1..n).any(|i| entries[..i].iter().any(|e| e.0 == entries[i].0))
    } else {
        let mut seen = std::collections::HashSet::with_capacity(n);
        !entries.iter().all(|e| seen.insert(e.0.as_str()))
    };
    if !repeats {
        return;
    }
    let mut kept: Vec<(String, T)> = Vec::with_capacity(n);
    for (k, v) in entries.drain(..) {
        match kept.iter_mut().find(|e| e.0 == k) {
            Some(slot) => slot.1 = v,
            None => kept.push((k, v)),
        }
    }
    *entries = kept;
}
