//! Python's number and string formatting, spelled exactly: the audit reasons were written
//! with f-strings (`{x:g}`, `{x:.3f}`, `{x!r}`) and clients match on them.

use std::fmt::Write;

/// Append `x` as Python's `format(x, "g")`: 6 significant digits, trailing zeros dropped,
/// scientific notation (`1e+06`, `1.5e-05`) below 1e-4 and from 1e6.
///
/// Audit reasons spell a float or two per record, so the digits come from the shortest
/// round-trip form (zmij) rounded to 6 places, which is what rounding the exact binary value
/// gives except at a tie (the shortest form is exactly 7 digits ending in 5) and for a
/// subnormal (too few bits for its shortest form to stand for it): those, and the
/// non-finite and zero values, take the exact path.
pub fn push_g(out: &mut String, x: f64) {
    if !x.is_normal() || !(push_g_scaled(out, x) || push_g_shortest(out, x)) {
        push_g_exact(out, x);
    }
}

/// Exact powers of ten, 1 to 1e9.
const POW10: [f64; 10] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];

/// The fastest path of `push_g`, for 1e-4 <= |x| < 1e6 (scores, factors, penalties):
/// |x| times an exact power of ten is its six significant digits plus a fraction, with
/// one rounding (an error under 1e-10); unless that fraction is within 1e-6 of a half,
/// rounding it is rounding the exact value. False (nothing written) otherwise.
///
/// Audit reasons spell a few hundred of these a page, so the text is built in registers:
/// the six digits as one word of ASCII, laid out with shifts and written in one store.
fn push_g_scaled(out: &mut String, x: f64) -> bool {
    let a = x.abs();
    if !(1e-4..1e6).contains(&a) {
        return false;
    }
    // The power of ten of the first significant digit, from the decade `a` is in; a
    // decade bound that is itself inexact (1e-4..1e-1) is corrected by the range check.
    let mut exp10: i32 = if a >= 1.0 {
        i32::from(a >= 1e1)
            + i32::from(a >= 1e2)
            + i32::from(a >= 1e3)
            + i32::from(a >= 1e4)
            + i32::from(a >= 1e5)
    } else {
        -1 - i32::from(a * 1e1 < 1.0)
            - i32::from(a * 1e2 < 1.0)
            - i32::from(a * 1e3 < 1.0)
            - i32::from(a * 1e4 < 1.0)
    };
    let mut t = a * POW10[(5 - exp10) as usize];
    if t < 100_000.0 {
        if exp10 == -4 {
            return false;
        }
        exp10 -= 1;
        t = a * POW10[(5 - exp10) as usize];
    }
    if !(100_000.0..1_000_000.0).contains(&t) {
        return false;
    }
    let whole = t as u32; // t is positive: truncation is its floor
    let fraction = t - f64::from(whole);
    if (fraction - 0.5).abs() < 1e-6 {
        return false;
    }
    let r = whole + u32::from(fraction > 0.5);
    if r == 1_000_000 {
        // Every digit carried (999999.5 and over): the next decade, which at 1e6 is
        // spelled with an exponent; rare enough for the general path.
        return false;
    }
    let digits = six_digits(r);
    // The significant digits: six less the trailing zeros, the high bytes that hold 0.
    let values = digits - ASCII_ZEROS;
    let n = (6 - (values.leading_zeros() as usize - 16) / 8).max(1);
    let (mut text, mut len) = if exp10 >= 0 {
        let int_digits = exp10 as usize + 1;
        let int_part = u128::from(digits & ((1u64 << (8 * int_digits)) - 1));
        if n <= int_digits {
            (int_part, int_digits) // the zeros up to the point are digits of `digits`
        } else {
            let point = u128::from(b'.') << (8 * int_digits);
            let rest = u128::from(digits >> (8 * int_digits)) << (8 * (int_digits + 1));
            (int_part | point | rest, n + 1)
        }
    } else {
        // `0.`, then 0 to 3 zeros, then the digits.
        let zeros = (-exp10 - 1) as usize;
        let lead = 0x2e30 | (0x3030_3030u128 << 16) & ((1u128 << (8 * (2 + zeros))) - 1);
        (
            lead | u128::from(digits) << (8 * (2 + zeros)),
            2 + zeros + n,
        )
    };
    if x < 0.0 {
        text = text << 8 | u128::from(b'-');
        len += 1;
    }
    push_ascii(out, text, len);
    true
}

