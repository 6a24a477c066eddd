"""Diversify, trim and annotate rules."""
from __future__ import annotations

from tests.helpers import ctx, doc, ids, make
from tests.reference.rules.diversity import HostCrowding, NearDuplicates
from tests.reference.rules.labels import AdLabel, AgeLabel
from tests.reference.rules.trim import Depth, HostQuota

TEMPLATE = ("доставка дивана в город {city} занимает от двух до пяти рабочих дней после "
            "оплаты заказа курьер позвонит заранее и согласует удобное время подъём на этаж "
            "оплачивается отдельно по тарифу службы доставки а сборка мебели входит в цену")


def test_host_crowding_collapses_past_the_limit_under_the_first():
    docs = [doc("a", host="x.com"), doc("b", host="x.com"), doc("c", host="y.com"),
            doc("d", host="x.com"), doc("e", host="x.com")]
    out, records = make(HostCrowding, max_per_host=2)(docs, ctx())
    assert ids(out) == ["a", "b", "c"]
    assert [c["id"] for c in out[0].collapsed] == ["d", "e"]
    assert {r.doc_id for r in records} == {"d", "e"}
    assert all(r.action == "collapse" and "collapsed under a" in r.reason for r in records)
    again, more = make(HostCrowding, max_per_host=2)(out, ctx())
    assert ids(again) == ids(out) and more == []  # idempotent


def test_host_crowding_by_registrable_domain():
    docs = [doc("a", host="shop.example.co.uk"), doc("b", host="blog.example.co.uk"),
            doc("c", host="other.co.uk")]
    out, _ = make(HostCrowding, max_per_host=1, key="domain")(docs, ctx())
    assert ids(out) == ["a", "c"]
    out, _ = make(HostCrowding, max_per_host=1, key="host")(docs, ctx())
    assert ids(out) == ["a", "b", "c"]


def test_near_duplicates_collapses_template_pages_under_the_higher_one():
    docs = [doc("kazan", text=TEMPLATE.format(city="казань")),
            doc("article", text="как вернуть товар надлежащего качества в течение "
                                 "четырнадцати дней без объяснения причин и чека"),
            doc("perm", text=TEMPLATE.format(city="пермь")),
            doc("notext")]
    out, records = make(NearDuplicates)(docs, ctx())
    assert ids(out) == ["kazan", "article", "notext"]
    assert out[0].collapsed == ({"id": "perm", "url": docs[2].url, "rule": "near_duplicates"},)
    assert records[0].reason.startswith("containment 0.")


def test_depth_keeps_top_k_and_request_depth_overrides():
    docs = [doc(str(i)) for i in range(5)]
    out, records = make(Depth, k=3)(docs, ctx())
    assert ids(out) == ["0", "1", "2"] and [r.doc_id for r in records] == ["3", "4"]
    assert ids(make(Depth, k=3)(docs, ctx(depth=1))[0]) == ["0"]


def test_host_quota_drops_past_quota():
    docs = [doc("a", host="x.com"), doc("b", host="x.com"), doc("c", host="y.com")]
    out, records = make(HostQuota)(docs, ctx())
    assert ids(out) == ["a", "c"] and records[0].action == "trim"


def test_labels_annotate_once():
    docs = [doc("a", is_ad=True), doc("b", adult_score=0.7), doc("c")]
    out, records = make(AdLabel)(docs, ctx())
    out, more = make(AgeLabel)(out, ctx())
    assert [d.annotations for d in out] == [("ad",), ("adult",), ()]
    assert [r.action for r in records + more] == ["annotate", "annotate"]
    again, none = make(AdLabel)(out, ctx())
    assert again[0].annotations == ("ad",) and none == []


def test_trimming_a_leader_says_where_its_collapsed_documents_went():
    leader = doc("a", host="x.com").replace(
        collapsed=({"id": "c", "url": "https://x.com/c", "rule": "host_crowding"},))
    out, records = make(Depth, k=1)([doc("z"), leader], ctx())
    assert ids(out) == ["z"]
    assert [(r.doc_id, r.action) for r in records] == [("a", "trim"), ("c", "trim")]
    assert records[1].reason == "collapsed under a, trimmed with it: below depth 1"
    out, records = make(HostQuota)([doc("y", host="x.com"), leader], ctx())
    assert [r.doc_id for r in records] == ["a", "c"]
