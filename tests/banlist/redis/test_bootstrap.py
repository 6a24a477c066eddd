"""A replica that starts from a snapshot (REARRANGE_BANLIST_BOOTSTRAP_URL) instead of reading
every entry from Redis: from another replica's `GET /v1/banlist/snapshot`, or the same
bytes served from anywhere; checked, then followed from the change it ends with."""
from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app.banlist import snapshot
from app.banlist.embedded.store import EmbeddedStore, EntrySpec
from app.config.settings import Settings
from app.main import create_app
from tests.conftest import AUTH, ROOT, TOKENS
from tests.helpers import until
from tests.redis_server import RedisServer, ServeProcess

pytestmark = pytest.mark.redis


@pytest.fixture
def writer(redis_server: RedisServer, tmp_path: Path) -> Iterator[ServeProcess]:
    """A replica serving on a port, as deployed, holding 2,000 bans."""
    env = {"REDIS_URL": redis_server.url, "REARRANGE_ADMIN_TOKENS": TOKENS,
           "REARRANGE_CONFIG": str(ROOT / "config" / "rules.yaml"),
           "REARRANGE_BANLIST_SNAPSHOT_PATH": str(tmp_path / "writer.snapshot"),
           "REARRANGE_BANLIST_PATH": str(tmp_path / "writer.unused.jsonl")}
    proc = ServeProcess(ROOT, tmp_path, env)
    lines = "".join(f'{{"scope": "host", "value": "h{n}.example", "reason": "spam"}}\n'
                    for n in range(2000))
    r = httpx.post(f"{proc.base}/v1/banlist/import", headers=AUTH, content=lines,
                   params={"format": "ndjson"}, timeout=60)
    assert r.status_code == 200, r.text
    yield proc
    proc.stop()


def starting(settings: Settings, url: str, bootstrap: str) -> TestClient:
    return TestClient(create_app(settings.model_copy(update={
        "redis_url": url, "banlist_block_seconds": 0.3, "banlist_bootstrap_url": bootstrap,
        "banlist_snapshot_path": settings.banlist_path.with_name("new.snapshot")})))


def hscans(server: RedisServer) -> int:
    with server.client() as c:
        return int(c.info("commandstats").get("cmdstat_hscan", {}).get("calls", 0))


def counted(client: TestClient, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f"{name}{{{want}}}"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_replica_starts_from_another_replicas_snapshot_and_follows_on(
        redis_server, writer, settings):
    served = httpx.get(f"{writer.base}/v1/banlist/snapshot")
    assert served.status_code == 200
    assert served.headers["content-type"] == snapshot.MEDIA_TYPE
    ready = httpx.get(f"{writer.base}/readyz").json()
    assert served.headers["etag"] == f'"{ready["banlist_digest"]}"'
    assert served.headers["x-banlist-version"] == str(ready["banlist_version"])
    again = httpx.get(f"{writer.base}/v1/banlist/snapshot",
                      headers={"If-None-Match": served.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    scans = hscans(redis_server)
    with starting(settings, redis_server.url, f"{writer.base}/v1/banlist/snapshot") as new:
        got = new.get("/readyz").json()
        assert got["banlist_in_sync"] and got["banlist_digest"] == ready["banlist_digest"]
        assert got["banlist_entries"] == 2000
        assert hscans(redis_server) == scans  # not one entry read from Redis
        assert counted(new, "rearrange_banlist_bootstraps_total", result="loaded",
                       structure="banlist") == 1
        r = httpx.post(f"{writer.base}/v1/banlist/entries", headers=AUTH,
                       json={"scope": "domain", "value": "later.example", "reason": "r"})
        assert r.status_code == 201
        until(lambda: new.get("/v1/banlist/lookup",
                              params={"url": "http://later.example/"}).json()["banned"])


class Serving:
    """Bytes behind a plain HTTP server (an object store, nginx), on a free port."""

    def __init__(self, body: bytes, status: int = 200) -> None:
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                self.send_response(outer.status)
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, *args: object) -> None:
                return None

        self.body, self.status = body, status
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/banlist.snapshot"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("case", ["not found", "torn", "another history"])
def test_a_snapshot_that_cannot_serve_leaves_the_replica_to_read_redis(
        redis_server, writer, settings, tmp_path, case):
    good = httpx.get(f"{writer.base}/v1/banlist/snapshot").content
    other = EmbeddedStore(None)  # a list that was never this Redis's: another history
    other.put_import((), [EntrySpec("host", "elsewhere.example", "r")], "tns")
    body, status = {"not found": (b"no such key", 404), "torn": (good[:len(good) // 2], 200),
                    "another history": (other.dump()[1], 200)}[case]
    source = Serving(body, status)
    try:
        with starting(settings, redis_server.url, source.url) as new:
            until(lambda: new.get("/readyz").json()["banlist_in_sync"])
            got = new.get("/readyz").json()
            assert got["banlist_entries"] == 2000 and got["banlist_diverged"] is None
            assert got["banlist_missing"] is None  # no loss is claimed over a copy not ours
            ours = httpx.get(f"{writer.base}/readyz").json()["banlist_digest"]
            assert got["banlist_digest"] == ours
            result = "loaded" if case == "another history" else "failed"
            assert counted(new, "rearrange_banlist_bootstraps_total", result=result,
                           structure="banlist") == 1
    finally:
        source.close()
