//! Strings: escapes decoded, a control character or a bad escape a 400 naming its byte,
//! UTF-8 checked by the caller only where a string is kept.

use std::borrow::Cow;

use super::path::{checked, truncated, R};
use super::scan::Scanner;

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

const ONES: u64 = 0x0101_0101_0101_0101;

const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The end of the run of plain bytes from `i` (at the first special byte, or the end),
/// and whether the run is all ASCII. On x86-64 sixteen bytes a step with SSE2 while
/// sixteen are left (URLs and texts are long), then as `plain_words`.
#[inline(always)]
pub(super) fn plain_run(buf: &[u8], i: usize) -> (usize, bool) {
    #[cfg(target_arch = "x86_64")]
    if i + 16 <= buf.len() {
        return plain_blocks(buf, i);
    }
    plain_words(buf, i)
}

/// `plain_run` sixteen bytes a step: the special bytes are those `json::write_str` escapes,
/// found by the same compare, and the high bits gathered by a movemask.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn plain_blocks(buf: &[u8], mut i: usize) -> (usize, bool) {
    use std::arch::x86_64::{_mm_loadu_si128, _mm_movemask_epi8};
    let mut high = 0u32;
    while i + 16 <= buf.len() {
        // SAFETY: the 16 bytes from `i` are within `buf`; SSE2 is part of x86-64.
        let block = unsafe { _mm_loadu_si128(buf.as_ptr().add(i).cast()) };
        let hits = crate::json::sse2::escapes(block);
        // SAFETY: SSE2 is part of x86-64.
        let highs = unsafe { _mm_movemask_epi8(block) } as u32;
        if hits != 0 {
            let k = hits.trailing_zeros();
            // Only the bytes before the special one are the run's.
            high |= highs & ((1 << k) - 1);
            return (i + k as usize, high == 0);
        }
        high |= highs;
        i += 16;
    }
    let (end, ascii) = plain_words(buf, i);
    (end, ascii && high == 0)
}

/// `plain_run` eight bytes a step, the first special byte of a word found exactly by the
/// has-zero-byte trick; the high bits of the run's bytes are gathered on the way, so a kept
/// string needs no second pass to be known ASCII.
#[inline(always)]
fn plain_words(buf: &[u8], mut i: usize) -> (usize, bool) {
    let mut high = 0u64;
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
            let k = hits.trailing_zeros() / 8;
            // Only the bytes before the special one are the run's.
            high |= v & ((1u64 << (8 * k)) - 1);
            return (i + k as usize, high & HIGHS == 0);
        }
        high |= v;
        i += 8;
    }
    while i < buf.len() && !special(buf[i]) {
        high |= u64::from(buf[i]);
        i += 1;
    }
    (i, high & HIGHS == 0)
}

impl<'a> Scanner<'a> {
    /// A string at `"`: its bytes with the escapes decoded (borrowed when it has none).
    pub(crate) fn string(&mut self) -> R<Cow<'a, [u8]>> {
        self.string_ascii().map(|(s, _)| s)
    }

    /// `string`, and whether it is ASCII as sent (no escapes): then `checked` needs no look
    /// at the bytes.
    #[inline(always)]
    pub(crate) fn string_ascii(&mut self) -> R<(Cow<'a, [u8]>, bool)> {
        let buf = self.buf;
        self.pos += 1;
        let start = self.pos;
        let (i, ascii) = plain_run(buf, self.pos);
        self.pos = i;
        match buf.get(i) {
            None => Err(truncated()),
            Some(b'"') => {
                self.pos += 1;
                Ok((Cow::Borrowed(&buf[start..i]), ascii))
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time run finder against a byte loop and `is_ascii`, on bytes rich in
    /// specials and in bytes past ASCII.
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
            let ascii = buf[start..end].is_ascii();
            assert_eq!(plain_run(&buf, start), (end, ascii), "{buf:?} from {start}");
            assert_eq!(
                plain_words(&buf, start),
                (end, ascii),
                "{buf:?} from {start}"
            );
        }
    }
}
