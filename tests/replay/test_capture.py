"""Request capture: sampling, the size cap, rotation, drops counted and logged once, and
nothing but the body written."""
from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from pathlib import Path

import orjson
from fastapi.testclient import TestClient

from app.config.settings import Settings
from app.main import create_app
from app.replay.capture import Capture, CaptureSettings

BODY = (b'{\n  "query": {"text": "sofa"},\n'
        b'  "documents": [{"id": "d1", "url": "http://a/", "score": 1}]\n}')


def lines(path: Path) -> list[dict]:
    return [orjson.loads(raw) for raw in path.read_bytes().splitlines()]


def test_a_drawn_body_is_written_as_one_line_with_its_versions(tmp_path):
    drops: Counter[str] = Counter()
    draws = iter([0.5, 0.001, 0.3])
    cap = Capture(CaptureSettings(tmp_path / "c.jsonl", rate=0.25), drops.update,
                  draw=lambda: next(draws))
    for version in (1, 2, 3):
        cap.offer(BODY, 200, "abc", version)
    cap.close()
    [line] = lines(tmp_path / "c.jsonl")
    assert line["request"] == orjson.loads(BODY)
    assert (line["capture"], line["status"], line["config_version"],
            line["banlist_version"]) == (1, 200, "abc", 2)
    assert isinstance(line["ts"], float)
    assert (tmp_path / "c.jsonl").stat().st_mode & 0o777 == 0o600  # query text, user ids
    assert drops == Counter()


def test_over_the_cap_or_not_json_is_dropped_counted_and_logged_once(tmp_path, caplog):
    drops: Counter[str] = Counter()
    cap = Capture(CaptureSettings(tmp_path / "c.jsonl", rate=1.0, max_body_bytes=len(BODY)),
                  lambda reason: drops.update([reason]))
    with caplog.at_level(logging.WARNING, "app.replay.capture"):
        for _ in range(3):
            cap.offer(BODY + b" ", 200, "v", 1)
        cap.offer(b"{nope", 200, "v", 1)
        cap.offer(b"{nope", 200, "v", 1)
        cap.offer(BODY, 200, "v", 1)
        cap.close()
    assert drops == Counter({"too_large": 3, "not_json": 2})
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2
    assert "too_large" in warned[0] and "over the cap" in warned[0]
    assert len(lines(tmp_path / "c.jsonl")) == 1


def test_a_full_queue_drops_instead_of_waiting(tmp_path):
    drops: Counter[str] = Counter()
    cap = Capture(CaptureSettings(tmp_path / "c.jsonl", rate=1.0, queue=2),
                  lambda reason: drops.update([reason]))
    held = threading.Event()
    write = cap._write
    cap._write = lambda line: (held.wait(10), write(line))  # a writer stuck on a slow disk
    for _ in range(6):
        cap.offer(BODY, 200, "v", 1)
    held.set()
    cap.close()
    written = len(lines(tmp_path / "c.jsonl"))
    assert drops["queue_full"] == 6 - written and written in (2, 3)


def test_the_file_rotates_before_it_passes_its_size_and_keeps_so_many(tmp_path):
    path = tmp_path / "c.jsonl"
    cap = Capture(CaptureSettings(path, rate=1.0, max_file_bytes=400, keep=2), print)
    for n in range(12):
        cap.offer(b'{"documents": [], "n": %d}' % n, 200, "v", n)
    cap.close()
    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == ["c.jsonl", "c.jsonl.1", "c.jsonl.2"]
    assert all(f.stat().st_size <= 400 for f in files)
    kept = [line["request"]["n"] for f in (files[2], files[1], files[0]) for line in lines(f)]
    assert kept == list(range(12 - len(kept), 12))  # the newest, in order; the oldest went


def test_the_service_captures_bodies_never_headers_nor_forced_requests(tmp_path):
    path = tmp_path / "capture-{pid}.jsonl"
    settings = Settings(config=tmp_path / "rules.yaml", banlist_path=tmp_path / "b.jsonl",
                        admin_tokens="qa:s3cret", config_poll_seconds=0, redis_url=None,
                        capture_path=path, capture_rate=1.0)
    (tmp_path / "rules.yaml").write_text(
        "profiles: {default: {}}\nexperiments: [{name: e, unit: user_id, "
        "variants: {control: 50, treatment: 50}, rules: []}]\n")
    with TestClient(create_app(settings)) as client:
        auth = {"Authorization": "Bearer s3cret"}
        assert client.post("/v1/rerank", content=BODY, headers=auth).status_code == 200
        forced = {**auth, "X-Rearrange-Force-Variant": "e=treatment"}
        assert client.post("/v1/rerank", content=BODY, headers=forced).status_code == 200
        assert client.post("/v1/rerank", content=b'{"documents": 1}').status_code == 422
        deadline = time.monotonic() + 10
        while "rearrange_capture_written_total 1.0" not in (metrics := client.get(
                "/metrics").text) and time.monotonic() < deadline:
            time.sleep(0.02)  # the writer thread is behind the request by design
    [written] = list(tmp_path.glob("capture-*.jsonl"))
    assert written.name != "capture-{pid}.jsonl"
    raw = written.read_bytes()
    assert b"s3cret" not in raw and b"Force" not in raw and b"Bearer" not in raw
    [line] = lines(written)
    assert line["request"] == orjson.loads(BODY)
    assert "rearrange_capture_written_total 1.0" in metrics
    assert 'rearrange_capture_dropped_total{reason="queue_full"} 0.0' in metrics
