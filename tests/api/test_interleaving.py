"""Interleaved experiments through POST /v1/rerank, on both request paths: the merged page
against the team-draft algorithm written out in tests/interleaving.py (with the coins of
its documented key), what is not taken over, the filters of both arms on the merged page,
the impressions handed on, and the exposures in the audit line and the metrics."""
from __future__ import annotations

import json
from collections.abc import Iterator

import mmh3
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.experiments.bucketing import bucket
from app.main import create_app
from tests.conftest import AUTH
from tests.interleaving import coins, team_draft

CONFIG = """
profiles:
  default:
    pre-filter: [spam_ban, safe_search]
    rerank: [spam_demotion]
    trim: [{depth: {k: 6}}]
    post-filter: [safe_search, empty_result_fallback]
  v8:
    extends: default
    rerank: [{spam_demotion: {theta_low: 0.0, lambda: 8}}, sandbox_damping]
  loose:
    extends: default
    pre-filter: [spam_ban]
    post-filter: []
  commercial:
    extends: default
routing: {commercial: commercial}
experiments:
  - name: spam_v8
    unit: user_id
    layer: ranking
    slots: [0, 50]
    interleave: {control: default, treatment: v8}
  - name: loose_test
    unit: user_id
    layer: ranking
    slots: [50, 100]
    salt: s1
    interleave: {control: default, treatment: loose}
"""
QUERY = "купить диван"
FORCE = "X-Rearrange-Force-Variant"


def users(in_spam_v8: bool) -> Iterator[str]:
    """User ids the layer's hash puts in spam_v8's slots (or in loose_test's)."""
    for i in range(100_000):
        u = f"user-{i}"
        if (bucket("ranking", u) < 5000) == in_spam_v8:
            yield u


def page(user_id: str | None, request_id: str = "r-1", **extra: object) -> dict:
    docs = []
    for i in range(9):
        docs.append({"id": f"d{i}", "url": f"https://site{i}.example/p", "score": 20.0 - i,
                     "spam_score": (i * 0.37) % 0.9, "domain_age_days": 30 * (i % 5)})
    docs[3]["adult_score"] = 0.9  # removed by safe search in `default`, kept by `loose`
    body: dict = {"request_id": request_id, "query": {"text": QUERY}, "documents": docs,
                  **extra}
    if user_id is not None:
        body["unit"] = {"user_id": user_id}
    return body


@pytest.fixture
def app_client(settings):
    settings.config.write_text(CONFIG)
    with TestClient(create_app(settings)) as c:
        yield c


def ids(answer: dict) -> list[str]:
    return [d["id"] for d in answer["documents"]]


def arm(client: TestClient, user: str, profile: str) -> list[str]:
    """The page `profile` serves alone (a named profile is never taken over)."""
    answer = client.post("/v1/rerank", json=page(user, profile=profile)).json()
    assert "interleaving" not in answer
    return ids(answer)


def test_the_merged_page_is_the_team_draft_of_both_profiles(app_client):
    merges = set()
    for user in list(zip(range(6), users(True), strict=False)):
        u = user[1]
        control, treatment = arm(app_client, u, "default"), arm(app_client, u, "v8")
        assert control != treatment  # the arms differ, or the test shows nothing
        r = app_client.post("/v1/rerank", json=page(u))
        answer = r.json()
        assert answer["profile"] == "default"
        assert answer["interleaving"] == {"experiment": "spam_v8"}
        assert answer["experiments"] == [{"experiment": "spam_v8", "variant": "interleaved",
                                          "bucket": bucket("spam_v8", u), "layer": "ranking",
                                          "salt": None}]
        served = [(d["id"], d["team"]) for d in answer["documents"]]
        assert served == team_draft(control, treatment, coins("spam_v8", "", u, QUERY))
        merges.add(tuple(served))
        for d in answer["documents"]:  # a document's score is its team's
            scored = app_client.post("/v1/rerank", json=page(
                u, profile="default" if d["team"] == "control" else "v8")).json()
            assert d["score"] == next(x["score"] for x in scored["documents"]
                                      if x["id"] == d["id"])
        assert app_client.post("/v1/rerank", json=page(u)).content == r.content  # the same
    assert len(merges) > 1  # the coins differ between units


def test_a_named_profile_or_another_route_is_not_taken_over(app_client):
    u = next(users(True))
    for body in (page(u, profile="default"), page(u, query={"text": QUERY,
                                                              "classes": ["commercial"]})):
        answer = app_client.post("/v1/rerank", json=body).json()
        assert "interleaving" not in answer
        assert answer["experiments"] == []
        assert all("team" not in d for d in answer["documents"])
    assert app_client.app.state.services.impressions.counts("spam_v8") is None


def test_variants_take_a_share_of_the_units_into_the_interleaving(settings):
    # CONTRACT.md: "bucketed as above; no `variants` means every bucket". With
    # `{interleaved: 20}` the units of buckets 0 to 1999 (mmh3 of "spam_v8:<unit>") are
    # interleaved and the rest are served the routed profile alone, in no experiment.
    settings.config.write_text(CONFIG.split("experiments:")[0] + (
        "experiments:\n  - {name: spam_v8, unit: user_id, variants: {interleaved: 20}, "
        "interleave: {control: default, treatment: v8}}\n"))
    seen = {True: 0, False: 0}
    with TestClient(create_app(settings)) as client:
        for i in range(60):
            u = f"user-{i}"
            inside = mmh3.hash(f"spam_v8:{u}", 1, signed=False) * 10_000 >> 32 < 2_000
            answer = client.post("/v1/rerank", json=page(u, request_id=f"r-{i}")).json()
            assert ("interleaving" in answer) == inside, (u, answer.get("experiments"))
            assert [e["variant"] for e in answer["experiments"]] == (
                ["interleaved"] if inside else [])
            seen[inside] += 1
    assert seen[True] and seen[False]


