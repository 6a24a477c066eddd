"""The index of ends in Redis (app/banlist/redis/ends.py), on a real redis-server: former
entries past the graveyard's cap, after a restart, of org bans; the sets trimmed to the
history's window; the write script's keys past the eighth."""
from __future__ import annotations

import time

from app.banlist import canon
from app.banlist.base import EntrySpec
from app.banlist.model import iso
from app.banlist.redis import ends
from app.banlist.redis.store import RedisStore
from tests.helpers import until

HISTORY = "rearrange:{banlist}:history"


def url(text: str) -> tuple[str, str]:
    canonical = canon.canonicalize(text)
    return canonical, canon.split(canonical)[0]


def churn(store: RedisStore, n: int) -> None:
    """n bans added and removed: n ends newer than those before, more than the cap."""
    for entry in store.add_many([EntrySpec("host", f"h{k}.example", "r") for k in range(n)],
                                "tns"):
        store.remove(entry.id, "tns", "appeal")


def ended_long_ago(store: RedisStore) -> tuple[str, str]:
    """A domain ban (in RU) and a url ban under it, both removed, then more ends than a
    graveyard of 3 keeps; their ids."""
    domain = store.add(EntrySpec("domain", "example.com", "court order", ("ru",)), "legal")
    page = store.add(EntrySpec("url", "https://www.example.com/x", "dmca"), "tns")
    store.remove(domain.id, "appeals", "appeal granted")
    store.remove(page.id, "appeals", "licensed now")
    churn(store, 5)
    return domain.id, page.id


def test_a_lookup_past_the_graveyards_cap_still_shows_an_old_former_entry(replicas):
    a = replicas("a")
    a.graveyard.cap = 3
    domain, page = ended_long_ago(a)
    gone = a.former(*url("https://www.example.com/x"))
    assert [f["id"] for f in gone] == [page, domain]  # the newest ended first
    assert domain not in a.graveyard.ends and page not in a.graveyard.ends
    old = gone[1]
    assert old["matched_by"] == "domain example.com (a parent of www.example.com)"
    assert (old["ended"]["op"], old["ended"]["actor"]) == ("remove", "appeals")
    assert old["was"] == (f"was banned in RU until {old['ended']['at']}, by legal, reason "
                          "court order (removed by appeals: appeal granted)")
    assert [f["id"] for f in a.former(*url("https://shop.example.com/"))] == [domain]
    # an end the graveyard holds is answered once, by it
    assert len(a.former(*url("http://h4.example/"))) == 1


def test_a_restarted_replica_answers_them_too(replicas):
    a = replicas("a")
    domain, _ = ended_long_ago(a)
    a.close()
    b = replicas("b")  # a new store: it reads back from the newest end, up to its cap
    b.graveyard.cap = 3
    (old,) = b.former(*url("https://shop.example.com/"))
    assert old["id"] == domain and old["was"].startswith("was banned in RU until ")


def test_an_org_bans_former_entry_swept_when_it_expired(replicas, redis_server):
    a = replicas("a")
    a.graveyard.cap = 3
    a.define_group("acme", ["acme.com", "acme-shop.net"], "tns", "one owner")
    org = a.add(EntrySpec("org", "acme", "brand abuse", expires_at=time.time() + 0.2),
                "legal")
    until(lambda: a.sweep() == 1)  # once it has expired
    churn(a, 5)
    (old,) = a.former(*url("https://www.acme-shop.net/"))
    assert old["id"] == org.id and old["ended"]["op"] == "expire"
    assert old["matched_by"].startswith("org acme") and old["was"].endswith("(expired)")
    with redis_server.client() as r:  # under the group's name, not a member domain's
        assert r.zcard("rearrange:{banlist}:ends:org:acme") == 1
        assert not r.exists("rearrange:{banlist}:ends:acme-shop.net")


