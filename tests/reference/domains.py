"""Reference model: registrable domains from `publicsuffixlist` (before the engine's `psl`)."""
from __future__ import annotations

from functools import lru_cache

from publicsuffixlist import PublicSuffixList

_PSL = PublicSuffixList()  # parses the bundled list once (~50 ms) at import


@lru_cache(maxsize=65536)
def registrable_domain(host: str) -> str:
    """The registrable domain (eTLD+1) of a host; the host itself for IPs and bare suffixes."""
    if not host or host[-1].isdigit() and host.replace(".", "").isdigit():
        return host
    return _PSL.privatesuffix(host) or host


def is_public_suffix(name: str) -> bool:
    """True for names such as `co.uk` or `github.io` under which anyone may register."""
    return _PSL.is_public(name)

