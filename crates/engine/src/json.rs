//! JSON text primitives the response and the audit line are written with.
//!
//! The response must be byte-identical to what the Python service wrote with msgspec, so
//! numbers and strings are spelled the way msgspec spells them: strings escape only `"`,
//! `\` and the control characters below U+0020 (everything else, U+007F and U+2028
//! included, is written as UTF-8), and floats are the shortest round-trip digits laid out
//! as msgspec's writer lays them out (`1e16`, `1e-7`, `0.00001`, `1.2345678901234568e17`,
//! `100.0`, `-0.0`).

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

/// Append `s` as a JSON string: `"`, `\` and control characters escaped, the rest as UTF-8.
///
/// Most strings of a response (ids, URLs, reasons) need no escape: the clean prefix is
/// found eight bytes at a time and copied at once.
#[inline]
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let clean = clean_prefix(bytes);
    out.extend_from_slice(&bytes[..clean]);
    if clean < bytes.len() {
        write_escaped(out, &bytes[clean..]);
    }
    out.push(b'"');
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
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
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

/// Append a finite float the way msgspec writes a Python float (shortest round-trip form).
///
/// A non-finite value cannot come from a decoded request (it is refused) and the engine's
/// arithmetic is bounded; msgspec writes one as `null`, and so does this.
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        let mut buf = zmij::Buffer::new();
        let text = buf.format_finite(v).as_bytes();
        // zmij lays a float out as ryu does (msgspec's layout), except that a positive
        // exponent gets a `+` (`1e+16`), which msgspec does not write.
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

/// Append an integer in decimal, as msgspec writes a Python int.
pub fn write_u64(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Append a signed integer in decimal, as msgspec writes a Python int.
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    write_u64(out, v.unsigned_abs());
}

/// Append a string or `null`.
pub fn write_opt_str(out: &mut Vec<u8>, v: Option<&str>) {
    match v {
        Some(s) => write_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// Append a JSON array of `items`, each written by `each`.
pub fn write_list<T>(
    out: &mut Vec<u8>,
    items: impl IntoIterator<Item = T>,
    mut each: impl FnMut(&mut Vec<u8>, T),
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
    fn floats_are_spelled_as_msgspec_spells_them() {
        // Each pair checked against msgspec.json.encode (tests/test_contract_engine.py
        // property-tests the rest).
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
        // ryu (a dev-dependency) is the reference: msgspec's writer is a port of its layout.
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
