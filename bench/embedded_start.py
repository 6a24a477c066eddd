"""An embedded store's start from its snapshot against a start that replays its whole log,
side by side in one run.

Usage: python -m bench.embedded_start [--entries 1000000] [--after 1000] [--rounds 2]

Writes a log of `--entries` host adds as one seed transaction, directly in the log's
format (the lines `EmbeddedStore.seed` writes, without the Python seed path's hour at
10 M), has a store replay it and write its snapshot (`<log>.snapshot`), then appends
`--after` changes (adds and removals, a line each, as the API logs them) that a start from
the snapshot replays. Then, alternating, each in a fresh process so that its RSS is its own:

  replay:    the snapshot moved aside: the start reads every line of the log;
  snapshot:  the snapshot loaded (its digest checked) and the lines after it replayed.

Each reports the seconds from the store's creation to ready (the embedded store serves once
constructed), the process's RSS then and its peak, `BanIndex.nbytes()`, and the seconds of
the first `former` (a lookup's former entries: the graveyard filled from the end of the
log). One more process, `index`, loads the snapshot's bytes into a BanIndex and drops the
bytes: its RSS less the interpreter's before is what the index alone takes, the yardstick
of the RSS ratios (bench.bootstrap measures the Redis replica's against the same index).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

AT = "2026-12-01T00:00:00.000Z"


def entry(i: int) -> str:
    return (f'{{"id":"{i}","scope":"host","value":"site-{i}.example.com","reason":"link farm",'
            f'"actor":"seed","created_at":"{AT}","expires_at":null,"regions":[]}}')


def write_log(path: Path, n: int) -> None:
    """`n` adds committed as one transaction, as a seed writes them."""
    with path.open("wb") as fh:
        for start in range(1, n + 1, 100_000):
            fh.write("".join(
                f'{{"seq":{i},"op":"add","entry":{entry(i)},"actor":"seed","reason":"link farm",'
                f'"at":"{AT}","txn_end":{n}}}\n'
                for i in range(start, min(n, start + 99_999) + 1)).encode())


def append_changes(path: Path, n: int, count: int) -> None:
    """`count` single changes after seq `n`: new adds, and removals of seeded entries."""
    lines = []
    for k, seq in enumerate(range(n + 1, n + count + 1)):
        if k % 2:
            gone = k  # a seeded entry: ids 1, 3, 5, ...
            lines.append(f'{{"seq":{seq},"op":"remove","id":"{gone}","entry":{entry(gone)},'
                         f'"actor":"tns","reason":"appeal","at":"{AT}"}}\n')
        else:
            lines.append(f'{{"seq":{seq},"op":"add","entry":{entry(seq)},"actor":"tns",'
                         f'"reason":"link farm","at":"{AT}"}}\n')
    with path.open("ab") as fh:
        fh.write("".join(lines).encode())


def child(kind: str, log: str, out: str) -> None:
    """One start (or the index alone), measured in this process."""
    from app.banlist import canon
    from app.banlist.base import index_change
    from app.banlist.index import BanIndex

    result: dict[str, object] = {"kind": kind}
    if kind == "index":
        before = _rss()
        data = Path(log + ".snapshot").read_bytes()
        index, meta = BanIndex.load(data)[:2]
        del data
        result.update(index_rss=_rss() - before, index_bytes=index.nbytes(), entries=len(index))
        with open(log, "rb") as fh:  # the changes after the snapshot, as a start applies them
            fh.seek(orjson.loads(meta)["log"]["offset"])
            changes = [index_change(orjson.loads(line)) for line in fh]
        index.apply([c for c in changes if c is not None])
        del changes
        result.update(tail_rss=_rss() - before, tail_bytes=index.nbytes())
    else:
        from app.banlist.embedded.store import EmbeddedStore

        started = time.perf_counter()
        store = EmbeddedStore(Path(log))
        result.update(seconds=time.perf_counter() - started, rss=_rss(), peak=_peak(),
                      index_bytes=store.index.nbytes(), entries=len(store),
                      version=store.version, digest=store.digest)
        canonical = canon.canonicalize("http://site-1.example.com/")
        started = time.perf_counter()
        gone = store.former(canonical, canon.split(canonical)[0])
        result.update(former_seconds=time.perf_counter() - started, former=len(gone))
        if kind == "dump":
            store.write_snapshot()
    Path(out).write_text(json.dumps(result))


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--after", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    work = Path(tempfile.mkdtemp(prefix="rearrange-embedded-start-"))
    log, snap = work / "banlist.jsonl", work / "banlist.jsonl.snapshot"
    aside = work / "aside.snapshot"
    try:
        t = time.perf_counter()
        write_log(log, args.entries)
        print(f"log of {args.entries:,} adds written in {time.perf_counter() - t:.0f} s "
              f"({log.stat().st_size / 2**20:,.0f} MiB)")

        def run(kind: str) -> dict[str, object]:
            out = work / f"{kind}.json"
            subprocess.run([sys.executable, "-m", "bench.embedded_start", "--child", kind,
                            str(log), str(out)], check=True)
            result: dict[str, object] = json.loads(out.read_text())
            return result

        run("dump")
        append_changes(log, args.entries, args.after)
        print(f"snapshot: {snap.stat().st_size / args.entries:.1f} B per entry; then "
              f"{args.after:,} changes logged after it")
        index = run("index")
        rows: dict[str, list[dict[str, object]]] = {"replay": [], "snapshot": []}
        for _ in range(args.rounds):
            snap.rename(aside)
            rows["replay"].append(run("replay"))
            aside.rename(snap)
            rows["snapshot"].append(run("snapshot"))
        report(rows, index)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def report(rows: dict[str, list[dict[str, object]]], index: dict[str, object]) -> None:
    alone, nbytes = float(index["index_rss"]), float(index["index_bytes"])
    print(f"index alone: RSS {alone / 2**20:,.0f} MiB, nbytes {nbytes / 2**20:,.0f} MiB as "
          f"loaded; RSS {float(index['tail_rss']) / 2**20:,.0f} MiB, nbytes "
          f"{float(index['tail_bytes']) / 2**20:,.0f} MiB once the changes after the "
          "snapshot are applied (the index's own copy-on-write)")
    digests = {r["digest"] for results in rows.values() for r in results}
    versions = {r["version"] for results in rows.values() for r in results}
    assert len(digests) == 1 and len(versions) == 1, (digests, versions)  # the same list
    for kind, results in rows.items():
        for r in results:
            rss, peak = float(r["rss"]), float(r["peak"])
            print(f"{kind:8} ready in {r['seconds']:7.2f} s  RSS {rss / 2**20:7,.0f} MiB "
                  f"({rss / alone:.2f}x the index alone as loaded, "
                  f"{rss / float(index['tail_rss']):.2f}x with the changes)  peak "
                  f"{peak / 2**20:7,.0f} MiB ({peak / alone:.2f}x)  first former "
                  f"{r['former_seconds']:.2f} s ({r['former']} found)")
    ratio = [float(s["seconds"]) / float(r["seconds"])
             for s, r in zip(rows["snapshot"], rows["replay"], strict=True)]
    print("snapshot / replay start: " + ", ".join(f"{x:.3f}x" for x in ratio))


if __name__ == "__main__":
    raise SystemExit(main())
