//! Python's `format(x, ".2f")` and `format(x, "g")`, which the audit reason is written with.
//!
//! Both round the exact binary value half to even, as Rust's `{:.N}` and `{:.Ne}` do, so
//! only the layout of `g` needs writing: six significant digits, scientific notation when
//! the exponent is below -4 or at least 6, trailing zeros dropped.

/// `f"{x:.2f}"`.
pub fn fixed2(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    format!("{x:.2}")
}

/// `f"{x:g}"`.
pub fn general(x: f64) -> String {
    if !x.is_finite() {
        return fixed2(x);
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{x:.5e}"); // d.ddddde<exp>, rounded to six significant digits
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        let fixed = format!("{x:.*}", (5 - exp) as usize);
        strip_zeros(&fixed).to_owned()
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip_zeros(mantissa), exp.abs())
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_python() {
        // Python: [f"{x:.2f}" for x in (0.125, 0.375, 2.675, 0.5, 1.0, 0.8333333333333334)]
        let two: Vec<String> = [0.125, 0.375, 2.675, 0.5, 1.0, 0.8333333333333334]
            .map(fixed2)
            .into();
        assert_eq!(two, ["0.12", "0.38", "2.67", "0.50", "1.00", "0.83"]);
        // Python: [f"{x:g}" for x in (0.5, 1.0, 0.333333333, 1e-05, 0.0001, 9.9999996e-5,
        //                              1234567.0, 0.30000000000000004)]
        let g: Vec<String> = [
            0.5,
            1.0,
            0.333333333,
            1e-05,
            0.0001,
            9.9999996e-5,
            1234567.0,
            0.30000000000000004,
        ]
        .map(general)
        .into();
        assert_eq!(
            g,
            [
                "0.5",
                "1",
                "0.333333",
                "1e-05",
                "0.0001",
                "0.0001",
                "1.23457e+06",
                "0.3"
            ]
        );
    }
}
