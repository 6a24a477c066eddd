"""Pin, hide and boost by query, through the engine; their config checks."""
from __future__ import annotations

import datetime as dt

import orjson
import pytest
import yaml
from prometheus_client import generate_latest

from app._engine import Engine
from app.config.load import load_bytes
from app.config.spec import compile_spec
from app.errors import ConfigError
from app.observability.metrics import Metrics
from tests.api.test_experiments_api import samples, value
from tests.conftest import ROOT
from tests.sides import NOW
from tests.sides import document as doc


def config(**phases: list) -> str:
    return yaml.safe_dump({"profiles": {"default": phases}}, sort_keys=False,
                          allow_unicode=True)


def moves(answer) -> list[tuple[str, int, str]]:
    return [(r["doc_id"], r["delta"], r["reason"]) for r in answer.records("query_pin")]


def page(n: int) -> list[dict]:
    """d1..dn on hosts d1.example..dn.example, best first."""
    return [doc(f"d{i}", float(n + 1 - i)) for i in range(1, n + 1)]


PIN = {"query_pin": {"when": {"query_is": ["iPhone 15"]}, "label": "launch", "pin": [
    {"url": "https://d5.example/d5", "position": 1},
    {"url": "HTTPS://D2.EXAMPLE/d2#reviews", "position": 4}]}}


def test_pin_puts_urls_at_their_positions_and_the_rest_keeps_its_order(side):
    loaded = side.load(config(diversify=[PIN]))
    out = loaded.rerank(page(6), query={"text": "IPHONE-15!"})
    assert out.ids() == ["d5", "d1", "d3", "d2", "d4", "d6"]
    when = 'when query is "iphone 15" [launch]'
    assert moves(out) == [
        ("d5", -4, f"pinned at position 1 {when}"),
        ("d1", 1, f"moved by pinned results {when}"),
        ("d2", 2, f"pinned at position 4 {when}"),
        ("d4", 1, f"moved by pinned results {when}")]
    assert [d["position"] for d in out.documents] == [1, 2, 3, 4, 5, 6]
    assert loaded.rerank(page(6), query={"text": "iphone 15 pro"}).ids() == [
        f"d{i}" for i in range(1, 7)]  # another query: nothing moves
    twice = side.rerank(config(diversify=[PIN, PIN]), page(6), query={"text": "iphone 15"})
    assert twice.ids() == out.ids() and moves(twice) == moves(out)  # idempotent


def test_a_pin_past_the_page_goes_last_and_a_url_not_on_the_page_is_ignored(side):
    pins = {"query_pin": {"pin": [{"url": "https://d1.example/d1", "position": 9},
                                  {"url": "https://elsewhere.example/", "position": 1}]}}
    out = side.rerank(config(diversify=[pins]), page(3))
    assert out.ids() == ["d2", "d3", "d1"]
    assert moves(out)[-1] == ("d1", 2, "pinned at position 9 (the page ends at 3) "
                              "on every query")


def test_a_pinned_document_leads_its_host_and_survives_depth(side):
    docs = [doc("a", 5, host="shop.example"), doc("b", 4, host="shop.example"),
            doc("c", 3), doc("d", 2), doc("e", 1, host="shop.example")]
    pin = {"query_pin": {"pin": [{"url": "https://shop.example/e", "position": 1}]}}
    out = side.rerank(config(diversify=[pin, {"host_crowding": {"max_per_host": 2}}],
                             trim=[{"depth": {"k": 3}}]), docs)
    assert out.ids() == ["e", "a", "c"]
    assert [c["id"] for c in out.documents[0]["collapsed"]] == ["b"]  # the host's third
    assert [(r["doc_id"], r["action"]) for r in out.records("depth")] == [("d", "trim")]


def test_a_hidden_or_banned_url_cannot_be_pinned_back(side):
    hide = {"query_hide": {"when": {"query_contains": ["cheap"]},
                           "match": {"urls": ["http://d3.example/d3"]}}}
    pin = {"query_pin": {"pin": [{"url": "https://d3.example/d3", "position": 1}]}}
    out = side.rerank(config(**{"pre-filter": [hide], "diversify": [pin]}), page(4),
                      query={"text": "Cheap sofa"})
    assert out.ids() == ["d1", "d2", "d4"] and out.records("query_pin") == []
    assert out.body["removed"] == [{
        "id": "d3", "rule": "query_hide", "phase": "pre-filter", "action": "remove",
        "reason": 'url d3.example/d3 hidden when query contains "cheap"'}]


