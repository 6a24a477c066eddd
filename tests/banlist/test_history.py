"""The embedded store's change log read back for T&S: history filtered by value, host,
actor and time, from the log file or from memory."""
from __future__ import annotations

from pathlib import Path

import pytest

from app.api.errors import status_of
from app.banlist.embedded.store import EmbeddedStore
from app.banlist.model import iso
from app.errors import FieldError
from tests.banlist.history_log import T0, flt, older_log, written


def seqs(changes: list[dict]) -> list[int]:
    return [c["seq"] for c in changes]


def test_history_by_host_takes_its_subdomains_parents_and_org_groups(history_store):
    store = history_store
    assert seqs(store.history(flt(host="example.com"))) == [1, 2, 3, 5, 6, 7, 8, 9]
    # www.example.com: the parent domain's ban and the group holding it, not a sibling host
    assert seqs(store.history(flt(host="http://WWW.Example.com/page"))) == [1, 2, 5, 6, 7, 8, 9]
    assert seqs(store.history(flt(host="acme.net"))) == [5, 6]
    assert seqs(store.history(flt(host="other.org"))) == [4]
    assert store.history(flt(host="nothing.example")) == []


def test_history_by_value_actor_and_time(history_store):
    store = history_store
    assert seqs(store.history(flt(value="EXAMPLE.com."))) == [1, 7]
    assert seqs(store.history(flt(value="www.example.com/x"))) == [2]
    assert seqs(store.history(flt(value="acme"))) == [5, 6]
    assert seqs(store.history(flt(actor="antispam"))) == [4, 8]
    assert seqs(store.history(flt(actor="system"))) == [9]
    start, until = iso(T0 + 120), iso(T0 + 300)
    assert seqs(store.history(flt(start=start, until=until))) == [3, 4, 5]
    assert seqs(store.history(flt(host="example.com", start=start, until=until,
                                  actor="tns"))) == [3, 5]


def test_history_pages_on_with_since(history_store):
    first = history_store.history(flt(host="example.com"), since=0, limit=3)
    rest = history_store.history(flt(host="example.com"), since=first[-1]["seq"], limit=100)
    assert seqs(first) == [1, 2, 3] and seqs(rest) == [5, 6, 7, 8, 9]


def test_a_removal_and_an_expiry_carry_the_entry_they_ended(history_store):
    removal = history_store.history(flt(value="example.com"))[1]
    expiry = history_store.history(flt(actor="system"))[0]
    assert removal["op"] == "remove" and removal["entry"]["value"] == "example.com"
    assert removal["entry"]["actor"] == "legal" and removal["reason"] == "appeal granted"
    assert expiry["op"] == "expire" and expiry["entry"]["value"] == "www.example.com"


def test_a_restart_reads_the_same_history_from_the_log(tmp_path: Path):
    first = written(tmp_path / "banlist.jsonl")
    want = first.history(flt(host="example.com"))
    first.close()
    assert EmbeddedStore(tmp_path / "banlist.jsonl", tail=2).history(
        flt(host="example.com")) == want


def test_an_older_log_whose_removals_name_only_the_id(tmp_path: Path):
    """Removals and expiries logged before they carried their entry are matched to the add
    of that id read before them."""
    store = EmbeddedStore(older_log(tmp_path / "old.jsonl"), tail=1)
    assert seqs(store.history(flt(host="a.example"))) == [1, 3, 4, 5]
    assert seqs(store.history(flt(host="b.example"))) == [2, 6]


@pytest.mark.parametrize(("kw", "field"), [
    ({"value": ""}, "query.value"),
    ({"value": "*.example.com"}, "query.value"),
    ({"host": "http://"}, "query.host"),
    ({"start": "2025-01-01T00:00:00"}, "query.from"),
    ({"until": "tomorrow"}, "query.until"),
    ({"start": "2025-01-02", "until": "2025-01-01"}, "query.until"),
])
def test_a_bad_filter_names_its_parameter(kw, field):
    with pytest.raises(FieldError) as exc:
        flt(**kw)
    assert exc.value.field == field and status_of(exc.value) == 422
