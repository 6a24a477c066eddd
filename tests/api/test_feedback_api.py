"""`POST /v1/feedback` and `GET /v1/experiments/{name}/results` through the HTTP API, on
both ports (the feedback runs on both request paths, tests/paths.py), embedded and with two
Redis-backed replicas; the pages are recorded through the store's `record`, as the
request paths hand them over."""
from __future__ import annotations

import json
import time

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from app.experiments.impressions import Impression
from app.experiments.results import exposure_counts
from app.experiments.sequential import read
from app.main import create_app
from tests.conftest import app_on
from tests.paths import Listener

FEEDBACK = "/v1/feedback"


def page(rid: str, teams: str, experiment: str = "spam_v8") -> Impression:
    """An impression served now, documents d0, d1, … on the teams `teams` spells (c/t)."""
    return Impression(rid, experiment, "u-" + rid, time.time(),
                      tuple((f"d{i}", "control" if t == "c" else "treatment")
                            for i, t in enumerate(teams)))


def record(client: TestClient, *impressions: Impression) -> None:
    store = client.app.state.services.impressions
    store.record(list(impressions))
    flush = getattr(store, "flush", None)
    if flush is not None:
        flush()


def test_feedback_is_taken_and_replaced(client):
    record(client, page("r1", "tctc"))
    answer = client.post(FEEDBACK, json={"request_id": "r1", "clicks": ["d0", "d2"]})
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"request_id": "r1", "experiment": "spam_v8",
                             "outcome": "treatment", "replaced": None}
    answer = client.post(FEEDBACK, json={"request_id": "r1", "clicks": ["d1"],
                                         "skips": ["d0"]})
    assert answer.status_code == 202
    assert answer.json()["outcome"] == "control" and answer.json()["replaced"] == "treatment"


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"request_id": "nope", "clicks": ["d0"]}, 404, "request_id"),
    ({"clicks": ["d0"]}, 422, "request_id"),
    ({"request_id": "", "clicks": []}, 422, "request_id"),
    ({"request_id": 7, "clicks": []}, 422, "request_id"),
    ({"request_id": "r1"}, 422, "clicks"),
    ({"request_id": "r1", "clicks": "d0"}, 422, "clicks"),
    ({"request_id": "r1", "clicks": ["d0", 3]}, 422, "clicks[1]"),
    ({"request_id": "r1", "clicks": ["d0", "d9"]}, 422, "clicks[1]"),
    ({"request_id": "r1", "clicks": ["d0"], "skips": ["d0"]}, 422, "skips[0]"),
    ({"request_id": "r1", "clicks": ["d0"], "skips": None}, 422, "skips"),
    ({"request_id": "r1", "clicks": ["d0"], "click": []}, 422, "click"),
    ({"request_id": "r1", "clicks": ["d0"] * 1001}, 422, "clicks"),
    ([1, 2], 422, "body"),
    ({"request_id": "\ud800", "clicks": []}, 422, "request_id"),  # a lone surrogate
    ({"request_id": "r1", "clicks": ["d0", "\udc00"]}, 422, "clicks[1]"),
])
def test_bad_feedback_is_refused_naming_the_field(client, body, status, field):
    record(client, page("r1", "tc"))
    # json.dumps escapes every non-ASCII character, lone surrogates included (\ud800)
    answer = client.post(FEEDBACK, content=json.dumps(body),
                         headers={"content-type": "application/json"})
    assert answer.status_code == status, answer.text
    assert answer.json()["field"] == field and answer.json()["error"] == "invalid_request"


@pytest.mark.parametrize(("raw", "field"), [
    (b'{"request_id": "r1", "clicks": [], "clicks": ["d0"]}', "clicks"),
    (b'{"request_id": "r1", "clicks": [', "body"), (b"\xff\xfe", "body"),
    # an integer past Python's 4,300-digit limit for int()
    (b'{"request_id": "r1", "clicks": [], "n": ' + b"1" * 5000 + b"}", "body")])
