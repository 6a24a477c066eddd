"""Appeals that cannot be fat-fingered (issue 49): a host never observed is cleared only
when forced, immunity ends after 90 days unless permanent, and a pinned host that scores
high is reported (the feed's answer, a counter, a log line) instead of silently ignored."""
from __future__ import annotations

import logging

import pytest
from prometheus_client import generate_latest

from app.banlist.embedded.store import EmbeddedStore
from app.errors import BanlistError, Conflict
from app.observability.metrics import Metrics
from app.sanctions.machine import Thresholds
from app.sanctions.service import Sanctions
from app.sanctions.states import FileStates

DAY = 86400.0
START = 1_800_000_000.0  # 2027-01-15T08:00:00Z


@pytest.fixture
def world(tmp_path):
    now = [START]
    clock = lambda: now[0]  # noqa: E731
    banlist = EmbeddedStore(tmp_path / "banlist.jsonl", clock=clock)
    quarantine = EmbeddedStore(tmp_path / "quarantine.jsonl", clock=clock)
    metrics = Metrics()
    service = Sanctions(FileStates(tmp_path / "sanctions.jsonl"), banlist, quarantine,
                        Thresholds(), metrics, clock=clock)
    return service, banlist, metrics, now


def feed(service, host, score, at):
    return service.feed([{"host": host, "spam_score": score, "observed_at": at}], "pipeline")


def test_clearing_a_host_never_observed_is_refused_unless_forced(world):
    service, banlist, _, _ = world
    with pytest.raises(Conflict) as refused:
        service.appeal("never-seen.example", "tns", "appeal granted")
    assert refused.value.field == "host"
    assert "never-seen.example has no observation" in refused.value.problem
    assert "--force" in refused.value.problem and "pins it clean until 2027-04-15" in (
        refused.value.problem)  # what forcing does, and for how long
    assert service.describe("never-seen.example")["history"] == []  # nothing recorded
    forced = service.appeal("never-seen.example", "tns", "pre-emptive", force=True)
    assert forced["state"] == "clean" and forced["pinned"] is True
    assert [h["actor"] for h in forced["history"]] == ["tns"]
    again = service.appeal("never-seen.example", "tns", "for good", permanent=True)
    assert again["pinned_forever"]  # its history now holds an appeal: no typo to catch


def test_an_observed_host_needs_no_force(world):
    service, _, _, _ = world
    feed(service, "seen.example", 0.1, START - 10)  # observed, clean: clearing it is meant
    assert service.appeal("seen.example", "tns", "pin it")["pinned"] is True


def test_immunity_lasts_90_days_by_default_then_the_host_is_scored_again(world):
    service, banlist, _, now = world
    feed(service, "shop.example", 0.97, START - 10)
    cleared = service.appeal("shop.example", "tns", "verified merchant")
    assert cleared["pinned_until"] == START + 90 * DAY and not cleared["pinned_forever"]
    assert "(pinned clean until 2027-04-15T08:00:00.000Z)" in cleared["history"][-1]["reason"]
    now[0] = START + 90 * DAY - 1
    feed(service, "shop.example", 0.99, now[0])
    assert banlist.active() == []  # still immune
    now[0] = START + 90 * DAY
    out = feed(service, "shop.example", 0.99, now[0])
    assert out["suppressed"] == [] and out["transitions"][0]["to"] == "banned"
    assert [e.value for e in banlist.active()] == ["shop.example"]
    assert service.describe("shop.example")["pinned"] is False


def test_a_permanent_appeal_keeps_its_immunity(world):
    service, banlist, _, now = world
    feed(service, "court.example", 0.97, START - 10)
    forever = service.appeal("court.example", "legal", "court ruling", permanent=True)
    assert forever["pinned_forever"] and forever["pinned_until"] is None
    now[0] += 10 * 365 * DAY
    feed(service, "court.example", 0.99, now[0])
    assert banlist.active() == []
    with pytest.raises(BanlistError) as both:
        service.appeal("court.example", "legal", "r", pin_seconds=60, permanent=True)
    assert both.value.field == "permanent"


def test_the_service_s_immunity_is_a_setting(world, tmp_path):
    service, banlist, metrics, now = world
    short = Sanctions(service.states, banlist, service.quarantine, Thresholds(), metrics,
                      clock=lambda: now[0], appeal_pin_seconds=7 * DAY)
    feed(short, "week.example", 0.8, START - 10)
    assert short.appeal("week.example", "tns", "r")["pinned_until"] == START + 7 * DAY


def test_a_pinned_host_scoring_high_is_suppressed_visibly(world, caplog):
    service, banlist, metrics, now = world
    feed(service, "shop.example", 0.97, START - 10)
    service.appeal("shop.example", "appeals-team", "verified merchant")
    now[0] += 3600
    with caplog.at_level(logging.WARNING, "app.sanctions.service"):
        out = service.feed([{"host": "ok.example", "spam_score": 0.1, "observed_at": now[0]},
                            {"host": "shop.example", "spam_score": 0.99, "observed_at": now[0]},
                            {"host": "shop.example", "spam_score": 0.75,
                             "observed_at": now[0] + 1},
                            {"host": "shop.example", "spam_score": 0.2,
                             "observed_at": now[0] + 2}], "pipeline")
    assert out["applied"] == 4 and out["transitions"] == [] and banlist.active() == []
    first, second = out["suppressed"]  # the clean score is no suppression
    assert first == {
        "index": 1, "key": "shop.example", "spam_score": 0.99, "would_be": "banned",
        "pinned_until": START + 90 * DAY, "pinned_forever": False,
        "until": "2027-04-15T08:00:00.000Z",
        "why": "pinned clean until 2027-04-15T08:00:00.000Z by appeals-team's appeal at "
               "2027-01-15T08:00:00.000Z: spam_score 0.99 would make it banned"}
    assert (second["index"], second["would_be"]) == (2, "quarantine")
    text = generate_latest(metrics.registry).decode()
    assert 'rearrange_sanction_suppressed_observations_total{would_be="banned"} 1.0' in text
    assert 'rearrange_sanction_suppressed_observations_total{would_be="quarantine"} 1.0' in text
    assert "shop.example is pinned clean" in caplog.text  # the host, which no label carries
    assert service.describe("shop.example")["suppressed"] is None  # its last score is 0.2
    feed(service, "shop.example", 0.95, now[0] + 3)
    assert service.describe("shop.example")["suppressed"]["would_be"] == "banned"


def test_a_permanent_pin_is_suppressed_until_null(world):
    service, _, _, now = world
    feed(service, "court.example", 0.97, START - 10)
    service.appeal("court.example", "legal", "court ruling", permanent=True)
    [held] = feed(service, "court.example", 0.99, now[0])["suppressed"]
    assert (held["until"], held["pinned_forever"]) == (None, True)
    assert held["why"].startswith("pinned clean permanently by legal's appeal")


def test_reasons_carry_iso_times_and_a_time_no_calendar_holds_does_not_fail(world):
    service, _, _, _ = world
    out = feed(service, "a.example", 0.95, START - 10)
    assert "spam_score 0.95 at 2027-01-15T07:59:50.000Z: clean -> banned" in (
        out["transitions"][0]["reason"])
    out = feed(service, "b.example", 0.95, -1e15)  # finite, valid, long before any calendar
    assert "at -1000000000000000 (epoch seconds)" in out["transitions"][0]["reason"]
    refused = feed(service, "c.example", 0.1, 1e15)["refused"][0]
    assert refused["field"] == "observed_at" and "in the future" in refused["problem"]
