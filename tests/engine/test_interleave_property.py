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
    assert set(shown) | set(folded) | set(removed) == {d["id"] for d in body["documents"]}
    assert not set(shown) & set(removed)
