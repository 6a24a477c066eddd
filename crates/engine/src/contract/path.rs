//! Where a value sits in the body, and the refusals the decoder makes.

use std::borrow::Cow;

use super::FieldError;

/// Errors are boxed inside the scanner: every step returns an `R`, and a one-word error
/// keeps those results small.
pub(crate) type R<T> = Result<T, Box<FieldError>>;

/// A refusal, boxed.
pub(crate) type Refusal = Box<FieldError>;

/// Where a value sits, built on the stack as the scanner descends; rendered only for an
/// error, as a JSON path (`documents[3].score`, `unit.team`).
#[derive(Clone, Copy)]
pub(crate) enum Path<'p> {
    Root,
    Field(&'p Path<'p>, &'static str),
    Index(&'p Path<'p>, usize),
    Key(&'p Path<'p>, &'p str),
}

impl<'p> Path<'p> {
    pub(crate) fn field(&'p self, name: &'static str) -> Path<'p> {
        Path::Field(self, name)
    }

    pub(crate) fn render(&self) -> String {
        let mut steps = Vec::new();
        let mut at = self;
        loop {
            match at {
                Path::Root => break,
                Path::Field(up, name) => {
                    steps.push(Step::Name(name));
                    at = up;
                }
                Path::Key(up, name) => {
                    steps.push(Step::Name(name));
                    at = up;
                }
                Path::Index(up, i) => {
                    steps.push(Step::Index(*i));
                    at = up;
                }
            }
        }
        let mut out = String::new();
        for step in steps.iter().rev() {
            match step {
                Step::Name(name) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(name);
                }
                Step::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
            }
        }
        if out.is_empty() {
            out.push_str("body");
        }
        out
    }
}

enum Step<'p> {
    Name(&'p str),
    Index(usize),
}

/// A 422 naming the field.
pub(crate) fn invalid(path: &Path, problem: impl Into<String>) -> Refusal {
    Box::new(FieldError {
        status: 422,
        field: path.render(),
        problem: problem.into(),
    })
}

/// A 400 naming a key its object gives a second time (`documents[3].url`): CONTRACT.md
/// refuses to guess which of the two was meant.
#[cold]
pub(crate) fn repeated(object: &Path, key: &str) -> Refusal {
    Box::new(FieldError {
        status: 400,
        field: Path::Key(object, key).render(),
        problem: "duplicate key".into(),
    })
}

pub(crate) fn body_error(problem: String) -> Refusal {
    Box::new(FieldError {
        status: 400,
        field: "body".into(),
        problem,
    })
}

/// A 400 for bytes that are not JSON at a value the decoder can name (`NaN` as a score).
pub(crate) fn not_json_at(path: &Path, problem: String) -> Refusal {
    Box::new(FieldError {
        status: 400,
        field: path.render(),
        problem,
    })
}

pub(crate) fn truncated() -> Refusal {
    body_error("not valid JSON: the body ends in the middle of a value".into())
}

pub(crate) fn bad_utf8() -> Refusal {
    body_error("not valid JSON: a string is not valid UTF-8".into())
}

/// Bytes of a string, checked to be UTF-8 (only the strings kept are checked).
pub(crate) fn utf8(bytes: Cow<'_, [u8]>) -> R<Cow<'_, str>> {
    match bytes {
        Cow::Borrowed(b) => std::str::from_utf8(b)
            .map(Cow::Borrowed)
            .map_err(|_| bad_utf8()),
        Cow::Owned(v) => String::from_utf8(v).map(Cow::Owned).map_err(|_| bad_utf8()),
    }
}

/// A string's bytes as str: `ascii` (the scanner saw only ASCII bytes, no escapes) needs
/// no check, the rest is checked to be UTF-8.
#[inline]
pub(crate) fn checked(raw: Cow<'_, [u8]>, ascii: bool) -> R<Cow<'_, str>> {
    match raw {
        // SAFETY: the scanner saw every byte is ASCII, so the bytes are UTF-8.
        Cow::Borrowed(b) if ascii => {
            debug_assert!(b.is_ascii());
            Ok(Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(b) }))
        }
        raw => utf8(raw),
    }
}

#[cfg(test)]
mod tests {
    use super::Path;

    #[test]
    fn paths_render_as_json_paths() {
        let root = Path::Root;
        let docs = root.field("documents");
        let third = Path::Index(&docs, 3);
        let attrs = third.field("attributes");
        let x = Path::Key(&attrs, "x");
        let y = Path::Index(&x, 1);
        assert_eq!(y.render(), "documents[3].attributes.x[1]");
        assert_eq!(root.render(), "body");
    }
}
