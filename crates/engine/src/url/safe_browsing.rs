//! Safe Browsing's canonical spelling ("URLs and Hashing" of the Safe Browsing v4 docs),
//! and its whole canonicalizer for the URLs a browser refuses.
//!
//! The spelling pieces (`unescape_fully`, `escape`, `canonical_path`, `parse_ipv4`,
//! `ipv6_host`) are applied to every URL; `canonicalize_raw` is the complete Safe Browsing
//! algorithm, used only where the WHATWG parser gives no host (see `super`). Everything
//! works on bytes: percent-unescaping can produce any byte.

use std::borrow::Cow;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::UrlError;

/// WHATWG "special" schemes: a backslash is a slash in them.
const SPECIAL: [&[u8]; 5] = [b"http", b"https", b"ws", b"wss", b"ftp"];

/// Whether a scheme is one of WHATWG's special ones (file aside), where a backslash is a
/// slash.
pub fn is_special(scheme: &[u8]) -> bool {
    SPECIAL.iter().any(|s| s.eq_ignore_ascii_case(scheme))
}

/// Percent-unescape until no escape is left, in one pass.
///
/// Escapes ("%XX") never overlap, so decoding is confluent: any order reaches the same
/// fixpoint as repeated passes, and decoding at the tail of an output stack does it in
/// O(n) even for "%252525...".
pub fn unescape_fully(data: &[u8]) -> Cow<'_, [u8]> {
    if !data.contains(&b'%') {
        return Cow::Borrowed(data);
    }
    let mut out: Vec<u8> = Vec::with_capacity(data.len());
    for &byte in data {
        out.push(byte);
        while let [.., b'%', high, low] = out[..] {
            let (Some(high), Some(low)) = (hex(high), hex(low)) else {
                break;
            };
            out.truncate(out.len() - 3);
            out.push(high << 4 | low);
        }
    }
    Cow::Owned(out)
}

fn hex(byte: u8) -> Option<u8> {
    (byte as char).to_digit(16).map(|d| d as u8)
}

fn needs_escape(byte: u8) -> bool {
    byte <= 0x20 || byte >= 0x7f || byte == b'#' || byte == b'%'
}

/// Escape the bytes <= 0x20, >= 0x7f, '#' and '%' as `%XX` (upper-case hex).
pub fn escape(data: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(data.len());
    for &byte in data {
        if needs_escape(byte) {
            out.push('%');
            out.push(HEX[usize::from(byte >> 4)] as char);
            out.push(HEX[usize::from(byte & 15)] as char);
        } else {
            out.push(byte as char);
        }
    }
    out
}

/// An unescaped path with its dot segments resolved and empty segments dropped, escaped.
///
/// "/a/b/.." names the directory "/a/", as a browser resolves it; "" is "/".
pub fn canonical_path(path: &[u8]) -> String {
    if path.is_empty() {
        return "/".to_owned();
    }
    let has = |needle: &[u8]| path.windows(2).any(|w| w == needle);
    if !has(b"//") && !has(b"/.") {
        return escape(path);
    }
    let mut segments: Vec<&[u8]> = Vec::new();
    for segment in path.split(|&b| b == b'/') {
        match segment {
            b".." => {
                segments.pop();
            }
            b"" | b"." => {}
            _ => segments.push(segment),
        }
    }
    let mut cleaned = Vec::with_capacity(path.len());
    for segment in &segments {
        cleaned.push(b'/');
        cleaned.extend_from_slice(segment);
    }
    let last = path.rsplit(|&b| b == b'/').next().unwrap_or_default();
    if cleaned.is_empty() || matches!(last, b"" | b"." | b"..") {
        cleaned.push(b'/');
    }
    escape(&cleaned)
}

/// The dotted quad for any IPv4 spelling (decimal, octal, hex, 1-4 parts), else None.
///
/// Safe Browsing's resolver rules, not WHATWG's: an earlier part over 255 keeps its low
/// byte, and "1.2.3.4 junk" is 1.2.3.4 when the whole string is at most 15 characters
/// (as Windows resolvers accept it).
pub fn parse_ipv4(host: &str) -> Option<String> {
    let host = if host.len() <= 15 {
        without_junk(host)
    } else {
        host
    };
    if !host.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let parts: Vec<&str> = host.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let mut octets = Vec::with_capacity(4);
    for (index, part) in parts.iter().enumerate() {
        let value = ipv4_number(part)?;
        // The last part fills all remaining bytes ("1.2.3" is 1.2.0.3).
        let width = if index == parts.len() - 1 {
            5 - parts.len()
        } else {
            1
        };
        octets.extend((0..width).rev().map(|shift| (value >> (8 * shift)) as u8));
    }
    let quad: Vec<String> = octets.iter().map(u8::to_string).collect();
    Some(quad.join("."))
}

