//! URLs as a browser resolves them, written in Safe Browsing's canonical spelling.
//!
//! The host is decided by the WHATWG URL Standard (the `url` crate, UTS 46 through `idna`),
//! as every browser decides it: leading control characters and spaces are dropped, tabs
//! and newlines removed, a backslash is a slash in special schemes, the userinfo ends at
//! the authority's last '@', IPv4 numbers in any form and percent-escapes in the host are
//! resolved, and any name UTS 46 maps (fullwidth letters, a soft hyphen, an emoji) is
//! written in punycode. The canonical form is then spelled the Safe Browsing way, so
//! the banlist's stored values and the Google vectors keep their meaning:
//! `scheme://host/path[?query]`, no port, userinfo or fragment, the path and query fully
//! unescaped and re-escaped (bytes <= 0x20, >= 0x7f, '#', '%'), dot segments resolved,
//! trailing and empty dots in the host collapsed, IPv4-mapped and NAT64 IPv6 as IPv4.
//!
//! Where the browser gives no host (it would not open the URL, or it is not http(s),
//! ws(s) or ftp), Safe Browsing's own algorithm decides; see `safe_browsing`. Nothing a
//! browser opens is refused: after a special scheme the ':' always ends the scheme
//! (`http:1572395042/` is 93.184.216.34) and any run of slashes and backslashes comes
//! before the host (`http:///blah` is blah, where the Safe Browsing vectors refuse it). A
//! URL without a scheme is an http one, except a path (`/blah`): with no page to resolve
//! it against it has no host, and the banlist rule removes its document.

mod python;
mod safe_browsing;

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use ::url::{Host, Position, Url};

pub use python::register;
pub use safe_browsing::parse_ipv4;

/// Why a URL has no canonical form; the message names the problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UrlError {
    /// Nothing left once whitespace and the fragment are dropped.
    Empty,
    /// No host before the path.
    NoHost,
    /// A scheme other than the special ones without "//" after it (`mailto:`).
    ExpectedSlashes(String),
    /// A port that is not all digits.
    InvalidPort(String),
    /// '[' without ']'.
    UnterminatedIpv6,
    /// Something other than a port after "]".
    AfterIpv6(String),
    /// Brackets around something that is not an IPv6 address.
    InvalidIpv6(String),
    /// '[' in a host that does not start with it.
    BracketOutsideIpv6,
    /// Text with an unpaired surrogate (only Python strings can carry one).
    Surrogate,
    /// Over `MAX_OPENABLE_URL_BYTES` once canonical: that length.
    TooLong(usize),
}

/// The longest URL a browser opens: Chromium's `url::kMaxURLChars`, 2 MiB of its canonical
/// form (Firefox's `network.standard-url.max-length` is 1 MiB), counted on the canonical
/// form made here, whose non-ASCII is percent-escaped as Chromium's is: a page of Cyrillic
/// text is three times its UTF-8 length there.
pub const MAX_OPENABLE_URL_BYTES: usize = 2 * 1024 * 1024;

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlError::Empty => f.write_str("empty URL"),
            UrlError::NoHost => f.write_str("no host"),
            UrlError::ExpectedSlashes(scheme) => write!(f, "expected '//' after '{scheme}:'"),
            UrlError::InvalidPort(port) => write!(f, "invalid port '{port}'"),
            UrlError::UnterminatedIpv6 => f.write_str("unterminated IPv6 address"),
            UrlError::AfterIpv6(after) => write!(f, "unexpected '{after}' after IPv6 address"),
            UrlError::InvalidIpv6(host) => write!(f, "invalid IPv6 address '{host}'"),
            UrlError::BracketOutsideIpv6 => f.write_str("'[' outside an IPv6 address"),
            UrlError::Surrogate => f.write_str("URL contains an unpaired surrogate"),
            UrlError::TooLong(bytes) => write!(
                f,
                "{bytes} characters long once escaped, over the {MAX_OPENABLE_URL_BYTES} a \
                 browser opens"
            ),
        }
    }
}

impl std::error::Error for UrlError {}

