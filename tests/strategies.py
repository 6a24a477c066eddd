"""Hypothesis strategies for the engine's property tests: configs, pages and banlists.

They draw from small pools (hosts, topics, regions, words, users) so that what the rules
look for actually happens: hosts repeat (crowding, quotas), bans hit, regions match,
texts share shingles (near-duplicates), users fall in both variants of an experiment.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from hypothesis import strategies as st

from app._engine import canonicalize
from app.phases import AGE_MODES, PHASES
from app.rules import RULES

HOSTS = ("shop.example.com", "www.shop.example.com", "news.example.org", "a.b.example.net",
         "banned.example", "sub.banned.example", "xn--e1afmkfd.xn--p1ai", "пример.рф",
         "blog.example.co.uk", "203.0.113.7", "evil.example", "WWW.Evil.Example")
PATHS = ("/", "/a", "/a/b", "/forum/", "/forum/t?id=3", "/p%41th", "/x/../y", "/q?")
TOPICS = ("furniture", "gambling", "news", "health", "crypto")
REGIONS = ("RU", "KZ", "DE")
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
         "lambda", "mu")
CLASSES = ("commercial", "ymyl", "news", "navigational")
# Parents the query rules' `domains` name (not an IP, not a public suffix).
DOMAINS = ("example.com", "shop.example.com", "banned.example", "пример.рф", "example.co.uk",
           "evil.example")
USERS = tuple(f"u-{i}" for i in range(40))
FACTORS = ("text", "link", "behav", "quality")

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
probability = st.one_of(st.sampled_from((0.0, 0.3, 0.5, 0.8, 0.95, 1.0)),
                        st.floats(0.0, 1.0, allow_nan=False))
# A few base texts, whole or cut, so that pages hold real near-duplicates, and free ones.
_BASES = tuple(" ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 30)) for i in (1, 5, 7))
texts = st.one_of(
    st.builds(lambda base, cut: base[:cut], st.sampled_from(_BASES), st.integers(10, 200)),
    st.lists(st.sampled_from(WORDS), min_size=0, max_size=40).map(" ".join))
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), finite,
                      st.text(max_size=8))
attributes = st.one_of(
    st.dictionaries(st.text(min_size=1, max_size=6), st.recursive(
        json_leaf, lambda inner: st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6), max_size=3),
    # what query_boost and query_hide look for (a number and a bool are not the same value)
    st.fixed_dictionaries({}, optional={"verified": st.sampled_from((True, False, 1)),
                                        "tier": st.sampled_from(("gold", "premium", 1, 1.0))}))
# A query as a user types it: a few of the words, cased and punctuated any which way.
short_queries = st.builds(
    lambda words, sep, upper: sep.join(w.upper() if upper else w for w in words),
    st.lists(st.sampled_from(WORDS[:5]), min_size=1, max_size=3),
    st.sampled_from((" ", "-", ", ", "  ", "\u00a0")), st.booleans())


@st.composite
def urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(("http", "https", "HTTP")))
    return f"{scheme}://{draw(st.sampled_from(HOSTS))}{draw(st.sampled_from(PATHS))}"


# A document's optional fields and what each is drawn from (built once: a strategy built
# inside a draw is built and validated again on every draw).
_OPTIONAL = {
    "factors": st.dictionaries(st.sampled_from(FACTORS), finite, max_size=4),
    "spam_score": probability,
    "adult_score": probability,
    "domain_age_days": st.one_of(st.none(), st.floats(0, 1000, allow_nan=False)),
    "is_ad": st.booleans(),
    "topics": st.lists(st.sampled_from(TOPICS), max_size=2),
    "blocked_regions": st.lists(st.sampled_from(REGIONS + ("ru",)), max_size=2),
    "text": st.one_of(st.none(), texts),
    "attributes": attributes,
}


@st.composite
def documents(draw: st.DrawFn, index: int) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": f"d{index}", "url": draw(urls()), "score": draw(finite)}
    for key, strategy in _OPTIONAL.items():
        if draw(st.booleans()):
            doc[key] = draw(strategy)
    return doc


@st.composite
def bodies(draw: st.DrawFn, profiles: tuple[str, ...] = ("default",),
           unit: bool = False) -> dict[str, Any]:
    """A /v1/rerank body: 0 to 25 documents with unique ids, a query, maybe a unit (always
    with `unit`)."""
    n = draw(st.integers(0, 25))
    docs_ = [draw(documents(i)) for i in range(n)]
    if draw(st.integers(0, 9)) == 0:  # a page the filters may empty: the fallback's case
        for doc in docs_:
            doc["adult_score"] = 1.0
    body: dict[str, Any] = {
        "request_id": "prop",
        "query": {"text": draw(st.one_of(texts, short_queries)),
                  "classes": draw(st.lists(st.sampled_from(CLASSES), max_size=2)),
                  "age_mode": draw(st.sampled_from(AGE_MODES))},
        "documents": docs_,
    }
    region = draw(st.one_of(st.none(), st.sampled_from(REGIONS + ("kz",))))
    if region is not None:
        body["query"]["region"] = region
    if unit or draw(st.booleans()):
        body["unit"] = {"user_id": draw(st.sampled_from(USERS))}
    if draw(st.booleans()):
        body["depth"] = draw(st.integers(1, 12))
    if draw(st.booleans()):
        body["profile"] = draw(st.sampled_from(profiles))
    return body


_PHRASES = st.lists(st.sampled_from(WORDS[:5]), min_size=1, max_size=2).map(" ".join)
_WHEN = {
    "query_is": st.lists(_PHRASES, min_size=1, max_size=2),
    "query_contains": st.lists(_PHRASES, min_size=1, max_size=2),
    "query_words": st.lists(st.sampled_from(WORDS[:5]), min_size=1, max_size=2),
    "classes": st.lists(st.sampled_from(CLASSES), min_size=1, max_size=2),
    "regions": st.lists(st.sampled_from(REGIONS + ("kz",)), min_size=1, max_size=2),
}


def _when(draw: st.DrawFn) -> dict[str, Any]:
    """A query rule's condition: some of its keys, from the pools the bodies draw from."""
    return {k: draw(v) for k, v in _WHEN.items() if draw(st.integers(0, 3)) == 0}


