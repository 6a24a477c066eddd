"""Diversify, trim and annotate rules, through the engine."""
from __future__ import annotations

from tests.sides import document as doc
from tests.sides import only

TEMPLATE = ("доставка дивана в город {city} занимает от двух до пяти рабочих дней после "
            "оплаты заказа курьер позвонит заранее и согласует удобное время подъём на этаж "
            "оплачивается отдельно по тарифу службы доставки а сборка мебели входит в цену")
ARTICLE = ("как вернуть товар надлежащего качества в течение четырнадцати дней без объяснения "
           "причин и чека")


def collapsed(answer) -> dict[str, list[str]]:
    """Each served document's id → the ids collapsed under it."""
    return {d["id"]: [c["id"] for c in d["collapsed"]] for d in answer.documents}


def test_host_crowding_collapses_past_the_limit_under_the_first(side):
    docs = [doc("a", host="x.com"), doc("b", host="x.com"), doc("c", host="y.com"),
            doc("d", host="x.com"), doc("e", host="x.com")]
    crowding = {"host_crowding": {"max_per_host": 2}}
    out = side.rerank(only("diversify", crowding), docs)
    assert out.ids() == ["a", "b", "c"] and collapsed(out)["a"] == ["d", "e"]
    assert [(r["doc_id"], r["action"], r["reason"]) for r in out.records()] == [
        (i, "collapse", "host x.com already has 2 result(s) above; collapsed under a")
        for i in ("d", "e")]
    twice = side.rerank(only("diversify", crowding, crowding), docs)
    assert twice.ids() == out.ids() and twice.records() == out.records()  # idempotent


def test_host_crowding_by_registrable_domain(side):
    docs = [doc("a", host="shop.example.co.uk"), doc("b", host="blog.example.co.uk"),
            doc("c", host="other.co.uk")]
    by_domain = {"host_crowding": {"max_per_host": 1, "key": "domain"}}
    out = side.rerank(only("diversify", by_domain), docs)
    assert out.ids() == ["a", "c"]
    assert out.records()[0]["reason"] == ("domain example.co.uk already has 1 result(s) "
                                          "above; collapsed under a")
    by_host = {"host_crowding": {"max_per_host": 1, "key": "host"}}
    assert side.rerank(only("diversify", by_host), docs).ids() == ["a", "b", "c"]


def test_near_duplicates_collapses_template_pages_under_the_higher_one(side):
    docs = [doc("kazan", text=TEMPLATE.format(city="казань")),
            doc("article", text=ARTICLE),
            doc("perm", text=TEMPLATE.format(city="пермь")),
            doc("notext")]
    out = side.rerank(only("diversify", "near_duplicates"), docs)
    assert out.ids() == ["kazan", "article", "notext"]
    assert out.documents[0]["collapsed"] == [
        {"id": "perm", "url": docs[2]["url"], "rule": "near_duplicates"}]
    assert out.records()[0]["reason"].startswith("containment 0.")


def test_depth_keeps_top_k_and_request_depth_overrides(side):
    docs = [doc(str(i)) for i in range(5)]
    loaded = side.load(only("trim", {"depth": {"k": 3}}))
    out = loaded.rerank(docs)
    assert out.ids() == ["0", "1", "2"]
    assert [(r["doc_id"], r["action"], r["reason"]) for r in out.records()] == [
        ("3", "trim", "below depth 3"), ("4", "trim", "below depth 3")]
    assert loaded.rerank(docs, depth=1).ids() == ["0"]


def test_host_quota_drops_past_quota(side):
    docs = [doc("a", host="x.com"), doc("b", host="x.com"), doc("c", host="y.com")]
    out = side.rerank(only("trim", "host_quota"), docs)
    assert out.ids() == ["a", "c"]
    assert [(r["doc_id"], r["action"], r["reason"]) for r in out.records()] == [
        ("b", "trim", "host x.com is past its quota of 1")]


def test_labels_annotate_once(side):
    docs = [doc("a", is_ad=True), doc("b", adult_score=0.7), doc("c")]
    out = side.rerank(only("annotate", "ad_label", "age_label", "ad_label"), docs)
    assert [d["annotations"] for d in out.documents] == [["ad"], ["adult"], []]
    assert [(r["rule"], r["doc_id"], r["reason"]) for r in out.records()] == [
        ("ad_label", "a", "is_ad"), ("age_label", "b", "adult_score >= 0.5")]


def test_trimming_a_leader_says_where_its_collapsed_documents_went(side):
    config = "profiles:\n  default:\n    diversify: [near_duplicates]\n    trim: [%s]\n"
    perm = TEMPLATE.format(city="пермь")
    # c's text is a's: c folds under a, then the trim drops a and c goes with it
    docs = [doc("z", text=ARTICLE), doc("y", host="x.com"), doc("a", host="x.com", text=perm),
            doc("c", text=perm)]
    out = side.rerank(config % "{depth: {k: 2}}", docs)
    assert out.ids() == ["z", "y"] and out.records("near_duplicates")[0]["doc_id"] == "c"
    assert [(r["doc_id"], r["action"], r["reason"]) for r in out.records("depth")] == [
        ("a", "trim", "below depth 2"),
        ("c", "trim", "collapsed under a, trimmed with it: below depth 2")]
    out = side.rerank(config % "host_quota", docs)
    assert out.ids() == ["z", "y"]
    assert [(r["doc_id"], r["reason"]) for r in out.records("host_quota")] == [
        ("a", "host x.com is past its quota of 1"),
        ("c", "collapsed under a, trimmed with it: host x.com is past its quota of 1")]
