//! A document of the page, its minhash and its attributes, field by field.

use super::fields::{missing, once, Fields};
use super::scan::{invalid, repeated, Key, Path, R};
use super::{given, Document, Few, MinHashIn, Text};
use crate::wire;

/// A document's fields in the contract's order, each as a compact body sends its key.
pub(super) const KEYS: [&[u8]; 13] = [
    b"\"id\":",
    b"\"url\":",
    b"\"score\":",
    b"\"factors\":",
    b"\"spam_score\":",
    b"\"adult_score\":",
    b"\"domain_age_days\":",
    b"\"is_ad\":",
    b"\"topics\":",
    b"\"blocked_regions\":",
    b"\"text\":",
    b"\"minhash\":",
    b"\"attributes\":",
];

/// Where `FieldOrder` keeps the guess for a document's first key.
pub(super) const START: usize = KEYS.len();

/// The field that followed each field (and the object's start) in the last document: a
/// ranker writes every document with the same code, so its keys come in the same order,
/// and the next key is guessed from it before it is read and looked up.
pub(super) struct FieldOrder(pub(super) [u8; START + 1]);

impl FieldOrder {
    /// The contract's order, until a document shows the sender's.
    pub(super) fn new() -> Self {
        let mut next = [0u8; START + 1];
        for (i, n) in next.iter_mut().enumerate().take(START) {
            *n = (i + 1).min(START - 1) as u8;
        }
        next[START] = 0;
        FieldOrder(next)
    }
}

/// The field of a key read in full (not guessed), or None for an unknown one.
pub(super) fn field_of(key: &[u8]) -> Option<usize> {
    KEYS.iter().position(|k| name(k) == key)
}

/// A field's name: its key without the quotes and the colon.
fn name(key: &[u8]) -> &[u8] {
    &key[1..key.len() - 2]
}

/// The 400 for a field its document gives twice.
#[cold]
fn given_twice(path: &Path, field: usize) -> super::scan::Refusal {
    repeated(
        path,
        std::str::from_utf8(name(KEYS[field])).unwrap_or_default(),
    )
}

/// `minhash`'s keys.
const MINHASH_KEYS: [&str; 4] = ["values", "shingles", "width", "seed"];