def test_hide_by_host_domain_and_attribute_when_a_phrase_is_in_the_query(side):
    docs = [doc("a", 5, host="lux.example"), doc("b", 4, host="www.lux.example"),
            doc("c", 3, host="deluxe.example"), doc("d", 2, attributes={"tier": "premium"}),
            doc("e", 1, host="outlet.lux.example")]
    hide = {"query_hide": {"when": {"query_contains": ["cheap sofa", "bargain"]},
                           "match": {"domains": ["www.lux.example"], "hosts": ["lux.example"],
                                     "attributes": {"tier": "premium"}}}}
    loaded = side.load(config(**{"pre-filter": [hide]}))
    out = loaded.rerank(docs, query={"text": "a CHEAP sofa, please"})
    assert out.ids() == ["c", "e"]
    when = 'when query contains "cheap sofa"'
    assert [(r["doc_id"], r["reason"]) for r in out.records()] == [
        ("a", f"host lux.example hidden {when}"),
        ("b", f"domain www.lux.example hidden {when}"),
        ("d", f'attributes tier="premium" hidden {when}')]
    # word for word: "cheap sofas" holds neither phrase
    assert len(loaded.rerank(docs, query={"text": "cheap sofas"}).ids()) == 5


def test_query_words_classes_and_region_all_must_hold(side):
    hide = {"query_hide": {"when": {"query_words": ["sofa", "cheap"], "classes": ["commercial"],
                                    "regions": ["ru"]},
                           "match": {"hosts": ["d1.example"]}}}
    loaded = side.load(config(**{"pre-filter": [hide]}))
    met = {"text": "sofa that is cheap", "classes": ["news", "commercial"], "region": "Ru"}
    out = loaded.rerank(page(2), query=met)
    assert out.ids() == ["d2"]
    assert out.records()[0]["reason"] == ('host d1.example hidden when query has "sofa", '
                                          '"cheap", class commercial, region RU')
    for miss in ({"text": "sofa"}, {"classes": ["news"]}, {"region": "KZ"}):
        assert loaded.rerank(page(2), query={**met, **miss}).ids() == ["d1", "d2"]


# Both sides split words at what is not a letter, mark or number, after NFKC and lower().
@pytest.mark.parametrize(("query", "condition"), [
    ("ＩＰＨＯＮＥ　１５", "iphone 15"),            # full-width letters, digits and space
    ("Купить\u00a0ДИВАН!", "купить диван"),       # no-break space, punctuation
    ("«ёлка»—2027", "ёлка 2027"),                  # quotes and a dash split words
    ("ΟΔΟΣ", "οδο\u03c2"),                         # final sigma: ς from the capital Σ
    ("e\u0301te\u0301", "été"),                    # combining accents: NFKC composes them
    ("c++/rust", "c rust"),
])
def test_the_query_is_normalized_alike_on_both_sides(side, query, condition):
    hide = {"query_hide": {"when": {"query_is": [condition]},
                           "match": {"hosts": ["d1.example"]}}}
    assert side.rerank(config(**{"pre-filter": [hide]}), page(2),
                       query={"text": query}).ids() == ["d2"]


def test_reserved_keys_switch_a_pin_off_and_bound_it_in_time(side):
    start = dt.datetime(2030, 3, 1, tzinfo=dt.UTC).timestamp()
    pin = {"pin": [{"url": "https://d2.example/d2", "position": 1}],
           "valid_from": "2030-03-01T00:00:00Z", "valid_until": "2030-03-08T00:00:00Z"}
    loaded = side.load(config(diversify=[{"query_pin": pin}]))
    assert [loaded.rerank(page(2), now=t).ids()[0] for t in (start - 1, start, start + 7 * 86400)
            ] == ["d1", "d2", "d1"]
    off = side.load(config(diversify=[{"query_pin": {**pin, "enabled": False}}]))
    assert off.rerank(page(2), now=start).ids() == ["d1", "d2"]


def test_a_gated_pin_runs_in_shadow_in_control(side):
    text = config(diversify=[{"query_pin": {"pin": [{"url": "https://d2.example/d2",
                                                     "position": 1}]}}])
    text += yaml.safe_dump({"experiments": [{"name": "pins", "unit": "user_id",
                                             "variants": {"control": 50, "treatment": 50},
                                             "rules": ["query_pin"]}]})
    loaded = side.load(text)
    control = loaded.rerank(page(2), variants={"pins": "control"}, unit={"user_id": "u"})
    assert control.ids() == ["d1", "d2"]
    assert {r["mode"] for r in control.records("query_pin")} == {"shadow"}
    treated = loaded.rerank(page(2), variants={"pins": "treatment"}, unit={"user_id": "u"})
    assert treated.ids() == ["d2", "d1"]


