"""The embedded store's start from the snapshot beside its log: only the log after it is
read, a log that does not continue it is read whole, and former entries come from the log."""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from app.banlist import digest
from app.banlist.embedded import changelog
from app.banlist.embedded import store as store_module
from app.banlist.embedded.store import EmbeddedStore, EntrySpec
from app.banlist.graveyard import Graveyard
from app.banlist.model import Entry
from app.errors import BanlistError
from app.observability.metrics import Metrics
from tests.banlist.history_log import older_log, url


def specs(n: int, prefix: str = "h") -> list[EntrySpec]:
    return [EntrySpec("host", f"{prefix}{i}.example", "spam") for i in range(n)]


def started(path: Path, **kw) -> tuple[EmbeddedStore, str]:
    """A store started on `path`, and how: snapshot, replay or refused (its metric)."""
    metrics = Metrics()
    kw.setdefault("tail", 2)
    store = EmbeddedStore(path, events=metrics, **kw)
    how = [r for r in ("snapshot", "replay", "refused") if metrics.registry.get_sample_value(
        "rearrange_banlist_embedded_starts_total", {"structure": "banlist", "result": r})]
    assert len(how) == 1, how
    return store, how[0]


@pytest.fixture(autouse=True)
def short_strides(monkeypatch):
    """A mark every 4 lines, so that a store keeping the last 2 changes in memory (tail=2)
    reads them from the file without reading the lines `spoil` spoils."""
    monkeypatch.setattr(changelog, "STRIDE", 4)


def spoil(path: Path, *numbers: int) -> None:
    """Lines `numbers` (1-based) replaced by as many bytes that are no JSON: a replay that
    reads one of them stops."""
    lines = path.read_bytes().splitlines(keepends=True)
    for n in numbers:
        lines[n - 1] = b"#" * (len(lines[n - 1]) - 1) + b"\n"
    path.write_bytes(b"".join(lines))


def content(store: EmbeddedStore) -> list[dict]:
    return sorted((e.as_dict() for e in store.index), key=lambda e: int(e["id"]))


def test_a_restart_loads_the_snapshot_and_replays_only_the_changes_after_it(tmp_path):
    path = tmp_path / "b.jsonl"
    store, how = started(path)
    assert how == "replay"  # no log yet, no snapshot
    store.define_group("acme", ["acme.com"], "tns", "one owner")
    first = store.add_many(specs(20), "tns")
    store.remove(first[3].id, "appeals", "sorry")
    assert store.write_snapshot() and not store.write_snapshot()  # the same seq: once
    store.add(EntrySpec("org", "acme", "farm"), "legal")
    store.remove(first[5].id, "appeals", "sorry")
    store.define_group("acme", ["acme.com", "acme.net"], "tns", "bought")
    spoil(path, *range(1, 21))  # the lines before the snapshot's end (22) but the last few
    again, how = started(path)
    assert how == "snapshot"
    assert (again.version, content(again), again.index.groups) == (
        store.version, content(store), store.index.groups)
    assert again.digest == store.digest == int(again.index.digest(), 16)
    assert [c["seq"] for c in again.changes_since(22)] == [23, 24, 25]
    added = again.add(EntrySpec("host", "late.example", "r"), "tns")
    assert added.id == "26" and json.loads(path.read_text().splitlines()[-1])["seq"] == 26
    (tmp_path / "b.jsonl.snapshot").unlink()
    with pytest.raises(BanlistError, match="not valid JSON"):  # what the start did not read
        EmbeddedStore(path)


def test_history_pages_after_a_snapshot_start_are_the_logs(tmp_path):
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path, tail=3)
    for i in range(11):
        store.add(EntrySpec("host", f"x{i}.example", f"r{i}"), "tns")
    store.write_snapshot()
    store.add_many(specs(6), "bulk")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    want = [{k: v for k, v in c.items() if k != "txn_end"} for c in lines]
    again, how = started(path, tail=3)
    assert how == "snapshot" and list(again.changelog.marks) == list(store.changelog.marks)
    for since in range(0, 18):
        assert again.changes_since(since, 5) == want[since:since + 5], since


