"""bench.embedded_start: the log it writes is one the embedded store reads as its own."""
from __future__ import annotations

from app.banlist import digest
from app.banlist.embedded.store import EmbeddedStore
from bench.embedded_start import append_changes, write_log


def test_the_generated_log_is_replayed_as_a_seed_and_changes(tmp_path):
    path = tmp_path / "banlist.jsonl"
    write_log(path, 30)
    store = EmbeddedStore(path)
    assert store.version == 30 and len(store) == 30 and store.write_snapshot()
    append_changes(path, 30, 6)  # adds 31, 33, 35; removals of 1, 3, 5
    again = EmbeddedStore(path)
    assert again.version == 36 and len(again) == 30
    assert {"1", "3", "5"}.isdisjoint(e.id for e in again.index)
    assert again.digest == digest.Digest.of(again.index, again.index.groups).value
    assert [f["id"] for f in again.former("http://site-1.example.com/", "site-1.example.com")
            ] == ["1"]
