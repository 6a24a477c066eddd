"""The engine's canonicalizer against ada (a separate WHATWG URL implementation, the one
Node.js uses, standing in for the browser), on random URLs.

1. A URL the browser opens with an http(s), ws(s) or ftp host: the engine's host is the
   browser's, in Safe Browsing's spelling (no empty labels, an IPv4-mapped IPv6 address
   as its IPv4; no host left: refused), and its canonical form starts with the browser's
   scheme and that host. This is what fixes the evasions of issue 14.
2. A URL without a scheme that starts with a slash or backslash (`/blah`, `//blah`): a path
   relative to a page the engine does not know, so no host ("no host").
3. Any other URL, and a label two WHATWG implementations may judge differently under
   UTS 46 (`idna_edge`): refused, or an ASCII `scheme://host/...` (Safe Browsing's answer
   where no browser has one); canonical forms of the structured URLs are fixpoints.

How Safe Browsing spells the path and the query is held to its published vectors
(tests/banlist/test_canon.py) and crates/engine/src/url/tests.rs.
"""
from __future__ import annotations

import ipaddress
import re
import socket
import unicodedata
from functools import lru_cache
from urllib.parse import unquote

import ada_url
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from publicsuffixlist import PublicSuffixList

from app import domains
from app.banlist import canon

SPECIAL = {"http:", "https:", "ws:", "wss:", "ftp:"}
_C0_OR_SPACE = "".join(map(chr, range(0x21)))
# A scheme as Safe Browsing reads one: a special one before its ':', or any other whose
# ':' is not followed by a port (`host:80/`).
_SCHEME = re.compile(r"((?i:https?|wss?|ftp)(?=:)"
                     r"|[A-Za-z][A-Za-z0-9+.\-]*(?=:(?!\d+(?:[/?]|\Z)))):")


def outcome(fn, url):
    try:
        return fn(url)
    except canon.InvalidURL:
        return "refused"


def as_the_browser_opens(url: str) -> str | None:
    """The URL as ada serializes it (no userinfo, port or fragment), or None if it opens
    no http(s)/ws(s)/ftp host. Without a scheme a URL is an http one, as Safe Browsing
    (and an address bar) takes it."""
    text = url.strip(_C0_OR_SPACE).translate({9: None, 10: None, 13: None})
    if _SCHEME.match(text) is None:
        text = "http://" + text
    try:
        parsed = ada_url.parse_url(text)
    except ValueError:
        return None
    if parsed["protocol"] not in SPECIAL or not parsed["hostname"]:
        return None
    href = parsed["href"].partition("#")[0]
    query = "?" + href.partition("?")[2] if "?" in href else ""
    return f"{parsed['protocol']}//{parsed['hostname']}{parsed['pathname']}{query}"


def a_bare_path(url: str) -> bool:
    """No scheme, and a slash or backslash first: a path, not a host (rule 2)."""
    text = url.strip(_C0_OR_SPACE).translate({9: None, 10: None, 13: None})
    return _SCHEME.match(text) is None and text.startswith(("/", "\\"))


def safe_browsing_host(host: str) -> str:
    """ada's host as Safe Browsing spells it: no empty labels (leading, trailing or
    repeated dots), then a name that inet_aton reads as an IPv4 address (`0`, `0x7f.1`)
    as that address, an IPv4-mapped IPv6 address as its IPv4."""
    if host.startswith("["):
        mapped = ipaddress.IPv6Address(host[1:-1]).ipv4_mapped
        return host if mapped is None else str(mapped)
    host = ".".join(label for label in host.split(".") if label)
    try:
        return socket.inet_ntoa(socket.inet_aton(host)) if host.isascii() else host
    except OSError:
        return host


def idna_edge(url: str) -> bool:
    """A URL with a label two WHATWG implementations may judge differently under UTS 46:
    an `xn--` label (ada accepts some that do not decode to valid text; the url crate
    refuses them), a right-to-left letter (the url crate applies UTS 46's Bidi rule to
    every label of such a host, ada not always) or a code point unassigned in Python's
    Unicode database (each parser has its own Unicode version)."""
    text = unquote(url).lower()
    return "xn--" in text or any(unicodedata.category(c) == "Cn"
                                 or unicodedata.bidirectional(c) in ("R", "AL") for c in text)


def well_formed(got) -> bool:
    """An ASCII canonical URL `scheme://host/...` whose host is the one given with it."""
    canonical, host = got
    scheme, sep, rest = canonical.partition("://")
    return (canonical.isascii() and bool(sep) and scheme == scheme.lower()
            and rest.startswith(f"{host}/") and host == canon.host_of(canonical))


def check(url: str) -> None:
    got = outcome(canon.canonicalize_with_host, url)
    browser = None if a_bare_path(url) else as_the_browser_opens(url)
    if idna_edge(url) or (browser is None and not a_bare_path(url)):  # rule 3
        assert got == "refused" or well_formed(got), url
        return
    if browser is None:  # rule 2
        assert got == "refused", url
        return
    scheme, _, rest = browser.partition("//")  # rule 1
    want = safe_browsing_host(rest.partition("/")[0])
    if not want:
        assert got == "refused", (url, browser)
        return
    assert got != "refused", (url, browser)
    assert got[1] == want, (url, browser)
    assert got[0].startswith(f"{scheme}//{want}/"), (url, browser)