def test_a_body_that_is_not_json_or_repeats_a_key_is_a_400(client, raw, field):
    record(client, page("r1", "tc"))
    answer = client.post(FEEDBACK, content=raw, headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert answer.json()["field"] == field


BODIES = [
    b'{"request_id": "r1", "clicks": ["d0"]}', b'{"request_id": "r1", "clicks": ["d1"]}',
    b'{"request_id": "r1", "clicks": []}', b'{"request_id": "r2", "clicks": ["d0"]}',
    b'{"request_id": "r1", "clicks": ["d9"]}', b'{"request_id": "r1"}', b"[]", b"{",
    b'{"request_id": "r1", "clicks": ["d0"], "clicks": []}',
    '{"request_id": "r1", "clicks": ["d0", "é"]}'.encode(), b"",
    b'{"request_id": "r1", "clicks": ["d0"], "x": 1}',
]


@pytest.mark.python_path("compares the two ports itself, on one app")
def test_both_ports_answer_byte_for_byte_alike(settings):
    small = settings.model_copy(update={"max_body_bytes": 1024})
    with TestClient(create_app(small)) as client:
        listener = Listener(client.app)
        try:
            for body in [*BODIES, b'{"request_id": "r1", "clicks": ["' + b"x" * 2000 + b'"]}']:
                record(client, page("r1", "tc"))  # each body meets the same page, afresh
                here = client.post(FEEDBACK, content=body,
                                   headers={"content-type": "application/json"})
                record(client, page("r1", "tc"))
                there = listener.request("POST", FEEDBACK, content=body,
                                         headers={"content-type": "application/json"})
                assert (there.status_code, there.content) == (here.status_code, here.content)
                assert there.headers["content-type"] == "application/json"
            wrong = listener.request("GET", FEEDBACK)
            assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
            counts = {(s.labels["route"], s.labels["code"]): s.value
                      for f in text_string_to_metric_families(client.get("/metrics").text)
                      if f.name == "rearrange_http_responses" for s in f.samples}
            assert counts[(FEEDBACK, "202")] == 2 * 3  # three 202s a port
        finally:
            listener.stop()


def results(client: TestClient, name: str = "spam_v8") -> dict:
    answer = client.get(f"/v1/experiments/{name}/results")
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_results_read_the_tallies_with_the_test(client):
    outcomes = ["d0"] * 45 + ["d1"] * 10 + [None] * 5  # d0 treatment, d1 control
    record(client, *(page(f"r{i}", "tc") for i in range(len(outcomes) + 2)))
    record(client, page("tie", "tctc"))
    for i, clicked in enumerate(outcomes):
        body = {"request_id": f"r{i}", "clicks": [] if clicked is None else [clicked]}
        assert client.post(FEEDBACK, json=body).status_code == 202
    client.post(FEEDBACK, json={"request_id": "tie", "clicks": ["d0", "d1"]})
    doc = results(client)
    expected = read(45, 10)
    assert doc["experiment"] == "spam_v8" and doc["method"] == "team_draft"
    assert doc["impressions"] == len(outcomes) + 3
    assert doc["wins"] == {"control": 10, "treatment": 45} and doc["ties"] == 1
    assert doc["decision"] == expected.decision == "treatment"
    assert doc["confidence_sequence"] == list(expected.interval)
    assert doc["preference"] == pytest.approx(45 / 55)
    assert doc["without_clicks"] == len(outcomes) + 3 - 56
    assert doc["scope"] == "replica" and doc["in_config"] is False
    families = {f.name: f for f in text_string_to_metric_families(client.get("/metrics").text)}
    outcomes_by = {s.labels["outcome"]: s.value
                   for s in families["rearrange_interleaving_outcomes"].samples
                   if s.labels.get("experiment") == "spam_v8"}
    assert outcomes_by == {"treatment": 45, "control": 10, "tie": 1}
    impressions = [s.value for s in families["rearrange_interleaving_impressions"].samples
                   if s.labels.get("experiment") == "spam_v8"]
    assert impressions == [len(outcomes) + 3]


def test_results_of_an_unknown_experiment_are_a_404(client):
    answer = client.get("/v1/experiments/nope/results")
    assert answer.status_code == 404 and answer.json()["field"] == "name"


def test_an_ab_experiment_gives_its_exposures_per_variant(client):
    """config/rules.yaml's antispam_v7 gates spam_demotion: a page with a spammy document
    is one the rule changes (treatment) or would have (control, in shadow), a clean page is
    not. The results count what the answers themselves say: each one's variant, and
    whether spam_demotion left a record in its audit."""
    want = {"control": {"exposures": 0.0, "triggered": 0.0},
            "treatment": {"exposures": 0.0, "triggered": 0.0}}
    for n in range(40):
        spam = 0.9 if n % 3 == 0 else 0.0
        answer = client.post("/v1/rerank", json={
            "query": {"text": "shoes"}, "unit": {"user_id": f"u{n}"},
            "documents": [{"id": "a", "url": "https://a.example/", "score": 3.0,
                           "spam_score": spam},
                          {"id": "b", "url": "https://b.example/", "score": 2.0}]}).json()
        [assignment] = answer["experiments"]
        counted = want[assignment["variant"]]
        counted["exposures"] += 1
        counted["triggered"] += any(r["rule"] == "spam_demotion" for r in answer["audit"])
    assert all(v["triggered"] for v in want.values())  # both arms saw both kinds of page
    assert all(v["exposures"] > v["triggered"] for v in want.values())
    doc = results(client, "antispam_v7")
    assert doc["method"] == "ab" and doc["in_config"] is True
    assert doc["variants"] == want


def test_exposures_are_read_from_the_counter_by_its_name():
    registry = CollectorRegistry()
    counter = Counter("rearrange_experiment_exposures_total", "test",
                      ["experiment", "variant", "triggered"], registry=registry)
    counter.labels("antispam_v7", "control", "true").inc(3)
    counter.labels("antispam_v7", "control", "false").inc(4)
    counter.labels("antispam_v7", "treatment", "true").inc(5)
    counts = exposure_counts(registry.collect())
    assert counts == {("antispam_v7", "control", True): 3.0,
                      ("antispam_v7", "control", False): 4.0,
                      ("antispam_v7", "treatment", True): 5.0}
    from app.experiments.results import ab

    assert ab("antispam_v7", ["control", "treatment"], counts)["variants"] == {
        "control": {"exposures": 7.0, "triggered": 3.0},
        "treatment": {"exposures": 5.0, "triggered": 5.0}}


@pytest.mark.redis
def test_two_replicas_share_pages_outcomes_and_tallies(redis_server, settings):
    with app_on(redis_server, settings, "a") as a, app_on(redis_server, settings, "b") as b:
        record(a, page("r1", "tctc"), page("r2", "tctc"))
        assert b.post(FEEDBACK, json={"request_id": "r1", "clicks": ["d0"]}).status_code == 202
        answer = a.post(FEEDBACK, json={"request_id": "r1", "clicks": ["d1"]})
        assert answer.json()["replaced"] == "treatment"
        b.post(FEEDBACK, json={"request_id": "r2", "clicks": ["d2"]})
        for client in (a, b):
            doc = results(client)
            assert doc["scope"] == "fleet" and doc["impressions"] == 2
            assert doc["wins"] == {"control": 1, "treatment": 1}
        redis_server.kill()
        answer = b.post(FEEDBACK, json={"request_id": "r2", "clicks": ["d0"]})
        assert answer.status_code == 503 and answer.json()["field"] == "redis"
        assert b.get("/v1/experiments/spam_v8/results").status_code == 503  # tallies there
        assert results(b, "antispam_v7")["method"] == "ab"  # this replica's own counts
        errors = {s.labels["op"]: s.value
                  for f in text_string_to_metric_families(b.get("/metrics").text)
                  if f.name == "rearrange_banlist_redis_errors" for s in f.samples}
        assert errors["feedback"] >= 2
