//! JSON text primitives the response and the audit line are written with.
//!
//! The response must be byte-identical to what the Python service wrote with msgspec, so
//! numbers and strings are spelled the way msgspec spells them.

/// Append `s` as a JSON string: `"`, `\` and control characters escaped, the rest as UTF-8.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => {
                out.extend_from_slice(&bytes[start..i]);
                out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(escape);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Append a finite float the way msgspec writes a Python float (shortest round-trip form).
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    // Rust's `{:?}` is the shortest round-trip form with a `.0` on integral values; the
    // exponent spelling msgspec uses for very large and very small values is refined in
    // the contract work.
    out.extend_from_slice(format!("{v:?}").as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_escape_quotes_backslashes_and_controls() {
        let mut out = Vec::new();
        write_str(&mut out, "a\"b\\c\nd\u{1}é");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a\\\"b\\\\c\\nd\\u0001é\""
        );
    }

    #[test]
    fn floats_keep_a_fraction() {
        let mut out = Vec::new();
        write_f64(&mut out, 8.0);
        out.push(b' ');
        write_f64(&mut out, 0.1);
        assert_eq!(String::from_utf8(out).unwrap(), "8.0 0.1");
    }
}