PIECES = [
    "http://", "HTTPS://", "ftp:", "ws://", "foo://", "mailto:", "//", "/", "\\", ".", "..",
    "/./", "/../", "%", "%25", "%2e", "%2E", "%2F", "%3F", "%23", "%40", "%5C", "#", "?", "@",
    ":", ":80", ":99999", "a", "B", "x_y", "ü", "п", "ß", "ｅ", "Ａ", "\u00ad", "❤", "xn--i-7iq",
    "xn--zz", "1", "0x1f", "07", "255", "256", "[", "]", "[::1]", "[::ffff:1.2.3.4]", " ", "\t",
    "\n", "\x01", "\x1f", "%20", "%00", "%80", "%C3%BC", "%e2%98%83", "<", "^", "|", "\u3002",
    "\uff0e", "evil", ".example", "com", "~", "'", "\"", "{", "=", "&",
]

pieces = st.lists(st.sampled_from(PIECES), min_size=1, max_size=14).map("".join)

label = st.one_of(
    st.sampled_from(["evil", "www", "a-b", "x_y", "0x7f", "1", "255", "xn--i-7iq", "ｅｖｉｌ",
                     "ev\u00adil", "i❤", "bücher", "пример", "straße", "EXAMPLE", "%65vil",
                     "a%2Eb", ""]),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
            max_size=4),
)
structured = st.builds(
    lambda lead, scheme, slashes, user, labels, dot, port, path, query, frag: (
        f"{lead}{scheme}{slashes}{user}{'.'.join(labels)}{dot}{port}{path}{query}{frag}"),
    st.sampled_from(["", "", " ", "\x01", "\t"]),
    st.sampled_from(["http:", "https:", "HTTP:", "ftp:", "ws:", "", "foo:"]),
    st.sampled_from(["//", "//", "/", "", "\\\\", "///", "/\\"]),
    st.sampled_from(["", "", "user:pw@", "good.example%2F@", "a@b@", "@"]),
    st.lists(label, min_size=1, max_size=4),
    st.sampled_from(["", "", ".", ".."]),
    st.sampled_from(["", "", ":80", ":8080", ":x", ":99999"]),
    st.lists(st.sampled_from(["a", ".", "..", "%2e%2e", "b%2Fc", "ü", "%25", "", "\\", "@x",
                              " ", "%23"]), max_size=4).map(
        lambda segments: "".join("/" + s for s in segments)),
    st.sampled_from(["", "", "?", "?q=1", "?a=%2F&b=ü", "?x#y", "?%3F"]),
    st.sampled_from(["", "", "#frag", "#"]),
)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(structured)
@example("\u0001http://evil.example/")
@example("http://x_y.ｅｖｉｌ.example/")
@example("http://ev\u00adil.example/")
@example("http:/evil.example/")
@example("http://i❤.ws/")
@example("http://good.example%2F@evil.example/")
@example("http://evil.example\\@good.example/")
@example("http://host%23.com/%257Ea")
@example("http:///blah")
@example("http:1572395042/")
@example("http:013556154042/")
@example("http:\\\\\\good.example\\")
@example("/blah")
def test_the_engines_host_is_the_browsers(url):
    check(url)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces)
def test_the_engines_host_is_the_browsers_on_url_fragments(url):
    check(url)


@settings(max_examples=500, deadline=None)
@given(structured)
def test_canonical_forms_are_fixpoints(url):
    found = outcome(canon.canonicalize_with_host, url)
    if found != "refused":
        canonical, host = found
        assert canon.canonicalize_with_host(canonical) == (canonical, host)
        assert canonical.isascii() and host == canon.host_of(canonical)


# --- registrable domains: psl (engine) against publicsuffixlist ---

PSL = PublicSuffixList()  # its own bundled copy of the list, parsed once (~50 ms)


@lru_cache(maxsize=65536)
def psl_registrable_domain(host: str) -> str:
    """publicsuffixlist's eTLD+1; the host itself for IPs and bare suffixes."""
    if host.startswith("[") or host.replace(".", "").isdigit():
        return host
    return PSL.privatesuffix(host) or host


def _rules() -> list[str]:
    import publicsuffixlist

    path = publicsuffixlist.__file__.rpartition("/")[0] + "/public_suffix_list.dat"
    with open(path, encoding="utf-8") as fh:
        lines = [line.strip() for line in fh]
    return [line.lstrip("!*.") for line in lines if line and not line.startswith("//")]


RULES = _rules()
host = st.builds(lambda labels, rule: ".".join([*labels, rule]).lower(),
                 st.lists(st.sampled_from(["www", "shop", "a-b", "x", "co", "com", "www.ck"]),
                          max_size=3),
                 st.sampled_from(RULES)).map(
    lambda h: ada_url.idna_to_ascii(h).decode("ascii"))


def suffixes(name: str) -> list[str]:
    labels = name.split(".")
    return [".".join(labels[i:]) for i in range(len(labels))]


@settings(max_examples=3000, deadline=None)
@given(host)
@example("www.example.co.uk")
@example("user.github.io")
@example("www.ck")
@example("a.b.kawasaki.jp")
@example("city.kawasaki.jp")
@example("10.0.0.1")
@example("[2001:db8::1]")
def test_registrable_domain_is_publicsuffixlists(name):
    # The two lists are snapshots of different days: where they disagree, the answer may
    # differ, but only because some suffix of the name is public in one and not the other.
    got, expected = domains.registrable_domain(name), psl_registrable_domain(name)
    lists_differ = any(domains.is_public_suffix(s) != PSL.is_public(s) for s in suffixes(name))
    assert got == expected or lists_differ, name
    if not name.startswith("["):
        assert domains.is_public_suffix(name) == PSL.is_public(name) or lists_differ, name
