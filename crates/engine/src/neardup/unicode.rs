//! Python's `re.findall(r"\w+", text.lower())` (app/neardup/shingles.py `words`), character for
//! character, on the Unicode tables of the Python the service runs (tables.rs).
//!
//! Rust's own `to_lowercase` and `is_alphanumeric` follow a newer Unicode and another
//! definition of a word character (Python's `\w` leaves out combining marks), so neither
//! is used: a word split differently would hash to other shingles.

use super::tables::{CASED, CASE_IGNORABLE, LOWER, WORD};

/// The words of a text, lowercased and joined by single spaces, with where each ends.
///
/// A window of consecutive words is then one slice of `joined`: exactly the bytes Python
/// hashes for a shingle (`b" ".join(words)`), with no allocation per window.
#[derive(Default)]
pub struct Words {
    /// The words in UTF-8, each followed by one space but the last.
    joined: Vec<u8>,
    /// Byte offset in `joined` just past each word.
    ends: Vec<usize>,
    in_word: bool,
}

impl Words {
    /// Tokenize `text` into self, replacing what it held.
    pub fn read(&mut self, text: &str) {
        self.joined.clear();
        self.ends.clear();
        self.in_word = false;
        let bytes = text.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            let b = bytes[at];
            if b < 0x80 {
                let low = b.to_ascii_lowercase();
                if low.is_ascii_alphanumeric() || low == b'_' {
                    self.start_word();
                    self.joined.push(low);
                } else {
                    self.end_word();
                }
                at += 1;
                continue;
            }
            let Some(c) = text[at..].chars().next() else {
                break;
            };
            if c == '\u{3A3}' {
                self.push(sigma(&text[..at], &text[at + c.len_utf8()..]));
            } else {
                let (first, second) = lower(c);
                self.push(first);
                if let Some(second) = second {
                    self.push(second);
                }
            }
            at += c.len_utf8();
        }
        self.end_word();
    }

    /// The number of words.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// The bytes of words `from..to` joined by spaces (`from < to <= len()`).
    pub fn window(&self, from: usize, to: usize) -> &[u8] {
        let start = if from == 0 {
            0
        } else {
            self.ends[from - 1] + 1
        };
        &self.joined[start..self.ends[to - 1]]
    }

    /// The words, each as a `&str`.
    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        (0..self.len()).map(|n| std::str::from_utf8(self.window(n, n + 1)).unwrap_or_default())
    }

    fn start_word(&mut self) {
        if !self.in_word {
            if !self.ends.is_empty() {
                self.joined.push(b' ');
            }
            self.in_word = true;
        }
    }

    fn push(&mut self, c: char) {
        if is_word(c) {
            self.start_word();
            let mut buf = [0; 4];
            self.joined
                .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        } else {
            self.end_word();
        }
    }

    fn end_word(&mut self) {
        if self.in_word {
            self.ends.push(self.joined.len());
            self.in_word = false;
        }
    }
}

fn in_ranges(ranges: &[(u32, u32)], c: char) -> bool {
    let c = c as u32;
    let after = ranges.partition_point(|&(start, _)| start <= c);
    after > 0 && c <= ranges[after - 1].1
}

/// Characters below this (Latin, Greek, Cyrillic, Armenian, Hebrew, Arabic: one or two
/// bytes of UTF-8) are looked up directly; the rest by binary search of the tables.
const DIRECT: usize = 0x800;

/// `\w` of each character below DIRECT, one bit each.
static WORD_BITS: [u64; DIRECT / 64] = word_bits();
/// The lowercase of each character below DIRECT (all single characters but U+0130's).
static LOWER_DIRECT: [u16; DIRECT] = lower_direct();

const fn word_bits() -> [u64; DIRECT / 64] {
    let mut bits = [0u64; DIRECT / 64];
    let mut n = 0;
    while n < WORD.len() && (WORD[n].0 as usize) < DIRECT {
        let mut c = WORD[n].0 as usize;
        while c <= WORD[n].1 as usize && c < DIRECT {
            bits[c / 64] |= 1 << (c % 64);
            c += 1;
        }
        n += 1;
    }
    bits
}

const fn lower_direct() -> [u16; DIRECT] {
    let mut out = [0u16; DIRECT];
    let mut c = 0;
    while c < DIRECT {
        out[c] = c as u16;
        c += 1;
    }
    let mut n = 0;
    while n < LOWER.len() && (LOWER[n].0 as usize) < DIRECT {
        out[LOWER[n].0 as usize] = LOWER[n].1 as u16; // U+0130's second half: see lower()
        n += 1;
    }
    out
}

/// Whether Python's `\w` matches c.
pub fn is_word(c: char) -> bool {
    let n = c as usize;
    if n < DIRECT {
        WORD_BITS[n / 64] >> (n % 64) & 1 == 1
    } else {
        in_ranges(&WORD, c)
    }
}

/// What `str.lower` makes of c (one character, or two for U+0130), capital sigma aside.
fn lower(c: char) -> (char, Option<char>) {
    let n = c as usize;
    if n < DIRECT && n != 0x130 {
        // below DIRECT every lowercase is below 0x800 too, so a valid char
        return (
            char::from_u32(u32::from(LOWER_DIRECT[n])).unwrap_or(c),
            None,
        );
    }
    match LOWER.binary_search_by_key(&(c as u32), |&(from, _, _)| from) {
        Ok(n) => {
            let (_, first, second) = LOWER[n];
            (
                char::from_u32(first).unwrap_or(c),
                char::from_u32(second).filter(|_| second != 0),
            )
        }
        Err(_) => (c, None),
    }
}

/// Capital sigma lowercased in its context, as CPython's `handle_capital_sigma` does: final
/// ς after a cased letter (skipping case-ignorable ones) unless one follows, else σ.
fn sigma(before: &str, after: &str) -> char {
    let ignorable = |c: &char| in_ranges(&CASE_IGNORABLE, *c);
    // CASED holds the cased characters that are not case-ignorable: the only ones looked at.
    let cased = |c: char| in_ranges(&CASED, c);
    let final_sigma = before
        .chars()
        .rev()
        .find(|c| !ignorable(c))
        .is_some_and(cased)
        && !after.chars().find(|c| !ignorable(c)).is_some_and(cased);
    if final_sigma {
        '\u{3C2}'
    } else {
        '\u{3C3}'
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut w = Words::default();
        w.read(text);
        w.iter().map(str::to_owned).collect()
    }

    #[test]
    fn cyrillic_punctuation_digits_and_case() {
        // tests/neardup/test_shingles.py: the same sentence, the same words
        assert_eq!(
            words("Доставка в КАЗАНЬ — 3 дня! Ёлки, палки."),
            ["доставка", "в", "казань", "3", "дня", "ёлки", "палки"]
        );
    }

    #[test]
    fn python_quirks_are_kept() {
        // 'İ' lowers to i + U+0307, a combining mark, which Python's \w does not match
        assert_eq!(words("İstanbul"), ["i", "stanbul"]);
        assert_eq!(words("ΟΔΟΣ ΣΑ"), ["οδος", "σα"]);
        assert_eq!(words("x_y ½ २"), ["x_y", "½", "२"]);
    }

    #[test]
    fn windows_are_the_joined_bytes() {
        let mut w = Words::default();
        w.read("  Один, ДВА три ");
        assert_eq!(w.window(0, 3), "один два три".as_bytes());
        assert_eq!(w.window(1, 2), "два".as_bytes());
    }
}
