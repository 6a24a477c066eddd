"""End to end: a live `rearrange serve` interleaving two profiles, a simulated user
population clicking on what it served (POST /v1/feedback on the port the path says), and the
results read as a dashboard would, every few impressions.

Users click clean documents far more than spammy ones; the treatment profile demotes spam,
so its team's documents get the clicks and the decision must be `treatment`, never
`control`. Two identical profiles (A/A) must stay `continue` at every read.
"""
from __future__ import annotations

import random
import time
from pathlib import Path

import httpx
import pytest

from app.config.load import load_file
from tests.conftest import ROOT
from tests.redis_server import ServeProcess

PROFILES = """
profiles:
  default:
    trim: [{depth: {k: 10}}]
  same:
    trim: [{depth: {k: 10}}]
  antispam:
    rerank: [{spam_demotion: {theta_low: 0.2, theta_high: 0.6, lambda: 50}}]
    trim: [{depth: {k: 10}}]
"""


def config(tmp_path: Path, treatment: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(PROFILES + f"""experiments:
  - name: spam_v8
    unit: user_id
    interleave: {{control: default, treatment: {treatment}}}
""")
    load_file(path)  # a config the loader refuses fails here, naming the place
    return path


@pytest.fixture
def serve(tmp_path: Path):
    started = []

    def start(treatment: str) -> ServeProcess:
        server = ServeProcess(ROOT, tmp_path, {
            "REARRANGE_CONFIG": str(config(tmp_path, treatment)),
            "REARRANGE_BANLIST_PATH": str(tmp_path / "banlist.jsonl"),
            "REARRANGE_BANLIST_SNAPSHOT_PATH": str(tmp_path / "banlist.snapshot.json")})
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def page(rng: random.Random, user: int) -> tuple[dict, dict[str, float]]:
    """A ranker's page for one user, and each document's spam score (what the users see)."""
    spam = {f"d{i}": rng.choice((0.0, 0.05, 0.1, 0.7, 0.9)) for i in range(20)}
    docs = [{"id": d, "url": f"https://h{i}.example/{user}", "score": 20.0 - i,
             "spam_score": s} for i, (d, s) in enumerate(spam.items())]
    return {"query": {"text": f"q{user % 7}"}, "unit": {"user_id": f"user-{user}"},
            "documents": docs}, spam


def clicks(rng: random.Random, served: list[dict], spam: dict[str, float]) -> list[str]:
    """A cascade user: reads down, clicks a clean document often and a spammy one seldom,
    stops after a click half the time and leaves at each position with probability 0.2."""
    clicked = []
    for doc in served:
        if rng.random() < (0.04 if spam[doc["id"]] >= 0.5 else 0.35):
            clicked.append(doc["id"])
            if rng.random() < 0.5:
                break
        if rng.random() < 0.2:
            break
    return clicked


def feedback(http: httpx.Client, request_id: str, clicked: list[str]) -> httpx.Response:
    """POST /v1/feedback; polled while 404: a path may hand its pages to the store just
    after answering (a real user clicks seconds later)."""
    deadline = time.monotonic() + 5
    while True:
        taken = http.post("/v1/feedback", json={"request_id": request_id, "clicks": clicked})
        if taken.status_code != 404 or time.monotonic() > deadline:
            return taken
        time.sleep(0.01)


def drive(server: ServeProcess, impressions: int, every: int, seed: int) -> list[str]:
    """Serve `impressions` pages to simulated users, send their clicks, read the decision
    every `every` impressions; the decisions read."""
    rng = random.Random(seed)
    decisions = []
    with httpx.Client(base_url=server.base, timeout=30) as http:
        for user in range(impressions):
            body, spam = page(rng, user)
            answer = http.post("/v1/rerank", json=body)
            assert answer.status_code == 200, answer.text
            served = answer.json()
            assert served["interleaving"]["experiment"] == "spam_v8"
            assert all(doc["team"] in ("control", "treatment") for doc in served["documents"])
            taken = feedback(http, served["request_id"],
                             clicks(rng, served["documents"], spam))
            assert taken.status_code == 202, taken.text
            if (user + 1) % every == 0:
                results = http.get("/v1/experiments/spam_v8/results")
                assert results.status_code == 200, results.text
                doc = results.json()
                assert doc["method"] == "team_draft" and doc["impressions"] == user + 1
                decisions.append(doc["decision"])
                if doc["decision"] != "continue" and impressions > 1000:
                    break
    return decisions


def test_a_better_profile_is_decided_for(serve):
    decisions = drive(serve("antispam"), 1500, 10, seed=1)
    assert decisions[-1] == "treatment" and "control" not in decisions


def test_a_a_stays_continue_at_every_read(serve):
    decisions = drive(serve("same"), 400, 5, seed=2)
    assert set(decisions) == {"continue"}
