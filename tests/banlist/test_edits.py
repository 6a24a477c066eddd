"""Editing an entry in place (app/banlist/edits.py) on each store: the embedded log replays
an `edit`, a Redis replica applies the stream's `edit` record, concurrent edits lose no
update, and a sweeper that saw the old expiry does not expire an entry extended since."""
from __future__ import annotations

import threading
import time

import orjson
import pytest

from app.banlist.base import EntryEdit, EntrySpec
from app.banlist.edits import edit_change, editable, revise
from app.banlist.embedded.store import EmbeddedStore
from app.banlist.history import ChangeFilter
from app.banlist.index import BanIndex
from app.banlist.model import Entry
from app.errors import BanlistConflict, BanlistError, BanlistNotFound

PERMANENT = EntryEdit("court order", sets_expiry=True, expires_at=None)


def wait_for(cond, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(0.005)


def test_revise_changes_expiry_and_regions_and_says_when_nothing_changes():
    entry = Entry("7", "host", "x.example", "spam", "tns", 100.0, 2000.0, frozenset({"RU"}))
    index = BanIndex([entry, Entry("8", "host", "x.example", "old", "tns", 50.0, 150.0,
                                   frozenset({"KZ"}))])
    assert revise(entry, PERMANENT, index, 1000.0) == Entry(
        "7", "host", "x.example", "spam", "tns", 100.0, None, frozenset({"RU"}))
    assert revise(entry, EntryEdit("r", regions=("ru",)), index, 1000.0) is None
    assert revise(entry, EntryEdit("r", sets_expiry=True, expires_at=2000.0004), index,
                  1000.0) is None  # the same to the millisecond, as it is written
    # entry 8 holds the same ban in KZ, but expired: moving 7 there repeats no active ban
    assert revise(entry, EntryEdit("r", regions=("KZ",)), index, 1000.0).regions == {"KZ"}
    with pytest.raises(BanlistConflict) as info:
        revise(entry, EntryEdit("r", regions=("KZ",)), index, 100.0)
    assert info.value.field == "regions" and info.value.extra == {"identical_to": "8"}
    with pytest.raises(BanlistError) as info:
        revise(entry, EntryEdit("r", sets_expiry=True, expires_at=999.0), index, 1000.0)
    assert info.value.field == "expires_at"
    with pytest.raises(BanlistNotFound):
        editable(entry, "7", PERMANENT, 2000.0)  # expired at that instant
    with pytest.raises(BanlistError) as info:
        editable(entry, "7", EntryEdit("  "), 1000.0)
    assert info.value.field == "reason"


def test_an_edit_change_says_only_what_changed():
    before = {"id": "3", "scope": "host", "value": "a.example", "expires_at": None,
              "regions": ["RU"]}
    after = {**before, "regions": []}
    assert edit_change(before, after) == {"id": "3", "entry": after,
                                          "before": {"regions": ["RU"]},
                                          "after": {"regions": []}}


def test_the_embedded_log_replays_an_edit_on_restart(tmp_path):
    path = tmp_path / "banlist.jsonl"
    now = [1000.0]
    store = EmbeddedStore(path, clock=lambda: now[0])
    entry = store.add(EntrySpec("domain", "spam.example", "doorways", ("ru",), 1100.0), "tns")
    other = store.add(EntrySpec("host", "other.example", "r"), "tns")
    extended, changed = store.edit(entry.id, PERMANENT, "legal")
    assert changed and extended.expires_at is None and store.version == 3
    moved, _ = store.edit(entry.id, EntryEdit("and Belarus", regions=("RU", "BY")), "tns")
    assert store.edit(entry.id, EntryEdit("again", regions=("by", "ru")), "tns") == (moved,
                                                                                      False)
    now[0] = 1200.0  # past the expiry it had: it holds, the sweep leaves it
    assert store.sweep() == 0
    del store
    again = EmbeddedStore(path, clock=lambda: now[0])
    assert again.version == 4 and again.index.get(entry.id) == moved
    assert [e.id for e in again.active()] == [other.id, entry.id]
    ops = [(c["op"], c.get("before"), c["actor"]) for c in again.changes_since(0)]
    assert ops == [("add", None, "tns"), ("add", None, "tns"),
                   ("edit", {"expires_at": "1970-01-01T00:18:20.000Z"}, "legal"),
                   ("edit", {"regions": ["RU"]}, "tns")]
    # the history of the value, searched in the log file's bytes
    found = again.history(ChangeFilter.of(value="spam.example"))
    assert [c["seq"] for c in found] == [1, 3, 4]


def test_an_edit_through_one_replica_reaches_the_other_through_the_stream(replicas):
    a, b = replicas("a"), replicas("b")
    entry = a.add(EntrySpec("host", "x.example", "spam", expires_at=time.time() + 3600), "tns")
    wait_for(lambda: b.index.get(entry.id) == entry)

    def lag_count() -> float:
        return b.events.registry.get_sample_value(
            "rearrange_banlist_replication_lag_seconds_count")

    before = lag_count()
    edited, changed = a.edit(entry.id, EntryEdit("court order", sets_expiry=True,
                                                 expires_at=None, regions=("RU",)), "legal")
    assert changed and a.index.get(entry.id) == edited  # read-your-writes
    wait_for(lambda: b.index.get(entry.id) == edited)
    assert lag_count() == before + 1 and b.version == a.version == 2 and len(b) == 1
    (_, record), = a.client.xrevrange(a.keys.stream, count=1)
    payload = {k: v for k, v in entry.as_dict().items() if k != "id"}
    assert record["op"] == "edit" and orjson.loads(record["previous"]) == payload
    assert b.changes_since(1) == a.changes_since(1) == [{
        "seq": 2, "op": "edit", "id": entry.id, "entry": edited.as_dict(),
        "before": {"expires_at": entry.as_dict()["expires_at"], "regions": []},
        "after": {"expires_at": None, "regions": ["RU"]}, "actor": "legal",
        "reason": "court order", "at": b.changes_since(1)[0]["at"]}]
    # a lagging replica edits what Redis holds, not its stale copy
    b.replica.stop()
    later, _ = a.edit(entry.id, EntryEdit("and KZ", regions=("RU", "KZ")), "tns")
    assert b.index.get(entry.id) == edited
    last, changed = b.edit(entry.id, EntryEdit("no, Belarus", regions=("BY",)), "tns")
    assert changed and last.expires_at is None
    assert b.changes_since(3)[0]["before"] == {"regions": ["KZ", "RU"]}
    wait_for(lambda: a.index.get(entry.id) == last)


def test_concurrent_edits_on_two_replicas_lose_no_update(replicas):
    a, b = replicas("a"), replicas("b")
    entry = a.add(EntrySpec("host", "x.example", "spam"), "tns")
    wait_for(lambda: b.index.get(entry.id) is not None)
    far = time.time() + 86400
    errors: list[BaseException] = []

    def expiries() -> None:  # a moves the expiry ...
        try:
            for n in range(15):
                a.edit(entry.id, EntryEdit("a", sets_expiry=True, expires_at=far + n), "a")
        except BaseException as exc:
            errors.append(exc)

    def regions() -> None:  # ... while b moves the regions
        try:
            for code in ("AT", "BE", "CH", "DE", "EE", "FI", "GR", "HU", "IE", "JP"):
                b.edit(entry.id, EntryEdit("b", regions=(code,)), "b")
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=expiries), threading.Thread(target=regions)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    wait_for(lambda: a.version == b.version == 26)
    final = a.index.get(entry.id)
    assert final == b.index.get(entry.id)
    assert final.expires_at == pytest.approx(far + 14, abs=0.001) and final.regions == {"JP"}
    # each edit starts from what the one before it left: no edit was decided on a stale entry
    state = entry.as_dict()
    for change in a.changes_since(1, 100):
        assert {k: state[k] for k in change["before"]} == change["before"], change
        state = change["entry"]


def test_a_sweeper_that_saw_the_old_expiry_does_not_expire_an_extended_entry(replicas):
    # a's clock runs 5 s behind b's: to a the entry is still active when b sees it expired
    a, b = replicas("a", clock=lambda: time.time() - 5), replicas("b")
    entry = b.add(EntrySpec("host", "x.example", "spam", expires_at=time.time() + 0.5), "tns")
    wait_for(lambda: a.index.get(entry.id) is not None)
    wait_for(lambda: time.time() > entry.expires_at)
    b.replica.stop()  # b does not follow: it sweeps on the expiry it saw
    extended, changed = a.edit(entry.id, PERMANENT, "legal")
    assert changed and b.index.get(entry.id).expires_at == entry.expires_at
    assert b.sweep() == 0  # the script finds another expiry in Redis: nothing expired
    assert a.client.hexists(a.keys.entries, entry.id)
    assert [c["op"] for c in a.changes_since(0)] == ["add", "edit"]
    assert b.index.get(entry.id) == extended  # its write caught it up
    wait_for(lambda: a.version == 2)
    assert a.index.get(entry.id) == extended
