//! Numbers as JSON has them: an int that fits, a larger int kept as digits where ints are
//! allowed (a float elsewhere), a float; past f64's range refused, whatever the type, and a
//! malformed one a 400 naming its byte.

use super::path::{invalid, not_json_at, Path, R};
use super::scan::Scanner;

/// An int of any size is kept where the type allows ints (`attributes`), up to this many
/// characters (Python's own limit on converting one, so the control plane can read it).
const MAX_INT_CHARS: usize = 4300;

/// A number as read: an int that fits (u64, or a negative down to -2**63), a larger int
/// (kept as its digits where ints are allowed), or a float.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Num<'a> {
    Int { neg: bool, mag: u64 },
    Big(&'a [u8]),
    Float(f64),
}

impl Num<'_> {
    /// The value a float field gets: an int converts (`-0` is `0.0`).
    pub(crate) fn as_f64(self) -> f64 {
        match self {
            Num::Int { neg: true, mag } if mag != 0 => -(mag as f64),
            Num::Int { mag, .. } => mag as f64,
            Num::Float(v) => v,
            // `number(.., false)` never returns Big.
            Num::Big(_) => f64::NAN,
        }
    }
}

/// Exact powers of ten for the fast float path.
pub(super) const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

impl<'a> Scanner<'a> {
    /// A number. `ints` says whether the type takes ints: there an int too large for u64
    /// is kept as digits (`Big`); elsewhere it is read as a float. A float
    /// past f64's range is refused here, whatever the type.
    #[inline(always)]
    pub(crate) fn number(&mut self, path: &Path, ints: bool) -> R<Num<'a>> {
        let buf = self.buf;
        let end = buf.len();
        let start = self.pos;
        let mut p = start;
        let neg = buf[p] == b'-';
        if neg {
            p += 1;
            if p == end {
                self.pos = p;
                return Err(self.malformed("invalid number"));
            }
        }
        let int_start = p;
        let mut mant: u64 = 0;
        if buf[p] == b'0' {
            p += 1;
            if p < end && buf[p].is_ascii_digit() {
                self.pos = p;
                return Err(self.malformed("invalid number"));
            }
        } else {
            while p < end && buf[p].is_ascii_digit() {
                mant = mant.wrapping_mul(10).wrapping_add(u64::from(buf[p] - b'0'));
                p += 1;
            }
            if p == int_start {
                self.pos = p;
                // What Python's json.dumps writes for a float that is not finite: not
                // JSON, so a 400 as any broken body, but at a value, so named by it. The
                // word whole (`NaNa` is just a broken body); `-NaN` is no such word.
                let words: &[&str] = if neg {
                    &["Infinity"]
                } else {
                    &["NaN", "Infinity"]
                };
                for word in words {
                    let after = buf.get(p + word.len());
                    if buf[p..].starts_with(word.as_bytes())
                        && !after.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
                    {
                        let sign = if neg { "-" } else { "" };
                        return Err(not_json_at(
                            path,
                            format!("not valid JSON: {sign}{word} is no JSON number (a number is finite)"),
                        ));
                    }
                }
                return Err(self.malformed("invalid character"));
            }
        }
        let int_digits = p - int_start;
        let mut is_float = false;
        let mut frac_digits = 0usize;
        let mut exp: i64 = 0;
        if p < end && buf[p] == b'.' {
            is_float = true;
            p += 1;
            let from = p;
            while p < end && buf[p].is_ascii_digit() {
                mant = mant.wrapping_mul(10).wrapping_add(u64::from(buf[p] - b'0'));
                p += 1;
            }
            if p == from {
                self.pos = p;
                return Err(self.malformed("invalid number"));
            }
            frac_digits = p - from;
        }
        if p < end && (buf[p] == b'e' || buf[p] == b'E') {
            is_float = true;
            p += 1;
            if p == end {
                self.pos = p;
                return Err(self.malformed("invalid number"));
            }
            let mut sign = 1;
            if buf[p] == b'+' {
                p += 1;
            } else if buf[p] == b'-' {
                sign = -1;
                p += 1;
            }
            let from = p;
            while p < end && buf[p].is_ascii_digit() {
                if exp < 10_000 {
                    exp = exp * 10 + i64::from(buf[p] - b'0');
                }
                p += 1;
            }
            if p == from {
                self.pos = p;
                return Err(self.malformed("invalid number"));
            }
            exp *= sign;
        }
        self.pos = p;
        let text = &buf[start..p];
        if !is_float {
            let fits = int_digits < 20 || (int_digits == 20 && fits_u64(&buf[int_start..p]));
            if fits && (!neg || mant <= 1 << 63) {
                return Ok(Num::Int { neg, mag: mant });
            }
            if ints {
                if text.len() > MAX_INT_CHARS {
                    return Err(invalid(path, "integer too long"));
                }
                return Ok(Num::Big(text));
            }
        }
        let exp10 = exp - frac_digits as i64;
        let v = if is_float
            && int_digits + frac_digits <= 19
            && mant >> 53 == 0
            && (-22..=22).contains(&exp10)
        {
            // Both the mantissa and the power of ten are exact doubles: one rounding.
            let m = mant as f64;
            let v = if exp10 >= 0 {
                m * POW10[exp10 as usize]
            } else {
                m / POW10[(-exp10) as usize]
            };
            if neg {
                -v
            } else {
                v
            }
        } else {
            // The literal is ASCII JSON number syntax, which Rust's parser accepts.
            std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.parse::<f64>().ok())
                .unwrap_or(f64::INFINITY)
        };
        if v.is_infinite() {
            return Err(invalid(path, "number out of range (past a 64-bit float)"));
        }
        Ok(Num::Float(v))
    }
}

/// Does a 20-digit integer fit in u64?
fn fits_u64(digits: &[u8]) -> bool {
    digits
        .iter()
        .try_fold(0u64, |acc, &d| {
            acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })
        .is_some()
}