def test_every_query_rule_is_counted_in_the_per_rule_metrics():
    m = Metrics()
    text = config(**{"pre-filter": [{"query_hide": {"match": {"hosts": ["d3.example"]}}}],
                     "diversify": [{"query_pin": {"pin": [{"url": "https://d2.example/d2",
                                                           "position": 1}]}}]})
    engine = Engine(*compile_spec(load_bytes(text.encode())), m.engine_metrics)
    status, _, _, _, _ = engine.rerank(orjson.dumps({"documents": page(3)}), now=NOW)
    assert status == 200
    s = samples(generate_latest(m.registry).decode())
    actions = "rearrange_rule_actions_total"
    assert value(s, actions, profile="default", rule="query_hide", phase="pre-filter",
                 action="remove", mode="applied") == 1
    assert value(s, actions, profile="default", rule="query_pin", phase="diversify",
                 action="move", mode="applied") == 2
    took = "rearrange_rule_duration_seconds_count"
    assert value(s, took, rule="query_pin", phase="diversify", mode="applied") == 1


@pytest.mark.parametrize(("step", "problem"), [
    ("{query_pin: {pin: [{url: 'http://[::1', position: 1}]}}",
     'pin[0].url: "http://[::1" cannot be opened'),
    ("{query_pin: {pin: [{url: 'https://a.example/', position: 0}]}}",
     "pin[0].position: 1 to 1000"),
    ("{query_pin: {pin: [{url: 'https://a.example/', position: 1}, "
     "{url: 'https://b.example/', position: 1}]}}",
     "pin[1].position: position 1 is pin[0]'s already"),
    ("{query_pin: {pin: [{url: 'https://a.example/x', position: 1}, "
     "{url: 'http://A.EXAMPLE/x#top', position: 2}]}}", "pin[1].url: the same URL as pin[0]"),
    ("{query_pin: {pin: []}}", "pin: 1 to 100 pins"),
    ("{query_pin: {promote: [{url: 'https://a.example/', position: 1}]}}",
     "promote: unknown field `promote`"),
    ("{query_pin: {when: {query_starts_with: [a]}, pin: [{url: 'https://a.example/', "
     "position: 1}]}}", "when.query_starts_with: unknown field `query_starts_with`"),
    ("{query_pin: {when: {query_is: ['?!']}, pin: [{url: 'https://a.example/', "
     "position: 1}]}}", 'when.query_is[0]: "?!" has no letters'),
    ("{query_pin: {when: {regions: [RUS]}, pin: [{url: 'https://a.example/', position: 1}]}}",
     'when.regions[0]: "RUS" is not an ISO 3166-1 alpha-2'),
    ("{query_pin: {when: {regions: [ß]}, pin: [{url: 'https://a.example/', position: 1}]}}",
     'when.regions[0]: "ß" is not an ISO 3166-1 alpha-2'),  # not SS
    ("{query_pin: {label: 'two words', pin: [{url: 'https://a.example/', position: 1}]}}",
     'label: "two words" is not'),
])
def test_a_bad_pin_is_refused_naming_the_place(step, problem):
    with pytest.raises(ConfigError) as err:
        load_bytes(f"profiles: {{default: {{diversify: [{step}]}}}}".encode())
    assert err.value.place == "profiles.default.diversify[0] query_pin"
    assert problem in err.value.problem


@pytest.mark.parametrize(("step", "problem"), [
    ("{query_hide: {}}", "missing field `match`"),
    ("{query_hide: {match: {}}}", "match: give urls, hosts, domains or attributes"),
    ("{query_hide: {match: {hosts: ['shop.example/a']}}}",
     'match.hosts[0]: "shop.example/a" is not a bare host'),
    ("{query_hide: {match: {hosts: ['*.shop.example']}}}", "is not a host name"),
    ("{query_hide: {match: {domains: [co.uk]}}}", "co.uk is a public suffix"),
    ("{query_hide: {match: {domains: [203.0.113.7]}}}", "is an IP address"),
    ("{query_hide: {match: {attributes: {tier: [a, b]}}}}", "match.attributes.tier: a string"),
    ("{query_hide: {match: {urls: ['https://a.example/']}, hide: true}}",
     "hide: unknown field `hide`"),
])
def test_a_bad_hide_is_refused_naming_the_place(step, problem):
    with pytest.raises(ConfigError) as err:
        load_bytes(f"profiles: {{default: {{pre-filter: [{step}]}}}}".encode())
    assert err.value.place == "profiles.default.pre-filter[0] query_hide"
    assert problem in err.value.problem


