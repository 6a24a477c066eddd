"""Pre/post-filter rules and the empty-result fallback, through the engine."""
from __future__ import annotations

import pytest

from app.banlist.model import Entry, normalize
from app.config.load import load_bytes
from app.errors import ConfigError
from tests.sides import document as doc
from tests.sides import only


def entry(id: str, scope: str, value: str, regions=(), expires_at=None) -> Entry:
    return Entry(id, scope, normalize(scope, value), "legal removal", "tns", 0.0, expires_at,
                 frozenset(regions))


BANLIST = only("pre-filter", "banlist")


def removed(answer) -> list[tuple[str, str]]:
    """(doc_id, reason) of each removal, in record order."""
    return [(r["doc_id"], r["reason"]) for r in answer.records() if r["action"] == "remove"]


def test_banlist_removes_matching_documents_with_the_entry_as_reason(side):
    out = side.rerank(BANLIST, [doc("a", host="www.bad.example"), doc("b", host="good.example")],
                      bans=[entry("7", "domain", "bad.example")], now=1.0)
    assert out.ids() == ["b"]
    assert removed(out) == [("a", "domain bad.example banned (legal removal) [entry 7]")]


def test_banlist_respects_regions_and_expiry(side):
    bans = [entry("1", "host", "a.example", regions={"DE"}),
            entry("2", "host", "b.example", expires_at=100.0)]
    docs = [doc("a", host="a.example"), doc("b", host="b.example")]
    loaded = side.load(BANLIST)

    def kept(region, now):
        return loaded.rerank(docs, bans=bans, now=now, query={"region": region}).ids()

    assert kept("DE", 50.0) == []
    assert kept("RU", 50.0) == ["a"]
    assert kept("ru", 100.0) == ["a", "b"]


def test_banlist_prefers_a_url_or_prefix_entry_over_its_hosts_domain_entry(side):
    # The rule looks once per host; a document on a host with url or prefix entries under
    # it is looked at again, and the more specific entry is the one it is removed for.
    bans = [entry("1", "domain", "mixed.example"),
            entry("2", "url", "http://www.mixed.example/leak"),
            entry("3", "prefix", "clean.example/private/", regions={"DE"}),
            entry("4", "url", "http://www.mixed.example/de-only", regions={"DE"})]
    docs = [doc("leak", url="https://www.mixed.example/leak"),
            doc("other", url="https://www.mixed.example/other"),
            doc("de", url="https://www.mixed.example/de-only"),
            doc("private", url="https://clean.example/private/x"),
            doc("public", url="https://clean.example/public")]
    loaded = side.load(BANLIST)
    out = loaded.rerank(docs, bans=bans, now=1.0, query={"region": "FR"})
    assert out.ids() == ["private", "public"]  # the prefix entry is for DE only
    assert [(i, why[-9:]) for i, why in removed(out)] == [
        ("leak", "[entry 2]"), ("other", "[entry 1]"), ("de", "[entry 1]")]
    out = loaded.rerank(docs, bans=bans, now=1.0, query={"region": "DE"})
    assert out.ids() == ["public"]
    assert [why[-9:] for _, why in removed(out)][2:] == ["[entry 4]", "[entry 3]"]


def test_banlist_leaves_a_page_it_does_not_match_as_it_came(side):
    out = side.rerank(BANLIST, [doc("a"), doc("b")], bans=[entry("1", "domain", "bad.example")],
                      now=1.0)
    assert out.ids() == ["a", "b"] and out.records() == [] and out.body["removed"] == []


def test_regional_removals_only_when_the_query_has_a_region(side):
    loaded = side.load(only("pre-filter", "regional_removals"))
    docs = [doc("a", blocked_regions=["de"]), doc("b")]
    out = loaded.rerank(docs, query={"region": "DE"})
    assert out.ids() == ["b"] and removed(out) == [("a", "blocked in region DE")]
    assert loaded.rerank(docs).ids() == ["a", "b"]


def test_topic_filter(side):
    docs = [doc("a", topics=["gambling", "x"]), doc("b", topics=["furniture"])]
    out = side.rerank(only("pre-filter", {"topic_filter": {"blocked_topics": ["gambling"]}}),
                      docs)
    assert out.ids() == ["b"] and removed(out) == [("a", "topic gambling is blocked")]
    assert side.rerank(only("pre-filter", "topic_filter"), docs).ids() == ["a", "b"]


@pytest.mark.parametrize(("mode", "kept"), [("strict", ["a"]), ("moderate", ["a", "b"]),
                                              ("off", ["a", "b", "c"])])
def test_safe_search_thresholds_by_age_mode(side, mode, kept):
    docs = [doc("a", adult_score=0.1), doc("b", adult_score=0.5), doc("c", adult_score=0.8)]
    config = only("pre-filter", {"safe_search": {"thresholds": {"strict": 0.5,
                                                                "moderate": 0.8}}})
    out = side.rerank(config, docs, query={"age_mode": mode})
    assert out.ids() == kept
    if mode == "strict":
        assert removed(out) == [("b", "adult_score 0.5 >= 0.5 (age_mode strict)"),
                                ("c", "adult_score 0.8 >= 0.5 (age_mode strict)")]


def test_safe_search_runs_in_post_filter_too(side):
    out = side.rerank(only("post-filter", "safe_search"), [doc("a", adult_score=0.9), doc("b")])
    assert out.ids() == ["b"]
    assert [(r["rule"], r["phase"], r["doc_id"]) for r in out.records()] == [
        ("safe_search", "post-filter", "a")]


