"""Interleaved pages on random configs and pages (tests/strategies.py, always an
interleaving of `default` with `commercial`), through the engine: the merged page is the
team-draft merge (tests/interleaving.py, written from the paper) of what each profile
serves alone, without any document either arm's filters removed; each team's documents
keep their arm's order and score; the teams stay within one pick of each other while both
have documents to give; every document sent is served, folded or in `removed`, once; and
a page either arm answered with a fallback is served as the control arm's, not
interleaved."""
from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings

from app._engine import EngineMetrics
from app.config.load import load_bytes
from app.config.spec import with_core
from tests.interleaving import coins, team_draft
from tests.strategies import bodies, configs

NOW = 1_900_000_000.0


def answer(core: Any, body: dict[str, Any]) -> dict[str, Any]:
    status, out, _, _, _ = core.rerank(orjson.dumps(body), now=NOW)
    assert status == 200, out
    parsed: dict[str, Any] = orjson.loads(out)
    return parsed


def filtered(arm: dict[str, Any]) -> set[str]:
    return {r["id"] for r in arm["removed"]
            if r["action"] == "remove" and r["phase"] in ("pre-filter", "post-filter")}


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(yaml_text=configs(interleave=True), body=bodies(unit=True))
def test_the_merged_page_is_the_team_draft_of_the_arms(yaml_text, body):
    core = with_core(load_bytes(yaml_text.encode()), EngineMetrics()).core
    body.pop("profile", None)
    body["query"]["classes"] = []  # routed to `default`, the interleaving's control
    served = answer(core, body)
    arms = {team: answer(core, {**body, "profile": profile})
            for team, profile in (("control", "default"), ("treatment", "commercial"))}
    unit, query = body["unit"]["user_id"], body["query"].get("text", "")
    if any(a["fallback"] is not None for a in arms.values()):
        assert "interleaving" not in served
        assert served["documents"] == arms["control"]["documents"]
        return
    gone = filtered(arms["control"]) | filtered(arms["treatment"])
    ranked = {team: [d["id"] for d in a["documents"] if d["id"] not in gone]
              for team, a in arms.items()}
    if arms["control"]["documents"] and not (ranked["control"] or ranked["treatment"]):
        # the arms' filters together leave nothing: the control page alone, never empty
        assert "interleaving" not in served
        assert served["documents"] == arms["control"]["documents"]
        return
    assert served["interleaving"] == {"experiment": "mix"}
    pairs = [(d["id"], d["team"]) for d in served["documents"]]
    assert pairs == team_draft(ranked["control"], ranked["treatment"],
                               coins("mix", "", unit, query))
    for d in served["documents"]:
        mine = next(x for x in arms[d["team"]]["documents"] if x["id"] == d["id"])
        assert (d["score"], d["original_position"]) == (mine["score"],
                                                        mine["original_position"])
    picks = {"control": 0, "treatment": 0}
    for k, (_, team) in enumerate(pairs):
        before = {x for x, _ in pairs[:k]}
        both_left = all(set(ranked[t]) - before for t in picks)
        picks[team] += 1
        if both_left:  # a prefix: a team with nothing left never has again
            assert abs(picks["control"] - picks["treatment"]) <= 1, pairs
    shown = [d["id"] for d in served["documents"]]
    folded = [c["id"] for d in served["documents"] for c in d["collapsed"]]
    removed = [r["id"] for r in served["removed"]]
    assert len(set(shown)) == len(shown) and not set(shown) & set(folded)
    assert not set(folded) & gone  # what a filter removed is not shown, folded or not
    assert set(folded) <= {r["doc_id"] for r in served["audit"]
                           if r["action"] == "collapse" and r["mode"] == "applied"}
    assert set(shown) | set(folded) | set(removed) == {d["id"] for d in body["documents"]}
    assert not set(shown) & set(removed)


def test_a_document_either_arm_filtered_is_never_folded_and_every_fold_has_its_record():
    """The treatment folds (host_crowding) a document under one it serves; the control's
    banlist removed that document. On the merged page the banned one must not be shown
    folded, and a fold that is shown has the collapse record that explains it."""
    from app.banlist.base import EntrySpec, prepare
    from app.banlist.index import BanIndex

    yaml_text = """profiles:
  default: {pre-filter: [banlist]}
  commercial: {diversify: [{host_crowding: {max_per_host: 1, key: domain}}]}
experiments:
- {name: mix, unit: user_id, interleave: {control: default, treatment: commercial}}
"""
    core = with_core(load_bytes(yaml_text.encode()), EngineMetrics()).core
    ban = prepare(EntrySpec("host", "bad.shop.example", "spam", ()), NOW, {})
    banlist = BanIndex([ban.entry("1", "tns", NOW - 100)], version=1)
    docs = [{"id": "a", "url": "https://www.shop.example/1", "score": 3.0},
            {"id": "b", "url": "https://bad.shop.example/2", "score": 2.0},
            {"id": "c", "url": "https://www.shop.example/3", "score": 1.0},
            {"id": "d", "url": "https://other.example/4", "score": 0.5}]
    teams = set()
    for n in range(40):
        body = {"unit": {"user_id": f"u-{n}"}, "query": {"text": "q"}, "documents": docs}
        status, raw, _, _, _ = core.rerank(orjson.dumps(body), banlist=banlist, now=NOW)
        out = orjson.loads(raw)
        assert status == 200 and out["interleaving"] == {"experiment": "mix"}
        folds = {c["id"]: d["id"] for d in out["documents"] for c in d["collapsed"]}
        assert "b" not in folds, out["documents"]
        collapsed = {r["doc_id"] for r in out["audit"]
                     if r["action"] == "collapse" and r["mode"] == "applied"}
        assert set(folds) <= collapsed, (folds, out["audit"])
        teams |= {d["team"] for d in out["documents"] if d["id"] == "a"}
    assert teams == {"control", "treatment"}  # both ways of serving `a` were seen
