"""Every spelling of a URL that a browser opens has the browser's host: the engine against
ada (a WHATWG URL parser, Node's) over a fixed, generated set of spellings.

The property test (test_canon_property.py) draws URLs at random; this one walks the same
set every run, built from the places where a spelling can hide a host: what comes before
the scheme, the scheme's case, the slashes and backslashes after its ':' (none, one,
three, mixed), userinfo, and the host as a name, in IPv4's numeric forms or as IPv6. Each
spelling ada opens with an http(s), ws(s) or ftp host must give the engine that host (in
Safe Browsing's spelling: no trailing dot); none may be refused. Issue 45's two classes
are here: `http:1572395042/` (read as the host `http` with a port) and
`http:///good.example/` (refused as having no host).
"""
from __future__ import annotations

import itertools

import ada_url

from app.banlist import canon
from tests.banlist.test_canon_property import safe_browsing_host

SPECIAL = {"http:", "https:", "ws:", "wss:", "ftp:"}

LEADS = ["", "\x01 ", "\t"]
SCHEMES = ["http", "HTTPS", "ws", "fTp"]
AFTER_COLON = ["", "/", "\\", "//", "\\\\", "/\\", "///", "\\\\\\", "/\\/", "////"]
USERINFO = ["", "u:p@", "@"]
HOSTS = ["good.example", "GOOD.example.", "93.184.216.34", "1572395042", "013556154042",
         "0x5db8d822", "0x5d.0xb8.0xd8.0x22", "93.184.55330", "80", "[::1]"]
TAILS = ["", "/", ":80/x", "\\x?q#f"]


def spellings() -> list[str]:
    return ["".join(parts) for parts in itertools.product(
        LEADS, SCHEMES, [":"], AFTER_COLON, USERINFO, HOSTS, TAILS)]


def browsers_host(url: str) -> str | None:
    """The host ada opens the URL with, in Safe Browsing's spelling; None if it opens no
    http(s), ws(s) or ftp host."""
    try:
        parsed = ada_url.parse_url(url)
    except ValueError:
        return None
    if parsed["protocol"] not in SPECIAL or not parsed["hostname"]:
        return None
    return safe_browsing_host(parsed["hostname"])


def test_every_spelling_a_browser_opens_has_the_browsers_host():
    urls = spellings()
    assert len(urls) == 14_400
    opened = wrong = 0
    first_wrong: list[tuple[str, str, str]] = []
    for url in urls:
        want = browsers_host(url)
        if want is None:
            continue
        opened += 1
        try:
            got = canon.canonicalize_with_host(url)[1]
        except canon.InvalidURL as exc:
            got = f"refused ({exc})"
        if got != want:
            wrong += 1
            first_wrong = first_wrong or [(url, want, got)]
    assert opened > 10_000  # the set is not vacuous: most spellings open
    assert wrong == 0, f"{wrong} of {opened} spellings, first {first_wrong}"


def test_the_issues_spellings():
    for url, host in [("http:1572395042/", "93.184.216.34"),
                      ("http:013556154042/", "93.184.216.34"),
                      ("http:///good.example/", "good.example"),
                      ("http:\\\\\\good.example\\", "good.example")]:
        assert browsers_host(url) == host
        assert canon.canonicalize_with_host(url)[1] == host