/// A URL's canonical form and where its host is in it. Most result URLs are their own
/// canonical form, so the page borrows them rather than copying each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Canonical<'u> {
    pub url: Cow<'u, str>,
    /// The host: `url[host]`.
    pub host: Range<usize>,
}

impl Canonical<'_> {
    /// The host as `url` spells it.
    pub fn host(&self) -> &str {
        &self.url[self.host.clone()]
    }

    /// A canonical form built as `scheme://host/...`.
    fn owned(url: String, host: &str) -> Canonical<'static> {
        let at = url.find("://").map_or(0, |i| i + 3);
        debug_assert_eq!(&url[at..at + host.len()], host);
        Canonical {
            host: at..at + host.len(),
            url: Cow::Owned(url),
        }
    }
}

/// The canonical form `scheme://host/path[?query]` of a URL and its host, in one pass.
pub fn canonicalize_with_host(url: &str) -> Result<(String, String), UrlError> {
    canonical_parts(url).map(|c| {
        let host = c.host().to_owned();
        (c.url.into_owned(), host)
    })
}

/// `canonicalize_with_host` without copying a URL that is already canonical.
pub fn canonical_parts(url: &str) -> Result<Canonical<'_>, UrlError> {
    let found = canonical_form(url)?;
    if found.url.len() > MAX_OPENABLE_URL_BYTES {
        return Err(UrlError::TooLong(found.url.len()));
    }
    Ok(found)
}

/// `canonical_parts` of any length.
fn canonical_form(url: &str) -> Result<Canonical<'_>, UrlError> {
    if let Some(found) = already_canonical(url) {
        return Ok(found);
    }
    if let Some(found) = as_a_browser_opens(url) {
        return found.map(|(canonical, host)| Canonical::owned(canonical, &host));
    }
    let text = url
        .split('#')
        .next()
        .unwrap_or_default()
        .trim_matches(is_python_space);
    let canonical = safe_browsing::canonicalize_raw(text.as_bytes())?;
    let range = host_range(&canonical);
    Ok(Canonical {
        url: Cow::Owned(canonical),
        host: range,
    })
}

/// The canonical form `scheme://host/path[?query]` of a URL.
pub fn canonicalize(url: &str) -> Result<String, UrlError> {
    canonicalize_with_host(url).map(|(canonical, _)| canonical)
}

/// The canonical form of a URL given as bytes, which need not be UTF-8.
pub fn canonicalize_bytes(raw: &[u8]) -> Result<String, UrlError> {
    if let Ok(text) = std::str::from_utf8(raw) {
        return canonicalize(text);
    }
    let before_fragment = raw.split(|&b| b == b'#').next().unwrap_or_default();
    safe_browsing::canonicalize_raw(before_fragment.trim_ascii())
}

/// The host of a canonical URL (which always has a path after its host).
pub fn host_of(canonical: &str) -> &str {
    &canonical[host_range(canonical)]
}

/// Where `host_of` finds the host.
fn host_range(canonical: &str) -> Range<usize> {
    let start = canonical.find("://").map_or(0, |at| at + 3);
    let end = canonical[start..]
        .find('/')
        .map_or(canonical.len(), |at| start + at);
    start..end
}

/// The bytes a path or query keeps as they are in both parsers: ASCII letters and digits
/// and `-._~!$&'()*+,;=:@/` (a table: this runs on every byte of every URL of a page).
const KEPT: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let extra = b"-._~!$&'()*+,;=:@/";
    let mut i = 0;
    while i < extra.len() {
        t[extra[i] as usize] = true;
        i += 1;
    }
    t
};

/// A byte's class for the shortcut's walks: one load tells the common byte from the few
/// that end a part or need a look at the next byte (`OUT`, 0, is everything else).
const OUT: u8 = 0;
/// Host: `a-z0-9-_`. Path: a kept byte other than `/`.
const PLAIN: u8 = 1;
/// Host: `.`. Path: `/`.
const MARK: u8 = 2;
/// Host: `/` or `?`. Path: `?`.
const END: u8 = 3;