def _match(draw: st.DrawFn) -> dict[str, Any]:
    """A query rule's targets: URLs, hosts, domains and attributes the pages hold."""
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["urls"] = draw(st.lists(urls(), min_size=1, max_size=2))
    if draw(st.booleans()):
        out["hosts"] = draw(st.lists(st.sampled_from(HOSTS), min_size=1, max_size=2))
    if draw(st.booleans()):
        out["domains"] = draw(st.lists(st.sampled_from(DOMAINS), min_size=1, max_size=2))
    if draw(st.booleans()) or not out:
        out["attributes"] = draw(st.sampled_from(
            ({"verified": True}, {"tier": 1}, {"tier": "premium", "verified": False})))
    return out


@st.composite
def _pins(draw: st.DrawFn) -> list[dict[str, Any]]:
    """1 to 3 pins, no two on one URL or one position."""
    pinned = draw(st.lists(urls(), min_size=1, max_size=3, unique_by=_pin_key))
    positions = draw(st.lists(st.integers(1, 8), min_size=len(pinned),
                              max_size=len(pinned), unique=True))
    return [{"url": u, "position": p} for u, p in zip(pinned, positions, strict=True)]


def _query_rule(draw: st.DrawFn, action: dict[str, Any]) -> dict[str, Any]:
    params = {"when": _when(draw), **action}
    if draw(st.booleans()):
        params["label"] = draw(st.sampled_from(("launch", "t-1")))
    return params


# Each rule's parameters, drawn only for the rule a step names.
_PARAMS: dict[str, Callable[[st.DrawFn], dict[str, Any]]] = {
    "safe_search": lambda draw: {"thresholds": {"strict": draw(probability),
                                                "moderate": draw(probability)}},
    "spam_ban": lambda draw: {"threshold": draw(probability)},
    "topic_filter": lambda draw: {"blocked_topics": draw(
        st.lists(st.sampled_from(TOPICS), max_size=3, unique=True))},
    "anti_seo_reset": lambda draw: {"blocks": draw(
        st.lists(st.sampled_from(FACTORS), min_size=1, max_size=3, unique=True))},
    "spam_demotion": lambda draw: {"theta_low": 0.2,
                                   "theta_high": draw(st.sampled_from((0.5, 0.9))),
                                   "lambda": draw(st.sampled_from((0.0, 1.0, 5.0, 2.5)))},
    "sandbox_damping": lambda draw: {"t_sandbox_days": draw(st.sampled_from((30, 120, 365))),
                                     "beta": draw(st.sampled_from((0.0, 0.25, 0.5, 1.0)))},
    "host_crowding": lambda draw: {"max_per_host": draw(st.integers(1, 3)),
                                   "key": draw(st.sampled_from(("host", "domain")))},
    "query_hide": lambda draw: _query_rule(draw, {"match": _match(draw)}),
    "query_boost": lambda draw: _query_rule(draw, {"match": _match(draw), "by": draw(
        st.sampled_from((-3.0, -0.5, 1.0, 2.5)))}),
    "query_pin": lambda draw: _query_rule(draw, {"pin": draw(_pins())}),
    "near_duplicates": lambda draw: {
        "shingle_words": draw(st.integers(1, 4)),
        "measure": draw(st.sampled_from(("containment", "jaccard"))),
        "threshold": draw(st.sampled_from((0.3, 0.5, 0.9, 1.0)))},
    "depth": lambda draw: {"k": draw(st.integers(1, 12))},
    "host_quota": lambda draw: {"max_per_host": draw(st.integers(1, 3))},
    "age_label": lambda draw: {"threshold": draw(probability)},
    "empty_result_fallback": lambda draw: {
        "strategy": draw(st.sampled_from(("relax", "message"))),
        "min_age_mode": draw(st.sampled_from(AGE_MODES))},
}


