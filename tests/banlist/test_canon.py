"""Safe Browsing canonicalization: every shared vector, plus the cases the vectors leave out."""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from app.banlist import canon
from app.banlist.canon import (
    InvalidURL,
    canonicalize,
    canonicalize_bytes,
    expressions,
    host_suffixes,
    parse_ipv4,
    path_prefixes,
    split,
)

SECTIONS = {"canonicalize", "canonicalize_bytes", "must_be_rejected", "ipv4_host", "expressions"}


SHARED_COPY = Path(__file__).resolve().parents[1] / "data" / "url_canonicalization.json"


def _vector_file() -> Path:
    """shared/ is the source of truth; the repo keeps a copy so a clone alone can run the suite."""
    shared = os.environ.get("REARRANGE_SHARED") or Path(__file__).resolve().parents[3] / "shared"
    path = Path(shared) / "testdata" / "url_canonicalization.json"
    return path if path.is_file() else SHARED_COPY


def _load() -> dict:
    path = _vector_file()
    if not path.is_file():
        # A collection error, not a skip: without the vectors nothing here is checked.
        pytest.fail(f"URL canonicalization vectors not found at {path} "
                    "(set REARRANGE_SHARED to the shared directory)", pytrace=False)
    return json.loads(path.read_text(encoding="utf-8"))


VECTORS = _load()


def _id(index: int, text: str) -> str:
    shown = text if len(text) <= 48 else text[:45] + "..."
    return f"{index:02d}:{shown!r}"


def _cases(section: str, key: str | None = None) -> list:
    items = VECTORS[section]
    return [pytest.param(v, id=_id(i, v[key] if key else v)) for i, v in enumerate(items)]


def test_vector_file_has_every_section_and_nothing_unchecked():
    assert set(VECTORS) - {"source"} == SECTIONS
    for section in SECTIONS:
        assert VECTORS[section], f"section {section} is empty"


@pytest.mark.parametrize("vector", _cases("canonicalize", "input"))
def test_canonicalize_vector(vector):
    assert canonicalize(vector["input"]) == vector["canonical"]


@pytest.mark.parametrize("vector", _cases("canonicalize_bytes", "input_hex"))
def test_canonicalize_bytes_vector(vector):
    assert canonicalize_bytes(bytes.fromhex(vector["input_hex"])) == vector["canonical"]


# Where a vector and the browser disagree, the browser wins (CONTRACT.md: URLs are parsed
# as the WHATWG URL Standard says): Safe Browsing refuses an empty authority, a browser
# skips every slash before the host and opens blah (issue 45).
THE_BROWSER_OPENS = {"http:///blah": "http://blah/"}


@pytest.mark.parametrize("url", _cases("must_be_rejected"))
def test_rejected_vector(url):
    if url in THE_BROWSER_OPENS:
        assert canonicalize(url) == THE_BROWSER_OPENS[url]
        return
    with pytest.raises(InvalidURL):
        canonicalize(url)


@pytest.mark.parametrize("vector", _cases("ipv4_host", "input"))
def test_ipv4_vector(vector):
    assert parse_ipv4(vector["input"]) == vector["dotted_quad"]


@pytest.mark.parametrize("vector", _cases("expressions", "url"))
def test_expressions_vector(vector):
    got = expressions(vector["url"])
    assert len(got) == len(set(got)), "duplicate expressions"
    assert set(got) == set(vector["expressions"])


ALL_CANONICAL = [v["canonical"] for v in VECTORS["canonicalize"] + VECTORS["canonicalize_bytes"]]
IDEMPOTENT_CASES = [pytest.param(u, id=_id(i, u)) for i, u in enumerate(ALL_CANONICAL)]


@pytest.mark.parametrize("url", IDEMPOTENT_CASES)
def test_canonicalize_is_idempotent(url):
    assert canonicalize(url) == url
    assert canonicalize(canonicalize(url)) == canonicalize(url)


def test_a_clean_url_is_returned_as_it_is():
    url = "https://shop.example.com/sofa?id=3"
    assert canonicalize(url) == url
    assert canonicalize("https://shop.example.com?id=3") == "https://shop.example.com/?id=3"


