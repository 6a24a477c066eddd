"""The sanctions service on the embedded stores: feed, bans as banlist entries, appeals."""
from __future__ import annotations

import pytest

from app.banlist.base import EntrySpec
from app.banlist.embedded.store import EmbeddedStore
from app.errors import BanlistError, Interrupted
from app.observability.metrics import Metrics
from app.sanctions.machine import Thresholds
from app.sanctions.service import Sanctions
from app.sanctions.states import FileStates


@pytest.fixture
def world(tmp_path):
    now = [1000.0]
    clock = lambda: now[0]  # noqa: E731
    banlist = EmbeddedStore(tmp_path / "banlist.jsonl", clock=clock)
    quarantine = EmbeddedStore(tmp_path / "quarantine.jsonl", clock=clock)
    states = FileStates(tmp_path / "sanctions.jsonl")
    metrics = Metrics()
    service = Sanctions(states, banlist, quarantine, Thresholds(), metrics, clock=clock)
    return service, banlist, quarantine, metrics, now, tmp_path


def obs(host, score, at):
    return {"host": host, "spam_score": score, "observed_at": at}


def test_ban_and_unban_are_banlist_entries_by_antispam(world):
    service, banlist, quarantine, metrics, now, _ = world
    out = service.feed([obs("Spam.Example", 0.95, 1.0)], actor="pipeline")
    assert out["applied"] == 1 and out["transitions"][0]["to"] == "banned"
    [entry] = banlist.active()
    assert entry.actor == "antispam" and entry.value == "spam.example"
    assert "spam_score 0.95" in entry.reason and "ban > 0.9 until < 0.6" in entry.reason
    service.feed([obs("spam.example", 0.65, 2.0)], actor="pipeline")  # hysteresis: stays
    assert len(banlist.active()) == 1
    service.feed([obs("spam.example", 0.55, 3.0)], actor="pipeline")  # below exit: quarantine
    assert banlist.active() == [] and [e.value for e in quarantine.active()] == ["spam.example"]
    assert [c["op"] for c in banlist.changes_since(0)] == ["add", "remove"]
    service.feed([obs("spam.example", 0.1, 4.0)], actor="pipeline")
    assert quarantine.active() == []
    history = service.describe("spam.example")["history"]
    assert [(h["from"], h["to"]) for h in history] == [
        ("clean", "banned"), ("banned", "quarantine"), ("quarantine", "clean")]
    assert ('rearrange_sanction_transitions_total{from_state="clean",to_state="banned"} 1.0'
            in _text(metrics))


def test_stale_and_bad_items(world):
    service, banlist, _, metrics, _, _ = world
    out = service.feed([obs("a.example", 0.2, 10.0), obs("a.example", 0.99, 5.0),
                        {"domain": "co.uk", "spam_score": 0.99, "observed_at": 11.0},
                        {"host": "b.example", "spam_score": 1.5, "observed_at": 11.0},
                        {"host": "b.example", "domain": "b.example", "spam_score": 0.1,
                         "observed_at": 1.0},
                        {"host": "c.example", "spam_score": 0.1, "observed_at": 1e12},
                        {"host": "c.example", "spam_score": 0.1, "observed_at": 1.0, "x": 1},
                        "nope"], actor="pipeline")
    assert out["applied"] == 1 and out["stale"] == 1
    assert [(r["index"], r["field"]) for r in out["refused"]] == [
        (2, "domain"), (3, "spam_score"), (4, "host"), (5, "observed_at"), (6, "x"), (7, "")]
    assert "public suffix" in out["refused"][0]["problem"]
    assert banlist.active() == []
    assert "rearrange_sanction_stale_observations_total 1.0" in _text(metrics)


def test_appeal_lifts_the_ban_and_pins_clean(world):
    service, banlist, _, _, now, _ = world
    service.feed([obs("shop.example", 0.97, 1.0)], actor="pipeline")
    assert len(banlist.active()) == 1
    state = service.appeal("shop.example", "appeals-team", "verified merchant", 3600)
    assert state["state"] == "clean" and state["pinned"] is True
    assert banlist.changes_since(1)[0]["actor"] == "appeals-team"
    assert "verified merchant" in banlist.changes_since(1)[0]["reason"]
    service.feed([obs("shop.example", 0.99, 2.0)], actor="pipeline")
    assert banlist.active() == []  # pinned: later scores cannot re-ban
    now[0] += 3601
    service.feed([obs("shop.example", 0.99, 3.0)], actor="pipeline")
    assert len(banlist.active()) == 1  # the pin ended
    with pytest.raises(BanlistError, match="reason"):
        service.appeal("shop.example", "appeals-team", " ", None)
    forever = service.appeal("shop.example", "appeals-team", "court ruling", permanent=True)
    assert forever["pinned_forever"] is True


