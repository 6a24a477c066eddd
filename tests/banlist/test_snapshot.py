"""The banlist's snapshot bytes (app/banlist/snapshot.py): the header and the index
round-trip, the digest is checked on load, older local snapshot files are still read."""
from __future__ import annotations

import os

import orjson
import pytest

from app.banlist import snapshot
from app.banlist.digest import Digest
from app.banlist.index import BanIndex
from app.banlist.model import Entry


def entry(n: int, scope: str = "host", value: str | None = None, **kw) -> Entry:
    fields = dict(reason="spam", actor="tns", created_at=1.7e9 + n, expires_at=None,
                  regions=frozenset())
    fields.update(kw)
    return Entry(str(n), scope, value or f"h{n}.example", **fields)


def make_index() -> BanIndex:
    index = BanIndex(groups={"acme": ("acme.com", "acme.net")})
    for n in range(1, 40):
        index.add(entry(n))
    index.add(entry(40, "org", "acme"))
    index.add(entry(41, "url", "h1.example/a?b=1", regions=frozenset({"DE"})))
    index.add(entry(42, "prefix", "h2.example/forum/", expires_at=1.9e9))
    index.remove("7")
    return index


def snap_of(index: BanIndex, seq: int = 42) -> snapshot.Snapshot:
    return snapshot.Snapshot(index, seq, 3, "1700-0", 1.7e9,
                             Digest.of(index, index.groups).value)


def test_a_snapshot_round_trips_every_entry_group_and_header_field():
    index = make_index()
    back = snapshot.decode(snapshot.encode(snap_of(index)))
    assert (back.seq, back.epoch, back.stream_id, back.synced_at) == (42, 3, "1700-0", 1.7e9)
    assert list(back.index) == list(index) and back.index.groups == index.groups
    assert back.digest == Digest.of(index, index.groups).value
    assert back.index.match("http://www.acme.net/", "www.acme.net", None, 1.8e9).id == "40"


def test_bytes_that_are_not_what_their_header_says_are_refused():
    index = make_index()
    data = snapshot.encode(snap_of(index))
    with pytest.raises(snapshot.SnapshotError, match="not a banlist snapshot"):
        snapshot.decode(data[:-10])  # a torn download
    with pytest.raises(snapshot.SnapshotError, match="not a banlist snapshot"):
        snapshot.decode(b"<html>502 Bad Gateway</html>")
    lying = snapshot.Snapshot(index, 42, 3, "1700-0", 1.7e9, 0)  # a digest of other content
    with pytest.raises(snapshot.SnapshotError, match="torn or altered"):
        snapshot.decode(snapshot.encode(lying))
    altered = data.replace(b"h12.example", b"h13.exampl")  # one entry's bytes changed
    with pytest.raises(snapshot.SnapshotError):
        snapshot.decode(altered)


def test_a_local_file_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    index = make_index()
    path = tmp_path / "snap.bin"
    snapshot.write(path, snapshot.encode(snap_of(index, 1)))
    old = path.read_bytes()
    assert snapshot.read(path).seq == 1

    def full(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="disk full"):
        snapshot.write(path, snapshot.encode(snap_of(index, 2)))
    assert path.read_bytes() == old and [p.name for p in tmp_path.iterdir()] == ["snap.bin"]
    path.write_bytes(old[:-3])
    assert snapshot.read(path) is None  # refused, logged: the replica loads Redis's copy


def test_local_files_of_the_json_formats_are_still_read(tmp_path):
    index = make_index()
    groups = {k: list(v) for k, v in index.groups.items()}
    lines = tmp_path / "lines.json"
    head = {"format": 2, "seq": 9, "epoch": 2, "stream_id": "5-0", "synced_at": 1.0,
            "groups": groups, "digest": Digest.of(index, index.groups).hex}
    lines.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in
                               [head, *(e.as_dict() for e in index)]))
    back = snapshot.read(lines)
    assert back is not None and back.seq == 9 and list(back.index) == list(index)
    whole = tmp_path / "whole.json"
    whole.write_bytes(orjson.dumps({
        "format": 1, "seq": 9, "epoch": 2, "stream_id": "5-0", "synced_at": 1.0,
        "groups": groups, "entries": [e.as_dict() for e in index]}))
    assert list(snapshot.read(whole).index) == list(index)
    lines.write_bytes(lines.read_bytes().replace(b'"h12.example"', b'"h13.example"'))
    assert snapshot.read(lines) is None  # the digest in its header says otherwise


def test_frozen_is_the_index_as_of_the_call():
    index = make_index()
    before = list(index)
    pinned = index.frozen()
    index.remove("3")  # after the call: still in the pinned copy
    index.add(entry(99))  # after the call: not in it
    for n in range(100, 3000):  # enough removals to compact the columns underneath
        index.add(entry(n))
    for n in range(100, 3000):
        index.remove(str(n))
    assert list(pinned) == before
    assert "3" not in {e.id for e in index} and index.get("99") is not None
