"""GET /v1/banlist/changes newest first (`order=desc`, paged back with `before`), with `more`
saying whether a page has a next, on both stores; `since` keeps its meaning (issue 49)."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.banlist.base import EntrySpec
from app.banlist.redis import store as redis_store
from app.main import create_app
from tests.conftest import AUTH, app_on


@pytest.fixture(params=["embedded", pytest.param("redis", marks=pytest.mark.redis)])
def logged(request, settings, monkeypatch):
    """(a client, every seq of its change log): a seed of 40 entries, then three adds. On
    Redis the seed is staged (as one of more than MAX_SCRIPT entries is): one change, seq
    41, after 40 seqs of no change, as a seq is no change's rank."""
    if request.param == "embedded":
        client = TestClient(create_app(settings))
    else:
        monkeypatch.setattr(redis_store, "MAX_SCRIPT", 10)
        client = app_on(request.getfixturevalue("redis_server"), settings, "a")
    with client:
        store = client.app.state.services.store
        assert store.seed([EntrySpec("host", f"s{i}.example", "seeded") for i in range(40)])
        for value in ("a.example", "b.example", "c.example"):
            r = client.post("/v1/banlist/entries", headers=AUTH,
                            json={"scope": "host", "value": value, "reason": "spam"})
            assert r.status_code == 201, r.text
        seqs = page(client, limit=1000)[0]
        assert seqs == ([41, 42, 43, 44] if request.param == "redis"
                        else list(range(1, 44)))
        yield client, seqs


def page(client, **params) -> tuple[list[int], bool]:
    r = client.get("/v1/banlist/changes", params=params)
    assert r.status_code == 200, r.text
    return [c["seq"] for c in r.json()["changes"]], r.json()["more"]


def newest_first(client, limit: int, **filters) -> list[int]:
    """Every seq, a page at a time from the newest, as the CLI's hint pages."""
    got, before = [], None
    while True:
        seqs, more = page(client, order="desc", limit=limit, **filters,
                          **({"before": before} if before else {}))
        assert len(seqs) == limit or not more
        got += seqs
        if not more:
            return got
        before = seqs[-1]


@pytest.mark.parametrize("limit", [1, 3, 40, 100])
def test_newest_first_pages_back_to_the_first_change(logged, limit):
    client, seqs = logged
    assert newest_first(client, limit) == seqs[::-1]


def test_a_page_back_reads_across_seqs_of_no_change(logged):
    client, seqs = logged
    # on Redis, the window of 4 seqs below 42 holds no change but the seed (41): it is
    # widened until it reaches the start rather than the page answered short
    below = [s for s in seqs if s < 42]
    assert page(client, order="desc", limit=3, before=42) == (below[::-1][:3], len(below) > 3)
    assert page(client, order="desc", before=seqs[0]) == ([], False)
    assert page(client, order="desc", limit=2) == (seqs[::-1][:2], True)


def test_since_keeps_its_meaning_and_more_says_whether_there_is_a_next(logged):
    client, seqs = logged
    assert page(client, limit=1000) == (seqs, False)  # no order: the oldest first
    assert page(client, since=seqs[-4], limit=2) == (seqs[-3:-1], True)
    assert page(client, since=seqs[-2], limit=2) == (seqs[-1:], False)
    assert page(client, since=seqs[-4], before=seqs[-1]) == (seqs[-3:-1], False)
    assert page(client, order="desc", since=seqs[-4], limit=5) == (seqs[-3:][::-1], False)


def test_filtered_newest_first_keeps_the_last_matches(logged):
    client, seqs = logged
    adds = seqs[-3:]  # tns's; the seed's are the seed's
    assert newest_first(client, 2, actor="tns") == adds[::-1]
    assert page(client, order="desc", actor="tns", limit=2) == (adds[:0:-1], True)
    assert page(client, order="desc", value="b.example") == ([adds[1]], False)
    assert page(client, actor="tns", limit=1, before=adds[2]) == (adds[:1], True)


@pytest.mark.parametrize(("params", "field", "problem"), [
    ({"order": "newest"}, "query.order", "one of 'asc', 'desc' (got \"newest\")"),
    ({"before": "0"}, "query.before", "at least 1 (got \"0\")"),
    ({"before": "x"}, "query.before", "a whole number (got \"x\")"),
])
def test_a_bad_order_or_before_is_a_422_naming_it(client, params, field, problem):
    r = client.get("/v1/banlist/changes", params=params, headers=AUTH)
    assert r.status_code == 422 and (r.json()["field"], r.json()["problem"]) == (field, problem)
