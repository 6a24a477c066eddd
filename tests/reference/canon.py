"""Reference model: URL canonicalization the Safe Browsing way, in pure Python.

The service's canonicalizer before the engine took it over (app/banlist/canon.py now
calls crates/engine/src/url.rs); tests/banlist/test_canon_property.py compares the two.

Follows "URLs and Hashing" of the Safe Browsing v4 docs and the vectors in
shared/testdata/url_canonicalization.json. The same function canonicalizes a
banlist entry when it is written and every result URL when it is checked, so
both sides always agree on one spelling.

The slow path works on bytes: percent-unescaping can produce any byte, and
only a host (and only when it decodes as UTF-8) is ever turned back into text
through IDNA. Ports are dropped entirely, as the vectors require.
"""
from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from urllib.parse import unquote_to_bytes

import idna

from app.banlist.canon import host_of, host_suffixes, is_ipv4, path_prefixes, split

__all__ = [
    "InvalidURL", "canonicalize", "canonicalize_bytes", "expressions", "host_suffixes", "is_ipv4",
    "parse_ipv4", "path_prefixes", "split",
]

# Safe Browsing looks at the exact host plus at most 4 parents taken from the
# last 5 labels, and at most 4 directory prefixes (root included).
_SB_HOST_LABELS = 5
_SB_PATH_PREFIXES = 4

# An already canonical http(s)-like URL: lowercase scheme and host, a host that
# starts with a letter (so it cannot be an IPv4 form), no port, userinfo,
# escapes, whitespace, fragment, empty or dot segments. Such URLs are returned
# as they are (with '/' added for an empty path); anything else takes the slow path.
_CLEAN = re.compile(
    r"[a-z][a-z0-9+.\-]*://"
    r"(?P<host>[a-z][a-z0-9_\-]*(?:\.[a-z0-9_\-]+)*)"
    r"(?P<path>(?:/(?!\.\.?(?:[/?]|\Z))[^/?%#\\\x00-\x20\x7f]+)*/?)"
    r"(?:\?[^%#\x00-\x20\x7f]*)?"
)

# A ':' followed by digits and the end of the host is a port ("host.com:80/"),
# not the end of a scheme; except after a WHATWG special scheme, which a browser always
# reads as one ("http:80/" is http://0.0.0.80/).
_SCHEME = re.compile(rb"((?i:https?|wss?|ftp)(?=:)"
                     rb"|[A-Za-z][A-Za-z0-9+.\-]*(?=:(?!\d+(?:[/?]|\Z)))):")

_NEEDS_ESCAPE = re.compile(rb"[\x00-\x20\x7f-\xff#%]")
_ESCAPES = tuple(
    f"%{b:02X}" if b <= 0x20 or b >= 0x7F or b in b"#%" else chr(b) for b in range(256)
)
_HEX = frozenset(b"0123456789abcdefABCDEF")
_UNQUOTE_PASSES = 4  # real URLs settle in one or two; deeper nesting goes to _reduce_escapes

# Windows resolvers accept "1.2.3.4 junk" when the whole string is at most 15 chars.
_IPV4_WITH_JUNK = re.compile(r"([0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}) ")
_IPV4_DIGITS = {16: frozenset("0123456789abcdefABCDEF"), 8: frozenset("01234567"),
                10: frozenset("0123456789")}
_DOTTED_QUAD = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class InvalidURL(ValueError):
    """A URL that cannot be canonicalized; the message says what is wrong."""


def canonicalize(url: str) -> str:
    """Return the Safe Browsing canonical form `scheme://host/path[?query]` of a URL."""
    if url.isascii():
        clean = _CLEAN.fullmatch(url)
        if clean is not None:
            if clean["path"]:
                return url
            end = clean.end("host")
            return f"{url[:end]}/{url[end:]}"
    return _canonicalize_text(url)


def canonicalize_with_host(url: str) -> tuple[str, str]:
    """(canonical URL, its host) in one pass."""
    return _canonicalize_with_host(url)


def _canonicalize_with_host(url: str) -> tuple[str, str]:
    if url.isascii():
        clean = _CLEAN.fullmatch(url)
        if clean is not None:
            if clean["path"]:
                return url, clean["host"]
            end = clean.end("host")
            return f"{url[:end]}/{url[end:]}", clean["host"]
    canonical = _canonicalize_text(url)
    return canonical, host_of(canonical)


