//! JSON text primitives the response and the audit line are written with.
//!
//! One spelling for every answer (the golden HTTP files hold it): strings escape only `"`,
//! `\` and the control characters below U+0020 (everything else, U+007F and U+2028
//! included, is written as UTF-8), and floats are the shortest round-trip digits laid out
//! as ryu lays them out, with no `+` in an exponent (`1e16`, `1e-7`, `0.00001`,
//! `1.2345678901234568e17`, `100.0`, `-0.0`).

/// The escape of each byte below 0x20 (`\u00XX` unless JSON has a short form), and of `"`
/// and `\`; 0 for a byte written as it is.
const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

const HEX: &[u8; 16] = b"0123456789abcdef";

pub use crate::out::Sink;

/// Append `s` as a JSON string: `"`, `\` and control characters escaped, the rest as UTF-8.
///
/// Most strings of a response (ids, URLs, reasons) need no escape. On x86-64 they are
/// scanned and copied sixteen bytes a step with SSE2 (each block stored as it is checked);
/// a shorter one is judged and copied as two words (`short_words`), and one with
/// something to escape has its clean prefix found eight bytes at a time and copied at once.
#[inline]
pub fn write_str<S: Sink + ?Sized>(out: &mut S, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    #[cfg(target_arch = "x86_64")]
    let clean = if bytes.len() >= 16 {
        sse2::copy_clean(out, bytes)
    } else if copy_short_clean(out, bytes) {
        bytes.len()
    } else {
        copy_clean_prefix(out, bytes)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let clean = if bytes.len() < 16 && copy_short_clean(out, bytes) {
        bytes.len()
    } else {
        copy_clean_prefix(out, bytes)
    };
    if clean < bytes.len() {
        write_escaped(out, &bytes[clean..]);
    }
    out.push(b'"');
}

/// Does any byte of the word need escaping (`"`, `\\`, or below 0x20)? The classic "has
/// less than" and "has zero byte" tricks, exact for "is there any".
#[inline(always)]
fn word_needs_escape(x: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = x.wrapping_sub(ONES * 0x20) & !x;
    let quote = x ^ (ONES * b'"' as u64);
    let quote = quote.wrapping_sub(ONES) & !quote;
    let slash = x ^ (ONES * b'\\' as u64);
    let slash = slash.wrapping_sub(ONES) & !slash;
    (below | quote | slash) & HIGH != 0
}

/// A string under 16 bytes as two words that cover it (overlapping when it is shorter
/// than 16 or 8), read without a loop; each is a whole number of the string's bytes.
#[inline(always)]
fn short_words(bytes: &[u8]) -> (u64, u64) {
    let n = bytes.len();
    debug_assert!(n < 16);
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let half = |at: usize| {
        let mut w = [0u8; 4];
        w.copy_from_slice(&bytes[at..at + 4]);
        u64::from(u32::from_le_bytes(w))
    };
    if n >= 8 {
        (word(0), word(n - 8))
    } else if n >= 4 {
        (half(0), half(n - 4))
    } else if n > 0 {
        let three =
            u64::from(bytes[0]) | u64::from(bytes[n / 2]) << 8 | u64::from(bytes[n - 1]) << 16;
        (three, three)
    } else {
        (0, 0)
    }
}

/// Append `bytes` (under 16 of them) from its `short_words`, with two stores (three for
/// a string of one to three bytes) instead of a copy of variable length.
#[inline(always)]
fn store_short<S: Sink + ?Sized>(out: &mut S, bytes: &[u8], words: (u64, u64)) {
    let n = bytes.len();
    out.reserve(n);
    // SAFETY: every store lands within the `n` bytes reserved past the text, and writes
    // the bytes of `bytes` at their own offsets, so all `n` are written when the length
    // covers them.
    unsafe {
        let dst = out.as_mut_ptr().add(out.len());
        if n >= 8 {
            std::ptr::write_unaligned(dst.cast::<[u8; 8]>(), words.0.to_le_bytes());
            std::ptr::write_unaligned(dst.add(n - 8).cast::<[u8; 8]>(), words.1.to_le_bytes());
        } else if n >= 4 {
            std::ptr::write_unaligned(dst.cast::<[u8; 4]>(), (words.0 as u32).to_le_bytes());
            std::ptr::write_unaligned(
                dst.add(n - 4).cast::<[u8; 4]>(),
                (words.1 as u32).to_le_bytes(),
            );
        } else if n > 0 {
            *dst = words.0 as u8;
            *dst.add(n / 2) = (words.0 >> 8) as u8;
            *dst.add(n - 1) = (words.0 >> 16) as u8;
        }
        out.set_len(out.len() + n);
    }
}

/// Append `bytes` as they are: under 16 with `store_short`, longer with one copy.
#[inline]
pub(crate) fn extend_short<S: Sink + ?Sized>(out: &mut S, bytes: &[u8]) {
    if bytes.len() < 16 {
        store_short(out, bytes, short_words(bytes));
    } else {
        out.extend_from_slice(bytes);
    }
}

/// Append `bytes` (under 16 of them) if none needs escaping; whether it did (nothing is
/// written otherwise). The two words of `short_words` are judged and stored whole; spaces
/// (clean) fill the high bytes of a word that holds fewer than eight.
#[inline]
fn copy_short_clean<S: Sink + ?Sized>(out: &mut S, bytes: &[u8]) -> bool {
    let words = short_words(bytes);
    let pad = match bytes.len() {
        0 => return true,
        n if n >= 8 => 0,
        n if n >= 4 => 0x2020_2020u64 << 32,
        _ => 0x20_2020_2020u64 << 24,
    };
    if word_needs_escape(words.0 | pad) || word_needs_escape(words.1 | pad) {
        return false;
    }
    store_short(out, bytes, words);
    true
}

/// Copy the clean prefix of `bytes` to `out`; its length.
#[inline]
fn copy_clean_prefix<S: Sink + ?Sized>(out: &mut S, bytes: &[u8]) -> usize {
    let clean = clean_prefix(bytes);
    out.extend_from_slice(&bytes[..clean]);
    clean
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod sse2 {
    use super::Sink;
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8, _mm_storeu_si128,
    };

    /// One bit per byte of `block` that needs escaping: `"`, `\`, or below 0x20 (the
    /// bytes that also end a plain run inside a string the decoder reads).
    #[inline(always)]
    pub(crate) fn escapes(block: __m128i) -> u32 {
        // SAFETY: SSE2 is part of x86-64.
        unsafe {
            let quote = _mm_cmpeq_epi8(block, _mm_set1_epi8(b'"' as i8));
            let slash = _mm_cmpeq_epi8(block, _mm_set1_epi8(b'\\' as i8));
            // x <= 0x1f (unsigned) exactly when max(x, 0x1f) is 0x1f.
            let low = _mm_set1_epi8(0x1f);
            let control = _mm_cmpeq_epi8(_mm_max_epu8(block, low), low);
            _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, slash), control)) as u32
        }
    }

    /// Copy the clean prefix of `bytes` (16 bytes or more) to `out`; its length. Each
    /// block is stored whole before it is judged, so `out` gets 16 bytes of room past the
    /// string; the last block overlaps the one before it rather than reading past the end.
    #[inline]
    pub(super) fn copy_clean<S: Sink + ?Sized>(out: &mut S, bytes: &[u8]) -> usize {
        let n = bytes.len();
        debug_assert!(n >= 16);
        out.reserve(n + 16);
        // SAFETY: every load reads 16 bytes within `bytes` (n >= 16); every store writes
        // 16 bytes at most n + 16 - 16 past the old length, inside the reserved room; the
        // length is set only over bytes copied from `bytes`.
        unsafe {
            let src = bytes.as_ptr();
            let dst = out.as_mut_ptr().add(out.len());
            let mut i = 0;
            loop {
                let at = i.min(n - 16);
                let block = _mm_loadu_si128(src.add(at).cast());
                _mm_storeu_si128(dst.add(at).cast(), block);
                // Bytes before `i` were judged clean by the block before.
                let hits = escapes(block) >> (i - at);
                if hits != 0 {
                    i += hits.trailing_zeros() as usize;
                    break;
                }
                i += 16;
                if i >= n {
                    i = n;
                    break;
                }
            }
            out.set_len(out.len() + i);
            i
        }
    }
}

