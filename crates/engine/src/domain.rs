//! Registrable domains (eTLD+1) from the Public Suffix List compiled into the `psl` crate.
//!
//! Both sections of the list count (ICANN's and the private one, so `user.github.io` is
//! its own site), and an unknown TLD is a public suffix of one label, as the list's
//! implicit `*` rule says.

use pyo3::prelude::*;

/// The registrable domain (eTLD+1) of a host; the host itself for IPs and bare suffixes.
pub fn registrable_domain(host: &str) -> &str {
    if is_ip(host) {
        return host;
    }
    psl::domain_str(host).unwrap_or(host)
}

/// True for names such as `co.uk` or `github.io` under which anyone may register.
pub fn is_public_suffix(name: &str) -> bool {
    !name.is_empty() && psl::suffix_str(name) == Some(name)
}

/// A canonical host that is an IPv4 dotted quad or a bracketed IPv6 address.
fn is_ip(host: &str) -> bool {
    host.starts_with('[')
        || host.ends_with(|c: char| c.is_ascii_digit())
            && host.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// The registrable domain of a host, for Python.
#[pyfunction(name = "registrable_domain")]
fn py_registrable_domain(host: &str) -> &str {
    registrable_domain(host)
}

/// Whether a name is a public suffix, for Python.
#[pyfunction(name = "is_public_suffix")]
fn py_is_public_suffix(name: &str) -> bool {
    is_public_suffix(name)
}

/// Add `registrable_domain` and `is_public_suffix` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(py_registrable_domain, m)?)?;
    m.add_function(wrap_pyfunction!(py_is_public_suffix, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrable_domains_follow_the_list() {
        assert_eq!(registrable_domain("www.example.co.uk"), "example.co.uk");
        assert_eq!(registrable_domain("a.b.example.com"), "example.com");
        assert_eq!(registrable_domain("user.github.io"), "user.github.io");
        assert_eq!(registrable_domain("x.user.github.io"), "user.github.io");
        assert_eq!(
            registrable_domain("shop.xn--e1afmkfd.xn--p1ai"),
            "xn--e1afmkfd.xn--p1ai"
        );
        assert_eq!(
            registrable_domain("a.example.unknowntld"),
            "example.unknowntld"
        );
    }

    #[test]
    fn ips_and_bare_suffixes_are_their_own_domain() {
        assert_eq!(registrable_domain("195.127.0.11"), "195.127.0.11");
        assert_eq!(registrable_domain("[2001:db8::1]"), "[2001:db8::1]");
        assert_eq!(registrable_domain("co.uk"), "co.uk");
        assert_eq!(registrable_domain("localhost"), "localhost");
        assert_eq!(registrable_domain(""), "");
    }

    #[test]
    fn public_suffixes() {
        assert!(is_public_suffix("co.uk"));
        assert!(is_public_suffix("github.io"));
        assert!(is_public_suffix("com"));
        assert!(is_public_suffix("xn--p1ai"));
        assert!(!is_public_suffix("example.com"));
        assert!(!is_public_suffix(""));
    }
}