def test_a_log_cut_back_before_the_snapshot_is_replayed_whole(tmp_path, caplog):
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path)
    store.add_many(specs(10), "tns")
    backup = path.read_bytes()  # an older copy of the log
    store.add_many(specs(10, "n"), "tns")
    store.close()  # writes the snapshot, at seq 20
    path.write_bytes(backup)  # the log restored from it
    with caplog.at_level(logging.WARNING):
        again, how = started(path)
    assert how == "refused" and again.version == 10
    assert sorted(e.value for e in again.index) == sorted(f"h{i}.example" for i in range(10))
    said = [r.getMessage() for r in caplog.records if "snapshot" in r.getMessage()]
    assert len(said) == 1 and "restored from an older copy" in said[0], said
    # then written on past the snapshot's end: the same seqs, other changes
    again.add_many(specs(10, "m"), "tns")
    again.add(EntrySpec("host", "after.example", "r"), "tns")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        third, how = started(path)
    assert how == "refused" and third.version == 21
    assert "m0.example" in {e.value for e in third.index}
    assert third.digest == digest.Digest.of(third.index, third.index.groups).value
    assert any("rewritten or replaced" in r.getMessage() for r in caplog.records)


def test_a_torn_tail_after_the_snapshot_is_still_dropped(tmp_path):
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path)
    store.add_many(specs(5), "tns")
    store.write_snapshot()
    kept = store.add(EntrySpec("host", "kept.example", "r"), "tns")
    size = path.stat().st_size
    store.add_many(specs(3, "lost"), "tns")  # a transaction that a crash cuts short
    spoil(path, 1, 2, 3, 4)
    path.write_bytes(path.read_bytes()[:-1])
    again, how = started(path)
    assert how == "snapshot" and again.version == 6 and path.stat().st_size == size
    assert again.index.get(kept.id) is not None and len(again) == 6
    assert again.add(EntrySpec("host", "next.example", "r"), "tns").id == "7"
    path.write_bytes(path.read_bytes()[:-10])  # a torn single line
    torn = path.stat().st_size
    again, how = started(path, read_only=True)  # a read-only store: the file stays as it is
    assert (how, again.version, path.stat().st_size) == ("snapshot", 6, torn)


def test_former_entries_after_a_restart_are_read_from_the_end_of_the_log(tmp_path):
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path)
    early = store.add_many(specs(30), "tns")
    for entry in early[-4:]:
        store.remove(entry.id, "appeals", "sorry")
    store.close()
    spoil(path, *range(1, 30))  # no line before the first removal is read for them
    again, how = started(path)
    assert how == "snapshot" and len(again.graveyard) == 0  # a start fills nothing
    again.remove(early[0].id, "appeals", "late")  # before the first lookup
    gone = again.former(*url("http://h29.example/"))
    assert [(f["id"], f["ended"]["seq"]) for f in gone] == [("30", 34)]
    assert [f["ended"]["reason"] for f in again.former(*url("http://h0.example/"))] == ["late"]
    assert len(again.graveyard) == 5
    again.remove(early[1].id, "appeals", "later")  # after it: buried as it is made
    assert [f["id"] for f in again.former(*url("http://h1.example/"))] == ["2"]


def test_former_entries_older_than_the_graveyards_cap_are_read_from_the_log(tmp_path):
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path)
    entries = store.add_many([*specs(8), EntrySpec("domain", "h0.example", "wide")], "tns")
    for entry in entries:  # h0..h7, then the domain
        store.remove(entry.id, "appeals", f"sorry {entry.value}")
    again = EmbeddedStore(path)
    again.graveyard.cap = 3
    gone = again.former(*url("http://www.h0.example/"))
    assert len(again.graveyard) == 3 and again.graveyard.oldest() == 16  # h6, h7, the domain
    assert [(f["id"], f["ended"]["seq"]) for f in gone] == [("9", 18)]
    assert [(f["id"], f["ended"]["reason"]) for f in again.former(*url("http://h0.example/"))] == [
        ("9", "sorry h0.example"), ("1", "sorry h0.example")]
    assert [f["id"] for f in again.former(*url("http://h3.example/"))] == ["4"]
    assert again.history_since() == again.changes_since(0, 1)[0]["at"]
    old = EmbeddedStore(older_log(tmp_path / "old.jsonl"))  # ends that name only the id
    old.graveyard.cap = 1
    assert [f["id"] for f in old.former(*url("http://a.example/"))] == ["3", "1"]
    assert [(f["id"], f["ended"]["seq"]) for f in old.former(*url("http://b.example/"))] == [
        ("2", 6)]