@pytest.mark.parametrize(("url", "expected"), [
    ("http://пример.рф/", "http://xn--e1afmkfd.xn--p1ai/"),
    ("HTTPS://Example.COM:443/a/./b/../c#x", "https://example.com/a/c"),
    ("http://ПРИМЕР.РФ./путь?ключ=значение",
     "http://xn--e1afmkfd.xn--p1ai/%D0%BF%D1%83%D1%82%D1%8C"
     "?%D0%BA%D0%BB%D1%8E%D1%87=%D0%B7%D0%BD%D0%B0%D1%87%D0%B5%D0%BD%D0%B8%D0%B5"),
    ("http://Straße.de/", "http://xn--strae-oqa.de/"),  # UTS 46 non-transitional, unlike IDNA 2003
    # IDNA 2008 refuses '_' beside non-ASCII; UTS 46 as browsers run it (WHATWG) does not
    ("http://ümlat_x.com/", "http://xn--mlat_x-2ya.com/"),
    ("http://user:pw@Example.com:8080/", "http://example.com/"),
    ("example.com:8080/a", "http://example.com/a"),
    ("http://a.com/b/c/..", "http://a.com/b/"),
    ("http://a.com/b/c/.", "http://a.com/b/c/"),
    ("http://a.com/../../x", "http://a.com/x"),
    ("http://a.com/%2e%2E/x/%2e/", "http://a.com/x/"),
    ("http://a.com?q", "http://a.com/?q"),
    ("http://0x7f.1/", "http://127.0.0.1/"),
    ("http://[::1]:8080/", "http://[::1]/"),
    ("http://a.com/%09%0a#%", "http://a.com/%09%0A"),
    ("http://пример．рф。/", "http://xn--e1afmkfd.xn--p1ai/"),  # UTS 46 dots, trailing one dropped
    ("http://1。/", "http://0.0.0.1/"),
    # the authority is split where a browser splits it, before anything is unescaped
    ("http://good.example%2F@evil.example/", "http://evil.example/"),
    ("http://evil.example\\@good.example/", "http://evil.example/@good.example/"),
    ("https://evil.example/a\\b?q=\\", "https://evil.example/a/b?q=\\"),  # query kept
    ("http://x%40y@host.example/p@q?r=s@t", "http://host.example/p@q?r=s@t"),
])
def test_canonicalize_more(url, expected):
    assert canonicalize(url) == expected
    assert canonicalize(expected) == expected


@pytest.mark.parametrize(("url", "message"), [
    ("", "empty URL"),
    ("   #x", "empty URL"),
    ("/a", "no host"),
    ("http:///", "no host"),
    ("http://.../", "no host"),
    ("mailto:someone@example.com", "expected '//'"),
    ("http://example.com:http/", "invalid port"),
    ("http://[::1/", "unterminated IPv6"),
    ("http://[zz::1]/", "invalid IPv6 address"),
    ("http://..[x/", "'\\[' outside an IPv6 address"),
    ("http://\ud800.com/", "unpaired surrogate"),
])
def test_invalid_urls_say_what_is_wrong(url, message):
    with pytest.raises(InvalidURL, match=message):
        canonicalize(url)
    assert issubclass(InvalidURL, ValueError)


def test_bytes_that_are_utf8_match_the_text_form():
    url = " http://Пример.рф/a b#frag "
    assert canonicalize_bytes(url.encode("utf-8")) == canonicalize(url)


def test_deeply_nested_escapes_are_linear():
    url = "http://host/" + "%" + "25" * 20000 + "x"
    assert canonicalize(url) == "http://host/%25x"


FUZZ_PIECES = [
    "http://", "HTTPS://", "ftp:", "//", "/", ".", "..", "/./", "/../", "%", "%25", "%2e", "%2F",
    "%3F", "%23", "#", "?", "a", "B", "ü", "п", "1", "0x1f", "07", ":", ":80", "@", "[", "]",
    "[::1]", " ", "\t", "%20", "%80", "_", "<", "ß", "255", "%C3%BC", "\x01", "\u3002", "\uff0e",
]


def test_random_urls_are_idempotent():
    rng = random.Random(7)
    checked = 0
    for _ in range(10000):
        url = "".join(rng.choice(FUZZ_PIECES) for _ in range(rng.randint(1, 12)))
        try:
            canonical, host = canon.canonicalize_with_host(url)
        except InvalidURL:
            continue
        checked += 1
        assert host == canon.host_of(canonical), url
        assert canonicalize(canonical) == canonical, url
        assert canonical.isascii(), url
    assert checked > 2500


def test_split():
    assert split("http://a.b.c/1/2.html?param=1") == ("a.b.c", "/1/2.html", "?param=1")
    assert split("http://www.google.com/q?") == ("www.google.com", "/q", "?")
    assert split("http://www.google.com/q") == ("www.google.com", "/q", "")
    assert split("http://www.google.com/q?r?") == ("www.google.com", "/q", "?r?")
    assert split("http://[::1]/") == ("[::1]", "/", "")
    with pytest.raises(InvalidURL):
        split("www.google.com/")


