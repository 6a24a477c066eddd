"""The banlist version a response reports is the version of the very snapshot it matched,
while a writer applies batches meanwhile: the version is published inside the index's
snapshot with the data, and the engine reads both in one load."""
from __future__ import annotations

import sys
import threading

import orjson

from app.api.services import build_services
from app.banlist.base import EntrySpec
from app.banlist.embedded import checkpoint

BODY = orjson.dumps({"request_id": "v", "query": {"text": "q"}, "documents": [
    {"id": "spam", "url": "https://spam.example/page", "score": 2.0},
    {"id": "fine", "url": "https://fine.example/", "score": 1.0}]})


def test_each_response_reports_the_version_of_the_banlist_it_matched(settings):
    # in memory: no fsync per write, so batches come as fast as requests
    services = build_services(settings.model_copy(update={"banlist_path": None,
                                                          "audit_log": None}))
    store = services.store
    banned_at: dict[int, bool] = {store.version: False}  # what each version holds
    stop = threading.Event()

    def writer() -> None:  # ban and unban the host, one batch each, as fast as it can
        while not stop.is_set():
            entry = store.add(EntrySpec("host", "spam.example", "flapping"), "tester")
            banned_at[store.version] = True  # the only writer: this is its batch's version
            store.remove(entry.id, "tester", "flapping")
            banned_at[store.version] = False

    seen: list[tuple[int, bool]] = []
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns between any two steps
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while len(seen) < 3000 and (len(seen) < 300 or len({v for v, _ in seen}) < 20):
            status, out = services.rearranger.rerank(BODY)
            assert status == 200, out
            answer = orjson.loads(out)
            removed = [d["id"] for d in answer["removed"]]
            seen.append((answer["banlist_version"], removed == ["spam"]))
    finally:
        stop.set()
        sys.setswitchinterval(switch)
        thread.join()
        services.close()
    assert {banned for _, banned in seen} == {True, False}  # both states were served
    wrong = [(v, banned) for v, banned in seen if banned_at[v] != banned]
    assert wrong == [], f"{len(wrong)} of {len(seen)} reported a version they did not match"


def test_a_store_started_from_its_log_alone_serves_the_logs_version(settings):
    """A start with no usable snapshot replays the whole log: the index it serves carries
    the log's version, as responses report it (not 0 until the next write)."""
    services = build_services(settings.model_copy(update={"audit_log": None}))
    for host in ("a.example", "b.example", "spam.example"):
        services.store.add(EntrySpec("host", host, "spam"), "tester")
    version = services.store.version
    services.close()
    # a crash before the first snapshot: the log alone
    checkpoint.path_of(settings.banlist_path).unlink(missing_ok=True)
    again = build_services(settings.model_copy(update={"audit_log": None}))
    try:
        assert again.store.version == version == 3
        status, out = again.rearranger.rerank(BODY)
        answer = orjson.loads(out)
        assert status == 200 and answer["banlist_version"] == version
        assert [d["id"] for d in answer["documents"]] == ["fine"]
    finally:
        again.close()
