"""The impression store, embedded and in Redis: attribution, one outcome per page, the window
and the cap, a second replica finding the page, a lost Redis."""
from __future__ import annotations

import threading
import time

import pytest
import redis

from app.banlist.redis.client import connect
from app.errors import FieldError, NotFound
from app.experiments.attribution import attribute
from app.experiments.feedback import MemoryImpressions, page_bytes
from app.experiments.feedback_redis import RedisImpressions
from app.experiments.impressions import Impression


class Events:
    """What a store reported (a FeedbackEvents of the test's)."""

    def __init__(self) -> None:
        self.recorded: dict[str, int] = {}
        self.outcomes: list[tuple[str, str]] = []
        self.dropped: dict[str, int] = {}
        self.errors: list[str] = []

    def impressions_recorded(self, experiment: str, count: int) -> None:
        self.recorded[experiment] = self.recorded.get(experiment, 0) + count

    def outcome_recorded(self, experiment: str, outcome: str) -> None:
        self.outcomes.append((experiment, outcome))

    def impressions_dropped(self, reason: str, count: int) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + count

    def redis_error(self, op: str) -> None:
        self.errors.append(op)


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def page(rid: str, teams: str, at: float = 1_000_000.0, experiment: str = "spam_v8"
         ) -> Impression:
    """An impression whose documents d0, d1, … are on the teams `teams` spells (c/t)."""
    return Impression(rid, experiment, "u-" + rid, at,
                      tuple((f"d{i}", "control" if t == "c" else "treatment")
                            for i, t in enumerate(teams)))


# ---- attribution, written out -------------------------------------------------------------
@pytest.mark.parametrize(("teams", "clicks", "expected"), [
    ("tctc", ["d0"], "treatment"), ("tctc", ["d1"], "control"),
    ("tctc", ["d0", "d1"], "tie"), ("tctc", ["d0", "d2", "d1"], "treatment"),
    ("tctc", ["d1", "d3", "d0"], "control"), ("tctc", [], None),
    ("tctc", ["d0", "d0", "d1"], "tie"),  # a document clicked twice counts once
    ("cccc", ["d2"], "control"), ("tttt", ["d0", "d3"], "treatment")])
def test_clicks_go_to_the_team_of_their_document(teams, clicks, expected):
    assert attribute(page("r", teams), clicks) == expected


def test_a_document_not_on_the_page_is_named():
    with pytest.raises(FieldError) as refused:
        attribute(page("r", "tc"), ["d0", "d9"])
    assert refused.value.field == "clicks[1]"
    with pytest.raises(FieldError) as refused:
        attribute(page("r", "tc"), ["d0"], ["d1", "zz"])
    assert refused.value.field == "skips[1]"
    with pytest.raises(FieldError) as refused:
        attribute(page("r", "tc"), ["d0"], ["d0"])
    assert refused.value.field == "skips[0]" and "also among the clicks" in refused.value.problem
    assert attribute(page("r", "tc"), ["d0"], ["d1"]) == "treatment"  # skips change nothing


# ---- both stores --------------------------------------------------------------------------
@pytest.fixture(params=["embedded", pytest.param("redis", marks=pytest.mark.redis)])
def stores(request, tmp_path):
    """make(events, clock) → (store a, store b): two replicas' stores (embedded: one)."""
    made = []
    if request.param == "embedded":
        def make(events, clock, window=3600.0, max_bytes=1 << 20):
            store = MemoryImpressions(window, max_bytes, events, clock)
            made.append(store)
            return store, store
        yield make
    else:
        from tests.redis_server import RedisServer

        server = RedisServer(tmp_path / "redis").start()

        def make(events, clock, window=3600.0, max_bytes=1 << 20):
            pair = tuple(RedisImpressions(connect(server.url, socket_timeout=2), "t:", window,
                                          max_bytes, events, clock) for _ in range(2))
            made.extend(pair)
            return pair
        make.server = server
        yield make
        server.kill()
    for store in made:
        store.close()


def flushed(*stores) -> None:
    for store in stores:
        if isinstance(store, RedisImpressions):
            store.flush()


def test_feedback_credits_the_page_and_the_tallies(stores):
    events, clock = Events(), Clock()
    a, b = stores(events, clock)
    a.record([page("r1", "tctc"), page("r2", "tctc"), page("r3", "tctc")])
    flushed(a)
    taken = b.feedback("r1", ["d0"])  # the other replica finds the page
    assert (taken.experiment, taken.outcome, taken.replaced) == ("spam_v8", "treatment", None)
    a.feedback("r2", ["d1", "d3"])
    a.feedback("r3", ["d0", "d1"], skips=["d2"])
    counts = b.counts("spam_v8")
    assert counts is not None
    assert counts.impressions == 3 and counts.feedback == 3
    assert counts.outcomes == {"treatment": 1, "control": 1, "tie": 1}
    assert b.counts("other") is None
    assert sorted(o for _, o in events.outcomes) == ["control", "tie", "treatment"]
    assert events.recorded == {"spam_v8": 3}


def test_a_second_feedback_replaces_the_first_fleet_wide(stores):
    a, b = stores(Events(), Clock())
    a.record([page("r1", "tctc")])
    flushed(a)
    a.feedback("r1", ["d0"])
    taken = b.feedback("r1", ["d1", "d3"])  # on the other replica
    assert (taken.outcome, taken.replaced) == ("control", "treatment")
    assert a.counts("spam_v8").outcomes == {"treatment": 0, "control": 1, "tie": 0}
    taken = a.feedback("r1", [])  # no clicks now: no outcome
    assert (taken.outcome, taken.replaced) == (None, "control")
    counts = b.counts("spam_v8")
    assert counts.outcomes == {"treatment": 0, "control": 0, "tie": 0} and counts.feedback == 3