/// "d.d.d.d " at the start (1-3 digits each): the quad alone, else the host as it is.
fn without_junk(host: &str) -> &str {
    let bytes = host.as_bytes();
    let mut at = 0;
    for part in 0..4 {
        let digits = bytes[at..]
            .iter()
            .take(3)
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            return host;
        }
        at += digits;
        let want = if part < 3 { b'.' } else { b' ' };
        if bytes.get(at) != Some(&want) {
            return host;
        }
        at += 1;
    }
    &host[..at - 1]
}

fn ipv4_number(part: &str) -> Option<u32> {
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x").or(part.strip_prefix("0X")) {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    // An over-long run of digits is over 0xFFFFFFFF whatever it says.
    u64::from_str_radix(digits.trim_start_matches('0'), radix)
        .ok()
        .or(digits.bytes().all(|b| b == b'0').then_some(0))
        .and_then(|v| u32::try_from(v).ok())
}

/// An IPv6 host as Safe Browsing writes it; IPv4-mapped and NAT64 (64:ff9b::/96)
/// addresses reach the same server as the IPv4 inside them, so they are written as it.
pub fn ipv6_host(address: Ipv6Addr, scope: Option<&str>) -> String {
    let [a, b, c, d, e, f, g, h] = address.segments();
    // As Python's ipaddress decides it (the reference): a zone does not change that.
    if [a, b, c, d, e, f] == [0, 0, 0, 0, 0, 0xffff]
        || [a, b, c, d, e, f] == [0x64, 0xff9b, 0, 0, 0, 0]
    {
        return Ipv4Addr::from((u32::from(g) << 16) | u32::from(h)).to_string();
    }
    // The url crate writes an address as WHATWG (and RFC 5952) does: the first longest
    // run of two or more zero groups compressed, lower-case hex.
    let written = ::url::Host::<&str>::Ipv6(address).to_string();
    match scope {
        Some(scope) => format!(
            "{}%25{}]",
            &written[..written.len() - 1],
            escape(scope.as_bytes())
        ),
        None => written,
    }
}

/// Safe Browsing's canonical form of a URL a browser would not open (or raw bytes that are
/// not UTF-8): the whole string unescaped first, then split. `raw` has no fragment and
/// no surrounding whitespace.
pub fn canonicalize_raw(raw: &[u8]) -> Result<String, UrlError> {
    let raw: Vec<u8> = raw
        .iter()
        .copied()
        .filter(|b| !matches!(b, b'\t' | b'\r' | b'\n'))
        .collect();
    if raw.is_empty() {
        return Err(UrlError::Empty);
    }
    let split = as_browsers_split(&raw);
    let raw = unescape_fully(&split);
    let (scheme, rest) = match scheme_end(&raw) {
        None => ("http".to_owned(), &raw[..]),
        Some(end) => {
            let scheme = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            match raw[end + 1..].strip_prefix(b"//") {
                Some(rest) => (scheme, rest),
                None => return Err(UrlError::ExpectedSlashes(scheme)),
            }
        }
    };
    let (rest, query) = partition(rest, b'?');
    let (hostish, path) = match rest.iter().position(|&b| b == b'/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, &b""[..]),
    };
    if hostish.is_empty() {
        return Err(UrlError::NoHost);
    }
    let mut url = format!(
        "{scheme}://{}{}",
        canonical_host(hostish)?,
        canonical_path(path)
    );
    if let Some(query) = query {
        url.push('?');
        url.push_str(&escape(query));
    }
    Ok(url)
}

/// Where the scheme's ':' is: `[A-Za-z][A-Za-z0-9+.-]*:`, unless the scheme is not a
/// special one and digits and the end of the host follow it ("host.com:80/" has a port,
/// not a scheme). After a special scheme the ':' always ends it, as in a browser:
/// `http:1572395042/` is `http://93.184.216.34/`, not the host `http`.
pub fn scheme_end(raw: &[u8]) -> Option<usize> {
    if !raw.first()?.is_ascii_alphabetic() {
        return None;
    }
    let end = raw
        .iter()
        .position(|&b| !(b.is_ascii_alphanumeric() || b"+.-".contains(&b)))?;
    if raw[end] != b':' {
        return None;
    }
    if is_special(&raw[..end]) {
        return Some(end);
    }
    let after = &raw[end + 1..];
    let digits = after.iter().take_while(|b| b.is_ascii_digit()).count();
    let port_like = digits > 0 && matches!(after.get(digits), None | Some(b'/' | b'?'));
    (!port_like).then_some(end)
}

fn partition(data: &[u8], mark: u8) -> (&[u8], Option<&[u8]>) {
    match data.iter().position(|&b| b == mark) {
        Some(at) => (&data[..at], Some(&data[at + 1..])),
        None => (data, None),
    }
}