/// The host's classes (only lower-case letters: an upper-case host is not canonical).
const HOST_CLASS: [u8; 256] = {
    let mut t = [OUT; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_' {
            t[b] = PLAIN;
        }
        b += 1;
    }
    t[b'.' as usize] = MARK;
    t[b'/' as usize] = END;
    t[b'?' as usize] = END;
    t
};

/// The path's classes: `KEPT` with `/` and `?` told apart.
const PATH_CLASS: [u8; 256] = {
    let mut t = [OUT; 256];
    let mut b = 0;
    while b < 256 {
        if KEPT[b] {
            t[b] = PLAIN;
        }
        b += 1;
    }
    t[b'/' as usize] = MARK;
    t[b'?' as usize] = END;
    t
};

/// The query's bytes: kept ones and `?`.
const QUERY_KEPT: [bool; 256] = {
    let mut t = KEPT;
    t[b'?' as usize] = true;
    t
};

/// Most result URLs are already canonical: http(s), a lower-case ASCII host whose labels a
/// browser keeps as they are (no `xn--`, which it would check, no empty label, the last
/// one starting with a letter so it is no IPv4 number), no port or userinfo, and a path
/// and query of characters that neither parser changes, without `//` or dot segments.
/// Such a URL is its own canonical form ('/' added to an empty path); `tests` checks this
/// shortcut against the full work.
fn already_canonical(url: &str) -> Option<Canonical<'_>> {
    // Byte by byte, in one pass, each byte's class from a table: this runs on every URL
    // of every page (str searches for `://`, `/` and `.` cost four times as much).
    let b = url.as_bytes();
    let host_at = if b.starts_with(b"https://") {
        8
    } else if b.starts_with(b"http://") {
        7
    } else {
        return None;
    };
    let n = b.len();
    let (mut i, mut label_at) = (host_at, host_at);
    let host_end = loop {
        let class = if i < n {
            HOST_CLASS[b[i] as usize]
        } else {
            END
        };
        match class {
            PLAIN => {}
            OUT => return None,
            _ => {
                let label = &b[label_at..i];
                if label.is_empty() || label.starts_with(b"xn--") {
                    return None;
                }
                if class == END {
                    if !label[0].is_ascii_lowercase() {
                        return None;
                    }
                    break i;
                }
                label_at = i + 1;
            }
        }
        i += 1;
    };
    // The path (to the first `?`): kept bytes only, and no `//` or `/.` (a dot segment);
    // the query: kept bytes and `?`.
    let mut j = host_end;
    while j < n {
        match PATH_CLASS[b[j] as usize] {
            PLAIN => {}
            MARK if matches!(b.get(j + 1), Some(b'/' | b'.')) => return None,
            MARK => {}
            END => break,
            _ => return None,
        }
        j += 1;
    }
    if !b[j..].iter().all(|&c| QUERY_KEPT[c as usize]) {
        return None;
    }
    let url = if matches!(b.get(host_end), None | Some(b'?')) {
        // An empty path is `/`.
        let mut c = String::with_capacity(url.len() + 1);
        c.push_str(&url[..host_end]);
        c.push('/');
        c.push_str(&url[host_end..]);
        Cow::Owned(c)
    } else {
        Cow::Borrowed(url)
    };
    Some(Canonical {
        url,
        host: host_at..host_end,
    })
}

