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
    let mut prefixes: Vec<&str> = vec!["/"];
    let bytes = path.as_bytes();
    let mut from = 1;
    while let Some(found) = bytes
        .get(from..)
        .and_then(|b| b.iter().position(|&c| c == b'/'))
    {
        let slash = from + found;
        prefixes.push(&path[..slash]);
        prefixes.push(&path[..slash + 1]);
        from = slash + 1;
    }
    if prefixes.last() != Some(&path) {
        prefixes.push(path);
    }
    let mut keys: Vec<String> = Vec::with_capacity(prefixes.len());
    for p in prefixes.iter().rev() {
        let key = format!("{host}{}", p.trim_end_matches('/'));
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

/// `canon.is_ipv4`: a dotted quad of 1-3 digit groups.
pub fn is_ipv4(host: &str) -> bool {
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

/// `suffixes` without allocating (the request path): calls `f` on each, most specific
/// first, until it returns true; whether one did.
#[inline]
pub fn any_suffix<'h>(host: &'h str, limit: usize, mut f: impl FnMut(&'h str) -> bool) -> bool {
    const MOST: usize = 16;
    if limit > MOST || host.starts_with('[') || is_ipv4(host) {
        return suffixes(host, limit).into_iter().any(f);
    }
    let bytes = host.as_bytes();
    let mut starts = [0usize; MOST];
    let (mut found, mut pos, mut whole) = (0, bytes.len(), false);
    while found < limit {
        match bytes[..pos].iter().rposition(|&b| b == b'.') {
            Some(dot) => {
                starts[found] = dot + 1;
                found += 1;
                pos = dot;
            }
            None => {
                whole = true;
                break;
            }
        }
    }
    if whole && f(host) {
        return true;
    }
    (2..=found).rev().any(|k| f(&host[starts[k - 1]..]))
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
        for (host, limit) in [
            ("a.b.c.d", 2),
            ("a.b.c.d", 9),
            ("c.d", 2),
            ("localhost", 1),
            ("a.b.c", 1),
            ("1.2.3.4", 3),
        ] {
            let mut seen = Vec::new();
            any_suffix(host, limit, |s| {
                seen.push(s);
                false
            });
            assert_eq!(seen, suffixes(host, limit));
        }
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
