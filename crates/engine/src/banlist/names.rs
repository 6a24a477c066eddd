//! The keys a canonical URL is looked up under: its url key, its prefix keys, its host's
//! parents. Plain string slicing of an already canonical URL (canonicalization itself is
//! done elsewhere); each function mirrors the Python one named in its doc.

/// `model.url_key`: the canonical URL without its scheme, so http and https match alike.
pub fn url_key(canonical: &str) -> &str {
    match canonical.find("://") {
        Some(at) => &canonical[at + 3..],
        None => "",
    }
}

/// `canon.split`'s path: what lies between the host and the query, or None when the string
/// is not a canonical URL (no scheme separator, or no host before the path).
pub fn path_of(canonical: &str) -> Option<&str> {
    let rest = &canonical[canonical.find("://")? + 3..];
    let rest = match rest.find('?') {
        Some(mark) => &rest[..mark],
        None => rest,
    };
    let slash = rest.find('/')?;
    (slash > 0).then(|| &rest[slash..])
}

/// The prefix keys of a path, most specific first, each once: `host + p.rstrip("/")` for
/// every `p` of `canon.path_prefixes(path)`, reversed (what `index._prefix_rows` probes).
pub fn prefix_keys(host: &str, path: &str) -> Vec<String> {
    prefix_lens(path)
        .map(|len| format!("{host}{}", &path[..len]))
        .collect()
}

/// The lengths of the path part of the prefix keys of `path`, longest first, each once:
/// every key is `host + &path[..len]`, so a caller holding `host + path` in one string
/// (a canonical URL's url key) slices the keys out of it.
pub fn prefix_lens(path: &str) -> impl Iterator<Item = usize> + '_ {
    let bytes = path.as_bytes();
    let trimmed = move |end: usize| {
        bytes[..end]
            .iter()
            .rposition(|&b| b != b'/')
            .map_or(0, |at| at + 1)
    };
    // the ends of `canon.path_prefixes`: the path, each slash past the first (before it and
    // after it), and the root; a prefix's key drops its trailing slashes
    let slashes = bytes
        .iter()
        .enumerate()
        .skip(1)
        .rev()
        .filter(|(_, &b)| b == b'/')
        .flat_map(|(at, _)| [at + 1, at]);
    let mut last = None;
    std::iter::once(bytes.len())
        .chain(slashes)
        .chain(std::iter::once(1.min(bytes.len())))
        .map(trimmed)
        .filter(move |&len| {
            let new = last != Some(len);
            last = Some(len);
            new
        })
}

/// `canon.is_ipv4`: a dotted quad of 1-3 digit groups.
pub fn is_ipv4(host: &str) -> bool {
    if !host.as_bytes().last().is_some_and(u8::is_ascii_digit) {
        return false;
    }
    let mut parts = 0;
    for part in host.split('.') {
        parts += 1;
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
    }
    parts == 4
}

/// How many labels a name has (what bounds the parents worth probing).
pub fn labels(name: &str) -> usize {
    name.bytes().filter(|&b| b == b'.').count() + 1
}

/// `index._parents`: the host and its parents that a domain entry or org member could be,
/// most specific first, only those of at most `limit` labels and never the bare TLD; an IP
/// is only itself.
pub fn suffixes(host: &str, limit: usize) -> Vec<&str> {
    if host.starts_with('[') || is_ipv4(host) {
        return vec![host];
    }
    let bytes = host.as_bytes();
    let mut starts: Vec<usize> = Vec::new(); // starts[k - 1]: where the parent of k labels begins
    let mut pos = bytes.len();
    let mut whole = false;
    while starts.len() < limit {
        match bytes[..pos].iter().rposition(|&b| b == b'.') {
            Some(dot) => {
                starts.push(dot + 1);
                pos = dot;
            }
            None => {
                whole = true;
                break;
            }
        }
    }
    let mut found = Vec::with_capacity(starts.len() + 1);
    if whole {
        found.push(host);
    }
    for k in (2..=starts.len()).rev() {
        found.push(&host[starts[k - 1]..]);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_keys_dedup_and_order_like_python() {
        assert_eq!(prefix_keys("h", "/a/b/c"), ["h/a/b/c", "h/a/b", "h/a", "h"]);
        assert_eq!(prefix_keys("h", "/a//b"), ["h/a//b", "h/a", "h"]);
        assert_eq!(prefix_keys("h", "/"), ["h"]);
        assert_eq!(prefix_keys("h", "/a/"), ["h/a", "h"]);
    }

    #[test]
    fn suffixes_stop_at_the_limit_and_skip_the_tld() {
        assert_eq!(suffixes("a.b.c.d", 2), ["c.d"]);
        assert_eq!(suffixes("a.b.c.d", 9), ["a.b.c.d", "b.c.d", "c.d"]);
        assert_eq!(suffixes("c.d", 2), ["c.d"]);
        assert_eq!(suffixes("localhost", 1), ["localhost"]);
        assert_eq!(suffixes("a.b.c", 1), Vec::<&str>::new());
        assert_eq!(suffixes("1.2.3.4", 9), ["1.2.3.4"]);
        assert_eq!(suffixes("[::1]", 9), ["[::1]"]);
    }

    #[test]
    fn paths_and_url_keys() {
        assert_eq!(path_of("http://h/p/x?q=1"), Some("/p/x"));
        assert_eq!(path_of("http:///x"), None);
        assert_eq!(path_of("nope"), None);
        assert_eq!(url_key("https://h/p?q"), "h/p?q");
        assert!(is_ipv4("1.2.3.4") && !is_ipv4("1.2.3") && !is_ipv4("1.2.3.4444"));
    }
}
