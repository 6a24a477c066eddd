"""Pre/post-filter rules and the empty-result fallback."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.banlist import canon
from app.banlist.index import BanIndex
from app.banlist.model import Entry, normalize
from app.pipeline import Phase
from tests.helpers import ctx, doc, ids, make
from tests.reference.pipeline import Doc
from tests.reference.rules.filters import (
    Banlist,
    EmptyResultFallback,
    RegionalRemovals,
    SafeSearch,
    SpamBan,
    TopicFilter,
)


def entry(id: str, scope: str, value: str, regions=(), expires_at=None) -> Entry:
    return Entry(id, scope, normalize(scope, value), "legal removal", "tns", 0.0, expires_at,
                 frozenset(regions))


def test_banlist_removes_matching_documents_with_the_entry_as_reason():
    index = BanIndex([entry("7", "domain", "bad.example")])
    docs = [doc("a", host="www.bad.example"), doc("b", host="good.example")]
    out, records = make(Banlist)(docs, ctx(banlist=index, now=1.0))
    assert ids(out) == ["b"]
    assert records[0].doc_id == "a" and records[0].action == "remove"
    assert records[0].reason == "domain bad.example banned (legal removal) [entry 7]"


def test_banlist_respects_regions_and_expiry():
    index = BanIndex([entry("1", "host", "a.example", regions={"DE"}),
                      entry("2", "host", "b.example", expires_at=100.0)])
    docs = [doc("a", host="a.example"), doc("b", host="b.example")]
    rule = make(Banlist)
    assert ids(rule(docs, ctx(banlist=index, region="DE", now=50.0))[0]) == []
    assert ids(rule(docs, ctx(banlist=index, region="RU", now=50.0))[0]) == ["a"]
    assert ids(rule(docs, ctx(banlist=index, region="RU", now=100.0))[0]) == ["a", "b"]


def test_banlist_prefers_a_url_or_prefix_entry_over_its_hosts_domain_entry():
    # The rule looks once per host; a document on a host with url or prefix entries under
    # it is looked at again, and the more specific entry is the one it is removed for.
    index = BanIndex([entry("1", "domain", "mixed.example"),
                      entry("2", "url", "http://www.mixed.example/leak"),
                      entry("3", "prefix", "clean.example/private/", regions={"DE"}),
                      entry("4", "url", "http://www.mixed.example/de-only", regions={"DE"})])
    docs = [doc("leak", host="www.mixed.example", url="https://www.mixed.example/leak"),
            doc("other", host="www.mixed.example", url="https://www.mixed.example/other"),
            doc("de", host="www.mixed.example", url="https://www.mixed.example/de-only"),
            doc("private", host="clean.example", url="https://clean.example/private/x"),
            doc("public", host="clean.example", url="https://clean.example/public")]
    rule = make(Banlist)
    out, records = rule(docs, ctx(banlist=index, region="FR", now=1.0))
    assert ids(out) == ["private", "public"]  # the prefix entry is for DE only
    assert [(r.doc_id, r.reason[-9:]) for r in records] == [
        ("leak", "[entry 2]"), ("other", "[entry 1]"), ("de", "[entry 1]")]
    out, records = rule(docs, ctx(banlist=index, region="DE", now=1.0))
    assert ids(out) == ["public"]
    assert [r.reason[-9:] for r in records][2:] == ["[entry 4]", "[entry 3]"]


def test_banlist_returns_an_untouched_page_as_it_came():
    index = BanIndex([entry("1", "domain", "bad.example")])
    docs = [doc("a"), doc("b")]
    out, records = make(Banlist)(docs, ctx(banlist=index, now=1.0))
    assert out is docs and records == []


def test_regional_removals():
    docs = [doc("a", blocked_regions=frozenset({"DE"})), doc("b")]
    rule = make(RegionalRemovals)
    out, records = rule(docs, ctx(region="DE"))
    assert ids(out) == ["b"] and records[0].reason == "blocked in region DE"
    assert not rule.applies(ctx(region=None))


def test_topic_filter():
    docs = [doc("a", topics=["gambling", "x"]), doc("b", topics=["furniture"])]
    out, records = make(TopicFilter, blocked_topics=["gambling"])(docs, ctx())
    assert ids(out) == ["b"] and records[0].reason == "topic gambling is blocked"
    assert not make(TopicFilter).applies(ctx())


@pytest.mark.parametrize(("mode", "kept"), [("strict", ["a"]), ("moderate", ["a", "b"]),
                                              ("off", ["a", "b", "c"])])
def test_safe_search_thresholds_by_age_mode(mode, kept):
    docs = [doc("a", adult_score=0.1), doc("b", adult_score=0.5), doc("c", adult_score=0.8)]
    rule = make(SafeSearch, thresholds={"strict": 0.5, "moderate": 0.8})
    c = ctx(age_mode=mode)
    out = rule(docs, c)[0] if rule.applies(c) else docs
    assert ids(out) == kept


def test_safe_search_runs_in_post_filter_too():
    rule = make(SafeSearch, Phase.POST_FILTER)
    out, records = rule([doc("a", adult_score=0.9)], ctx())
    assert out == [] and records[0].phase is Phase.POST_FILTER


def test_spam_ban_is_strictly_above_threshold():
    docs = [doc("a", spam_score=0.95), doc("b", spam_score=0.951)]
    out, records = make(SpamBan)(docs, ctx())
    assert ids(out) == ["a"] and [r.doc_id for r in records] == ["b"]


def test_filters_are_idempotent():
    docs = [doc("a", adult_score=0.9), doc("b", spam_score=0.99), doc("c")]
    for rule in (make(SafeSearch), make(SpamBan)):
        once = rule(docs, ctx())[0]
        twice, records = rule(once, ctx())
        assert ids(twice) == ids(once) and records == []


def test_fallback_relaxes_strict_once_then_reports_nothing_safe():
    rule = make(EmptyResultFallback)
    _, records = rule([], ctx(age_mode="strict", input_count=3))
    assert records[0].action == "fallback" and records[0].relax_to == "moderate"
    _, records = rule([], ctx(age_mode="moderate", input_count=3))  # floor is moderate
    assert records[0].relax_to is None and "nothing safe was found" in records[0].reason
    _, records = make(EmptyResultFallback, min_age_mode="off")(
        [], ctx(age_mode="moderate", input_count=3, relaxed_from="strict"))
    assert records[0].relax_to is None  # at most one relaxation per request
    assert not rule.applies(ctx(input_count=0))
    assert rule([doc("a")], ctx(input_count=1))[1] == []


def test_fallback_params_validated():
    with pytest.raises(ValidationError, match="strategy"):
        make(EmptyResultFallback, strategy="pray")


def _resolved(id: str, url: str) -> Doc:
    """A Doc as contract.to_docs builds it: canonical URL and host from the engine, or ''."""
    try:
        canonical, host = canon.canonicalize_with_host(url)
    except canon.InvalidURL:
        canonical = host = ""
    return Doc(id=id, url=url, score=1.0, original_score=1.0, canonical=canonical, host=host)


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
def test_a_domain_ban_covers_every_spelling_a_browser_resolves_to_the_domain(url):
    index = BanIndex([entry("9", "domain", "evil.example")])
    out, records = make(Banlist)([_resolved("a", url), doc("b")], ctx(banlist=index, now=1.0))
    assert ids(out) == ["b"]
    assert records[0].reason == "domain evil.example banned (legal removal) [entry 9]"


@pytest.mark.parametrize("value", ["i❤.ws", "xn--i-7iq.ws", "I❤.WS"])
@pytest.mark.parametrize("scope", ["host", "domain"])
def test_an_emoji_host_can_be_banned_in_either_spelling(scope, value):
    index = BanIndex([entry("5", scope, value)])
    docs = [_resolved("emoji", "http://i❤.ws/"), _resolved("puny", "https://xn--i-7iq.ws/x"),
            doc("other")]
    out, _ = make(Banlist)(docs, ctx(banlist=index, now=1.0))
    assert ids(out) == ["other"]


@pytest.mark.parametrize("banned", [True, False])
def test_a_url_no_browser_could_open_is_removed_with_the_problem(banned):
    # The banlist cannot vouch for a URL it cannot resolve: removed whatever it holds.
    index = BanIndex([entry("1", "domain", "bad.example")] if banned else [])
    docs = [doc("a"), _resolved("nohost", "http://"), _resolved("mail", "mailto:x@y.example"),
            doc("b", host="www.bad.example")]
    out, records = make(Banlist)(docs, ctx(banlist=index, now=1.0))
    assert ids(out) == (["a"] if banned else ["a", "b"])
    assert [(r.doc_id, r.action, r.reason) for r in records][:2] == [
        ("nohost", "remove", "URL cannot be opened: no host"),
        ("mail", "remove", "URL cannot be opened: expected '//' after 'mailto:'")]


def test_no_banlist_at_all_still_removes_a_url_no_browser_could_open():
    out, records = make(Banlist)([doc("a"), _resolved("x", "http:///blah")], ctx(now=1.0))
    assert ids(out) == ["a"] and records[0].reason == "URL cannot be opened: no host"
