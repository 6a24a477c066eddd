"""A replica's start from a snapshot against its start from Redis, side by side in one run.

Usage: python -m bench.bootstrap [--entries 1000000] [--rounds 2]

Starts its own redis-server (no persistence) and fills it as a staged seed leaves Redis
(the entries hash, the groups, seq, epoch, the digest, one `seed` record), written here
directly so that a 10 M-entry list takes a minute, not the Python seed path's hour. Then,
alternating, each in a fresh process so that its RSS is its own:

  redis:     a replica with no local snapshot: it reads every entry from Redis (HSCAN);
  snapshot:  a replica started with REARRANGE_BANLIST_BOOTSTRAP_URL pointing at the
             snapshot's bytes behind a plain HTTP server (as nginx or an object store
             would serve them): it loads them, checks the digest, reads only the changes
             since from Redis.

Each reports the seconds from the store's creation to ready (loaded and in sync), the
process's RSS then and its peak, and the Redis commands the start sent (commandstats).
The snapshot is made once, by a replica of the first kind, with `dump()`.
"""
from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

from bench.replicas import redis_server

KEYS = "rearrange:{banlist}:"
EPOCH = "1700000000000"


def fill(client: redis.Redis, n: int) -> str:
    """Redis as a staged seed of `n` host entries leaves it; returns the digest."""
    value = 0
    pipe = client.pipeline(transaction=False)
    for i in range(1, n + 1):
        payload = (f'{{"scope":"host","value":"site-{i}.example.com","reason":"link farm",'
                   f'"actor":"seed","created_at":"2026-12-01T00:00:00.000Z",'
                   f'"expires_at":null,"regions":[]}}')
        value ^= int.from_bytes(hashlib.sha1(f"e\n{i}\n{payload}".encode()).digest()[:16])
        pipe.hset(KEYS + "entries", str(i), payload)
        if i % 10_000 == 0:
            pipe.execute()
    pipe.execute()
    digest = f"{value:032x}"
    client.mset({KEYS + "seq": n + 1, KEYS + "epoch": EPOCH, KEYS + "digest": digest})
    fields = {"seq": n + 1, "epoch": EPOCH, "op": "seed", "key": n, "payload": "",
              "actor": "seed", "reason": "bench"}
    client.xadd(KEYS + "stream", fields)
    client.xadd(KEYS + "history", fields)
    return digest


def child(kind: str, url: str, bootstrap: str, out: str) -> None:
    """One replica's start, measured in this process."""
    from app.banlist.redis.store import RedisStore
    from app.observability.metrics import Metrics

    started = time.perf_counter()
    store = RedisStore(url, Metrics(), None,
                       bootstrap_url=bootstrap if kind == "snapshot" else None)
    store.start()
    while not store.sync_state().in_sync:
        time.sleep(0.01)
    took = time.perf_counter() - started
    result = {"kind": kind, "seconds": took, "entries": len(store),
              "rss": _rss(), "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
              "index_bytes": store.index.nbytes(),
              "digest": store.sync_state().details["digest"]}
    if kind == "dump":
        Path(out).write_bytes(store.dump()[1])
    Path(out + ".json").write_text(json.dumps(result))
    store.close()


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def serve(path: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    body = path.read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/banlist.snapshot"


def commands(client: redis.Redis) -> dict[str, int]:
    return {k.removeprefix("cmdstat_"): v["calls"] for k, v in client.info("commandstats").items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    work = Path(tempfile.mkdtemp(prefix="rearrange-bootstrap-"))
    server, port = redis_server(work)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis(port=port, decode_responses=True)
        t = time.perf_counter()
        digest = fill(client, args.entries)
        print(f"Redis filled with {args.entries:,} entries in {time.perf_counter() - t:.0f} s")
        snap = work / "banlist.snapshot"

        def run(kind: str, bootstrap: str = "") -> dict[str, object]:
            before = commands(client)
            subprocess.run([sys.executable, "-m", "bench.bootstrap", "--child", kind, url,
                            bootstrap, str(snap)], check=True)
            result = json.loads(Path(str(snap) + ".json").read_text())
            after = commands(client)
            result["commands"] = {k: n - before.get(k, 0) for k, n in after.items()
                                  if n - before.get(k, 0)}
            assert result["digest"] == digest, (result["digest"], digest)
            return result

        run("dump")
        print(f"snapshot: {snap.stat().st_size / args.entries:.1f} B per entry")
        http_server, snap_url = serve(snap)
        rows: dict[str, list[dict[str, object]]] = {"redis": [], "snapshot": []}
        for _ in range(args.rounds):
            rows["redis"].append(run("redis"))
            rows["snapshot"].append(run("snapshot", snap_url))
        http_server.shutdown()
        for kind, results in rows.items():
            for r in results:
                sent = sum(int(n) for n in r["commands"].values())  # type: ignore[union-attr]
                print(f"{kind:9} ready in {r['seconds']:6.2f} s  RSS {r['rss'] / 2**20:7.0f} MiB "
                      f"(peak {r['peak'] / 2**20:7.0f} MiB, index {r['index_bytes'] / 2**20:6.0f}"
                      f" MiB)  Redis commands {sent:,}: {r['commands']}")
        ratio = [s["seconds"] / r["seconds"] for s, r in zip(rows["snapshot"], rows["redis"],
                                                             strict=True)]
        print("snapshot / redis start: " + ", ".join(f"{x:.3f}x" for x in ratio))
    finally:
        server.kill()
        server.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
