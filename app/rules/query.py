"""Query rules: pin, hide and boost (or bury) by the query's text, classes and region.

Their anchors elsewhere: Elasticsearch's query rules (`pinned`, `exclude`, criteria such as
`exact` and `contains`), Algolia's rules (promote and hide with `pattern` and
`anchoring`), Vertex AI's serving controls (boost and bury on query terms: a factor in
[-1, 1] there, an addition to the score here).
Here each configured step is one rule of that kind: one condition (`when`), one action,
and the reserved keys (`enabled`, `valid_from`, `valid_until`) of every step give it
its validity window, as Algolia's `validity` does.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from app.banlist.canon import InvalidURL, canonicalize, is_ipv4
from app.domains import is_public_suffix
from app.phases import Phase
from app.rules.base import BuiltinRule, Params

MAX_PINS = 100
MAX_POSITION = 1000  # the page's own limit (REARRANGE_MAX_DOCUMENTS by default)
MAX_BY = 1e9
LABEL = r"^[A-Za-z0-9_.:-]{1,64}$"
# What a result URL's host can be (as a banlist host entry checks it): what canonicalization
# keeps escaped ('*', spaces) is no host, and a target naming it would never match.
_HOST_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*|\[[0-9a-f:.]+\]")


def _is_word_char(c: str) -> bool:
    return unicodedata.category(c)[0] in "LMN"


def normalize(text: str) -> str:
    """NFKC, lower-cased, split into words at what is not a letter, mark or number (Unicode
    general categories L, M, N), the words joined by one space: `iPhone-15 PRO!` is
    `iphone 15 pro`. The engine's query_match.rs does the same."""
    folded = unicodedata.normalize("NFKC", text).lower()
    words: list[str] = []
    start = None
    for i, c in enumerate(folded):
        if _is_word_char(c):
            if start is None:
                start = i
        elif start is not None:
            words.append(folded[start:i])
            start = None
    if start is not None:
        words.append(folded[start:])
    return " ".join(words)


