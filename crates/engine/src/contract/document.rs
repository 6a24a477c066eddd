//! A document of the page, its minhash and its attributes, field by field.

use super::fields::{missing, once, Fields, Oversize};
use super::scan::{invalid, repeated, Key, Path, R};
use super::{given, Document, Few, MinHashIn, Text};

/// A document's fields in the contract's order, each as a compact body sends its key.
const KEYS: [&[u8]; 13] = [
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
const START: usize = KEYS.len();

/// The field that followed each field (and the object's start) in the last document: a
/// ranker writes every document with the same code, so its keys come in the same order,
/// and the next key is guessed from it before it is read and looked up.
pub(super) struct FieldOrder([u8; START + 1]);

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
fn field_of(key: &[u8]) -> Option<usize> {
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
    pub(super) fn documents(&mut self, path: &Path) -> R<(Vec<Document<'a>>, Vec<Oversize>)> {
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

    fn document(&mut self, path: &Path, d: &mut Document<'a>) -> R<Option<String>> {
        self.object_or_null(path, "object", false)?;
        let (mut id, mut url, mut score) = (None, None, None);
        let mut big = None;
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
                0 => id = Some(self.string(&path.field("id"), "str", 1, 512)?),
                1 => url = Some(self.string(&path.field("url"), "str", 1, 8192)?),
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
                        Some(self.float(&p, "float | null", (0.0, "0.0"), None)?)
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
                    d.blocked_regions = self.strings(&path.field("blocked_regions"), 1, 16)?
                }
                10 => {
                    d.given |= given::TEXT;
                    d.text = self.opt_string(&path.field("text"), 0, usize::MAX)?
                }
                11 => {
                    d.given |= given::MINHASH;
                    (d.minhash, big) = self.minhash(&path.field("minhash"))?
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
        Ok(big)
    }

    fn attributes(&mut self, path: &Path) -> R<Text<'a>> {
        let c = self.s.peek()?;
        if c != b'{' {
            return Err(self.s.wrong_type(c, "object", path, false));
        }
        let mut out = Vec::new();
        self.any.object(&mut self.s, &mut out, path)?;
        // Written from str values and ASCII syntax only.
        String::from_utf8(out)
            .map(Text::Owned)
            .map_err(|_| super::path::bad_utf8())
    }

    fn minhash(&mut self, path: &Path) -> R<(Option<MinHashIn>, Option<String>)> {
        if !self.object_or_null(path, "object | null", true)? {
            return Ok((None, None));
        }
        let (mut values, mut shingles, mut width, mut seed) = (None, None, None, None);
        let (mut big_value, mut big_seed) = (None, None);
        let mut first = true;
        let mut seen = 0;
        while let Some((key, _)) = self.s.next_key(&mut first)? {
            once(&mut seen, &MINHASH_KEYS, &key, path)?;
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

fn empty_document<'a>() -> Document<'a> {
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