/// Append the first `len` bytes of `text` (ASCII, the first in the lowest byte) with one
/// 16-byte store into the string's spare room.
#[inline]
fn push_ascii(out: &mut String, text: u128, len: usize) {
    debug_assert!(len <= 16 && text.to_le_bytes()[..len].is_ascii());
    // SAFETY: the store lands in reserved capacity, and only its first `len` bytes, all
    // ASCII, become part of the string, which stays UTF-8.
    unsafe {
        let v = out.as_mut_vec();
        v.reserve(16);
        let at = v.len();
        std::ptr::write_unaligned(
            v.as_mut_ptr().add(at).cast::<[u8; 16]>(),
            text.to_le_bytes(),
        );
        v.set_len(at + len);
    }
}

/// `'0'` in each of the six low bytes.
const ASCII_ZEROS: u64 = 0x0000_3030_3030_3030;

/// The six digits of `r` (100_000..=999_999) in ASCII, the first in the lowest byte.
#[inline]
fn six_digits(r: u32) -> u64 {
    let three = |v: u32| -> u64 {
        let hundreds = v / 100;
        let rest = v - hundreds * 100;
        let tens = rest / 10;
        u64::from(hundreds) | u64::from(tens) << 8 | u64::from(rest - tens * 10) << 16
    };
    let high = r / 1000;
    (three(high) | three(r - high * 1000) << 24) + ASCII_ZEROS
}

/// The fast path of `push_g`; false (nothing written) where it cannot decide.
fn push_g_shortest(out: &mut String, x: f64) -> bool {
    let mut buf = zmij::Buffer::new();
    let text = buf.format_finite(x.abs()).as_bytes();
    let (mantissa, exp) = match text.iter().position(|&b| b == b'e') {
        Some(at) => (&text[..at], &text[at + 1..]),
        None => (text, &b""[..]),
    };
    let mut exp10: i32 = 0;
    if !exp.is_empty() {
        let (neg, digits) = match exp.split_first() {
            Some((b'-', rest)) => (true, rest),
            Some((b'+', rest)) => (false, rest),
            _ => (false, exp),
        };
        for &d in digits {
            exp10 = exp10 * 10 + i32::from(d - b'0');
        }
        if neg {
            exp10 = -exp10;
        }
    }
    // The significant digits, and the power of ten of the first of them.
    let mut digits = [0u8; 24];
    let mut n = 0;
    let mut int_len: i32 = 0;
    let mut seen_point = false;
    for &c in mantissa {
        if c == b'.' {
            seen_point = true;
            continue;
        }
        if !seen_point {
            int_len += 1;
        }
        if n == 0 && c == b'0' {
            exp10 -= 1; // a leading zero: the first digit is one place further right
            continue;
        }
        if n == digits.len() {
            return false;
        }
        digits[n] = c;
        n += 1;
    }
    // Trailing zeros (`100.0`) are no digits of the value: without them a tie shows.
    while n > 1 && digits[n - 1] == b'0' {
        n -= 1;
    }
    if n == 0 {
        return false;
    }
    exp10 += int_len - 1;
    if n > 6 {
        if n == 7 && digits[6] == b'5' {
            return false; // a tie on the shortest form: the exact value decides
        }
        let up = digits[6] >= b'5';
        n = 6;
        if up {
            let mut k = 6;
            loop {
                if k == 0 {
                    digits[0] = b'1'; // 999999.5 -> 1e+06: every digit carried
                    n = 1;
                    exp10 += 1;
                    break;
                }
                k -= 1;
                if digits[k] == b'9' {
                    digits[k] = b'0';
                } else {
                    digits[k] += 1;
                    break;
                }
            }
        }
    }
    while n > 1 && digits[n - 1] == b'0' {
        n -= 1;
    }
    lay_out_g(out, x < 0.0, &digits[..n], exp10);
    true
}