def test_host_suffixes():
    assert host_suffixes("a.b.c") == ["a.b.c", "b.c", "c"]
    assert host_suffixes("a.b.c", limit=5) == ["a.b.c", "b.c"]
    assert host_suffixes("a.b.c.d.e.f.g", limit=5) == [
        "a.b.c.d.e.f.g", "c.d.e.f.g", "d.e.f.g", "e.f.g", "f.g"]
    assert host_suffixes("localhost") == ["localhost"]
    assert host_suffixes("localhost", limit=5) == ["localhost"]
    assert host_suffixes("195.127.0.11") == ["195.127.0.11"]
    assert host_suffixes("[2001:db8::1]") == ["[2001:db8::1]"]


def test_path_prefixes():
    assert path_prefixes("/") == ["/"]
    assert path_prefixes("/a") == ["/", "/a"]
    assert path_prefixes("/a/") == ["/", "/a", "/a/"]
    assert path_prefixes("/a/b/c.html") == ["/", "/a", "/a/", "/a/b", "/a/b/", "/a/b/c.html"]


def test_expressions_for_a_bare_query_mark_and_deep_paths():
    assert set(expressions("http://a.b/q?")) == {"a.b/", "a.b/q"}
    assert expressions("http://h.com/1/2/3/4/5.html") == [
        "h.com/", "h.com/1/", "h.com/1/2/", "h.com/1/2/3/", "h.com/1/2/3/4/5.html"]


def test_repo_copy_of_the_vectors_matches_shared():
    shared = _vector_file()
    if shared == SHARED_COPY:
        pytest.skip("shared/ is not beside this checkout; the repo copy is in use")
    assert json.loads(SHARED_COPY.read_text("utf-8")) == json.loads(shared.read_text("utf-8"))


@pytest.mark.parametrize("url", [v["input"] for v in VECTORS["canonicalize"]] + [
    "https://shop.example.com/sofa?id=3", "http://a.b/", "http://a.b", "HTTP://A.B/x/../y"])
def test_canonicalize_with_host_agrees_with_the_two_calls(url):
    from app.banlist.canon import canonicalize_with_host, host_of

    canonical, host = canonicalize_with_host(url)
    assert canonical == canonicalize(url) and host == host_of(canonical)


# The host is the one a browser finds (WHATWG URL, UTS 46): each of these spellings was
# resolved to another host (or refused) by the Python canonicalizer, so a ban on the
# browser's host was evaded (issue 14).
@pytest.mark.parametrize(("url", "expected"), [
    ("\u0001http://evil.example/", "http://evil.example/"),  # leading C0 control dropped
    ("http://x_y.ｅｖｉｌ.example/", "http://x_y.evil.example/"),  # fullwidth letters beside '_'
    ("http://ev\u00adil.example/", "http://evil.example/"),  # soft hyphen mapped away
    ("http:/evil.example/", "http://evil.example/"),  # one slash: browsers accept it
    ("http://i❤.ws/", "http://xn--i-7iq.ws/"),  # emoji: UTS 46 valid, IDNA 2008 not
    ("http://xn--i-7iq.ws/", "http://xn--i-7iq.ws/"),
    ("http://good.example%2F@evil.example/", "http://evil.example/"),
    ("http://evil.example\\@good.example/", "http://evil.example/@good.example/"),
])
def test_the_browsers_host(url, expected):
    assert canon.canonicalize_with_host(url) == (expected, canon.host_of(expected))


# Derived from the WHATWG URL test data (urltestdata.json, as shipped with the url crate):
# inputs browsers resolve with a host where the Python canonicalizer found another or none.
@pytest.mark.parametrize(("url", "host"), [
    ("http:example.com/", "example.com"),
    ("ftp:/example.com/", "example.com"),
    ("wss:example.com/", "example.com"),
    ("http:@www.example.com", "www.example.com"),
    ("http:/a:b@www.example.com", "www.example.com"),
    ("http::b@www.example.com", "www.example.com"),
    ("\x00\x1b\x04\x12 http://example.com/\x1f \r ", "example.com"),
    ("https://%e2%98%83", "xn--n3h"),
    ("https://0x.0x.0", "0.0.0.0"),
])
def test_browser_valid_spellings_from_the_whatwg_test_data(url, host):
    assert canon.canonicalize_with_host(url)[1] == host


@pytest.mark.parametrize("url", [
    "http://./",  # WHATWG's host "." is no name: no host once its dots are collapsed
])
def test_what_a_browser_takes_and_the_canonical_form_still_refuses(url):
    # A document with such a URL is removed by the banlist rule: refusing cannot evade a ban.
    with pytest.raises(InvalidURL, match="no host"):
        canonicalize(url)
