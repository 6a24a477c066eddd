"""A host's sanctions inherited from its parent domains (issue 49): `www.yellow.example` is
demoted while `yellow.example` is quarantined as a domain, so its state must say so rather
than "clean, no score yet"."""
from __future__ import annotations

import pytest

from app.banlist.base import EntrySpec
from app.banlist.embedded.store import EmbeddedStore
from app.observability.metrics import Metrics
from app.sanctions.machine import Thresholds
from app.sanctions.service import Sanctions
from app.sanctions.states import FileStates


@pytest.fixture
def service(tmp_path):
    banlist = EmbeddedStore(tmp_path / "banlist.jsonl")
    quarantine = EmbeddedStore(tmp_path / "quarantine.jsonl")
    return Sanctions(FileStates(None), banlist, quarantine, Thresholds(), Metrics())


def feed(service, scope, key, score):
    out = service.feed([{scope: key, "spam_score": score, "observed_at": 1.0}], "pipeline")
    assert out["applied"] == 1, out


def test_a_domain_quarantine_of_the_parent_is_inherited(service):
    feed(service, "domain", "yellow.example", 0.75)
    got = service.describe("www.yellow.example")
    assert (got["state"], got["score"]) == ("clean", None)  # its own state
    [parent] = got["parents"]
    assert parent == {"key": "yellow.example", "scope": "domain", "state": "quarantine",
                      "score": 0.75, "observed_at": 1.0, "covers_subdomains": True}
    [entry] = got["inherited"]
    assert (entry["sanction"], entry["via"], entry["scope"], entry["actor"]) == (
        "quarantine", "yellow.example", "domain", "antispam")
    assert "yellow.example" in entry["matched_by"]
    assert service.describe("a.b.yellow.example")["inherited"][0]["via"] == "yellow.example"
    own = service.describe("yellow.example")
    assert own["state"] == "quarantine" and own["inherited"] == []  # its own, not inherited


def test_a_parent_scored_as_a_host_is_shown_but_not_inherited(service):
    feed(service, "host", "yellow.example", 0.95)
    got = service.describe("www.yellow.example")
    assert [(p["key"], p["state"], p["covers_subdomains"]) for p in got["parents"]] == [
        ("yellow.example", "banned", False)]
    assert got["inherited"] == []  # a host ban covers that host alone


def test_a_domain_ban_by_t_and_s_is_inherited_too(service):
    service.banlist.add(EntrySpec("domain", "yellow.example", "court order"), "legal")
    service.banlist.add(EntrySpec("url", "www.yellow.example/", "one page"), "legal")
    got = service.describe("www.yellow.example")
    assert got["parents"] == []  # no sanction: a human's ban
    assert [(e["sanction"], e["via"], e["actor"], e["reason"]) for e in got["inherited"]] == [
        ("banned", "yellow.example", "legal", "court order")]  # not the URL's own entry


def test_a_clean_host_with_clean_parents_inherits_nothing(service):
    feed(service, "domain", "yellow.example", 0.1)
    got = service.describe("www.yellow.example")
    assert (got["parents"], got["inherited"], got["suppressed"]) == ([], [], None)
