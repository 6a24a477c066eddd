"""The audit log on failing disks: every line is written whole or counted, none torn into
the next, and shutdown goes on past it. Real limits: RLIMIT_FSIZE, /dev/full, a FIFO that
nobody reads."""
from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import pytest

from app.banlist import snapshot
from app.observability.audit import AuditLog
from tests.conftest import AUTH, ROOT, app_on
from tests.sanctions.test_sanctions_redis import feed, until

LIMIT = 100_000  # bytes: RLIMIT_FSIZE of the writing process
SENT = [msgspec.json.encode({"i": i, "pad": "x" * 80}) for i in range(3000)]  # as LIMITED emits
FIT = b"\n".join(SENT)[:LIMIT].count(b"\n")  # the lines that fit whole under LIMIT
LIMITED = """
import json, logging, resource, signal, sys
import msgspec
from app.observability.audit import AuditLog

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills the process at the limit
logging.basicConfig(format="LOG %(message)s")
path, n, lift = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "lift"
hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[4]), hard))
dropped = []

def on_drop(count):
    dropped.append(count)
    if lift:  # the disk has room again after the first failed write
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))

audit = AuditLog(path, on_drop, report_seconds=3600)
for i in range(n):
    audit.emit_line(msgspec.json.encode({"i": i, "pad": "x" * 80}))
audit.close()
print(json.dumps({"dropped": sum(dropped)}))
"""


def write_limited(path: Path, n: int, lift: bool = False) -> tuple[int, str]:
    """Emit n lines in a process whose files may not exceed LIMIT bytes: (dropped, its log)."""
    done = subprocess.run([sys.executable, "-c", LIMITED, str(path), str(n),
                           "lift" if lift else "stay", str(LIMIT)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr  # close() raised nothing
    return json.loads(done.stdout)["dropped"], done.stderr


def split(data: bytes) -> tuple[list[dict], list[bytes], bytes]:
    """(records parsed, newline-ended lines that do not parse, unterminated tail)."""
    *lines, tail = data.split(b"\n")
    good, bad = [], []
    for line in lines:
        try:
            good.append(json.loads(line))
        except ValueError:
            bad.append(line)
    return good, bad, tail


def test_at_a_file_size_limit_every_line_is_written_or_counted(tmp_path):
    path = tmp_path / "audit.jsonl"
    dropped, logged = write_limited(path, len(SENT))
    good, bad, tail = split(path.read_bytes())
    assert bad == [] and [r["i"] for r in good] == list(range(len(good)))
    assert len(good) + dropped == len(SENT)
    assert len(good) == FIT and path.stat().st_size == LIMIT
    assert tail and SENT[FIT].startswith(tail)  # the line cut short by the limit
    # one traceback for the first failure, then one summary when the writer stops
    assert logged.count("LOG ") == 2 and logged.count("Traceback") == 1, logged
    assert sum(map(int, re.findall(r"(\d+) lines dropped", logged))) == dropped


def test_after_a_write_cut_short_the_next_line_starts_on_its_own(tmp_path):
    path = tmp_path / "audit.jsonl"
    dropped, _ = write_limited(path, len(SENT), lift=True)
    data = path.read_bytes()
    good, bad, tail = split(data)
    assert len(good) + dropped == len(SENT) and tail == b""
    assert dropped > 0 and len(good) > FIT  # lines written after the limit was lifted
    # the one bad line is the fragment left at the limit, ended by the next write
    assert len(bad) == 1 and data[LIMIT:LIMIT + 1] == b"\n" and data[:LIMIT].endswith(bad[0])
    assert [r["i"] for r in good] == sorted({r["i"] for r in good})


def test_a_restart_after_a_write_cut_short_starts_a_new_line(tmp_path):
    path = tmp_path / "audit.jsonl"
    write_limited(path, len(SENT))
    dropped: list[int] = []
    audit = AuditLog(str(path), dropped.append)
    for i in range(10):
        audit.emit_line(msgspec.json.encode({"i": 10_000 + i}))
    audit.close()
    good, bad, tail = split(path.read_bytes())
    assert dropped == [] and len(bad) == 1 and tail == b""
    assert [r["i"] for r in good[-10:]] == list(range(10_000, 10_010))


@pytest.mark.skipif(not os.access("/dev/full", os.W_OK), reason="no writable /dev/full")
def test_a_full_disk_counts_every_line_and_close_returns(caplog):
    dropped: list[int] = []
    audit = AuditLog("/dev/full", dropped.append, report_seconds=3600)
    for i in range(5000):
        audit.emit_line(msgspec.json.encode({"i": i}))
    audit.close()
    audit.close()  # idempotent
    assert sum(dropped) == 5000
    assert audit.failing()
    failures = [r for r in caplog.records if r.name == "app.observability.audit"]
    assert len(failures) == 2 and failures[0].exc_info is not None


def test_close_does_not_wait_past_its_timeout_for_a_stuck_writer(tmp_path, caplog):
    fifo = tmp_path / "audit.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # there, but reads nothing yet
    dropped: list[int] = []
    audit = AuditLog(str(fifo), dropped.append, maxsize=100)
    for i in range(2000):  # 2 KB lines: the writer blocks once the pipe holds 64 KB
        audit.emit_line(msgspec.json.encode({"i": i, "pad": "y" * 2000}))
    closer = threading.Thread(target=audit.close, kwargs={"timeout": 0.2})
    closer.start()
    closer.join(30)
    assert not closer.is_alive()
    assert any("did not finish" in r.getMessage() for r in caplog.records)
    os.set_blocking(reader, True)
    with os.fdopen(reader, "rb") as fh:
        data = fh.read()  # the writer finishes its batch, then closes its end: EOF
    good, bad, tail = split(data)
    assert bad == [] and tail == b"" and len(good) + sum(dropped) == 2000


def test_shutdown_with_a_full_disk_still_closes_both_stores(redis_server, settings, caplog):
    if not os.access("/dev/full", os.W_OK):
        pytest.skip("no writable /dev/full")
    caplog.set_level(logging.ERROR)
    settings = settings.model_copy(update={"audit_log": "/dev/full"})
    snapshots = [settings.banlist_path.with_name(name)
                 for name in ("a.snapshot.json", "quarantine.snapshot.json")]

    def seqs():
        return [s.seq if (s := snapshot.read(path)) else None for path in snapshots]

    with app_on(redis_server, settings, "a") as a:
        until(lambda: seqs() == [0, 0])  # written at start; the next one only at shutdown
        assert a.post("/v1/banlist/entries", headers=AUTH, json={
            "scope": "host", "value": "bad.example", "reason": "spam"}).status_code == 201
        feed(a, "grey.example", 0.75, 1)  # into the quarantine
        page = {"documents": [{"id": "x", "url": "http://bad.example/1", "score": 1.0}]}
        for _ in range(20):  # each removes a banned document: one audit line each
            assert a.post("/v1/rerank", json=page).json()["documents"] == []
        registry = a.app.state.services.metrics.registry
        until(lambda: registry.get_sample_value("rearrange_audit_log_dropped_total") == 20)
        assert registry.get_sample_value("rearrange_audit_log_failing") == 1
        assert seqs() == [0, 0]
    assert seqs() == [1, 1]  # the lifespan got past the audit log to both stores' close
    assert not any("shutdown failed" in r.getMessage() for r in caplog.records)