def test_each_query_rule_runs_in_its_phase_only():
    with pytest.raises(ConfigError) as err:
        load_bytes(b"profiles: {default: {trim: [{query_pin: {pin: [{url: 'https://a.example/',"
                   b" position: 1}]}}]}}")
    assert err.value.problem == "cannot run in trim (it runs in diversify)"
    with pytest.raises(ConfigError) as err:
        load_bytes(b"profiles: {default: {rerank: [{query_hide: {match: {hosts: [a.example]}}}]}}")
    assert err.value.problem == "cannot run in rerank (it runs in pre-filter)"


def test_boost_verified_sources_and_bury_a_host_and_the_sort_moves_them(side):
    # seed 002, rerank: "boost of verified sources", here an attribute the ranker passes on
    docs = [doc("a", 5.0, host="blog.example"), doc("b", 4.0, host="www.who.int"),
            doc("c", 3.0, attributes={"verified": True}), doc("d", 2.0),
            doc("e", 1.0, attributes={"verified": 1})]
    rules = [{"query_boost": {"match": {"attributes": {"verified": True}}, "by": 2.5,
                              "label": "verified"}},
             {"query_boost": {"when": {"classes": ["ymyl"]}, "match": {"domains": ["who.int"]},
                              "by": 1}},
             {"query_boost": {"when": {"query_contains": ["symptoms"]},
                              "match": {"hosts": ["blog.example"]}, "by": -4}}]
    loaded = side.load(config(rerank=rules))
    out = loaded.rerank(docs, query={"text": "Flu symptoms", "classes": ["ymyl"]})
    assert out.ids() == ["c", "b", "d", "a", "e"]
    assert out.scores() == [5.5, 5.0, 2.0, 1.0, 1.0]
    assert [(r["doc_id"], r["delta"], r["reason"]) for r in out.records()
            if r["rule"] == "query_boost"] == [
        ("c", 2.5, "boost +2.5 for attributes verified=true on every query [verified]"),
        ("b", 1.0, "boost +1 for domain who.int when class ymyl"),
        ("a", -4.0, 'bury -4 for host blog.example when query contains "symptoms"')]
    assert [(r["doc_id"], r["delta"]) for r in out.records("sort")] == [
        ("c", -2), ("d", -1), ("a", 3)]
    plain = loaded.rerank(docs, query={"text": "flu"})
    assert plain.ids() == ["c", "a", "b", "d", "e"]  # only the unconditioned boost


@pytest.mark.parametrize(("step", "problem"), [
    ("{query_boost: {match: {hosts: [a.example]}}}", "missing field `by`"),
    ("{query_boost: {match: {hosts: [a.example]}, by: 0}}", "0 changes nothing"),
    ("{query_boost: {match: {hosts: [a.example]}, by: '2'}}", 'by: invalid type: string "2"'),
    ("{query_boost: {match: {hosts: [a.example]}, by: 1.0e+10}}", "by: 10000000000 is outside"),
    ("{query_boost: {match: {hosts: [a.example]}, by: 1e10}}",  # a string to YAML 1.1
     'by: invalid type: string "1e10"'),
    ("{query_boost: {by: 2}}", "missing field `match`"),
])
def test_a_bad_boost_is_refused_naming_the_place(step, problem):
    with pytest.raises(ConfigError) as err:
        load_bytes(f"profiles: {{default: {{rerank: [{step}]}}}}".encode())
    assert err.value.place == "profiles.default.rerank[0] query_boost"
    assert problem in err.value.problem


def test_the_documented_example(side):
    """config/query_rules.example.yaml on its request: what docs/config.md "Pins, hides and
    boosts by query" shows."""
    example = (ROOT / "config" / "query_rules.example.yaml").read_text()
    assert example[example.index("profiles:"):] in (ROOT / "docs" / "config.md").read_text()
    body = orjson.loads((ROOT / "config" / "query_rules.request.json").read_bytes())
    loaded = side.load(example)
    out = loaded.rerank(body["documents"], query=body["query"])
    assert out.ids() == ["d5", "d3", "d1", "d4"]
    assert [(r["rule"], r["doc_id"], r["action"]) for r in out.records()] == [
        ("query_hide", "d2", "remove"), ("query_boost", "d3", "rescore"),
        ("sort", "d3", "move"), ("sort", "d1", "move"), ("query_pin", "d5", "move"),
        ("query_pin", "d3", "move"), ("query_pin", "d1", "move"), ("query_pin", "d4", "move")]
    assert out.records("query_pin")[0]["reason"] == (
        'pinned at position 1 when query has "sofa", region RU [sofa-sale]')
    de = loaded.rerank(body["documents"], query={**body["query"], "region": "DE"})
    assert de.ids() == ["d3", "d1", "d4", "d5"]  # no pin outside RU and KZ
