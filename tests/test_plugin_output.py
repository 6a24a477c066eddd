"""The runner's check of what a Python rule returns, on plain data (CONTRACT "Python rules")."""
from __future__ import annotations

import pytest

from app import plugins
from app.pipeline import Phase
from tests.helpers import ctx, doc
from tests.reference.errors import RefusedOutput
from tests.reference.plugins import PythonRule, doc_dict


class Returns:
    """A rule that returns what the test set, whatever it is given."""

    def __init__(self, result):
        self.result = result

    def __call__(self, documents, context):
        return self.result


def rule(result, phase=Phase.DIVERSIFY) -> PythonRule:
    return PythonRule(plugins.PythonRule("team_rule", phase, Returns(result), {}, "default"))


PAGE = [doc("a", 3.0), doc("b", 2.0), doc("c", 1.0)]


def dicts(*ids, **scores):
    by_id = {d.id: doc_dict(d) for d in PAGE}
    return [{**by_id[i], **({"score": scores[i]} if i in scores else {})} for i in ids]


def rec(doc_id, action, delta=None, reason="why"):
    return {"doc_id": doc_id, "action": action, "reason": reason, "delta": delta}


ALL = ("a", "b", "c")


@pytest.mark.parametrize(("result", "problem"), [
    ((dicts(*ALL), [rec("x", "remove")]), "records[0]: doc_id 'x' was not in its input"),
    ((dicts(*ALL), [rec("a", "annotate")]), "records[0]: action 'annotate' is not one"),
    ((dicts(*ALL), [{**rec("a", "move"), "mode": "x"}]), "unknown key 'mode'"),
    ((dicts(*ALL), [rec("a", "move", delta=float("inf"))]), "delta inf is not a finite"),
    ((dicts(*ALL), [rec("a", "move", delta=True)]), "delta True is not a finite"),
    ((dicts(*ALL), [rec("a", "move", reason=None)]), "reason must be a string"),
    ((dicts(*ALL), ["a"]), "records[0] is a str, not a dict"),
    ((dicts(*ALL), None), "documents and records must both be lists"),
    ((dicts("b", "a", "c"), []), "moved 'b' without a move record"),
    ((dicts(*ALL, c=True), [rec("c", "rescore")]), "score True is not a finite number"),
    ((dicts(*ALL, c=1e16), [rec("c", "rescore")]), "score 1e+16 is not a finite number"),
    (([*dicts("a", "b"), {"url": "u", "score": 1}], [rec("c", "trim")]), "id None was not"),
    ((dicts(*ALL), []) * 2, "returned tuple, not (documents, records)"),
])
def test_what_the_runner_refuses(result, problem):
    with pytest.raises(RefusedOutput) as err:
        rule(result)(PAGE, ctx())
    assert problem in str(err.value)


def test_accepted_output_becomes_docs_and_records():
    collapsed = [doc("a", 3.0, collapsed=({"id": "z", "url": "u", "rule": "host_crowding"},)),
                 *PAGE[1:]]
    out, records = rule((dicts("c", "b", c=1.5), [
        rec("a", "trim", reason="team quota"), rec("c", "rescore"),
        rec("c", "move", delta=-1), rec("b", "move")]))(collapsed, ctx())
    assert [(d.id, d.score, d.original_score) for d in out] == [("c", 1.5, 1.0),
                                                                ("b", 2.0, 2.0)]
    assert out[1] is collapsed[1]  # an unchanged document is the same Doc
    got = [(r.rule, r.phase, r.doc_id, r.action, r.delta, r.reason, r.mode) for r in records]
    assert got == [
        ("team_rule", Phase.DIVERSIFY, "a", "trim", None, "team quota", "applied"),
        ("team_rule", Phase.DIVERSIFY, "c", "rescore", 0.5, "why", "applied"),  # filled
        ("team_rule", Phase.DIVERSIFY, "c", "move", -1, "why", "applied"),  # as given
        ("team_rule", Phase.DIVERSIFY, "b", "move", 1, "why", "applied"),
        # collapsed under the trimmed document: it goes with it, with its own record
        ("team_rule", Phase.DIVERSIFY, "z", "trim", None,
         "collapsed under a, trimmed with it: team quota", "applied")]


def test_in_rerank_the_rules_order_gives_way_to_the_sort():
    out, records = rule((dicts("c", "a", "b", c=9.0), [rec("c", "rescore", delta=8.0)]),
                        Phase.RERANK)(PAGE, ctx())
    assert [d.id for d in out] == ["a", "b", "c"]  # input order; the phase's sort moves c
    assert [(r.doc_id, r.action) for r in records] == [("c", "rescore")]
