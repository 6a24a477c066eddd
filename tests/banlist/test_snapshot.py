"""The local snapshot file: streamed both ways, pinned to one moment, old format still read."""
from __future__ import annotations

import orjson
import pytest

from app.banlist.digest import Digest
from app.banlist.index import BanIndex
from app.banlist.model import Entry
from app.banlist.redis import snapshot


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


def snap_of(index: BanIndex, seq: int) -> snapshot.Snapshot:
    return snapshot.Snapshot(index, seq, 1, f"{seq}-0", float(seq),
                             Digest.of(index, index.groups).value)


def test_a_snapshot_round_trips_every_entry_and_group(tmp_path):
    index = make_index()
    path = tmp_path / "snap.json"
    snap = snapshot.Snapshot(index, 42, 3, "1700-0", 1.7e9, Digest.of(index, index.groups).value)
    snapshot.write(path, snap, index.frozen())
    lines = path.read_bytes().splitlines()
    assert orjson.loads(lines[0])["format"] == 2 and len(lines) == 1 + len(index)
    back = snapshot.read(path)
    assert back is not None and (back.seq, back.epoch, back.stream_id) == (42, 3, "1700-0")
    assert list(back.index) == list(index) and back.index.groups == index.groups
    assert back.index.match("http://www.acme.net/", "www.acme.net", None, 1.8e9).id == "40"


def test_frozen_is_the_index_as_of_the_call(tmp_path):
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


def test_the_old_single_document_format_is_still_read(tmp_path):
    index = make_index()
    path = tmp_path / "old.json"
    path.write_bytes(orjson.dumps({
        "format": 1, "seq": 9, "epoch": 2, "stream_id": "5-0", "synced_at": 1.0,
        "groups": {k: list(v) for k, v in index.groups.items()},
        "entries": [e.as_dict() for e in index]}))
    back = snapshot.read(path)
    assert back is not None and back.seq == 9 and list(back.index) == list(index)


def test_a_cut_off_snapshot_is_refused_not_half_loaded(tmp_path):
    index = make_index()
    path = tmp_path / "snap.json"
    snapshot.write(path, snap_of(index, 1), index.frozen())
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    assert snapshot.read(path) is None
    path.write_bytes(b"[1, 2]\n")
    assert snapshot.read(path) is None


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    index = make_index()
    path = tmp_path / "snap.json"
    snapshot.write(path, snap_of(index, 1), index.frozen())
    old = path.read_bytes()

    def broken():
        yield from index.frozen()
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        snapshot.write(path, snap_of(index, 2), broken())
    assert path.read_bytes() == old and [p.name for p in tmp_path.iterdir()] == ["snap.json"]