def canonicalize_bytes(raw: bytes) -> str:
    """Canonicalize a URL given as raw bytes, which need not be valid UTF-8."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _canonicalize_raw(raw.partition(b"#")[0].strip())
    return canonicalize(text)


def expressions(url: str) -> list[str]:
    """The Safe Browsing host-suffix/path-prefix expressions (`host/path`) for a URL."""
    host, path, query = split(canonicalize(url))
    paths = ["/"]
    labels = [segment for segment in path.split("/") if segment]
    for count in range(1, min(len(labels), _SB_PATH_PREFIXES)):
        paths.append("/" + "/".join(labels[:count]) + "/")
    if path != "/":
        paths.append(path)
    # A bare '?' adds nothing: Safe Browsing only adds the query form for a non-empty query.
    if len(query) > 1:
        paths.append(path + query)
    return [h + p for h in host_suffixes(host, _SB_HOST_LABELS) for p in paths]


def parse_ipv4(host: str) -> str | None:
    """The dotted quad for any IPv4 spelling (decimal, octal, hex, 1-4 parts), else None."""
    if len(host) <= 15:
        junk = _IPV4_WITH_JUNK.match(host)
        if junk is not None:
            host = junk[1]
    if not host or not "0" <= host[0] <= "9":
        return None
    parts = host.split(".")
    if len(parts) > 4:
        return None
    octets: list[int] = []
    for index, part in enumerate(parts):
        value = _ipv4_number(part)
        if value is None:
            return None
        # The last part fills all remaining bytes ("1.2.3" is 1.2.0.3); an earlier
        # part over 255 keeps only its low byte, as the reference resolver does.
        width = 5 - len(parts) if index == len(parts) - 1 else 1
        octets.extend((value >> (8 * shift)) & 0xFF for shift in reversed(range(width)))
    return ".".join(map(str, octets))


def _ipv4_number(part: str) -> int | None:
    if part[:2] in ("0x", "0X"):
        digits, base = part[2:], 16
    elif part[:1] == "0" and len(part) > 1:
        digits, base = part[1:], 8
    else:
        digits, base = part, 10
    # Checked by hand because int() also takes '_', spaces and non-ASCII digits.
    if not digits or not _IPV4_DIGITS[base].issuperset(digits):
        return None
    value = int(digits, base)
    return value if value <= 0xFFFFFFFF else None


def _canonicalize_text(url: str) -> str:
    text = url.partition("#")[0].strip()
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidURL("URL contains an unpaired surrogate") from None
    return _canonicalize_raw(raw)


def _canonicalize_raw(raw: bytes) -> str:
    raw = raw.translate(None, b"\t\r\n")
    if not raw:
        raise InvalidURL("empty URL")
    raw = _unescape_fully(_as_browsers_split(raw))
    scheme_match = _SCHEME.match(raw)
    if scheme_match is None:
        scheme, rest = "http", raw
    else:
        scheme, rest = scheme_match[1].decode("ascii").lower(), raw[scheme_match.end():]
        if not rest.startswith(b"//"):
            raise InvalidURL(f"expected '//' after '{scheme}:'")
        rest = rest[2:]
    rest, question, query = rest.partition(b"?")
    hostish, slash, path = rest.partition(b"/")
    if not hostish:
        raise InvalidURL("no host")
    url = f"{scheme}://{_canonical_host(hostish)}{_canonical_path(slash + path)}"
    return f"{url}?{_escape(query)}" if question else url


_SPECIAL = frozenset((b"http", b"https", b"ws", b"wss", b"ftp"))  # WHATWG "special" schemes


def _as_browsers_split(raw: bytes) -> bytes:
    """The URL with its authority split where a browser splits it, before any unescaping.

    Safe Browsing unescapes the whole URL first, so `http://good.example%2F@evil.example/`
    would have host good.example, and `http://evil.example\\@good.example/` too, while a
    browser (WHATWG URL) goes to evil.example for both: a domain ban would be evaded. So,
    as a browser does, a backslash before the query is a slash in http(s) URLs, and the
    userinfo (everything up to the authority's last raw '@') is dropped here, where the
    authority still ends at the first raw '/'. URLs without '\\' or '@' are unchanged.
    """
    if b"\\" not in raw and b"@" not in raw:
        return raw
    scheme = _SCHEME.match(raw)
    start = scheme.end() if scheme is not None else 0
    rest, question, query = raw[start:].partition(b"?")
    if scheme is None or scheme[1].lower() in _SPECIAL:
        rest = rest.replace(b"\\", b"/")
    lead = b"//" if scheme is not None or rest.startswith(b"//") else b""
    if not rest.startswith(lead):
        return raw  # "scheme:" without "//": refused later with its own message
    authority, slash, path = rest[len(lead):].partition(b"/")
    host = authority.rpartition(b"@")[2]
    return raw[:start] + lead + host + slash + path + question + query


def _canonical_host(hostish: bytes) -> str:
    host = hostish.rpartition(b"@")[2]
    if host.startswith(b"["):
        return _canonical_ipv6(host)
    host, _, port = host.partition(b":")
    if port and not port.isdigit():
        raise InvalidURL(f"invalid port {_show(port)!r}")
    host = _collapse_dots(host)
    if not host.isascii():
        # UTS 46 maps '。' and '．' to '.', so dots are collapsed again afterwards.
        host = _collapse_dots(_punycode(host))
    if not host:
        raise InvalidURL("no host")
    if host.startswith(b"["):
        raise InvalidURL("'[' outside an IPv6 address")
    if host.isascii():
        ip = parse_ipv4(host.decode("ascii"))
        if ip is not None:
            return ip
    return _escape(host.lower())


def _collapse_dots(host: bytes) -> bytes:
    return b".".join(label for label in host.split(b".") if label)


@lru_cache(maxsize=4096)  # idna costs ~30 µs a host, and result pages repeat hosts
def _punycode(host: bytes) -> bytes:
    try:
        return idna.encode(host.decode("utf-8"), uts46=True)
    except UnicodeError:
        # Not UTF-8, or refused by UTS 46 / IDNA 2008 (e.g. '_' or '<' next to
        # non-ASCII): Safe Browsing then keeps the raw bytes, percent-escaped.
        return host


def _canonical_ipv6(host: bytes) -> str:
    end = host.find(b"]")
    if end < 0:
        raise InvalidURL("unterminated IPv6 address")
    after = host[end + 1:]
    if after and not (after[:1] == b":" and (len(after) == 1 or after[1:].isdigit())):
        raise InvalidURL(f"unexpected {_show(after)!r} after IPv6 address")
    try:
        address = ipaddress.IPv6Address(host[1:end].decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise InvalidURL(f"invalid IPv6 address {_show(host[:end + 1])!r}") from None
    # IPv4-mapped and NAT64 addresses reach the same server as the IPv4 inside them.
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    if address in _NAT64:
        return str(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return f"[{_escape(address.compressed.encode('ascii'))}]"


def _canonical_path(path: bytes) -> str:
    if not path:
        return "/"
    if b"//" not in path and b"/." not in path:
        return _escape(path)
    segments: list[bytes] = []
    for segment in path.split(b"/"):
        if segment == b"..":
            if segments:
                segments.pop()
        elif segment and segment != b".":
            segments.append(segment)
    cleaned = b"/" + b"/".join(segments)
    # "/a/b/.." names the directory "/a/", as a browser resolves it.
    if segments and path.rpartition(b"/")[2] in (b"", b".", b".."):
        cleaned += b"/"
    return _escape(cleaned)


def _unescape_fully(data: bytes) -> bytes:
    for _ in range(_UNQUOTE_PASSES):
        if b"%" not in data:
            return data
        decoded = unquote_to_bytes(data)
        if decoded == data:
            return data
        data = decoded
    return _reduce_escapes(data)


def _reduce_escapes(data: bytes) -> bytes:
    # Repeated passes cost O(n) each and "%252525..." needs n/2 of them. Escapes
    # ("%XX") can never overlap, so decoding is confluent: any order reaches the
    # same fixpoint, and decoding at the tail of an output stack does it in O(n).
    out = bytearray()
    for byte in data:
        out.append(byte)
        while len(out) >= 3 and out[-3] == 0x25 and out[-2] in _HEX and out[-1] in _HEX:
            value = int(out[-2:], 16)
            del out[-3:]
            out.append(value)
    return bytes(out)


def _escape(data: bytes) -> str:
    if _NEEDS_ESCAPE.search(data) is None:
        return data.decode("ascii")
    return "".join([_ESCAPES[byte] for byte in data])


def _show(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")
