"""A real uvicorn process: hot reload on file change while requests keep flowing."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from bench.replicas import free_port
from tests.conftest import ROOT
from tests.helpers import answers
from tests.redis_server import LIVE

PAGE = {"documents": [{"id": f"d{i}", "url": f"http://h{i}.example/{i}", "score": 20 - i}
                      for i in range(20)]}


@pytest.fixture
def server(tmp_path: Path):
    """`rearrange serve` on a free port with its own config file, polled every 0.2 s."""
    proc, base, config = start_server(tmp_path)
    yield base, config, proc
    if proc.poll() is None:
        proc.terminate()
        proc.wait(10)


def start_server(tmp_path: Path, **extra_env: str) -> tuple[subprocess.Popen, str, Path]:
    config = tmp_path / "rules.yaml"
    config.write_text("profiles: {default: {trim: [{depth: {k: 5}}]}}")
    port, data = free_port(), free_port()
    env = {**os.environ, "REARRANGE_CONFIG": str(config), "REARRANGE_CONFIG_POLL_SECONDS": "0.2",
           "REARRANGE_DATA_PORT": str(data),
           "REARRANGE_BANLIST_PATH": str(tmp_path / "banlist.jsonl"),
           "REARRANGE_ADMIN_TOKENS": "tns:t", "REARRANGE_LOG_LEVEL": "INFO",
           "REARRANGE_BODY_TIMEOUT_SECONDS": "0.5", "REARRANGE_DRAIN_SECONDS": "1.5"}
    env.pop("REDIS_URL", None)  # the embedded store, unless the test names a Redis
    env.update(extra_env)
    data = int(env["REARRANGE_DATA_PORT"])
    log = tmp_path / "server.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
                                cwd=ROOT, env=env, stderr=err)
    base = f"http://127.0.0.1:{port}"
    if not (answers(f"{base}/readyz", 20, proc)
            and answers(f"http://127.0.0.1:{data}/healthz", 10, proc)):
        proc.kill()
        pytest.fail(f"server did not start: {log.read_text()[-2000:]}")
    LIVE[("127.0.0.1", port)] = (data, proc)  # tests/paths.py: the native path
    return proc, base, config


def write_atomically(path: Path, text: str) -> None:
    """How a deploy writes a config (and a kubelet swaps a ConfigMap): never half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def wait_for_new_version(base: str, old: str, timeout: float = 10.0) -> str:
    """Poll /readyz until the served config version changes (the poller runs every 0.2 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        version = httpx.get(f"{base}/readyz").json()["config_version"]
        if version != old:
            return version
        time.sleep(0.05)
    pytest.fail(f"config version stayed {old} for {timeout} s after the file changed")


def test_our_info_lines_reach_stderr(server, tmp_path):
    """uvicorn configures only its loggers: ours (a config reload, a refusal) must show too."""
    base, config, _ = server
    old = httpx.get(f"{base}/readyz").json()["config_version"]
    write_atomically(config, "profiles: {default: {trim: [{depth: {k: 3}}]}}")
    new = wait_for_new_version(base, old)
    write_atomically(config, "profiles: {default: {trim: [{depth: {k: 0}}]}}")
    log = tmp_path / "server.log"
    deadline = time.monotonic() + 10
    while "config reload refused" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    text = log.read_text()
    assert f"INFO:     app.config.versions: config: now serving {new} (file by file)" in text, (
        text[-2000:])
    assert f"ERROR:    rearrange: config reload refused, still serving {new}" in text


def test_hot_reload_under_concurrent_requests(server):
    base, config, _ = server
    results: list[tuple[int, str, int]] = []
    stop = threading.Event()

    def hammer() -> None:
        with httpx.Client(base_url=base, timeout=5) as c:
            while not stop.is_set():
                r = c.post("/v1/rerank", json=PAGE)
                body = r.json()
                results.append((r.status_code, body.get("config_version"),
                                len(body.get("documents", []))))

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    versions = [httpx.get(f"{base}/readyz").json()["config_version"]]
    for k in (3, 7, 4):
        write_atomically(config, f"profiles: {{default: {{trim: [{{depth: {{k: {k}}}}}]}}}}")
        versions.append(wait_for_new_version(base, versions[-1]))
        time.sleep(0.3)  # let requests flow on this version
    versions.pop(0)
    write_atomically(config, "profiles: {default: {trim: [nope]}}")  # refused; 4 keeps serving
    refused = 'rearrange_config_reloads_total{result="refused"} 1.0'
    deadline = time.monotonic() + 10
    while refused not in httpx.get(f"{base}/metrics").text and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for t in threads:
        t.join()
    assert len(set(versions)) == 3
    assert results and all(status == 200 for status, _, _ in results)
    # each response is consistent with the config that served it: version ↔ depth
    depth_of = {}
    for _, version, n in results:
        depth_of.setdefault(version, set()).add(n)
    assert all(len(sizes) == 1 for sizes in depth_of.values()), depth_of
    assert {n for sizes in depth_of.values() for n in sizes} >= {3, 7, 4}
    final = httpx.post(f"{base}/v1/rerank", json=PAGE).json()
    assert final["config_version"] == versions[-1] and len(final["documents"]) == 4
    assert refused in httpx.get(f"{base}/metrics").text


def test_srm_cli_reads_a_running_service_and_rebucketing_reload_is_refused(server, capsys):
    from app.cli.main import main

    base, config, _ = server
    experiment = ("profiles: {default: {rerank: [spam_demotion]}}\n"
                  "experiments: [{name: e, unit: user_id, variants: {control: 50, "
                  "treatment: 50}, rules: [spam_demotion]}]\n")
    old = httpx.get(f"{base}/readyz").json()["config_version"]
    config.write_text(experiment)
    version = wait_for_new_version(base, old)
    with httpx.Client(base_url=base, timeout=5) as c:
        for i in range(200):
            assert c.post("/v1/rerank", json={**PAGE, "unit": {"user_id": f"u{i}"}}
                          ).status_code == 200
    assert main(["experiments", "srm", "--url", f"{base}/metrics", "--config",
                 str(config), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["experiments"][0]
    assert sum(report["observed"].values()) == 200 and report["flagged"] is False
    # reordering the variants would re-bucket every unit: the poller refuses it
    config.write_text(experiment.replace("control: 50, treatment: 50",
                                         "treatment: 50, control: 50"))
    refused = 'rearrange_config_reloads_total{result="refused"} 1.0'
    deadline = time.monotonic() + 10
    while refused not in httpx.get(f"{base}/metrics").text:
        assert time.monotonic() < deadline, "the poller never refused the reorder"
        time.sleep(0.05)
    assert httpx.get(f"{base}/readyz").json()["config_version"] == version


def test_a_trickling_body_gets_408_not_a_held_worker(server):
    base, _, _ = server
    port = int(base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"POST /v1/rerank HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{\"documents\": [")
        reply = b""
        while b'"problem"' not in reply:  # headers and body may come in separate segments
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
        reply = reply.decode()
    assert reply.startswith("HTTP/1.1 408") and '"field":"body"' in reply
    assert httpx.post(f"{base}/v1/rerank", json=PAGE).status_code == 200  # still serving


def test_sigterm_turns_readiness_off_first_then_stops(server):
    base, _, proc = server
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 1.0
    while httpx.get(f"{base}/readyz").status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert httpx.get(f"{base}/readyz").status_code == 503
    assert httpx.post(f"{base}/v1/rerank", json=PAGE).status_code == 200  # still answering
    # ...and stops by itself after the drain (uvicorn re-raises the signal it captured)
    assert proc.wait(10) in (0, -signal.SIGTERM)


@pytest.mark.python_path("its /v1/rerank goes to the control port over a socket of its own")
def test_a_second_signal_cuts_the_drain_short_and_in_flight_requests_finish(tmp_path):
    """Ctrl-C twice: the second ends the drain and starts the shutdown, which lets the request
    in flight finish. The drain's timer must not fire later: a late handle_exit(SIGINT)
    during the shutdown is uvicorn's "force exit", which would cut that request off."""
    proc, base, _ = start_server(tmp_path, REARRANGE_DRAIN_SECONDS="1",
                                 REARRANGE_BODY_TIMEOUT_SECONDS="10")
    try:
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 5
        while httpx.get(f"{base}/readyz").status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert httpx.get(f"{base}/readyz").status_code == 503
        body = json.dumps(PAGE).encode()
        with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1]))) as s:
            s.sendall(b"POST /v1/rerank HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
                      b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:10])
            time.sleep(0.2)
            proc.send_signal(signal.SIGINT)  # the drain had ~0.8 s to go
            time.sleep(1.5)  # past the drain's end: a timer left running fires meanwhile
            s.sendall(body[10:])
            s.settimeout(10)
            reply = s.recv(65536)
        assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
        assert proc.wait(15) in (0, 130)  # 130: interrupted (docs/cli.md#exit-codes)
        assert "Application shutdown complete" in (tmp_path / "server.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.python_path("posts to the data port itself")
def test_several_serving_threads_share_one_embedded_banlist(tmp_path):
    """`--workers 2` is two threads of one process: a ban written on the control port is
    matched by the data port's next request, with no Redis (one index for both)."""
    port, data = free_port(), free_port()
    env = {**os.environ, "REARRANGE_BANLIST_PATH": str(tmp_path / "banlist.jsonl"),
           "REARRANGE_LOG_LEVEL": "warning", "REARRANGE_ADMIN_TOKENS": "tns:t",
           "REARRANGE_DATA_PORT": str(data), "REARRANGE_BANLIST_SEED": "",
           # its one request makes a.example high-impact: no review here (test_ban_review.py)
           "REARRANGE_BAN_REVIEW_SHARE": "1"}
    env.pop("REDIS_URL", None)
    serve = [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--workers", "2"]
    proc = subprocess.Popen(serve, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    try:
        assert answers(f"http://127.0.0.1:{port}/readyz", 30, proc), "did not start"
        assert answers(f"http://127.0.0.1:{data}/healthz", 30, proc), "no data port"
        page = {"documents": [{"id": "a", "url": "https://a.example/", "score": 2.0},
                              {"id": "b", "url": "https://b.example/", "score": 1.0}]}
        before = httpx.post(f"http://127.0.0.1:{data}/v1/rerank", json=page).json()
        assert [d["id"] for d in before["documents"]] == ["a", "b"]
        r = httpx.post(f"http://127.0.0.1:{port}/v1/banlist/entries",
                       json={"scope": "host", "value": "a.example", "reason": "spam"},
                       headers={"Authorization": "Bearer t"})
        assert r.status_code == 201, r.text
        for _ in range(4):  # new connections: either thread may answer
            with httpx.Client() as c:
                after = c.post(f"http://127.0.0.1:{data}/v1/rerank", json=page).json()
            assert [d["id"] for d in after["documents"]] == ["b"]
            assert after["banlist_version"] == before["banlist_version"] + 1
    finally:
        proc.terminate()
        proc.wait(15)
