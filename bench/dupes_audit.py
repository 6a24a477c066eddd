"""Benchmark: `rearrange dupes` on generated sites: time and peak memory, LSH vs exact.

For each size in `--sizes` (default 10000), a site is generated with tests/corpus.py
(`--words` words per page, half the pages in template families of 2-12 near-copies),
written as JSON lines, and audited in a fresh process (so peak RSS is that run's own):
with MinHash LSH, and with exact all-pairs for sizes up to `--exact-max`. Each run goes
through `rearrange dupes` itself (reading, shingling, pairs, clusters, report, CSV).
Reported: wall seconds, peak RSS, pairs and clusters found, and for the sizes that ran
both, the LSH recall of the exact pairs at the threshold and the exact/LSH time ratio.

Run from the repository root: `python -m bench.dupes_audit [--sizes 10000,100000]`.
"""
from __future__ import annotations

import argparse
import csv
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.corpus import corpus


def one(pages: Path, method: str, out: Path) -> None:
    """Child process: run the CLI once, print seconds and peak RSS as JSON."""
    from app.cli import main

    started = time.perf_counter()
    code = main(["dupes", str(pages), "--method", method, "--no-progress", "--top", "0",
                 "--csv", str(out)])
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"code": code, "seconds": seconds, "peak_bytes": peak}), file=sys.stderr)


def run(pages: Path, method: str, out: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "bench.dupes_audit", "--one", str(pages),
                           method, str(out)], capture_output=True, text=True, check=True)
    result = json.loads(proc.stderr.strip().splitlines()[-1])
    report = proc.stdout
    clusters = report.split("clusters at the threshold")[1]
    result["clusters"] = int(clusters.split(": ")[1].split()[0])
    result["over"] = int(report.split("at or over the threshold: ")[1].split(";")[0].split()[0])
    return result


def over_threshold(path: Path) -> set[tuple[str, str]]:
    with path.open(encoding="utf-8") as fh:
        return {(r["url_a"], r["url_b"]) for r in csv.DictReader(fh) if r["over_threshold"] == "1"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--exact-max", type=int, default=10000)
    parser.add_argument("--one", nargs=3, metavar=("PAGES", "METHOD", "CSV"))
    args = parser.parse_args()
    if args.one:
        one(Path(args.one[0]), args.one[1], Path(args.one[2]))
        return
    print(f"{'pages':>7} {'method':>8} {'seconds':>9} {'peak MiB':>9} {'over 0.5':>9} "
          f"{'clusters':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            started = time.perf_counter()
            pages = Path(tmp) / f"site{size}.jsonl"
            with pages.open("w", encoding="utf-8") as fh:
                for url, text in corpus(size, seed=size, words=args.words):
                    fh.write(json.dumps({"url": url, "text": text}, ensure_ascii=False) + "\n")
            print(f"# generated {size} pages in {time.perf_counter() - started:.1f}s "
                  f"({pages.stat().st_size >> 20} MiB)", flush=True)
            results = {}
            for method in ("minhash", "exact"):
                if method == "exact" and size > args.exact_max:
                    continue
                out = Path(tmp) / f"{size}-{method}.csv"
                r = results[method] = run(pages, method, out)
                print(f"{size:7} {method:>8} {r['seconds']:9.1f} {r['peak_bytes'] / 2**20:9.0f} "
                      f"{r['over']:9} {r['clusters']:9}", flush=True)
            if "exact" in results:
                exact = over_threshold(Path(tmp) / f"{size}-exact.csv")
                lsh = over_threshold(Path(tmp) / f"{size}-minhash.csv")
                print(f"# {size}: LSH recall of exact pairs >= 0.5: "
                      f"{len(exact & lsh) / max(1, len(exact)):.4f}; exact/LSH time "
                      f"{results['exact']['seconds'] / results['minhash']['seconds']:.1f}x")


if __name__ == "__main__":
    main()
