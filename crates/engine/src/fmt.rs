//! Python's number and string formatting, spelled exactly: the audit reasons were written
//! with f-strings (`{x:g}`, `{x:.3f}`, `{x!r}`) and clients match on them.

use std::fmt::Write;

/// Append `x` as Python's `format(x, "g")`: 6 significant digits, trailing zeros dropped,
/// scientific notation (`1e+06`, `1.5e-05`) below 1e-4 and from 1e6.
pub fn push_g(out: &mut String, x: f64) {
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
    let mut s = String::new();
    push_g(&mut s, x);
    s
}

/// Python's `format(x, ".{decimals}f")` (round half to even on the exact binary value, as
/// Rust's own fixed formatting does).
pub fn fixed(x: f64, decimals: usize) -> String {
    format!("{x:.decimals$}")
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Python's `repr()` of a str (the exact one, from the decoder's Unicode tables).
pub use crate::contract::py_repr;

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
    fn repr_quotes_and_escapes_like_python() {
        assert_eq!(py_repr("abc"), "'abc'");
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert_eq!(py_repr("a'b\"c"), "'a\\'b\"c'");
        assert_eq!(py_repr("a\\b\n\u{1}"), "'a\\\\b\\n\\x01'");
        assert_eq!(py_repr("диван\u{ad}"), "'диван\\xad'");
        assert_eq!(py_repr("x\u{200b}"), "'x\\u200b'");
    }
}