def _tuple(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


def _texts(values: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for i, value in enumerate(values):
        text = normalize(value)
        if not text:
            raise ValueError(f"item {i} {value!r} has no letters or digits")
        out.append(text)
    return tuple(out)


def _regions(values: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for i, value in enumerate(values):
        code = value.strip()  # checked before upper-casing: 'ß' upper-cases to 'SS'
        if len(code) != 2 or not (code.isascii() and code.isalpha()):
            raise ValueError(f"item {i} {value!r} is not an ISO 3166-1 alpha-2 code "
                             "(two letters, such as RU or KZ)")
        out.append(code.upper())
    return tuple(out)


def _classes(values: tuple[str, ...]) -> tuple[str, ...]:
    if any(not v for v in values):
        raise ValueError("a class cannot be empty")
    return values


Texts = Annotated[tuple[str, ...], BeforeValidator(_tuple), AfterValidator(_texts)]


class When(Params):
    """The condition: each one given must hold; within one list, any item will do. None
    given: every request of the profile."""

    query_is: Texts = ()  # the normalized query is one of these
    query_contains: Texts = ()  # holds one of these phrases, word for word
    query_words: Texts = ()  # holds every one of these words, in any order
    classes: Annotated[tuple[str, ...], BeforeValidator(_tuple), AfterValidator(_classes)] = ()
    regions: Annotated[tuple[str, ...], BeforeValidator(_tuple), AfterValidator(_regions)] = ()


def url_key(raw: str) -> str:
    """The key a configured URL matches on: its canonical form without the scheme (http
    and https alike, as a `url` ban matches); ValueError if no browser could open it."""
    try:
        canonical = canonicalize(raw.strip())
    except InvalidURL as exc:
        raise ValueError(f"{raw!r} cannot be opened: {exc}") from exc
    return canonical.partition("://")[2]


def host_name(raw: str) -> str:
    """A configured host as result URLs spell it; ValueError unless it is a bare host."""
    key = url_key(raw)
    host, _, rest = key.partition("/")
    if not host or rest or "/" in raw.split("://")[-1].rstrip("/"):
        raise ValueError(f"{raw!r} is not a bare host name")
    if not _HOST_NAME.fullmatch(host):
        raise ValueError(f"{host!r} is not a host name (letters, digits, '-', '_' and dots; "
                         "no wildcards: a domain covers every subdomain)")
    return host


def domain_name(raw: str) -> str:
    """A configured domain (it covers its subdomains); not an IP, not a public suffix."""
    host = host_name(raw)
    if host.startswith("[") or is_ipv4(host):
        raise ValueError(f"{host} is an IP address, which has no subdomains: use hosts")
    if is_public_suffix(host):
        raise ValueError(f"{host} is a public suffix: it would match every site "
                         "registered under it")
    return host


def _each(check: Any) -> Any:
    def run(values: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for i, value in enumerate(values):
            try:
                out.append(check(value))
            except ValueError as exc:
                raise ValueError(f"item {i}: {exc}") from exc
        return tuple(dict.fromkeys(out))
    return AfterValidator(run)


Scalar = bool | int | float | str


class Match(Params):
    """The documents acted on: any target will do. `attributes` holds when every key has
    that value in the document's `attributes` (of the same JSON type; numbers by value)."""

    urls: Annotated[tuple[str, ...], BeforeValidator(_tuple), _each(url_key)] = ()
    hosts: Annotated[tuple[str, ...], BeforeValidator(_tuple), _each(host_name)] = ()
    domains: Annotated[tuple[str, ...], BeforeValidator(_tuple), _each(domain_name)] = ()
    attributes: dict[str, Scalar] = {}

    @model_validator(mode="after")
    def _something(self) -> Match:
        if not (self.urls or self.hosts or self.domains or self.attributes):
            raise ValueError("match: give urls, hosts, domains or attributes")
        if any(not key for key in self.attributes):
            raise ValueError("match.attributes: a key cannot be empty")
        return self


class Pin(Params):
    url: Annotated[str, AfterValidator(url_key)]
    position: int = Field(ge=1, le=MAX_POSITION)


class QueryPinParams(Params):
    when: When = When()
    pin: Annotated[tuple[Pin, ...], BeforeValidator(_tuple)] = Field(
        min_length=1, max_length=MAX_PINS)
    label: str | None = Field(None, pattern=LABEL)

    @model_validator(mode="after")
    def _no_conflicts(self) -> QueryPinParams:
        positions: dict[int, int] = {}
        urls: dict[str, int] = {}
        for i, pin in enumerate(self.pin):
            if pin.position in positions:
                raise ValueError(f"pin.{i}.position: position {pin.position} is "
                                 f"pin.{positions[pin.position]}'s already")
            if pin.url in urls:
                raise ValueError(f"pin.{i}.url: the same URL as pin.{urls[pin.url]}")
            positions[pin.position] = urls[pin.url] = i
        return self


class QueryPin(BuiltinRule[QueryPinParams]):
    """When the query meets `when`: each pinned URL on the page takes its position.

    Diversify, listed first: after the rerank sort (which would undo it), before host
    crowding (a pinned document leads its host) and depth (it survives a depth at or past
    its position). A pinned URL not on the page is ignored: a pin never adds a document
    and never brings back one a filter removed.
    """

    name = "query_pin"
    phases = frozenset({Phase.DIVERSIFY})
    Params = QueryPinParams


class QueryHideParams(Params):
    when: When = When()
    match: Match
    label: str | None = Field(None, pattern=LABEL)


class QueryHide(BuiltinRule[QueryHideParams]):
    """When the query meets `when`: removes every document `match` names (pre-filter)."""

    name = "query_hide"
    phases = frozenset({Phase.PRE_FILTER})
    Params = QueryHideParams


class QueryBoostParams(Params):
    when: When = When()
    match: Match
    by: float = Field(ge=-MAX_BY, le=MAX_BY)
    label: str | None = Field(None, pattern=LABEL)

    @field_validator("by")
    @classmethod
    def _not_zero(cls, value: float) -> float:
        if value == 0:
            raise ValueError("0 changes nothing: boost with by > 0, bury with by < 0")
        return value


class QueryBoost(BuiltinRule[QueryBoostParams]):
    """When the query meets `when`: score += by for every document `match` names (rerank);
    by < 0 buries. Additive like the demotions: a factor would bury a negative score."""

    name = "query_boost"
    phases = frozenset({Phase.RERANK})
    Params = QueryBoostParams
