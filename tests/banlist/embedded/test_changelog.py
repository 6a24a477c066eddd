"""The embedded store's log: batched transactions, crashes mid-commit, history from the file."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.api.errors import status_of
from app.banlist.base import GroupSpec
from app.banlist.embedded import changelog
from app.banlist.embedded import store as store_module
from app.banlist.embedded.store import EmbeddedStore, EntrySpec
from app.errors import BanlistError
from tests.conftest import ROOT


def specs(n: int, prefix: str = "h") -> list[EntrySpec]:
    return [EntrySpec("host", f"{prefix}{i}.example", "spam") for i in range(n)]


def log_changes(path: Path) -> list[dict]:
    """The log as written, parsed independently of the store (the reference for history)."""
    out = []
    for line in path.read_text().splitlines():
        change = json.loads(line)
        change.pop("txn_end", None)
        out.append(change)
    return out


@pytest.fixture
def file_fsyncs(monkeypatch) -> list[int]:
    """Counts os.fsync calls on log files (directory fsyncs are not commits, nor is the
    snapshot written after a seed)."""
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        if stat.S_ISREG(os.fstat(fd).st_mode) and os.readlink(f"/proc/self/fd/{fd}").endswith(
                ".jsonl"):
            calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


def test_seed_commits_in_batches_with_one_fsync_each(tmp_path, monkeypatch, file_fsyncs):
    monkeypatch.setattr(store_module, "BATCH", 10)
    store = EmbeddedStore(tmp_path / "b.jsonl")
    assert store.seed(specs(25)) == 25
    assert len(file_fsyncs) == 3 and store.version == 25 and len(store) == 25
    lines = [json.loads(x) for x in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert [c["seq"] for c in lines] == list(range(1, 26))
    assert {c["txn_end"] for c in lines} == {25}  # one transaction: all or nothing
    again = EmbeddedStore(tmp_path / "b.jsonl")
    assert sorted(e.value for e in again.active()) == sorted(e.value for e in store.active())
    assert again.seed(specs(3, "late")) == 0  # only ever into an empty store
    file_fsyncs.clear()
    store.add(EntrySpec("host", "one.example", "r"), "tns")
    assert len(file_fsyncs) == 1
    assert "txn_end" not in json.loads((tmp_path / "b.jsonl").read_text().splitlines()[-1])


def test_a_seed_with_one_bad_spec_writes_nothing(tmp_path):
    bad = [*specs(5), EntrySpec("domain", "co.uk", "r"), *specs(5, "x")]
    store = EmbeddedStore(tmp_path / "b.jsonl")
    with pytest.raises(BanlistError) as info:
        store.seed(bad)
    assert info.value.field.startswith("[5].") and store.version == 0 and len(store) == 0
    assert not (tmp_path / "b.jsonl").exists() or (tmp_path / "b.jsonl").stat().st_size == 0


CRASHING_SEED = """
import os, stat, sys
from pathlib import Path
from app.banlist.embedded import store as store_module
from app.banlist.embedded.store import EmbeddedStore, EntrySpec
store_module.BATCH = 10
real, seen = os.fsync, []
def crash_on_second_batch(fd):
    if stat.S_ISREG(os.fstat(fd).st_mode):
        seen.append(fd)
        if len(seen) == 2:
            os._exit(3)  # the process dies with batch 2 written but not fsynced
    real(fd)
os.fsync = crash_on_second_batch
EmbeddedStore(Path(sys.argv[1])).seed(
    [EntrySpec("host", f"h{i}.example", "spam") for i in range(25)])