impl<'a> Fields<'a> {
    pub(super) fn documents(&mut self, path: &Path) -> R<Vec<Document<'a>>> {
        self.array(path)?;
        // Sized from the body (a document is rarely under 128 bytes), so the page is not
        // moved as it grows.
        let mut docs = Vec::with_capacity(((self.s.buf.len() - self.s.pos) / 128).min(1024));
        let mut first = true;
        while self.s.next_element(&mut first)? {
            let i = docs.len();
            // Filled in place: a Document is a few hundred bytes, not worth moving twice.
            docs.push(empty_document());
            if self.fast {
                let mark = self.s.mark();
                if self.fast_document(&mut docs[i]).is_some() {
                    #[cfg(test)]
                    {
                        self.taken += 1;
                    }
                    continue;
                }
                self.s.back_to(mark);
                docs[i] = empty_document();
            }
            self.document(&Path::Index(path, i), &mut docs[i])?;
        }
        Ok(docs)
    }

    fn document(&mut self, path: &Path, d: &mut Document<'a>) -> R<()> {
        self.object_or_null(path, "an object", false)?;
        let (mut id, mut url, mut score) = (None, None, None);
        let mut first = true;
        let mut prev = START;
        // The fields given so far, a bit each: a field given twice is refused at its key.
        let mut seen = 0u16;
        loop {
            let guess = self.order.0[prev] as usize;
            let field = match self.s.next_key_or(&mut first, KEYS[guess])? {
                None => break,
                Some(Key::Guessed) => guess,
                Some(Key::Read(key)) => match field_of(&key) {
                    Some(f) if seen & (1 << f) != 0 => return Err(given_twice(path, f)),
                    Some(f) => {
                        self.s.colon()?;
                        f
                    }
                    None => {
                        self.s.colon()?;
                        return Err(self.unknown(path, key));
                    }
                },
            };
            if seen & (1 << field) != 0 {
                return Err(given_twice(path, field)); // a guessed key, given again
            }
            seen |= 1 << field;
            self.order.0[prev] = field as u8;
            prev = field;
            match field {
                0 => {
                    let p = path.field("id");
                    id = Some(self.string(&p, "a string", 1, wire::MAX_ID_CHARS)?)
                }
                1 => {
                    let p = path.field("url");
                    url = Some(self.string(&p, "a string", 0, usize::MAX)?)
                }
                2 => score = Some(self.score(&path.field("score"))?),
                3 => {
                    d.given |= given::FACTORS;
                    d.factors = self.map(&path.field("factors"), |f, p| f.score(p))?
                }
                4 => {
                    d.given |= given::SPAM_SCORE;
                    d.spam_score = self.probability(&path.field("spam_score"))?
                }
                5 => {
                    d.given |= given::ADULT_SCORE;
                    d.adult_score = self.probability(&path.field("adult_score"))?
                }
                6 => {
                    d.given |= given::DOMAIN_AGE_DAYS;
                    let p = path.field("domain_age_days");
                    d.domain_age_days = if self.s.peek()? == b'n' {
                        self.s.literal(b"ull")?;
                        None
                    } else {
                        Some(self.float(&p, "a number or null", 0.0, f64::MAX)?)
                    };
                }
                7 => {
                    d.given |= given::IS_AD;
                    d.is_ad = self.bool(&path.field("is_ad"))?
                }
                8 => {
                    d.given |= given::TOPICS;
                    d.topics = self.strings(&path.field("topics"), 0, usize::MAX)?
                }
                9 => {
                    d.given |= given::BLOCKED_REGIONS;
                    // Checked to be codes by `check_page`.
                    d.blocked_regions =
                        self.strings(&path.field("blocked_regions"), 0, usize::MAX)?
                }
                10 => {
                    d.given |= given::TEXT;
                    d.text = self.opt_string(&path.field("text"), 0, usize::MAX)?
                }
                11 => {
                    d.given |= given::MINHASH;
                    d.minhash = self.minhash(&path.field("minhash"))?
                }
                12 => {
                    d.given |= given::ATTRIBUTES;
                    d.attributes = self.attributes(&path.field("attributes"))?
                }
                _ => unreachable!("a field of KEYS"),
            }
        }
        d.id = id.ok_or_else(|| missing(path, "id"))?;
        d.url = url.ok_or_else(|| missing(path, "url"))?;
        d.score = score.ok_or_else(|| missing(path, "score"))?;
        Ok(())
    }

    pub(super) fn attributes(&mut self, path: &Path) -> R<Text<'a>> {
        let c = self.s.peek()?;
        if c != b'{' {
            return Err(self.s.wrong_type(c, "an object", path));
        }
        let mut out = Vec::new();
        self.any.object(&mut self.s, &mut out, path)?;
        // Written from str values and ASCII syntax only.
        String::from_utf8(out)
            .map(Text::Owned)
            .map_err(|_| super::path::bad_utf8())
    }

    pub(super) fn minhash(&mut self, path: &Path) -> R<Option<MinHashIn>> {
        if !self.object_or_null(path, "an object or null", true)? {
            return Ok(None);
        }
        let (mut values, mut shingles, mut width, mut seed) = (None, None, None, None);
        let mut first = true;
        let mut seen = 0;
        while let Some((key, _)) = self.s.next_key(&mut first)? {
            once(&mut seen, &MINHASH_KEYS, &key, path)?;
            self.s.colon()?;
            match &*key {
                b"values" => values = Some(self.values(&path.field("values"))?),
                b"shingles" => {
                    let p = path.field("shingles");
                    shingles = Some(self.int(&p, "an integer", 0, wire::MAX_MINHASH_SHINGLES)?)
                }
                b"width" => {
                    let p = path.field("width");
                    width = Some(self.int(&p, "an integer", 1, wire::MAX_MINHASH_WIDTH)?)
                }
                b"seed" => seed = Some(self.int(&path.field("seed"), "an integer", 0, u64::MAX)?),
                _ => return Err(self.unknown(path, key)),
            }
        }
        let values = values.ok_or_else(|| missing(path, "values"))?;
        let shingles = shingles.ok_or_else(|| missing(path, "shingles"))?;
        let width = width.ok_or_else(|| missing(path, "width"))?;
        let seed = seed.ok_or_else(|| missing(path, "seed"))?;
        Ok(Some(MinHashIn {
            values,
            shingles,
            // Bounded by MAX_MINHASH_WIDTH, so it fits.
            width: width as u32,
            seed,
        }))
    }

    /// `values`: 1 to `wire::MAX_MINHASH_VALUES` unsigned 64-bit integers.
    fn values(&mut self, path: &Path) -> R<Vec<u64>> {
        self.array(path)?;
        let mut out = Vec::new();
        let mut first = true;
        while self.s.next_element(&mut first)? {
            let at = Path::Index(path, out.len());
            out.push(self.int(&at, "an integer", 0, u64::MAX)?);
        }
        if out.is_empty() || out.len() > wire::MAX_MINHASH_VALUES {
            let max = wire::MAX_MINHASH_VALUES;
            return Err(invalid(path, format!("must hold 1 to {max} values")));
        }
        Ok(out)
    }
}

pub(super) fn empty_document<'a>() -> Document<'a> {
    Document {
        id: Text::Borrowed(""),
        url: Text::Borrowed(""),
        score: 0.0,
        factors: Few::new(),
        spam_score: 0.0,
        adult_score: 0.0,
        domain_age_days: None,
        is_ad: false,
        topics: Few::new(),
        blocked_regions: Few::new(),
        text: None,
        minhash: None,
        attributes: Text::Borrowed("{}"),
        given: 0,
    }
}