/// The length of the longest prefix of `bytes` with nothing to escape.
#[inline]
fn clean_prefix(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    while i + 8 <= bytes.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[i..i + 8]);
        let x = u64::from_le_bytes(word);
        // A byte below 0x20, or equal to `"` or `\`, sets its high bit in one of the
        // three masks (the classic "has less than" and "has zero byte" tricks, exact for
        // "is there any").
        let below = x.wrapping_sub(ONES * 0x20) & !x;
        let quote = x ^ (ONES * b'"' as u64);
        let quote = quote.wrapping_sub(ONES) & !quote;
        let slash = x ^ (ONES * b'\\' as u64);
        let slash = slash.wrapping_sub(ONES) & !slash;
        if (below | quote | slash) & HIGH != 0 {
            break;
        }
        i += 8;
    }
    while i < bytes.len() && ESCAPE[bytes[i] as usize] == 0 {
        i += 1;
    }
    i
}

/// Append `bytes` (inside a string) with each byte that needs it escaped.
fn write_escaped<S: Sink + ?Sized>(out: &mut S, bytes: &[u8]) {
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let e = ESCAPE[b as usize];
        if e == 0 {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        if e == b'u' {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 0xf) as usize]);
        } else {
            out.push(b'\\');
            out.push(e);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// Append a finite float in its shortest round-trip form.
///
/// A non-finite value cannot come from a decoded request (it is refused) and the engine's
/// arithmetic is bounded; one is written as `null`, never as invalid JSON.
pub fn write_f64<S: Sink + ?Sized>(out: &mut S, v: f64) {
    if v.is_finite() {
        let mut buf = zmij::Buffer::new();
        let text = buf.format_finite(v).as_bytes();
        // zmij lays a float out as ryu does, except that a positive exponent gets a `+`
        // (`1e+16`), which the answers have never had.
        match text.iter().position(|&b| b == b'+') {
            Some(plus) => {
                out.extend_from_slice(&text[..plus]);
                out.extend_from_slice(&text[plus + 1..]);
            }
            None => out.extend_from_slice(text),
        }
    } else {
        out.extend_from_slice(b"null");
    }
}

/// "00" to "99".
const PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// Append an integer in decimal.
///
/// Written in place from the last digit back, two digits a step, with no copy: a response
/// spells two positions per document.
#[inline]
pub fn write_u64<S: Sink + ?Sized>(out: &mut S, v: u64) {
    let digits = decimal_digits(v);
    out.reserve(digits);
    // SAFETY: `digits` bytes of reserved room are written, each an ASCII digit, before
    // the length covers them.
    unsafe {
        let end = out.as_mut_ptr().add(out.len() + digits);
        let mut at = digits;
        let mut v = v;
        while v >= 100 {
            let pair = (v % 100) as usize * 2;
            v /= 100;
            at -= 2;
            std::ptr::copy_nonoverlapping(PAIRS.as_ptr().add(pair), end.sub(digits - at), 2);
        }
        if v >= 10 {
            std::ptr::copy_nonoverlapping(PAIRS.as_ptr().add(v as usize * 2), end.sub(digits), 2);
        } else {
            *end.sub(digits) = b'0' + v as u8;
        }
        out.set_len(out.len() + digits);
    }
}

/// How many decimal digits `v` has (1 for 0).
#[inline]
fn decimal_digits(v: u64) -> usize {
    let mut digits = 1;
    let mut bound = 10u64;
    while digits < 20 && v >= bound {
        digits += 1;
        bound = bound.wrapping_mul(10);
    }
    digits
}

/// Append a signed integer in decimal.
pub fn write_i64<S: Sink + ?Sized>(out: &mut S, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    write_u64(out, v.unsigned_abs());
}

/// Append a string or `null`.
pub fn write_opt_str<S: Sink + ?Sized>(out: &mut S, v: Option<&str>) {
    match v {
        Some(s) => write_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// Append a JSON array of `items`, each written by `each`.
pub fn write_list<S: Sink + ?Sized, T>(
    out: &mut S,
    items: impl IntoIterator<Item = T>,
    mut each: impl FnMut(&mut S, T),
) {
    out.push(b'[');
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        each(out, item);
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: f64) -> String {
        let mut out = Vec::new();
        write_f64(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_escape_quotes_backslashes_and_controls() {
        let mut out = Vec::new();
        write_str(&mut out, "a\"b\\c\nd\u{1}é\u{7f}\u{2028}\u{1f}");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a\\\"b\\\\c\\nd\\u0001é\u{7f}\u{2028}\\u001f\""
        );
    }

    #[test]
    fn escapes_are_found_in_any_lane_of_a_long_string() {
        for special in ["\"", "\\", "\n", "\u{0}", "\u{1f}"] {
            for at in 0..20 {
                let s = format!("{}{special}{}", "a".repeat(at), "é".repeat(5));
                let mut fast = Vec::new();
                write_str(&mut fast, &s);
                let mut slow = vec![b'"'];
                write_escaped(&mut slow, s.as_bytes());
                slow.push(b'"');
                assert_eq!(fast, slow, "{s:?}");
            }
        }
        let mut out = Vec::new();
        write_str(&mut out, "0123456789abcdef\u{7f}\u{2028}~!#$%&'()*+,-./");
        assert_eq!(
            out,
            "\"0123456789abcdef\u{7f}\u{2028}~!#$%&'()*+,-./\"".as_bytes()
        );
    }

    #[test]
    fn floats_are_spelled_in_the_answers_layout() {
        for (v, s) in [
            (8.0, "8.0"),
            (0.1, "0.1"),
            (1e16, "1e16"),
            (1e15, "1000000000000000.0"),
            (1e-7, "1e-7"),
            (1e-5, "0.00001"),
            (123456789012345680.0, "1.2345678901234568e17"),
            (-0.0, "-0.0"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e308"),
            (9007199254740992.0, "9007199254740992.0"),
        ] {
            assert_eq!(f(v), s);
        }
        assert_eq!(f(f64::NAN), "null");
    }

    #[test]
    fn floats_respell_as_ryu_the_writer_they_replaced() {
        // ryu (a dev-dependency) is the reference: the layout is its own.
        let mut rng = crate::testing::Xorshift(0x9e37_79b9_7f4a_7c15);
        for i in 0..2_000_000u64 {
            let state = rng.next();
            let v = match i % 3 {
                0 => f64::from_bits(state),
                1 => (state >> 11) as f64 / (1u64 << 53) as f64 * 40.0 - 20.0,
                _ => (state % 10_000_000) as f64 / 10f64.powi((state >> 40) as i32 % 24 - 4),
            };
            if v.is_finite() {
                assert_eq!(f(v), ryu::Buffer::new().format_finite(v), "{v:e}");
            }
        }
    }

    #[test]
    fn short_strings_are_judged_and_copied_as_the_byte_loop_does() {
        // Every length under 16 (one word, two, half-words, single bytes), each place
        // holding a byte to escape, a clean byte next to one (0x20, 0x21, 0x23, 0x5b,
        // 0x5d), or DEL, against the byte loop; then bytes past ASCII.
        let specials: [&[u8]; 11] = [
            b"\"", b"\\", b"\x00", b"\x1f", b"\x01", b" ", b"!", b"#", b"[", b"]", b"\x7f",
        ];
        for len in 0..16 {
            for at in 0..=len {
                for special in specials {
                    let mut s: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
                    if at < len {
                        s[at] = special[0];
                    }
                    let s = String::from_utf8(s).unwrap();
                    let mut fast = b"x".to_vec();
                    write_str(&mut fast, &s);
                    let mut slow = b"x\"".to_vec();
                    write_escaped(&mut slow, s.as_bytes());
                    slow.push(b'"');
                    assert_eq!(fast, slow, "{s:?}");
                    let mut copied = b"x".to_vec();
                    extend_short(&mut copied, s.as_bytes());
                    assert_eq!(copied, [b"x", s.as_bytes()].concat(), "{s:?}");
                }
            }
        }
        let mut out = Vec::new();
        write_str(&mut out, "é\u{2028}\u{7f}ü");
        assert_eq!(out, "\"é\u{2028}\u{7f}ü\"".as_bytes());
    }

    #[test]
    fn long_strings_are_escaped_in_any_block() {
        // Lengths around the 16-byte blocks, an escape at every place (or none), so each
        // block, the overlapping last one included, is checked against the byte loop.
        for len in 16..70 {
            for at in 0..=len {
                for special in ["\"", "\\", "\u{1}", "\u{1f}"] {
                    let mut s: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
                    if at < len {
                        s.replace_range(at..at + 1, special);
                    }
                    let mut fast = Vec::new();
                    write_str(&mut fast, &s);
                    let mut slow = vec![b'"'];
                    write_escaped(&mut slow, s.as_bytes());
                    slow.push(b'"');
                    assert_eq!(fast, slow, "{s:?}");
                }
            }
        }
    }

    #[test]
    fn integers_are_spelled_as_rust_spells_them() {
        let mut rng = crate::testing::Xorshift(0x2545_f491_4f6c_dd1d);
        let mut values: Vec<u64> = vec![0, 9, 10, 99, 100, 101, u64::MAX];
        for p in 1..20 {
            let t = 10u64.pow(p);
            values.extend([t - 1, t, t + 1]);
        }
        for _ in 0..100_000 {
            let r = rng.next();
            values.push(r >> (r % 64));
        }
        for v in values {
            let mut out = b"x".to_vec();
            write_u64(&mut out, v);
            assert_eq!(out, format!("x{v}").into_bytes());
        }
    }

    #[test]
    fn integers() {
        let mut out = Vec::new();
        write_i64(&mut out, i64::MIN);
        out.push(b' ');
        write_u64(&mut out, u64::MAX);
        out.push(b' ');
        write_i64(&mut out, 0);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "-9223372036854775808 18446744073709551615 0"
        );
    }
}
