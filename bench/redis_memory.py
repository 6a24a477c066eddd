"""Estimate Redis memory per million banlist entries, on a real redis-server.

Usage: python -m bench.redis_memory [--entries 200000]

Starts its own `redis-server` on a free port (no persistence), writes `--entries`
generated entries (bench.pipeline's generator, normalized by the service's own Entry
model) in a plausible layout, and reports `used_memory` growth per million entries:

  entry:    one hash per entry (`banlist:entry:<id>`, the fields of Entry.as_dict);
  changes:  one stream entry per change (`banlist:changes`, the change as JSON), the log
            replicas follow and /v1/banlist/changes pages.

It is an estimate: the Redis-backed store may lay entries out differently (a JSON string
per entry, an index set per scope, a trimmed change stream). Rerun it against that
layout, or read `used_memory` of staging's Redis, once it exists.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from app.banlist.bulk import read_file
from app.banlist.model import Entry, iso, normalize
from bench.pages import write_banlist
from bench.replicas import free_port


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=200_000)
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    work = Path(tempfile.mkdtemp(prefix="rearrange-redis-"))
    seed = work / "seed.jsonl"
    write_banlist(seed, args.entries, 2024)
    specs = read_file(seed)[1]
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "",
                               "--appendonly", "no", "--dir", str(work)],
                              stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    try:
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        base = client.info("memory")["used_memory"]
        now = time.time()
        json_bytes = 0
        pipe = client.pipeline(transaction=False)
        after_entries = base
        for layout in ("entry", "changes"):
            for n, spec in enumerate(specs, 1):
                entry = Entry(str(n), spec.scope, normalize(spec.scope, spec.value),
                              spec.reason, "tns", now, None, frozenset(spec.regions))
                data = entry.as_dict()
                if layout == "entry":
                    data["regions"] = ",".join(data["regions"])
                    data["expires_at"] = data["expires_at"] or ""
                    pipe.hset(f"banlist:entry:{n}", mapping=data)
                else:
                    change = json.dumps({"seq": n, "op": "add", "entry": data, "actor": "tns",
                                         "reason": spec.reason, "at": iso(now)})
                    json_bytes += len(change)
                    pipe.xadd("banlist:changes", {"change": change})
                if n % 5000 == 0:
                    pipe.execute()
            pipe.execute()
            if layout == "entry":
                after_entries = client.info("memory")["used_memory"]
        total = client.info("memory")["used_memory"]
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    per_million = 1e6 / len(specs) / 2**20
    print(f"{len(specs)} entries; change record JSON {json_bytes / len(specs):.0f} bytes "
          f"on average")
    print(f"entry hashes:   {(after_entries - base) * per_million:>6.0f} MiB per million entries")
    print(f"change stream:  {(total - after_entries) * per_million:>6.0f} MiB per million changes")
    print(f"both:           {(total - base) * per_million:>6.0f} MiB per million entries "
          f"(used_memory; RSS adds allocator overhead, an AOF rewrite forks)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