"""


def test_a_crash_mid_seed_leaves_an_empty_store_that_seeds_again(tmp_path, monkeypatch):
    monkeypatch.setattr(changelog, "STRIDE", 4)
    path = tmp_path / "b.jsonl"
    done = subprocess.run([sys.executable, "-c", CRASHING_SEED, str(path)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 3, done.stderr
    assert len(path.read_text().splitlines()) == 20  # two batches reached the file
    store = EmbeddedStore(path)
    assert store.version == 0 and len(store) == 0 and path.stat().st_size == 0
    assert store.changes_since(0) == []
    assert store.seed(specs(25)) == 25 and EmbeddedStore(path).version == 25
    assert list(store.changelog.marks) == [  # one offset per 4 lines, none left from the crash
        sum(len(x) + 1 for x in path.read_text().splitlines()[:n]) for n in range(0, 25, 4)]


def test_an_unfinished_transaction_at_the_tail_is_dropped_whole(tmp_path):
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path)
    kept = store.add(EntrySpec("host", "kept.example", "r"), "tns")
    store.add_many(specs(3), "tns")
    size_after_kept = len(path.read_text().splitlines()[0]) + 1
    text = path.read_bytes()
    path.write_bytes(text[:-1])  # the last line lost only its newline: still not committed
    again = EmbeddedStore(path)
    assert again.version == 1 and [e.id for e in again.active()] == [kept.id]
    assert path.stat().st_size == size_after_kept
    path.write_bytes(text[:size_after_kept + 30])  # torn inside the transaction's first line
    assert EmbeddedStore(path).version == 1 and path.stat().st_size == size_after_kept
    again = EmbeddedStore(path)
    added = again.add_many(specs(2, "new"), "tns")
    assert [e.id for e in added] == ["2", "3"] and EmbeddedStore(path).version == 3


def test_an_import_that_defines_groups_is_replayed_and_a_crash_keeps_its_groups(tmp_path):
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path)
    names, _ = store.put_import([GroupSpec("acme", ("acme.com", "acme.net"), "one owner")],
                                [EntrySpec("org", "acme", "farm"),
                                 EntrySpec("host", "x.example", "r")], "tns")
    assert names == ["acme"]
    store.close()
    again = EmbeddedStore(path)  # a group inside the import used to stop the replay
    assert again.version == 3 and again.index.groups == {"acme": ("acme.com", "acme.net")}
    assert sorted(e.value for e in again.active()) == ["acme", "x.example"]
    again.close()
    text = path.read_bytes()
    path.write_bytes(text[:-1])  # the entries' transaction never finished: a crash
    crashed = EmbeddedStore(path)
    assert crashed.version == 1 and crashed.index.groups == {"acme": ("acme.com", "acme.net")}
    assert list(crashed.active()) == []
    names, done = crashed.put_import([GroupSpec("acme", ("acme.com", "acme.net"), "again")],
                                     [EntrySpec("org", "acme", "farm")], "tns")
    assert names == [] and [e.id for e, _ in done] == ["2"]  # the group held: a no-op


def test_a_log_out_of_order_or_with_a_transaction_cut_in_the_middle_is_refused(tmp_path):
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path)
    store.add_many(specs(3), "tns")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + lines[2])
    with pytest.raises(BanlistError, match="out of order"):
        EmbeddedStore(path)
    single = json.loads(lines[2])
    del single["txn_end"]
    single["seq"] = 2
    path.write_text(lines[0] + json.dumps(single) + "\n")
    with pytest.raises(BanlistError, match="unfinished transaction"):
        EmbeddedStore(path)


def test_a_failed_write_changes_nothing_and_the_next_one_works(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "BATCH", 10)
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path)
    store.add(EntrySpec("host", "first.example", "r"), "tns")
    size, real, calls = path.stat().st_size, os.fsync, []

    def full_disk_on_second(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", full_disk_on_second)
    with pytest.raises(BanlistError) as info:
        store.add_many(specs(25), "tns")
    assert status_of(info.value) == 503 and "nothing was changed" in info.value.problem
    assert store.version == 1 and len(store) == 1 and path.stat().st_size == size
    assert [c["seq"] for c in store.changes_since(0)] == [1]
    monkeypatch.setattr(os, "fsync", real)
    assert store.add(EntrySpec("host", "next.example", "r"), "tns").id == "2"
    again = EmbeddedStore(path)
    assert again.version == 2 and sorted(e.value for e in again.active()) == [
        "first.example", "next.example"]


def test_history_beyond_the_tail_comes_from_the_file_with_the_same_pages(tmp_path,
                                                                         monkeypatch):
    monkeypatch.setattr(changelog, "STRIDE", 4)
    monkeypatch.setattr(store_module, "BATCH", 6)
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path, tail=7)
    store.define_group("acme", ["acme.com"], "tns", "one owner")
    first = store.add_many(specs(20), "tns")
    store.remove(first[4].id, "appeals", "appeal granted")
    for i in range(15):
        store.add(EntrySpec("domain", f"d{i}.example", f"reason {i}"), "tns")
    store.seed(specs(3, "ignored"))  # not empty: no-op
    store.add_many(specs(9, "late"), "bulk")
    assert store.version == 46 and len(store._tail) == 7  # bounded: the rest is on disk
    reference = log_changes(path)
    assert [c["seq"] for c in reference] == list(range(1, 47))
    restarted = EmbeddedStore(path, tail=7)
    for since in range(0, 49):
        for limit in (1, 3, 10, 100):
            want = [c for c in reference if c["seq"] > since][:limit]
            assert store.changes_since(since, limit) == want, (since, limit)
            assert restarted.changes_since(since, limit) == want, (since, limit)
    assert restarted.changes_since(4, 1)[0]["entry"]["value"] == "h3.example"


def test_history_through_the_api_pages_from_the_file(settings, monkeypatch):
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.conftest import AUTH

    monkeypatch.setattr(store_module, "TAIL", 3)
    with TestClient(create_app(settings)) as client:
        for i in range(12):
            assert client.post("/v1/banlist/entries", headers=AUTH, json={
                "scope": "host", "value": f"h{i}.example", "reason": f"r{i}"}).status_code == 201
        assert len(client.app.state.services.store._tail) == 3
        seen, since = [], 0
        while True:
            page = client.get("/v1/banlist/changes", params={"since": since, "limit": 5}).json()
            if not page["changes"]:
                break
            seen += page["changes"]
            since = page["changes"][-1]["seq"]
    assert [c["seq"] for c in seen] == list(range(1, 13))
    assert [c["reason"] for c in seen] == [f"r{i}" for i in range(12)]


def test_a_sweep_logs_every_expiry_in_one_fsync(tmp_path, file_fsyncs):
    clock = [1000.0]
    store = EmbeddedStore(tmp_path / "b.jsonl", clock=lambda: clock[0])
    store.add_many([EntrySpec("host", f"t{i}.example", "r", expires_at=1010.0)
                    for i in range(5)] + [EntrySpec("host", "kept.example", "r")], "tns")
    file_fsyncs.clear()
    clock[0] = 1011.0
    assert store.sweep() == 5 and len(file_fsyncs) == 1
    assert [e.value for e in store.active()] == ["kept.example"]
    logged = [json.loads(x) for x in (tmp_path / "b.jsonl").read_text().splitlines()][-5:]
    assert [c["op"] for c in logged] == ["expire"] * 5 and logged[-1]["seq"] == store.version
    again = EmbeddedStore(tmp_path / "b.jsonl", clock=lambda: clock[0])
    assert [e.value for e in again.active()] == ["kept.example"] and again.version == 11


def test_a_sweep_cut_short_by_a_crash_keeps_the_expiries_that_reached_the_disk(tmp_path):
    clock = [1000.0]
    path = tmp_path / "b.jsonl"
    store = EmbeddedStore(path, clock=lambda: clock[0])
    store.add_many([EntrySpec("host", f"t{i}.example", "r", expires_at=1010.0)
                    for i in range(3)], "tns")
    clock[0] = 1011.0
    assert store.sweep() == 3
    data = path.read_bytes()
    path.write_bytes(data[:-20])  # the last expiry line torn, as by a crash mid-write
    again = EmbeddedStore(path, clock=lambda: clock[0])
    assert again.version == 5 and len(again) == 1  # two expiries replayed, one entry left
    assert again.sweep() == 1 and len(again) == 0 and again.version == 6
