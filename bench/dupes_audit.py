"""Benchmark: `rearrange dupes` beside datasketch's MinHash + MinHashLSH, in one run.

For each size in `--sizes` (default 20000), a site is generated with tests/corpus.py
(`--words` words per page, half the pages in template families of 2-12 near-copies) and
written as JSON lines. Each run is a fresh process, so its peak RSS is its own:

  * ours: `rearrange dupes PAGES --method minhash --csv` (reading, shingling, signatures,
    LSH, exact verification, clustering, report and the CSV of the pairs at the threshold);
  * datasketch (sizes up to `--datasketch-max`): the same 10-word shingles, `MinHash(128)`
    with `update_batch` per page, one `MinHashLSH` with the bands x rows ours chose
    (weights 0.2, 0.8 at the containment floor), every page inserted and then queried:
    candidates only, no verification, no report.

The truth is every pair sharing a shingle, counted exactly through an inverted index of
the shingle sets (no LSH): recall is the share of the pairs with containment >= 0.5 that
ours reported, precision the share of ours that truly are (both to 1.0 after
verification). `--large N` adds ours alone on N pages, and `--html-tree DIR` ours on a
folder of saved HTML (`cargo doc`'s output, say). Times compare only within one run.

Run from the repository root:
`python -m bench.dupes_audit [--sizes 20000] [--large 100000] [--html-tree DIR]
[--reworded 20000]`. `--reworded N` runs ours with and without `--reworded` on N pages, 120
of them rewritten from 12 templates (tests/corpus.reworded_site), the ratio being to the
default run.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from tests.corpus import corpus, reworded_site

THRESHOLD = 0.5


def child_ours(pages: Path, out: Path, *flags: str) -> None:
    from app.cli.main import main

    tree = TreePeak() if pages.is_dir() else None
    started = time.perf_counter()
    code = main(["dupes", str(pages), "--method", "minhash", "--no-progress", "--top", "0",
                 "--csv", str(out), *flags])
    report({"code": code, "seconds": time.perf_counter() - started}, tree)


def child_datasketch(pages: Path, out: Path, bands: int, rows: int) -> None:
    import mmh3  # noqa: F401 (imported before timing, as app's modules are by the CLI)
    from datasketch import MinHash, MinHashLSH

    from app.neardup import shingles

    started = time.perf_counter()
    lsh = MinHashLSH(num_perm=128, params=(bands, rows))
    sigs = []
    with pages.open("rb") as fh:
        for n, line in enumerate(fh):
            words = [w.encode() for w in shingles.words(json.loads(line)["text"])]
            grams = [b" ".join(words[i:i + 10]) for i in range(max(1, len(words) - 9))]
            m = MinHash(num_perm=128)
            m.update_batch(grams)
            lsh.insert(n, m)
            sigs.append(m)
    pairs = {(min(n, o), max(n, o)) for n, m in enumerate(sigs) for o in lsh.query(m) if o != n}
    seconds = time.perf_counter() - started
    out.write_text("\n".join(f"{a} {b}" for a, b in sorted(pairs)))
    report({"code": 0, "seconds": seconds, "candidates": len(pairs)})


def report(result: dict, tree: TreePeak | None = None) -> None:
    """Print the run's figures. Peak RSS is this process's own high-water mark (ru_maxrss
    would carry the parent's over exec), or with extraction workers the largest sum over
    the process tree seen while it ran, whichever is larger."""
    status = Path("/proc/self/status").read_text()
    own = int(status.split("VmHWM:")[1].split()[0]) * 1024
    result["peak_bytes"] = max(own, tree.stop() if tree else 0)
    print(json.dumps(result), file=sys.stderr)


class TreePeak:
    """The largest total RSS of this process and its descendants, sampled every 200 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.2):
            self.peak = max(self.peak, self._total())

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self.peak

    @staticmethod
    def _total() -> int:
        parent, rss = {}, {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:  # the process ended between the listing and the read
                continue
            pid = int(stat.parent.name)
            parent[pid], rss[pid] = int(fields[1]), int(fields[21]) * resource.getpagesize()
        mine = {os.getpid()}
        for pid in sorted(parent):  # children have larger pids, but follow chains anyway
            chain, p = [], pid
            while p in parent and p not in mine and p > 1:
                chain.append(p)
                p = parent[p]
            if p in mine:
                mine.update(chain)
        return sum(rss[p] for p in mine if p in rss)


def run(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "bench.dupes_audit", *args],
                          capture_output=True, text=True, check=True)
    result = json.loads(proc.stderr.strip().splitlines()[-1])
    result["stdout"] = proc.stdout
    return result


def truth(texts: list[str]) -> dict[tuple[int, int], float]:
    """{(a, b): exact max(in, out)} of every pair sharing a shingle (inverted index)."""
    from app._engine import NearDupSets

    sets = NearDupSets(10)
    sizes = np.frombuffer(sets.add(texts, 0), dtype=np.uint32).astype(np.int64)
    hashes = np.concatenate([np.frombuffer(sets.shingles(i), np.uint64) for i in range(len(texts))])
    pages = np.repeat(np.arange(len(texts)), sizes)
    order = np.argsort(hashes, kind="stable")
    hashes, pages = hashes[order], pages[order]
    pairs = []
    for lag in range(1, len(texts)):
        same = np.flatnonzero(hashes[lag:] == hashes[:-lag])
        if same.size == 0:
            break
        a, b = pages[same], pages[same + lag]
        pairs.append(np.minimum(a, b) << 32 | np.maximum(a, b))
    keys, both = np.unique(np.concatenate(pairs), return_counts=True)
    a, b = keys >> 32, keys & 0xFFFFFFFF
    value = both / np.minimum(sizes[a], sizes[b])
    return dict(zip(zip(a.tolist(), b.tolist(), strict=True), value.tolist(), strict=True))