/// Append `format(x, "g")` from its significant digits (no trailing zeros) and the power
/// of ten of the first of them.
fn lay_out_g(out: &mut String, negative: bool, digits: &[u8], exp10: i32) {
    // Laid out in a stack buffer and appended in one copy (at most 12 bytes: a sign, `0.`,
    // three zeros and six digits, or six digits with `e-300`).
    let mut text = [0u8; 24];
    let mut len = 0;
    // Byte by byte: the pieces are a few bytes each, shorter than a memcpy call's setup.
    let mut put = |bytes: &[u8]| {
        for &b in bytes {
            text[len] = b;
            len += 1;
        }
    };
    if negative {
        put(b"-");
    }
    if (-4..6).contains(&exp10) {
        if exp10 < 0 {
            put(b"0.");
            put(&b"000"[..(-exp10 - 1) as usize]);
            put(digits);
        } else {
            let int_digits = exp10 as usize + 1;
            if digits.len() <= int_digits {
                put(digits);
                put(&b"00000"[..int_digits - digits.len()]);
            } else {
                put(&digits[..int_digits]);
                put(b".");
                put(&digits[int_digits..]);
            }
        }
    } else {
        put(&digits[..1]);
        if digits.len() > 1 {
            put(b".");
            put(&digits[1..]);
        }
        put(if exp10 < 0 { b"e-" } else { b"e+" });
        let e = exp10.unsigned_abs();
        if e >= 100 {
            put(&[b'0' + (e / 100) as u8]);
        }
        put(&[b'0' + (e / 10 % 10) as u8, b'0' + (e % 10) as u8]);
    }
    // SAFETY: only ASCII digits, `-`, `.`, `e` and `+` were put.
    out.push_str(unsafe { std::str::from_utf8_unchecked(&text[..len]) });
}

