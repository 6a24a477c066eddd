"""URLs as a browser resolves them, in Safe Browsing's canonical spelling, and their lookup
expressions.

The canonicalization itself is the engine's (crates/engine/src/url.rs): the host is the
one a browser's WHATWG URL parser finds, the spelling (no port, userinfo or fragment;
path and query fully unescaped and re-escaped; dot segments resolved) is Safe Browsing's,
so the vectors in shared/testdata/url_canonicalization.json hold. The same function
canonicalizes a banlist entry when it is written and every result URL when it is
checked, so both sides always agree on one spelling. What is here works on canonical
URLs only: splitting them and listing their host suffixes and path prefixes.
"""
from __future__ import annotations

import re

from app._engine import (
    InvalidURL,
    canonicalize,
    canonicalize_bytes,
    canonicalize_with_host,
    parse_ipv4,
)

__all__ = [
    "InvalidURL", "canonicalize", "canonicalize_bytes", "canonicalize_with_host", "expressions",
    "host_of", "host_suffixes", "is_ipv4", "parse_ipv4", "path_prefixes", "split",
]

# Safe Browsing looks at the exact host plus at most 4 parents taken from the
# last 5 labels, and at most 4 directory prefixes (root included).
_SB_HOST_LABELS = 5
_SB_PATH_PREFIXES = 4

# Canonical URLs longer than this are never remembered by the banlist index's caches.
LONGEST_REMEMBERED = 2048

_DOTTED_QUAD = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}")


def host_of(canonical: str) -> str:
    """The host of a canonical URL (which always has a path after the host), cheaply."""
    start = canonical.index("://") + 3
    return canonical[start:canonical.index("/", start)]


def split(canonical: str) -> tuple[str, str, str]:
    """Split a canonical URL into (host, path, query); the query keeps its leading '?'.

    The query is '' when the URL has none, '?' for a bare trailing '?'
    (`http://host/q?` stays distinct from `http://host/q`), else '?a=1'; so
    `scheme + "://" + host + path + query == canonical` always holds.
    """
    start = canonical.find("://")
    if start < 0:
        raise InvalidURL(f"not a canonical URL (no '://'): {canonical!r}")
    rest = canonical[start + 3:]
    mark = rest.find("?")
    query = "" if mark < 0 else rest[mark:]
    if mark >= 0:
        rest = rest[:mark]
    slash = rest.find("/")
    if slash <= 0:
        raise InvalidURL(f"not a canonical URL (no host or path): {canonical!r}")
    return rest[:slash], rest[slash:], query


def is_ipv4(host: str) -> bool:
    """A canonical host that is a dotted-quad IPv4 address."""
    return _DOTTED_QUAD.fullmatch(host) is not None


def host_suffixes(host: str, limit: int | None = None) -> list[str]:
    """The host, then its parent domains; for an IP address only the IP itself.

    Without `limit` every parent is listed down to the bare TLD
    (`a.b.c` -> `a.b.c`, `b.c`, `c`). With `limit` (Safe Browsing uses 5) only
    parents of at most `limit` labels are listed and never the bare TLD.
    """
    if host.startswith("[") or _DOTTED_QUAD.fullmatch(host):
        return [host]
    starts = []
    dot = host.find(".")
    while dot >= 0:
        starts.append(dot + 1)
        dot = host.find(".", dot + 1)
    if limit is not None:
        starts = starts[max(0, len(starts) - limit):-1]
    return [host, *(host[start:] for start in starts)]


def path_prefixes(path: str) -> list[str]:
    """Every prefix of a path ending at a '/' boundary, shortest first, the path itself last.

    `/a/b/c` -> `/`, `/a`, `/a/`, `/a/b`, `/a/b/`, `/a/b/c`: a prefix-scope entry
    for `/a/b` or `/a/b/` covers `/a/b/c`, while `/a/bc` is not covered by `/a/b`.
    """
    prefixes = ["/"]
    slash = path.find("/", 1)
    while slash >= 0:
        prefixes.append(path[:slash])
        prefixes.append(path[:slash + 1])
        slash = path.find("/", slash + 1)
    if prefixes[-1] != path:
        prefixes.append(path)
    return prefixes


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