def reported(path: Path, index: dict[str, int]) -> set[tuple[int, int]]:
    with path.open(encoding="utf-8") as fh:
        rows = csv.DictReader(fh)
        return {tuple(sorted((index[r["url_a"]], index[r["url_b"]]))) for r in rows}


def lsh_of(stdout: str) -> tuple[int, int]:
    bands, rows = stdout.split("MinHash LSH (")[1].split(" rows")[0].split(" bands x ")
    return int(bands), int(rows)


def line(what: str, pages: int, r: dict, yardstick: dict | None = None, extra: str = "") -> None:
    ratio = f"{r['seconds'] / yardstick['seconds']:6.2f}" if yardstick else "     -"
    print(f"{pages:7} {what:<12} {r['seconds']:8.1f} {ratio} {r['peak_bytes'] / 2**20:9.0f}"
          f"  {extra}", flush=True)


def reworded(size: int, tmp: Path) -> None:
    """The default run and --reworded on pages rewritten from templates among unique ones:
    each run's time, and the share of the pairs of one template's pages it clustered
    together (recall) beside the unique pages it clustered."""
    site, families = reworded_site(unique=size - 120)
    pages = tmp / "reworded.jsonl"
    with pages.open("w", encoding="utf-8") as fh:
        for url, text in site:
            fh.write(json.dumps({"url": url, "text": text}, ensure_ascii=False) + "\n")
    default = None
    for what, flags in (("ours", []), ("--reworded", ["--reworded"])):
        out = tmp / "reworded.json"
        r = run("--child", "ours", str(pages), str(tmp / "reworded.csv"), "--json", str(out),
                *flags)
        clusters = json.loads(out.read_bytes())["clusters"]
        of = {u: n for n, c in enumerate(clusters) for u in c["pages"]}
        pairs = [(a, b) for f in families for i, a in enumerate(f) for b in f[i + 1:]]
        found = sum(1 for a, b in pairs if a in of and of[a] == of.get(b))
        unique = sum(1 for u in of if u.startswith("/u/"))
        line(what, size, r, default, f"recall {found / len(pairs):.3f} of {len(pairs)} "
             f"template pairs, {unique} unique pages clustered")
        default = default or r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="20000")
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--datasketch-max", type=int, default=20000)
    parser.add_argument("--large", type=int, default=0, help="ours alone on this many pages")
    parser.add_argument("--html-tree", type=Path, help="ours on this folder of saved HTML")
    parser.add_argument("--reworded", type=int, default=0, metavar="PAGES",
                        help="ours and ours --reworded on a site of this many pages, 120 of "
                        "them rewritten from 12 templates")
    if sys.argv[1:2] == ["--child"]:  # a measured run: what follows is its own (flags too)
        kind, pages, out, *lsh = sys.argv[2:]
        if kind == "ours":
            child_ours(Path(pages), Path(out), *lsh)
        else:
            child_datasketch(Path(pages), Path(out), *map(int, lsh))
        return
    args = parser.parse_args()
    print(f"{'pages':>7} {'run':<12} {'seconds':>8} {'× ds':>6} {'peak MiB':>9}  checks")
    with tempfile.TemporaryDirectory() as tmp:
        sizes = [int(s) for s in args.sizes.split(",")] + ([args.large] if args.large else [])
        for size in sizes:
            site = corpus(size, seed=size, words=args.words)
            pages = Path(tmp) / f"site{size}.jsonl"
            with pages.open("w", encoding="utf-8") as fh:
                for url, text in site:
                    fh.write(json.dumps({"url": url, "text": text}, ensure_ascii=False) + "\n")
            ours = run("--child", "ours", str(pages), str(Path(tmp) / f"{size}.csv"))
            if size == args.large:
                line("ours", size, ours)
                continue
            exact = truth([t for _, t in site])
            over = {p for p, v in exact.items() if v >= THRESHOLD}
            found = reported(Path(tmp) / f"{size}.csv", {u: n for n, (u, _) in enumerate(site)})
            true = sum(1 for p in found if exact.get(p, 0.0) >= THRESHOLD)
            checks = (f"recall {len(found & over) / max(1, len(over)):.4f} of {len(over)} "
                      f"pairs >= {THRESHOLD}, precision {true / max(1, len(found)):.4f}")
            ds = None
            if size <= args.datasketch_max:
                bands, rows = lsh_of(ours["stdout"])
                ds = run("--child", "datasketch", str(pages), str(Path(tmp) / f"{size}.ds"),
                         str(bands), str(rows))
                line("datasketch", size, ds, ds, f"{ds['candidates']} candidates, unverified")
            line("ours", size, ours, ds, checks)
        if args.reworded:
            reworded(args.reworded, Path(tmp))
        if args.html_tree:
            n = sum(1 for p in args.html_tree.rglob("*") if p.suffix in (".html", ".htm"))
            r = run("--child", "ours", str(args.html_tree), str(Path(tmp) / "html.csv"))
            found = r["stdout"].split("clusters at the threshold")[1].split(": ")[1].split()[0]
            line("ours, HTML", n, r, None, f"{found} clusters")


if __name__ == "__main__":
    main()