/// `format(x, "g")` from the exact binary value (Rust's exact decimal formatting).
fn push_g_exact(out: &mut String, x: f64) {
    if !x.is_finite() {
        out.push_str(if x.is_nan() {
            "nan"
        } else if x > 0.0 {
            "inf"
        } else {
            "-inf"
        });
        return;
    }
    if x == 0.0 {
        out.push_str(if x.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    // Rounded to 6 significant digits first: the exponent Python decides with is the
    // rounded one (999999.5 is 1e+06).
    let sci = format!("{x:.5e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        let decimals = (5 - exp) as usize;
        let fixed = format!("{x:.decimals$}");
        out.push_str(strip_zeros(&fixed));
    } else {
        out.push_str(strip_zeros(mantissa));
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
}

/// `format(x, "g")` as a new string.
pub fn g(x: f64) -> String {
    let mut s = String::with_capacity(16);
    push_g(&mut s, x);
    s
}

/// Python's `format(x, ".{decimals}f")` (round half to even on the exact binary value, as
/// Rust's own fixed formatting does).
pub fn fixed(x: f64, decimals: usize) -> String {
    format!("{x:.decimals$}")
}

/// Append `fixed(x, decimals)` to `out`.
pub fn push_fixed(out: &mut String, x: f64, decimals: usize) {
    // Writing to a String cannot fail.
    let _ = write!(out, "{x:.decimals$}");
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// A value named in a message: in single quotes, quotes, backslashes and what does not
/// print escaped (`'RUS'`, `'a\nb'`), so a stray space or control character shows.
pub fn quoted(s: &str) -> String {
    format!("'{}'", s.escape_debug())
}

#[cfg(test)]
mod tests {
    use super::*;

    // (value, f"{v:g}", f"{v:.3f}", f"{v:.2f}") as Python 3.11 prints them.
    const PYTHON: &[(f64, &str, &str, &str)] = &[
        (0.5, "0.5", "0.500", "0.50"),
        (1.5, "1.5", "1.500", "1.50"),
        (2.5, "2.5", "2.500", "2.50"),
        (0.125, "0.125", "0.125", "0.12"),
        (0.375, "0.375", "0.375", "0.38"),
        (
            1e16,
            "1e+16",
            "10000000000000000.000",
            "10000000000000000.00",
        ),
        (1.5e-05, "1.5e-05", "0.000", "0.00"),
        (123456.5, "123456", "123456.500", "123456.50"),
        (1234567.0, "1.23457e+06", "1234567.000", "1234567.00"),
        (0.0001, "0.0001", "0.000", "0.00"),
        (1.234e-05, "1.234e-05", "0.000", "0.00"),
        (-0.0, "-0", "-0.000", "-0.00"),
        (5.0, "5", "5.000", "5.00"),
        (0.95, "0.95", "0.950", "0.95"),
        (1e-07, "1e-07", "0.000", "0.00"),
        (100000.0, "100000", "100000.000", "100000.00"),
        (999999.5, "1e+06", "999999.500", "999999.50"),
        (9999995.0, "1e+07", "9999995.000", "9999995.00"),
        (2.675, "2.675", "2.675", "2.67"),
        (0.1, "0.1", "0.100", "0.10"),
        (0.3, "0.3", "0.300", "0.30"),
        (0.3333333333333333, "0.333333", "0.333", "0.33"),
        (-2.5, "-2.5", "-2.500", "-2.50"),
        (120.0, "120", "120.000", "120.00"),
        (0.05, "0.05", "0.050", "0.05"),
        (-1.5e-300, "-1.5e-300", "-0.000", "-0.00"),
        (0.0, "0", "0.000", "0.00"),
        (400.0, "400", "400.000", "400.00"),
        (7.77777777, "7.77778", "7.778", "7.78"),
        (2e-05, "2e-05", "0.000", "0.00"),
        (0.000123456789, "0.000123457", "0.000", "0.00"),
    ];

    #[test]
    fn g_and_fixed_match_python() {
        for &(v, pg, p3, p2) in PYTHON {
            assert_eq!(g(v), pg, "{v:?}:g");
            assert_eq!(fixed(v, 3), p3, "{v:?}:.3f");
            assert_eq!(fixed(v, 2), p2, "{v:?}:.2f");
        }
        assert_eq!(g(1e300), "1e+300");
        assert_eq!(g(f64::INFINITY), "inf");
    }

    #[test]
    fn the_shortest_path_agrees_with_the_exact_one() {
        let mut rng = crate::testing::Xorshift(0x9e37_79b9_7f4a_7c15);
        let mut next = || rng.next();
        let mut values = vec![
            999999.5,
            999999.4,
            9999995.0,
            0.00012345650,
            1.2345650,
            123456.5,
            99999.95,
            9.999995e-5,
            0.0001,
            0.00009999995,
            1e6,
            1e-5,
            5e-324,
            1.7976931348623157e308,
            9.681800000000003,
            27.3547,
            0.1 + 0.2,
            1234565.0,
            12345650.0,
            999999.9999999999,
            99999.99999999999,
            0.9999999999999999,
            0.00099999999999999,
        ];
        for _ in 0..200_000 {
            let r = next();
            values.push(match r % 4 {
                0 => f64::from_bits(r >> 2 | 1 << 62 >> (r % 3)),
                // 4-to-8-digit decimals around the rounding places, as the rules meet them
                1 => (r % 100_000_000) as f64 / 10f64.powi((r >> 40) as i32 % 12),
                2 => ((r % 2_000_000) as f64 * 0.5 + 0.5) / 10f64.powi((r >> 40) as i32 % 14 - 4),
                _ => (r >> 11) as f64 / (1u64 << 53) as f64 * 10f64.powi((r >> 8) as i32 % 30 - 15),
            });
        }
        let mut scaled_decided = 0;
        let n = values.len();
        for v in values {
            for v in [v, -v] {
                let (mut fast, mut exact) = (String::new(), String::new());
                push_g(&mut fast, v);
                push_g_exact(&mut exact, v);
                assert_eq!(fast, exact, "{v:?}");
                let mut scaled = String::new();
                if push_g_scaled(&mut scaled, v) {
                    scaled_decided += 1;
                    assert_eq!(scaled, exact, "{v:?} (scaled)");
                }
            }
        }
        // Half the values are in the scaled path's range: it must decide nearly all of them.
        assert!(scaled_decided > n / 2, "{scaled_decided} of {}", 2 * n);
    }

    #[test]
    fn quoted_shows_what_does_not_print() {
        assert_eq!(quoted("RUS"), "'RUS'");
        assert_eq!(quoted(" RU"), "' RU'");
        assert_eq!(quoted("it's"), "'it\\'s'");
        assert_eq!(quoted("a\\b\n\u{1}"), "'a\\\\b\\n\\u{1}'");
        assert_eq!(quoted("диван\u{ad}"), "'диван\\u{ad}'");
    }
}