def test_spam_ban_is_strictly_above_threshold(side):
    out = side.rerank(only("pre-filter", "spam_ban"),
                      [doc("a", spam_score=0.95), doc("b", spam_score=0.951)])
    assert out.ids() == ["a"] and removed(out) == [("b", "spam_score 0.951 > 0.95")]


def test_filters_are_idempotent(side):
    docs = [doc("a", adult_score=0.9), doc("b", spam_score=0.99), doc("c")]
    for rule in ("safe_search", "spam_ban"):
        out = side.rerank(only("pre-filter", rule, rule), docs)
        assert out.ids() == (["b", "c"] if rule == "safe_search" else ["a", "c"])
        assert len(out.records(rule)) == 1  # the second run found nothing more


FALLBACK = """
profiles:
  default:
    pre-filter: [safe_search]
    post-filter: [{empty_result_fallback: %s}]
"""


def fallbacks(answer) -> list[str]:
    return [r["reason"] for r in answer.records("empty_result_fallback")]


def test_fallback_relaxes_strict_once_then_reports_nothing_safe(side):
    docs = [doc("x", adult_score=0.6), doc("y", adult_score=0.7), doc("z", adult_score=0.9)]
    loaded = side.load(FALLBACK % "{}")
    out = loaded.rerank(docs, query={"age_mode": "strict"})
    assert out.ids() == ["x", "y"]  # rerun under moderate
    assert out.body["fallback"] == {
        "rule": "empty_result_fallback", "action": "relax",
        "reason": "filters removed all 3 documents under age_mode strict; reran with "
                  "age_mode moderate"}
    out = loaded.rerank(docs[2:], query={"age_mode": "moderate"})  # the floor is moderate
    assert out.ids() == [] and fallbacks(out) == [
        "filters removed all 1 documents under age_mode moderate; nothing safe was found"]
    assert out.body["fallback"]["action"] == "empty"
    # min_age_mode off would allow a second step, but a request relaxes at most once
    out = side.rerank(FALLBACK % "{min_age_mode: 'off'}", docs[2:], query={"age_mode": "strict"})
    assert out.ids() == [] and fallbacks(out) == [
        "filters removed all 1 documents under age_mode strict; reran with age_mode moderate",
        "filters removed all 1 documents under age_mode moderate; nothing safe was found"]


def test_fallback_stays_quiet_on_a_page_that_is_not_empty_or_was_empty_already(side):
    loaded = side.load(FALLBACK % "{}")
    assert loaded.rerank([doc("a")]).records() == []
    out = loaded.rerank([])
    assert out.records() == [] and out.body["fallback"] is None


def test_fallback_params_validated():
    with pytest.raises(ConfigError, match="empty_result_fallback: strategy: must be relax or"):
        load_bytes((FALLBACK % "{strategy: pray}").encode())


# Every spelling a browser resolves to evil.example (issue 14): a domain ban covers them all.
EVASIONS = [
    "\u0001http://evil.example/",
    "http://x_y.ｅｖｉｌ.example/",
    "http://ev\u00adil.example/",
    "http:/evil.example/",
    "http://good.example%2F@evil.example/",
    "http://evil.example\\@good.example/",
    "HTTP://EVIL.EXAMPLE.:8080/",
    "http://evil。example/",
]


@pytest.mark.parametrize("url", EVASIONS)
def test_a_domain_ban_covers_every_spelling_a_browser_resolves_to_the_domain(side, url):
    out = side.rerank(BANLIST, [doc("a", url=url), doc("b")],
                      bans=[entry("9", "domain", "evil.example")], now=1.0)
    assert out.ids() == ["b"]
    assert removed(out) == [("a", "domain evil.example banned (legal removal) [entry 9]")]


@pytest.mark.parametrize("value", ["i❤.ws", "xn--i-7iq.ws", "I❤.WS"])
@pytest.mark.parametrize("scope", ["host", "domain"])
def test_an_emoji_host_can_be_banned_in_either_spelling(side, scope, value):
    docs = [doc("emoji", url="http://i❤.ws/"), doc("puny", url="https://xn--i-7iq.ws/x"),
            doc("other")]
    out = side.rerank(BANLIST, docs, bans=[entry("5", scope, value)], now=1.0)
    assert out.ids() == ["other"]


@pytest.mark.parametrize("banned", [True, False])
def test_a_url_no_browser_could_open_is_removed_with_the_problem(side, banned):
    # The banlist cannot vouch for a URL it cannot resolve: removed whatever it holds.
    bans = [entry("1", "domain", "bad.example")] if banned else []
    docs = [doc("a"), doc("nohost", url="http://"), doc("mail", url="mailto:x@y.example"),
            doc("b", host="www.bad.example")]
    out = side.rerank(BANLIST, docs, bans=bans, now=1.0)
    assert out.ids() == (["a"] if banned else ["a", "b"])
    assert removed(out)[:2] == [
        ("nohost", "URL cannot be opened: no host"),
        ("mail", "URL cannot be opened: expected '//' after 'mailto:'")]


def test_no_banlist_at_all_still_removes_a_url_no_browser_could_open(side):
    out = side.rerank(BANLIST, [doc("a"), doc("x", url="/blah")], now=1.0)
    assert out.ids() == ["a"] and removed(out) == [("x", "URL cannot be opened: no host")]
