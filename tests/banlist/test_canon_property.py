"""The engine's canonicalizer against the reference Python model, on random URLs.

The engine (crates/engine/src/url.rs) differs from the reference by design in one thing:
the host is the one a browser finds. So the oracle here is the reference applied to the
URL *as a browser resolves it*, with ada (a separate WHATWG URL implementation, the one
Node.js uses) standing in for the browser:

1. A URL the browser opens with an http(s), ws(s) or ftp host: the engine's answer is the
   reference's answer on the browser's URL (`scheme://host` + path + query as the browser
   serialized them). Safe Browsing's spelling of path and query is kept; the host is the
   browser's, which is what fixes the evasions of issue 14.
2. Except a URL without a scheme that starts with a slash or backslash (`/blah`,
   `//blah`): a path relative to a page the engine does not know, so no host ("no host").
   After a scheme the browser decides: `http:///blah` is blah, `http:80/` is 0.0.0.80.
3. A URL the browser does not open (or opens with another scheme): the engine's answer is
   the reference's on the URL as it is, except that a non-ASCII host which the reference's
   IDNA 2008 library refuses (and so leaves percent-escaped) is written, as a browser
   would write it, in its UTS 46 ASCII form when UTS 46 accepts it (and a host that
   UTS 46 maps to nothing, such as a lone soft hyphen, is no host).
4. Where the two WHATWG implementations may disagree on a label (`idna_edge`: an `xn--`
   label, a right-to-left letter, a code point newer than Python's Unicode database),
   the engine follows the url crate: its answer is rule 1's, rule 3's, a refusal, or
   (the url crate's verdict on the label differing from ada's) a canonical fixpoint.
"""
from __future__ import annotations

import re
import unicodedata
from urllib.parse import unquote

import ada_url
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app import domains
from app.banlist import canon
from tests.reference import canon as reference
from tests.reference import domains as reference_domains

SPECIAL = {"http:", "https:", "ws:", "wss:", "ftp:"}
_C0_OR_SPACE = "".join(map(chr, range(0x21)))


def outcome(fn, url):
    try:
        return fn(url)
    except (canon.InvalidURL, reference.InvalidURL):
        return "refused"


def as_the_browser_opens(url: str) -> str | None:
    """The URL as ada serializes it (no userinfo, port or fragment), or None if it opens
    no http(s)/ws(s)/ftp host. Without a scheme a URL is an http one, as Safe Browsing
    (and an address bar) takes it."""
    text = url.strip(_C0_OR_SPACE).translate({9: None, 10: None, 13: None})
    if reference._SCHEME.match(text.encode("utf-8", "surrogatepass")) is None:
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
    scheme = reference._SCHEME.match(text.encode("utf-8", "surrogatepass"))
    return scheme is None and text.startswith(("/", "\\"))


_ESCAPED_NON_ASCII = re.compile(r"%[89A-F][0-9A-F]")


def with_the_browsers_idna(found: tuple[str, str]) -> tuple[str, str] | str:
    """The reference's answer with an escaped non-ASCII host in its UTS 46 form (rule 3)."""
    canonical, host = found
    if not _ESCAPED_NON_ASCII.search(host):
        return found
    try:
        ascii_host = ada_url.idna_to_ascii(unquote(host)).decode("ascii")
    except (ValueError, UnicodeError):
        return found
    ascii_host = ".".join(label for label in ascii_host.split(".") if label)
    if not ascii_host:
        return "refused"  # UTS 46 maps it to nothing (a soft hyphen): no host
    ip = reference.parse_ipv4(ascii_host) if ascii_host.isascii() else None
    ascii_host = ip or ascii_host
    scheme, _, rest = canonical.partition("://")
    return f"{scheme}://{ascii_host}{rest[len(host):]}", ascii_host


def idna_edge(url: str) -> bool:
    """A URL with a label two WHATWG implementations may judge differently under UTS 46:
    an `xn--` label (ada accepts some that do not decode to valid text; the url crate
    refuses them), a right-to-left letter (the url crate applies UTS 46's Bidi rule to
    every label of such a host, ada not always) or a code point unassigned in Python's
    Unicode database (each parser has its own Unicode version)."""
    text = unquote(url).lower()
    return "xn--" in text or any(unicodedata.category(c) == "Cn"
                                 or unicodedata.bidirectional(c) in ("R", "AL") for c in text)


def check(url: str) -> None:
    got = outcome(canon.canonicalize_with_host, url)
    if idna_edge(url):  # rule 4: the url crate's verdict on the label stands
        browser = as_the_browser_opens(url)
        raw = outcome(reference.canonicalize_with_host, url)
        answers = ["refused", raw, raw if raw == "refused" else with_the_browsers_idna(raw)]
        if browser is not None:
            answers.append(outcome(reference.canonicalize_with_host, browser))
        # or the url crate's own verdict on the label: then a canonical fixpoint
        assert got in answers or canon.canonicalize_with_host(got[0]) == got, (url, browser)
        return
    if a_bare_path(url):  # rule 2
        assert got == "refused", url
        return
    browser = as_the_browser_opens(url)
    if browser is not None:  # rule 1
        assert got == outcome(reference.canonicalize_with_host, browser), (url, browser)
        return
    expected = outcome(reference.canonicalize_with_host, url)  # rule 3
    if got != expected and expected != "refused":
        expected = with_the_browsers_idna(expected)
    assert got == expected, url


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
def test_engine_agrees_with_the_reference_on_the_browsers_url(url):
    check(url)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces)
def test_engine_agrees_with_the_reference_on_url_fragments(url):
    check(url)


@settings(max_examples=500, deadline=None)
@given(structured)
def test_canonical_forms_are_fixpoints(url):
    found = outcome(canon.canonicalize_with_host, url)
    if found != "refused":
        canonical, host = found
        assert canon.canonicalize_with_host(canonical) == (canonical, host)
        assert canonical.isascii() and host == canon.host_of(canonical)


# --- registrable domains: psl (engine) against publicsuffixlist (reference) ---

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
    lambda h: reference.canonicalize_with_host(f"http://{h}/")[1])


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
def test_registrable_domain_agrees_with_the_reference(name):
    # The two lists are snapshots of different days: where they disagree, the answer may
    # differ, but only because some suffix of the name is public in one and not the other.
    got, expected = domains.registrable_domain(name), reference_domains.registrable_domain(name)
    lists_differ = any(domains.is_public_suffix(s) != reference_domains.is_public_suffix(s)
                       for s in suffixes(name))
    assert got == expected or lists_differ, name
    if not name.startswith("["):
        assert domains.is_public_suffix(name) == reference_domains.is_public_suffix(name) or (
            lists_differ), name