def test_the_snapshot_is_due_after_many_changes_or_some_time_and_never_read_only(
        tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "SNAPSHOT_CHANGES", 5)
    clock = [1000.0]
    path = tmp_path / "b.jsonl"
    snap = tmp_path / "b.jsonl.snapshot"
    store = EmbeddedStore(path, clock=lambda: clock[0], snapshot_seconds=60)
    assert store.seed(specs(3)) == 3 and snap.exists()  # written after a seed
    written = snap.stat().st_mtime_ns
    store.add_many(specs(4, "a"), "tns")
    assert not store.keep_snapshot()  # 4 changes, no time
    store.add(EntrySpec("host", "b.example", "r"), "tns")
    assert store.keep_snapshot() and not store.keep_snapshot()  # 5 changes
    store.add(EntrySpec("host", "c.example", "r"), "tns")
    clock[0] += 59
    assert not store.keep_snapshot()
    clock[0] += 1
    assert store.keep_snapshot() and snap.stat().st_mtime_ns != written
    store.add(EntrySpec("host", "d.example", "r"), "tns")
    store.close()  # and at close
    reader, how = started(path, read_only=True, clock=lambda: clock[0])
    assert how == "snapshot" and reader.version == 10
    before = snap.read_bytes()
    clock[0] += 3600
    assert not reader.keep_snapshot() and not reader.write_snapshot()
    reader.close()
    assert snap.read_bytes() == before


def test_a_snapshot_that_cannot_be_written_is_tried_again_later(tmp_path, caplog,
                                                                monkeypatch):
    monkeypatch.setattr(store_module, "SNAPSHOT_CHANGES", 5)
    clock = [1000.0]
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path, clock=lambda: clock[0], snapshot_seconds=60)
    (tmp_path / "b.jsonl.snapshot").mkdir()  # what the rename cannot replace
    store.add_many(specs(20), "tns")
    with pytest.raises(OSError):
        store.keep_snapshot()  # the housekeeping counts it and logs it
    assert not store.keep_snapshot()  # not again at the next poll: after snapshot_seconds
    clock[0] += 60
    with pytest.raises(OSError):
        store.keep_snapshot()
    with caplog.at_level(logging.ERROR):
        store.close()  # logged, and the log is released all the same
    assert "not written" in caplog.text
    (tmp_path / "b.jsonl.snapshot").rmdir()
    again, how = started(path)
    assert how == "replay" and again.version == 20


def test_a_snapshot_that_does_not_fit_is_refused_for_what_it_is(tmp_path, caplog):
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path)
    store.add_many(specs(4), "tns")
    store.close()
    snap = tmp_path / "b.jsonl.snapshot"
    good = snap.read_bytes()
    snap.write_bytes(good[:-7])  # torn
    assert started(path)[1] == "refused"
    snap.write_bytes(EmbeddedStore(None).dump()[1])  # no log position in its header
    with caplog.at_level(logging.WARNING):
        assert started(path)[1] == "refused"
    assert any("says nothing of a change log" in r.getMessage() for r in caplog.records)
    snap.write_bytes(good)
    assert started(path)[1] == "snapshot"


def test_an_embedded_service_writes_its_snapshot_from_the_housekeeping(settings, monkeypatch):
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.conftest import AUTH

    settings = settings.model_copy(update={"config_poll_seconds": 0.05,
                                           "banlist_snapshot_seconds": 0.05})
    snap = settings.banlist_path.with_name("banlist.jsonl.snapshot")
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/banlist/entries", headers=AUTH, json={
            "scope": "host", "value": "spam.example", "reason": "r"}).status_code == 201
        for _ in range(100):  # written by the housekeeping, the service still running
            if snap.exists():
                break
            time.sleep(0.05)
        assert snap.exists()
    with TestClient(create_app(settings)) as client:
        metrics = client.get("/metrics").text
        assert ('rearrange_banlist_embedded_starts_total{result="snapshot",structure="banlist"} '
                '1.0') in metrics
        assert client.get("/v1/banlist/lookup", params={"url": "http://spam.example/"}).json()[
            "banned"]


def test_graveyard_oldest_is_the_first_buried():
    yard = Graveyard(cap=5)
    assert yard.oldest() is None
    entry = Entry("7", "host", "a.example", "r", "tns", 0.0, None, frozenset())
    yard.bury([(entry, {"op": "remove", "seq": 9, "at": "", "actor": "", "reason": ""})])
    assert yard.oldest() == 9