def test_state_survives_restart_and_reconciles_a_lost_entry(world):
    service, banlist, quarantine, metrics, now, tmp = world
    service.feed([obs("x.example", 0.95, 1.0)], actor="pipeline")
    entry_id = service.describe("x.example")["ban_entry_id"]
    banlist.remove(entry_id, "tns", "removed by hand")  # a T&S edit behind the machine's back
    again = Sanctions(FileStates(tmp / "sanctions.jsonl"), banlist, quarantine, Thresholds(),
                      metrics, clock=lambda: now[0])
    assert again.describe("x.example")["state"] == "banned"
    again.feed([obs("x.example", 0.96, 2.0)], actor="pipeline")
    assert [e.value for e in banlist.active()] == ["x.example"]  # the ban is back in line
    assert again.counts() == {"clean": 0, "quarantine": 0, "banned": 1}


def _text(metrics):
    from prometheus_client import generate_latest
    return generate_latest(metrics.registry).decode()


def test_an_appeal_lifts_every_sanction_entry_of_the_host(world):
    # A racing replica's identical add finds the sanction's entry (adds are idempotent); a
    # T&S ban of its own (here regional) is another entry, which the appeal leaves alone.
    service, banlist, _, _, _, _ = world
    service.feed([obs("dup.example", 0.95, 1.0)], actor="pipeline")
    first = banlist.active()[0]
    assert banlist.add(EntrySpec("host", "dup.example", "racing replica"), "antispam") == first
    banlist.add(EntrySpec("host", "dup.example", "a T&S ban of its own", ("DE",)), "tns")
    assert len(banlist.active()) == 2
    service.appeal("dup.example", "appeals", "false positive", None)
    assert [e.actor for e in banlist.active()] == ["tns"]  # only the human's own ban stays



def test_a_store_failing_partway_stops_the_batch_and_says_what_was_committed(world):
    """A banlist that refuses writes (read-only here) after a state was written: that item
    is `pending`, the ones after it `not_applied`, the ones before it applied whole."""
    service, banlist, quarantine, metrics, now, tmp = world
    frozen = EmbeddedStore(tmp / "frozen.jsonl", read_only=True, clock=lambda: now[0])
    service = Sanctions(service.states, frozen, quarantine, Thresholds(), metrics,
                        clock=lambda: now[0])
    batch = [obs("a.example", 0.1, 1.0), "nope", obs("b.example", 0.75, 1.0),
             obs("c.example", 0.95, 1.0), obs("d.example", 0.1, 1.0)]
    with pytest.raises(Interrupted) as caught:
        service.feed(batch, actor="pipeline")
    out = caught.value.result
    assert (out["applied"], out["pending"], out["not_applied"]) == (2, [3], [4])
    assert [r["index"] for r in out["refused"]] == [1]
    assert [t["key"] for t in out["transitions"]] == ["b.example", "c.example"]
    assert "stopped at observation 3" in caught.value.problem
    assert "nothing was changed" not in caught.value.problem
    assert [e.value for e in quarantine.active()] == ["b.example"]  # before it: whole
    assert service.describe("c.example")["state"] == "banned"  # its state, not its ban
    assert service.describe("d.example")["observed_at"] is None  # after it: nothing


def test_an_appeal_whose_entries_cannot_be_lifted_says_the_host_is_cleared(world):
    service, banlist, quarantine, metrics, now, tmp = world
    service.feed([obs("shop.example", 0.97, 1.0)], actor="pipeline")
    banlist.close()
    frozen = EmbeddedStore(tmp / "banlist.jsonl", read_only=True, clock=lambda: now[0])
    service = Sanctions(service.states, frozen, quarantine, Thresholds(), metrics,
                        clock=lambda: now[0])
    with pytest.raises(Interrupted) as caught:
        service.appeal("shop.example", "appeals-team", "verified merchant", None)
    assert "shop.example is cleared and pinned" in caught.value.problem
    assert caught.value.result == {"key": "shop.example", "cleared": True}
    assert service.describe("shop.example")["state"] == "clean"
    assert [e.value for e in frozen.active()] == ["shop.example"]  # the ban is still there