/// The URL with its authority split where a browser splits it, before any unescaping.
///
/// Unescaping the whole URL first would give `http://good.example%2F@evil.example/` the
/// host good.example; a browser goes to evil.example. So a backslash before the query is
/// a slash in special schemes, and the userinfo (up to the authority's last raw '@') is
/// dropped while the authority still ends at the first raw '/'.
fn as_browsers_split(raw: &[u8]) -> Cow<'_, [u8]> {
    if !raw.iter().any(|&b| b == b'\\' || b == b'@') {
        return Cow::Borrowed(raw);
    }
    let scheme = scheme_end(raw);
    let start = scheme.map_or(0, |end| end + 1);
    let (rest, query) = partition(&raw[start..], b'?');
    let special = scheme.map_or(true, |end| is_special(&raw[..end]));
    let rest: Cow<[u8]> = if special && rest.contains(&b'\\') {
        Cow::Owned(
            rest.iter()
                .map(|&b| if b == b'\\' { b'/' } else { b })
                .collect(),
        )
    } else {
        Cow::Borrowed(rest)
    };
    let lead: &[u8] = if scheme.is_some() || rest.starts_with(b"//") {
        b"//"
    } else {
        b""
    };
    let Some(after_lead) = rest.strip_prefix(lead) else {
        return Cow::Borrowed(raw); // "scheme:" without "//": refused later with its message
    };
    let (authority, path) = match after_lead.iter().position(|&b| b == b'/') {
        Some(slash) => (&after_lead[..slash], &after_lead[slash..]),
        None => (after_lead, &b""[..]),
    };
    let host = match authority.iter().rposition(|&b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    let mut out = raw[..start].to_vec();
    for piece in [lead, host, path] {
        out.extend_from_slice(piece);
    }
    if let Some(query) = query {
        out.push(b'?');
        out.extend_from_slice(query);
    }
    Cow::Owned(out)
}

fn canonical_host(hostish: &[u8]) -> Result<String, UrlError> {
    let host = match hostish.iter().rposition(|&b| b == b'@') {
        Some(at) => &hostish[at + 1..],
        None => hostish,
    };
    if host.starts_with(b"[") {
        return canonical_ipv6(host);
    }
    let (host, port) = partition(host, b':');
    if let Some(port) = port.filter(|p| !p.is_empty()) {
        if !port.iter().all(u8::is_ascii_digit) {
            return Err(UrlError::InvalidPort(show(port)));
        }
    }
    let mut host = collapse_dots(host);
    if !host.is_ascii() {
        // UTS 46 maps '。' and '．' to '.', so dots are collapsed again afterwards.
        if let Some(ascii) = punycode(&host) {
            host = collapse_dots(ascii.as_bytes());
        }
    }
    if host.is_empty() {
        return Err(UrlError::NoHost);
    }
    if host.starts_with(b"[") {
        return Err(UrlError::BracketOutsideIpv6);
    }
    if host.is_ascii() {
        if let Some(ip) = std::str::from_utf8(&host).ok().and_then(parse_ipv4) {
            return Ok(ip);
        }
    }
    Ok(escape(&host.to_ascii_lowercase()))
}

/// A host's labels joined by single dots: no leading, trailing or empty labels.
pub fn collapse_dots(host: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(host.len());
    for label in host.split(|&b| b == b'.').filter(|l| !l.is_empty()) {
        if !out.is_empty() {
            out.push(b'.');
        }
        out.extend_from_slice(label);
    }
    out
}

/// The host's UTS 46 ASCII form as a browser computes it; None when UTS 46 refuses it
/// (or it is not UTF-8): Safe Browsing then keeps the raw bytes, percent-escaped.
fn punycode(host: &[u8]) -> Option<String> {
    std::str::from_utf8(host).ok()?;
    idna::domain_to_ascii_cow(host, idna::AsciiDenyList::URL)
        .ok()
        .map(Cow::into_owned)
}

fn canonical_ipv6(host: &[u8]) -> Result<String, UrlError> {
    let end = host
        .iter()
        .position(|&b| b == b']')
        .ok_or(UrlError::UnterminatedIpv6)?;
    let after = &host[end + 1..];
    if !(after.is_empty() || after[0] == b':' && after[1..].iter().all(u8::is_ascii_digit)) {
        return Err(UrlError::AfterIpv6(show(after)));
    }
    let invalid = || UrlError::InvalidIpv6(show(&host[..=end]));
    let inside = std::str::from_utf8(&host[1..end]).map_err(|_| invalid())?;
    // A zone ("fe80::1%eth0") is accepted as Python's ipaddress accepts it.
    let (address, scope) = match inside.split_once('%') {
        Some((_, scope)) if scope.is_empty() || scope.contains('%') => return Err(invalid()),
        Some((address, scope)) => (address, Some(scope)),
        None => (inside, None),
    };
    let address: Ipv6Addr = address.parse().map_err(|_| invalid())?;
    Ok(ipv6_host(address, scope))
}

/// Bytes for a message: UTF-8 as it is, other bytes as `\xNN`.
fn show(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.utf8_chunks() {
        out.push_str(chunk.valid());
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}