def test_tallies_reset_by_hand_never_go_below_zero(stores):
    """docs/experiments.md: tallies are reset by deleting them (Redis) or by a restart
    (embedded); a page kept from before whose feedback is replaced must not take a count
    below zero, which the results' test cannot read."""
    a, b = stores(Events(), Clock())
    a.record([page("r1", "tctc")])
    flushed(a)
    a.feedback("r1", ["d0"])  # treatment
    if isinstance(a, RedisImpressions):
        with stores.server.client() as c:
            c.delete("t:{feedback}:tallies:spam_v8")
    else:
        a.tallies.clear()
    b.feedback("r1", ["d1"])  # replaced: control
    counts = b.counts("spam_v8")
    assert counts is not None and counts.outcomes["treatment"] == 0
    assert counts.outcomes["control"] == 1


def test_feedback_reaches_the_serving_replica_before_its_page_is_written(stores):
    a, b = stores(Events(), Clock())
    a.record([page("r1", "tc")])
    assert a.feedback("r1", ["d1"]).outcome == "control"  # its own copy, written on the way
    flushed(a)
    assert b.counts("spam_v8").impressions == 1  # the page counted once, written late
    assert b.feedback("r1", ["d0"]).replaced == "control"


def test_unknown_and_expired_pages_are_not_found(stores):
    clock = Clock()
    a, b = stores(Events(), clock, window=60.0)
    with pytest.raises(NotFound) as refused:
        b.feedback("nope", ["d0"])
    assert refused.value.field == "request_id"
    a.record([page("old", "tc", at=clock.now - 61), page("new", "tc", at=clock.now - 30)])
    flushed(a)
    with pytest.raises(NotFound):
        a.feedback("old", ["d0"])
    assert b.feedback("new", ["d0"]).outcome == "treatment"


def test_a_refused_feedback_changes_nothing(stores):
    a, b = stores(Events(), Clock())
    a.record([page("r1", "tc")])
    flushed(a)
    a.feedback("r1", ["d0"])
    with pytest.raises(FieldError):
        b.feedback("r1", ["d1", "d7"])
    counts = a.counts("spam_v8")
    assert counts.outcomes["treatment"] == 1 and counts.feedback == 1


def test_the_cap_drops_the_oldest_pages_and_counts_them():
    events, clock = Events(), Clock()
    one = page_bytes(page("r00", "tctc"))
    store = MemoryImpressions(3600.0, one * 10, events, clock)
    store.record([page(f"r{i:02}", "tctc") for i in range(25)])
    assert events.dropped == {"capacity": 15}
    assert store.pages.bytes <= one * 10
    with pytest.raises(NotFound):
        store.feedback("r14", ["d0"])
    assert store.feedback("r15", ["d0"]).outcome == "treatment"
    clock.now += 3601  # past the window: gone, not counted as dropped
    store.record([page("late", "tc", at=clock.now)])
    assert len(store.pages.held) == 1 and events.dropped == {"capacity": 15}


def test_a_request_id_reused_for_another_page_starts_afresh(stores):
    a, b = stores(Events(), Clock())
    a.record([page("r1", "tc")])
    flushed(a)
    a.feedback("r1", ["d0"])
    b.record([page("r1", "ct")])  # another page under the same id
    flushed(b)
    taken = a.feedback("r1", ["d0"])  # computed on the page now kept: d0 is control's
    assert (taken.outcome, taken.replaced) == ("control", None)
    counts = b.counts("spam_v8")
    assert counts.impressions == 2 and counts.outcomes["treatment"] == 1


@pytest.mark.redis
def test_a_lost_redis_degrades_and_the_pages_follow_once_it_is_back(tmp_path, caplog):
    from tests.redis_server import RedisServer

    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    events = Events()
    store = RedisImpressions(connect(server.url, socket_timeout=0.5,
                                     socket_connect_timeout=0.5), "t:", 3600.0, 1 << 20,
                             events)
    try:
        server.kill()
        store.record([page("r1", "tc", at=time.time())])  # never waits on Redis
        deadline = time.monotonic() + 10
        while len(events.errors) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert events.errors and set(events.errors) == {"feedback"}
        warnings = [r for r in caplog.records if "Redis unreachable" in r.getMessage()]
        assert len(warnings) == 1  # once per outage, however many retries
        with pytest.raises(redis.RedisError):
            store.feedback("r1", ["d0"])
        server.start()
        deadline = time.monotonic() + 10
        with server.client() as c:  # the writer pops a batch before writing it: poll Redis
            while (c.hget("t:{feedback}:tallies:spam_v8", "impressions") != "1"
                   and time.monotonic() < deadline):
                time.sleep(0.02)
            assert c.hget("t:{feedback}:tallies:spam_v8", "impressions") == "1"
        assert store.feedback("r1", ["d0"]).outcome == "treatment"
    finally:
        store.close()
        server.kill()


def test_the_embedded_store_takes_concurrent_feedback():
    store = MemoryImpressions(3600.0, 1 << 24, Events())
    now = time.time()
    store.record([page(f"r{i}", "tc", at=now) for i in range(400)])

    def send(lo: int) -> None:
        for i in range(lo, 400, 4):
            store.feedback(f"r{i}", ["d0"] if i % 3 else ["d1"])

    threads = [threading.Thread(target=send, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts = store.counts("spam_v8")
    assert counts.outcomes["treatment"] == sum(1 for i in range(400) if i % 3)
    assert counts.outcomes["control"] == sum(1 for i in range(400) if not i % 3)