def test_filters_of_either_arm_hold_on_the_merged_page(app_client):
    u = next(users(False))
    loose = arm(app_client, u, "loose")
    assert "d3" in loose  # the treatment alone would show the adult document
    control = arm(app_client, u, "default")
    answer = app_client.post("/v1/rerank", json=page(u)).json()
    assert answer["interleaving"] == {"experiment": "loose_test"}
    filtered = [d for d in loose if d != "d3"]
    assert [(d["id"], d["team"]) for d in answer["documents"]] == team_draft(
        control, filtered, coins("loose_test", "s1", u, QUERY))
    assert "d3" in [r["id"] for r in answer["removed"] if r["rule"] == "safe_search"]
    # every document the request had is on the page, or its absence is explained
    explained = {r["id"] for r in answer["removed"]} | {
        c["id"] for d in answer["documents"] for c in d["collapsed"]}
    assert set(ids(answer)) | explained == {f"d{i}" for i in range(9)}
    assert not set(ids(answer)) & explained


def test_each_interleaved_page_is_handed_on_as_an_impression(app_client):
    impressions = app_client.app.state.services.impressions
    u = next(users(True))
    answer = app_client.post("/v1/rerank", json=page(u, request_id="seen")).json()
    kept = impressions.pages.get("seen")
    assert kept is not None
    impression = kept.impression
    assert (impression.request_id, impression.experiment, impression.unit) == (
        "seen", "spam_v8", u)
    assert impression.teams == tuple((d["id"], d["team"]) for d in answer["documents"])
    assert impression.at > 1.7e9  # epoch seconds
    # QA traffic is served interleaved but not handed on
    forced = app_client.post("/v1/rerank", json=page("qa-user", request_id="qa"),
                             headers={FORCE: "spam_v8=interleaved", **AUTH}).json()
    assert forced["interleaving"] == {"experiment": "spam_v8"}
    assert forced["experiments"][0]["forced"] is True
    assert impressions.pages.get("qa") is None
    assert impressions.counts("spam_v8").impressions == 1


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_interleaved_exposures_in_the_audit_line_and_metrics(settings):
    settings.config.write_text(CONFIG)
    u = next(users(True))
    with TestClient(create_app(settings)) as c:
        c.post("/v1/rerank", json=page(u, request_id="merged"))
        # one document: both arms serve the same page, so the merge changes nothing
        c.post("/v1/rerank", json={**page(u, request_id="same"),
                                   "documents": page(u)["documents"][:1]})
        m = samples(c.get("/metrics").text)
    name = "rearrange_experiment_exposures_total"
    for triggered in ("true", "false"):
        assert m[(name, frozenset({"experiment": "spam_v8", "variant": "interleaved",
                                   "triggered": triggered}.items()))] == 1
    with open(settings.audit_log, encoding="utf-8") as fh:
        lines = {x["request_id"]: x for x in map(json.loads, fh)}
    merged = lines["merged"]
    assert merged["exposures"] == [{
        "unit": u, "experiment": "spam_v8", "variant": "interleaved", "triggered": True,
        "request_id": "merged", "time": merged["ts"]}]
    assert merged["interleaving"] == {"experiment": "spam_v8"}
    assert lines["same"]["exposures"][0]["triggered"] is False


CROSSED = """
profiles:
  default:
    pre-filter: [safe_search]
  spam_only:
    pre-filter: [spam_ban]
experiments:
  - name: crossed
    unit: user_id
    interleave: {control: default, treatment: spam_only}
"""


def test_arms_whose_filters_leave_nothing_to_merge_serve_the_control_page(settings):
    """Each arm removes what the other serves: the merged page would be empty, with no
    fallback (CONTRACT: an empty page only for a request with no documents), so the
    control page is served alone, as to a unit outside the experiment."""
    settings.config.write_text(CROSSED)
    body = {"query": {"text": QUERY}, "unit": {"user_id": "u-1"}, "documents": [
        {"id": "adult", "url": "https://a.example/", "score": 2.0, "adult_score": 0.99},
        {"id": "spam", "url": "https://s.example/", "score": 1.0, "spam_score": 0.99}]}
    with TestClient(create_app(settings)) as c:
        control = c.post("/v1/rerank", json={**body, "profile": "default"}).json()
        treatment = c.post("/v1/rerank", json={**body, "profile": "spam_only"}).json()
        assert ids(control) == ["spam"] and ids(treatment) == ["adult"]
        answer = c.post("/v1/rerank", json=body).json()
        impressions = c.app.state.services.impressions.counts("crossed")
    assert ids(answer) == ["spam"] and "interleaving" not in answer
    assert all("team" not in d for d in answer["documents"])
    assert impressions is None  # nothing interleaved was served, so nothing to credit