def _step(draw: st.DrawFn, rule: str) -> Any:
    """A rule as the config writes it: a bare name or {name: {parameters}}."""
    params = _PARAMS.get(rule)
    if params is None or not rule.startswith("query_") and not draw(st.booleans()):
        return rule
    return {rule: params(draw)}


# Every built-in by the phases it may run in, as the engine's catalog lists them: a rule
# added to the engine is drawn without a line here.
PHASE_RULES = {phase.value: tuple(name for name, rule in RULES.items() if phase in rule.phases)
               for phase in PHASES}


def _pin_key(url: str) -> str:
    """What query_pin keys a URL on: its canonical form without the scheme."""
    return canonicalize(url).partition("://")[2]


@st.composite
def configs(draw: st.DrawFn, shadow: bool = False, interleave: bool = False) -> str:
    """A valid rules YAML: a default profile, maybe a second one extending it, routing, and
    maybe an experiment gating one rule with a parameter override; with a second profile,
    maybe an interleaving of the two (every unit routed to `default`; with `interleave`,
    always the second profile and the interleaving). With `shadow`, always
    such an experiment when the profiles run a rule it may gate, with every unit in its
    control arm: the rule runs in shadow for every request that has a unit."""
    def profile() -> dict[str, Any]:
        out = {}
        for phase, rules in PHASE_RULES.items():
            chosen = draw(st.lists(st.sampled_from(rules), max_size=len(rules), unique=True))
            if chosen:
                out[phase] = [_step(draw, r) for r in chosen]
        return out

    config: dict[str, Any] = {"profiles": {"default": profile()}}
    if interleave or draw(st.booleans()):
        second = profile()
        second["extends"] = "default"
        config["profiles"]["commercial"] = second
        config["routing"] = {"commercial": "commercial", "ymyl": "commercial"}
    used = sorted({(s if isinstance(s, str) else next(iter(s)))
                   for p in config["profiles"].values() for k, steps in p.items()
                   if k != "extends" for s in steps})
    gateable = [r for r in used if r not in ("banlist", "empty_result_fallback")]
    if gateable and (shadow or draw(st.booleans())):
        rule = draw(st.sampled_from(gateable))
        experiment: dict[str, Any] = {"name": "exp_a", "unit": "user_id",
                                      "variants": {"control": 50, "treatment": 50},
                                      "rules": [rule]}
        if shadow:
            experiment["variants"] = {"control": 100}
        elif rule == "spam_demotion" and draw(st.booleans()):
            experiment["variants"]["treatment"] = {"weight": 50,
                                                   "params": {"spam_demotion": {"lambda": 9.0}}}
        config["experiments"] = [experiment]
    if interleave or ("commercial" in config["profiles"] and not shadow
                      and draw(st.booleans())):
        config.setdefault("experiments", []).append(
            {"name": "mix", "unit": "user_id",
             "interleave": {"control": "default", "treatment": "commercial"}})
    return yaml.safe_dump(config, sort_keys=False, allow_unicode=True)


@st.composite
def bans(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Banlist entry specs on the pool's hosts and paths (some regional, some expired)."""
    specs = []
    for i in range(draw(st.integers(0, 6))):
        scope = draw(st.sampled_from(("url", "prefix", "host", "domain")))
        host = draw(st.sampled_from(HOSTS)).lower()
        if scope == "domain" and host[0].isdigit():
            scope = "host"  # a domain ban on an IP address is refused: use host
        value = {"url": f"http://{host}{draw(st.sampled_from(PATHS))}",
                 "prefix": f"{host}{draw(st.sampled_from(('/forum/', '/a', '/')))}",
                 "host": host, "domain": host}[scope]
        spec: dict[str, Any] = {"scope": scope, "value": value, "reason": f"reason {i}"}
        if draw(st.booleans()):
            spec["regions"] = draw(st.lists(st.sampled_from(REGIONS), min_size=1, max_size=2,
                                            unique=True))
        specs.append(spec)
    return specs
