"""The runner's check of what a Python rule returns (CONTRACT "Python rules"):
what it refuses, what it makes of what it accepts, what it hands over."""
from __future__ import annotations

import importlib

import pytest

from tests.sides import document as doc

pytestmark = pytest.mark.usefixtures("plugin_path")

PAGE = [doc("a", 3.0), doc("b", 2.0), doc("c", 1.0)]


def team_rule(phase: str, before: str = "") -> str:
    """A config running rr_returns' rule in `phase`, closed (a refusal answers 503)."""
    return (f"plugins: [rr_returns]\nprofiles:\n  default:\n    {phase}: [{before}"
            "{team_rule: {on_error: closed}}]\n")


def answering(result):
    """rr_returns set to answer `result(documents by id)`; its record of calls emptied."""
    module = importlib.import_module("rr_returns")
    module.ANSWER[:] = [lambda documents, context: result({d["id"]: d for d in documents})]
    module.HANDED.clear()
    return module


def page(by_id, *ids, **scores):
    return [{**by_id[i], **({"score": scores[i]} if i in scores else {})} for i in ids]


def rec(doc_id, action, delta=None, reason="why"):
    return {"doc_id": doc_id, "action": action, "reason": reason, "delta": delta}


ALL = ("a", "b", "c")


@pytest.mark.parametrize(("result", "problem"), [
    (lambda d: (page(d, *ALL), [rec("x", "remove")]),
     "records[0]: doc_id 'x' was not in its input"),
    (lambda d: (page(d, *ALL), [rec("a", "annotate")]), "records[0]: action 'annotate' is not one"),
    (lambda d: (page(d, *ALL), [{**rec("a", "move"), "mode": "x"}]), "unknown key 'mode'"),
    (lambda d: (page(d, *ALL), [rec("a", "move", delta=float("inf"))]),
     "delta inf is not a finite"),
    (lambda d: (page(d, *ALL), [rec("a", "move", delta=True)]), "delta True is not a finite"),
    (lambda d: (page(d, *ALL), [rec("a", "move", reason=None)]), "reason must be a string"),
    (lambda d: (page(d, *ALL), ["a"]), "records[0] is a str, not a dict"),
    (lambda d: (page(d, *ALL), None), "documents and records must both be lists"),
    (lambda d: (page(d, "b", "a", "c"), []), "moved 'b' without a move record"),
    (lambda d: (page(d, *ALL, c=True), [rec("c", "rescore")]),
     "score True is not a finite number"),
    (lambda d: (page(d, *ALL, c=1e16), [rec("c", "rescore")]),
     "score 1e+16 is not a finite number"),
    (lambda d: ([*page(d, "a", "b"), {"url": "u", "score": 1}], [rec("c", "trim")]),
     "id None was not"),
    (lambda d: (page(d, *ALL), []) * 2, "returned tuple, not (documents, records)"),
])
def test_what_the_runner_refuses(side, result, problem):
    answering(result)
    out = side.rerank(team_rule("diversify"), PAGE)
    assert (out.status, out.body["rule"], out.body["phase"]) == (503, "team_rule", "diversify")
    assert out.body["problem"].startswith("returned output the runner refuses: ")
    assert problem in out.body["problem"]


def test_accepted_output_becomes_the_page_and_records(side):
    answering(lambda d: (page(d, "c", "b", c=1.5), [
        rec("a", "trim", reason="team quota"), rec("c", "rescore"),
        rec("c", "move", delta=-1), rec("b", "move")]))
    crowded = [*PAGE, doc("z", 0.5, host="a.example")]  # z folds under a first
    out = side.rerank(team_rule("diversify", "{host_crowding: {max_per_host: 1}}, "), crowded)
    assert [(d["id"], d["score"], d["original_score"]) for d in out.documents] == [
        ("c", 1.5, 1.0), ("b", 2.0, 2.0)]
    got = [(r["phase"], r["doc_id"], r["action"], r["delta"], r["reason"], r["mode"])
           for r in out.records("team_rule")]
    assert got == [
        ("diversify", "a", "trim", None, "team quota", "applied"),
        ("diversify", "c", "rescore", 0.5, "why", "applied"),  # the delta filled in
        ("diversify", "c", "move", -1, "why", "applied"),  # as given
        ("diversify", "b", "move", 1, "why", "applied"),
        # collapsed under the trimmed document: it goes with it, with its own record
        ("diversify", "z", "trim", None, "collapsed under a, trimmed with it: team quota",
         "applied")]


def test_in_rerank_the_rules_order_gives_way_to_the_sort(side):
    # b raised to a's score, and put first: the page keeps its input order, so the stable
    # sort after rerank leaves a ahead of b (kept in the rule's order, b would lead).
    answering(lambda d: (page(d, "b", "a", "c", b=3.0), [rec("b", "rescore", delta=1.0)]))
    out = side.rerank(team_rule("rerank"), PAGE)
    assert out.ids() == ["a", "b", "c"] and out.scores() == [3.0, 3.0, 1.0]
    assert [(r["rule"], r["doc_id"], r["action"]) for r in out.records()] == [
        ("team_rule", "b", "rescore")]


def test_documents_are_handed_over_as_the_request_gave_them(side):
    rule = answering(lambda d: (list(d.values()), []))
    full = doc("a", 2.0, factors={"link": 1.0}, spam_score=0.2, adult_score=0.1,
               domain_age_days=None, is_ad=False, topics=["t"], blocked_regions=["de", "AT"],
               text="x", attributes={"k": [1, {"n": None}]})
    bare = doc("b")
    out = side.rerank(team_rule("annotate"), [full, bare],
                      query={"text": "q", "region": "de"}, unit={"user_id": "u"})
    assert out.ids() == ["a", "b"]
    [(documents, context)] = rule.HANDED
    assert documents == [full, bare]  # null and default values included, as sent
    assert context == {"query": {"text": "q", "classes": [], "region": "de",
                                 "age_mode": "moderate"},
                       "profile": "default", "variants": {}, "phase": "annotate"}