/// The canonical form and host when a browser would open the URL with a host (or the
/// refusal of an empty authority), else None.
fn as_a_browser_opens(url: &str) -> Option<Result<(String, String), UrlError>> {
    let text = url.trim_matches(|c: char| c <= ' ');
    let text: Cow<str> = if text.contains(['\t', '\n', '\r']) {
        Cow::Owned(text.replace(['\t', '\n', '\r'], ""))
    } else {
        Cow::Borrowed(text)
    };
    // Without a scheme (`www.example.com/`, `host:8080/`) a URL is an http one, as Safe
    // Browsing and a browser's address bar both take it; but one that starts with a slash
    // (`/blah`, `//blah`) is a path relative to a page we do not know: no host.
    let (candidate, colon): (Cow<str>, usize) = match safe_browsing::scheme_end(text.as_bytes()) {
        Some(colon) => (text, colon),
        None if text.starts_with(['/', '\\']) => return Some(Err(UrlError::NoHost)),
        None => (Cow::Owned(format!("http://{text}")), 4),
    };
    // A backslash is a slash only in a special scheme: `foo://\/` has the host `\`. After
    // a special scheme the browser skips every slash before the host (`http:///h` is h).
    let special = safe_browsing::is_special(&candidate.as_bytes()[..colon]);
    let slashes = candidate.as_bytes()[colon + 1..]
        .iter()
        .take_while(|&&b| b == b'/' || (special && b == b'\\'))
        .count();
    let candidate = without_drive_letters(&candidate, colon + 1 + slashes, special);
    let parsed = Url::parse(&candidate).ok()?;
    let scheme = parsed.scheme();
    if !matches!(scheme, "http" | "https" | "ws" | "wss" | "ftp") {
        return None;
    }
    let Some(host) = browser_host(parsed.host()?) else {
        return Some(Err(UrlError::NoHost)); // "http://./": dots, and nothing once collapsed
    };
    // What the browser requests, spelled the Safe Browsing way: the path and query
    // unescaped as one string and split again at the first '?', as the reference does.
    let rest = safe_browsing::unescape_fully(
        parsed[Position::BeforePath..Position::AfterQuery].as_bytes(),
    );
    let (path, query) = match rest.iter().position(|&b| b == b'?') {
        Some(mark) => (&rest[..mark], Some(&rest[mark + 1..])),
        None => (&rest[..], None),
    };
    let mut canonical = format!("{scheme}://{host}{}", safe_browsing::canonical_path(path));
    if let Some(query) = query {
        canonical.push('?');
        canonical.push_str(&safe_browsing::escape(query));
    }
    Some(Ok((canonical, host)))
}

/// The URL with every `:` and `|` of its path percent-escaped. The url crate keeps a
/// segment such as `a|` or `c:` (a Windows drive letter) when a `..` follows it, in every
/// scheme (servo/rust-url#1113), while browsers remove it outside `file:`:
/// `http://h/a|/../x` is `http://h/x` to a browser. Escaped, the segment is an ordinary
/// one; the canonical spelling unescapes it again, so nothing else changes. `after_slashes`
/// is where the authority starts.
fn without_drive_letters(candidate: &str, after_slashes: usize, special: bool) -> Cow<'_, str> {
    let bytes = candidate.as_bytes();
    let ends_authority = |b: u8| b == b'/' || b == b'?' || b == b'#' || (special && b == b'\\');
    let Some(path) = bytes[after_slashes..]
        .iter()
        .position(|&b| ends_authority(b))
    else {
        return Cow::Borrowed(candidate);
    };
    let path = after_slashes + path;
    let end = bytes[path..]
        .iter()
        .position(|&b| b == b'?' || b == b'#')
        .map_or(bytes.len(), |at| path + at);
    if !bytes[path..end].iter().any(|&b| b == b':' || b == b'|') {
        return Cow::Borrowed(candidate);
    }
    let mut out = String::with_capacity(candidate.len() + 8);
    out.push_str(&candidate[..path]);
    for c in candidate[path..end].chars() {
        match c {
            ':' => out.push_str("%3A"),
            '|' => out.push_str("%7C"),
            c => out.push(c),
        }
    }
    out.push_str(&candidate[end..]);
    Cow::Owned(out)
}

/// A WHATWG host in Safe Browsing's spelling; None for a name of dots only.
fn browser_host(host: Host<&str>) -> Option<String> {
    match host {
        Host::Domain(name) => {
            // WHATWG keeps "evil.example." and "a..b"; Safe Browsing collapses the dots,
            // after which "1.2.3.4." is the IPv4 address it spells.
            let collapsed = safe_browsing::collapse_dots(name.as_bytes());
            let name = String::from_utf8(collapsed)
                .ok()
                .filter(|n| !n.is_empty())?;
            Some(parse_ipv4(&name).unwrap_or(name))
        }
        Host::Ipv4(address) => Some(address.to_string()),
        Host::Ipv6(address) => Some(safe_browsing::ipv6_host(address, None)),
    }
}

/// Python's `str.isspace`, which the reference strips a URL of.
fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

#[cfg(test)]
mod tests;
