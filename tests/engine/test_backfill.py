"""Backfill, through the engine: a post-filter removal from a trimmed page is
refilled from what the trim cut, in order, within the trim rules, each with a record."""
from __future__ import annotations

from tests.sides import document as doc

CONFIG = """
profiles:
  default:
    trim: [{depth: {k: 3}}]
    annotate: [ad_label]
    post-filter: [safe_search, {empty_result_fallback: {strategy: message}}]
"""


def applied(out, action):
    return [(r["doc_id"], r["rule"], r["reason"]) for r in out.records()
            if r["action"] == action and r["mode"] == "applied"]


def test_the_next_trimmed_document_takes_the_place_of_a_removed_one(side):
    page = [doc("a", 5.0), doc("b", 4.0, adult_score=0.9), doc("c", 3.0),
            doc("d", 2.0, is_ad=True), doc("e", 1.0)]
    out = side.rerank(CONFIG, page)
    assert out.ids() == ["a", "c", "d"]
    assert [d["position"] for d in out.documents] == [1, 2, 3]
    assert out.documents[2]["annotations"] == ["ad"]
    assert applied(out, "backfill") == [
        ("d", "backfill", "refilled after safe_search removed 1 from the page")]
    assert applied(out, "trim") == [("e", "depth", "below depth 3")]  # d's record gave way
    assert [(r["id"], r["action"]) for r in out.body["removed"]] == [("e", "trim"),
                                                                      ("b", "remove")]
    labels = [r for r in out.records("ad_label") if r["doc_id"] == "d"]
    assert [r["action"] for r in labels] == ["annotate"]
    assert out.body["fallback"] is None


def test_the_request_depth_caps_the_refill_too(side):
    page = [doc(x, 10.0 - i, adult_score=0.9 if x in "ab" else 0.0)
            for i, x in enumerate("abcdef")]
    out = side.rerank(CONFIG, page, depth=2)
    assert out.ids() == ["c", "d"]
    assert [i for i, _, _ in applied(out, "backfill")] == ["c", "d"]
    assert [i for i, _, _ in applied(out, "trim")] == ["e", "f"]


def test_a_host_past_its_quota_stays_out_and_an_unsafe_one_is_not_refilled(side):
    config = """
profiles:
  default:
    trim: [host_quota, {depth: {k: 2}}]
    post-filter: [safe_search]
"""
    page = [doc("a", 5.0, host="x.example"), doc("b", 4.0, host="x.example"),
            doc("c", 3.0, host="y.example", adult_score=0.9),
            doc("d", 2.0, host="z.example", adult_score=0.95), doc("e", 1.0, host="w.example")]
    out = side.rerank(config, page)
    assert out.ids() == ["a", "e"]
    assert [i for i, _, _ in applied(out, "backfill")] == ["e"]
    assert sorted(i for i, _, _ in applied(out, "trim")) == ["b", "d"]


def test_a_refilled_document_lands_at_its_rank_between_the_kept(side):
    config = """
profiles:
  default:
    trim: [host_quota]
    post-filter: [safe_search]
"""
    page = [doc("a", 5.0, host="x.example", adult_score=0.9), doc("b", 4.0, host="x.example"),
            doc("c", 3.0, host="y.example")]
    out = side.rerank(config, page)
    assert out.ids() == ["b", "c"]


def test_the_collapsed_come_back_with_their_document(side):
    config = """
profiles:
  default:
    diversify: [{host_crowding: {max_per_host: 1}}]
    trim: [{depth: {k: 1}}]
    post-filter: [safe_search]
"""
    page = [doc("a", 5.0, adult_score=0.9), doc("b", 4.0, host="x.example"),
            doc("c", 3.0, host="x.example")]
    out = side.rerank(config, page)
    assert out.ids() == ["b"]
    assert [c["id"] for c in out.documents[0]["collapsed"]] == ["c"]
    assert [(i, why.split(":")[0]) for i, _, why in applied(out, "backfill")] == [
        ("b", "refilled after safe_search removed 1 from the page"),
        ("c", "collapsed under b, refilled with it")]
    assert applied(out, "trim") == []


def test_the_fallback_only_when_nothing_is_left(side):
    out = side.rerank(CONFIG, [doc("a", 2.0, adult_score=0.9), doc("b", 1.0)], depth=1)
    assert out.ids() == ["b"]
    assert out.body["fallback"] is None
    out = side.rerank(CONFIG, [doc("a", 2.0, adult_score=0.9), doc("b", 1.0, adult_score=0.9)],
                      depth=1)
    assert out.ids() == []
    assert applied(out, "backfill") == []
    assert out.body["fallback"]["rule"] == "empty_result_fallback"


def test_no_trim_no_backfill_and_a_shadow_filter_refills_nothing(side):
    config = """
profiles:
  default:
    trim: [{depth: {k: 1}}]
    post-filter: [safe_search]
experiments:
  - name: e
    unit: user_id
    variants: {control: 100}
    rules: [safe_search]
"""
    out = side.rerank(config, [doc("a", 2.0, adult_score=0.9), doc("b", 1.0)],
                      unit={"user_id": "u"})
    assert out.ids() == ["a"]
    assert applied(out, "backfill") == []
    plain = "profiles:\n  default:\n    post-filter: [safe_search]\n"
    out = side.rerank(plain, [doc("a", 2.0, adult_score=0.9), doc("b", 1.0)])
    assert out.ids() == ["b"]
    assert applied(out, "backfill") == []