def test_history_since_is_where_the_index_reaches_once_the_graveyard_dropped(replicas):
    a = replicas("a")
    a.graveyard.cap = 3
    first = a.add(EntrySpec("host", "first.example", "r"), "tns")
    a.remove(first.id, "tns", "appeal")
    assert a.former(*url("http://first.example/"))  # the graveyard holds the whole history
    churn(a, 5)  # then drops its oldest ends
    (old,) = a.former(*url("http://first.example/"))
    assert first.id not in a.graveyard.ends and a.history_since() == old["ended"]["at"]


def test_at_most_LIMIT_former_entries_come_from_the_index(replicas, monkeypatch):
    monkeypatch.setattr(ends, "LIMIT", 2)
    a = replicas("a")
    a.graveyard.cap = 3
    ids = [e.id for e in a.add_many([EntrySpec("prefix", f"example.com{path}", "r")
                                     for path in ("/a/", "/a/b/", "/a/b/c/")], "tns")]
    for entry_id in ids:
        a.remove(entry_id, "tns", "appeal")
    churn(a, 5)
    assert [f["id"] for f in a.former(*url("http://example.com/a/b/c/d"))] == ids[:0:-1]


def test_the_sets_are_trimmed_to_the_history_window_and_expire_with_it(replicas,
                                                                       redis_server):
    a = replicas("a", retention_seconds=0.4, history_seconds=0.4)
    key = "rearrange:{banlist}:ends:example.com"
    first = a.add(EntrySpec("host", "www.example.com", "r"), "tns")
    a.remove(first.id, "tns", "appeal")
    with redis_server.client() as r:
        assert r.zcard(key) == 1 and 0 < r.pttl(key) <= 400  # an idle domain's set goes
        until(lambda: r.pttl(key) == -2)  # the window has passed: the set expired
        second = a.add(EntrySpec("host", "shop.example.com", "r"), "tns")
        a.remove(second.id, "tns", "appeal")
        (newest, _), = r.xrevrange(HISTORY, count=1)
        assert r.zrange(key, 0, -1) == [newest]  # the first end left the window
        assert 0 < r.pttl(key) <= 400


def test_the_write_scripts_keys_past_the_ninth_name_each_ends_set(replicas, redis_server):
    a = replicas("a")
    x = a.add(EntrySpec("host", "x.example", "r"), "tns")
    y = a.add(EntrySpec("url", "https://y.example/p", "r"), "tns")
    z = a.add(EntrySpec("host", "z.example", "r"), "tns")
    head = [*a.keys.write(), a.keys.outcome("1" * 32), a.keys.digest, a.keys.history,
            a.keys.batch]
    # an expiry that finds its entry gone takes its key's place and writes nothing to it
    a._write(keys=[*head, a.keys.ends_since, a.keys.ends("unused"), a.keys.ends("x.example"),
                   a.keys.ends("y.example")],
             args=[str(a.replica.epoch), a.retention_ms, 60, "attempt", "", a.history_ms,
                   "expire", "99", "", "system", "ttl elapsed", iso(0),
                   "remove", x.id, "", "tns", "r", "",
                   "remove", y.id, "", "tns", "r", ""])
    # a writer giving eight keys (an older release's) indexes nothing
    a._write(keys=[*a.keys.write(), a.keys.outcome("2" * 32), a.keys.digest, a.keys.history],
             args=[str(a.replica.epoch), a.retention_ms, 60, "attempt", "", a.history_ms,
                   "remove", z.id, "", "tns", "r", ""])
    with redis_server.client() as r:
        x_end, y_end, _ = (sid for sid, _ in r.xrange(HISTORY)[-3:])
        assert r.zrange(a.keys.ends("x.example"), 0, -1, withscores=True) == [
            (x_end, int(x_end.split("-")[0]))]
        assert r.zrange(a.keys.ends("y.example"), 0, -1) == [y_end]
        assert not r.exists(a.keys.ends("unused"), a.keys.ends("z.example"))
        assert r.get(a.keys.ends_since) == x_end.split("-")[0]
