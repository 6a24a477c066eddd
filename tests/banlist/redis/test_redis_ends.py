"""The index of ends in Redis (app/banlist/redis/ends.py), on a real redis-server: the
sets trimmed to the history's window; the write script's keys past the eighth."""
from __future__ import annotations

import time

from app.banlist.base import EntrySpec
from app.banlist.model import iso

HISTORY = "rearrange:{banlist}:history"


def test_the_sets_are_trimmed_to_the_history_window_and_expire_with_it(replicas,
                                                                       redis_server):
    a = replicas("a", retention_seconds=0.4, history_seconds=0.4)
    key = "rearrange:{banlist}:ends:example.com"
    first = a.add(EntrySpec("host", "www.example.com", "r"), "tns")
    a.remove(first.id, "tns", "appeal")
    with redis_server.client() as r:
        assert r.zcard(key) == 1 and 0 < r.pttl(key) <= 400  # an idle domain's set goes
        time.sleep(0.5)
        second = a.add(EntrySpec("host", "shop.example.com", "r"), "tns")
        a.remove(second.id, "tns", "appeal")
        (newest, _), = r.xrevrange(HISTORY, count=1)
        assert r.zrange(key, 0, -1) == [newest]  # the first end left the window
        assert 0 < r.pttl(key) <= 400


def test_the_write_scripts_keys_past_the_eighth_name_each_ends_set(replicas, redis_server):
    a = replicas("a")
    x = a.add(EntrySpec("host", "x.example", "r"), "tns")
    y = a.add(EntrySpec("url", "https://y.example/p", "r"), "tns")
    z = a.add(EntrySpec("host", "z.example", "r"), "tns")
    head = [*a.keys.write(), a.keys.outcome("1" * 32), a.keys.digest, a.keys.history]
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
