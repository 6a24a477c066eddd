"""Arguments and driver of `rearrange dupes PAGES` (imports the heavy parts only when run)."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.exits import OK, REFUSED, USAGE
from app.cli.flags import add_progress_flags, print_json
from app.cli.progress import ProgressBar
from app.errors import InputFileError

if TYPE_CHECKING:
    from types import ModuleType

    from app.neardup.dupes import Audit

HTML_SAMPLE = 25  # pairs near the threshold the HTML report shows without --sample
TARGETS = ("csv", "verdicts", "json", "html", "signatures")  # the options naming a file to write


def _unit(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def _weights(text: str) -> tuple[float, float]:
    try:
        fp, fn = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected two numbers FP,FN, got {text}") from None
    if fp < 0 or fn < 0 or fp + fn <= 0:
        raise argparse.ArgumentTypeError(f"weights must be >= 0 and not both 0, got {text}")
    return fp, fn


def add_dupes_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `rearrange dupes`."""
    p.add_argument("pages", type=Path,
                   help="JSON lines of {url, text}, or a folder of saved .html pages")
    p.add_argument("--threshold", type=_unit, default=None,
                   help="cluster pairs at or over this (default 0.5, the only published "
                   "threshold, and 0.25 with --reworded; choose yours by eyeballing "
                   "--sample pairs)")
    p.add_argument("--reworded", action="store_true",
                   help="find pages rewritten from one template (sentences reordered, "
                   "words swapped): compare pages by their distinctive words, not by "
                   "10-word shingles (docs/near-duplicates.md: Reworded templates)")
    p.add_argument("--measure", choices=("containment", "jaccard"), default="containment",
                   help="containment: max(in, out), catches a page inside a longer "
                   "template (default); jaccard: symmetric resemblance")
    p.add_argument("--width", type=int, default=10, help="words per shingle (default 10)")
    p.add_argument("--method", choices=("auto", "exact", "minhash"), default="auto",
                   help="exact all pairs, or MinHash LSH candidates scored exactly; auto: "
                   "exact up to --exact-max pages")
    p.add_argument("--exact-max", type=int, default=2000,
                   help="largest input compared all-pairs under --method auto (default 2000)")
    p.add_argument("--num-perm", type=int, default=128,
                   help="MinHash functions for LSH (default 128)")
    p.add_argument("--lsh-weights", type=_weights, default=(0.2, 0.8), metavar="FP,FN",
                   help="weights of the false-positive and false-negative mass LSH's bands "
                   "and rows minimize (default 0.2,0.8; datasketch's is 0.5,0.5)")
    p.add_argument("--max-size-ratio", type=float, default=2.0,
                   help="LSH aims at containment pairs whose larger page has at most this "
                   "many times the shingles of the smaller (default 2)")
    p.add_argument("--top", type=int, default=30,
                   help="pairs and clusters to print (default 30; files get all)")
    p.add_argument("--bins", type=int, default=10, help="histogram bins (default 10)")
    p.add_argument("--sample", type=int, default=0, metavar="N",
                   help="print N random pairs within --margin of the threshold to check by "
                   "eye (the seed suggests 20-30)")
    p.add_argument("--margin", type=float, default=0.1,
                   help="how near the threshold a --sample pair is (default 0.1)")
    p.add_argument("--sample-seed", type=int, default=0, help="random seed of --sample")
    p.add_argument("--canonical-urls", action="store_true",
                   help="name saved HTML pages by the canonical URL they declare, when they "
                   "do (default: their path inside the folder)")
    p.add_argument("--extractor", choices=("auto", "trafilatura"), default="auto",
                   help="main text of saved HTML: auto takes the element a page marks as "
                   "main (<main>, role=main) and trafilatura's heuristics for the rest "
                   "(default); trafilatura for every page")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="leave out pages whose name (path in the folder, or url) or last "
                   "path component matches GLOB, e.g. print.html; repeatable")
    p.add_argument("--workers", type=int, default=0,
                   help="processes extracting HTML and threads shingling (default: one per "
                   "core)")
    p.add_argument("--csv", type=Path,
                   help="write the pairs at or over the threshold to this CSV file")
    p.add_argument("--verdicts", type=Path, metavar="FILE",
                   help="write a verdict per page to this CSV file: its cluster, the shares "
                   "of its text that are template, shared blocks or its own, its nearest "
                   "page and a recommendation (canonical, rewrite, merge, noindex, ok)")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the whole audit to this "
                   "JSON file; `--json -` prints it on stdout instead of the report")
    p.add_argument("--html", type=Path,
                   help="write a self-contained report to look at: the histogram, clusters "
                   "with their template, pairs near the threshold side by side (the --sample "
                   "pairs, or 25)")
    p.add_argument("--signatures", type=Path, metavar="FILE",
                   help="write each page's url, shingle count and MinHash values as JSON "
                   "lines (docs/near-duplicates.md: Exporting signatures)")
    p.add_argument("--compare", type=Path, metavar="PREVIOUS.json",
                   help="compare the clusters with those of an earlier run's --json file: "
                   "which appeared, went away, grew or shrank")
    p.add_argument("--all-candidates", action="store_true",
                   help="--csv and --json hold every pair scored (exact: those sharing "
                   "text; LSH: the candidates sharing text), not only those at or over the "
                   "threshold")
    add_progress_flags(p)


def run(args: argparse.Namespace) -> int:
    """Read pages, audit, print the report and write the files; 1 on input it cannot read,
    2 on bad options (docs/cli.md#exit-codes)."""
    from app.neardup import dupes, shingles
    from app.neardup.read import read_pages
    from app.neardup.report import SignatureWriter

    for name, low in (("width", 1), ("num_perm", 16), ("exact_max", 0), ("top", 0),
                      ("bins", 1), ("sample", 0), ("workers", 0)):
        if getattr(args, name) < low:
            print(f"rearrange dupes: --{name.replace('_', '-')} must be >= {low}",
                  file=sys.stderr)
            return USAGE
    if args.threshold is None:
        args.threshold = (dupes.REWORDED_THRESHOLD if args.reworded
                          else shingles.DEFAULT_THRESHOLD)
    if args.reworded and args.signatures is not None:
        print("rearrange dupes: --signatures exports the 10-word shingles' signatures the "
              "near_duplicates rule reads; it does not go with --reworded", file=sys.stderr)
        return USAGE
    if args.max_size_ratio < 1:
        print("rearrange dupes: --max-size-ratio must be >= 1", file=sys.stderr)
        return USAGE
    targets = _targets(args)
    same = [(a, b) for n, (a, pa) in enumerate(targets) for b, pb in targets[n + 1:]
            if os.path.abspath(pa) == os.path.abspath(pb)]
    if same:
        print(f"rearrange dupes: {same[0][0]} and {same[0][1]} name the same file",
              file=sys.stderr)
        return USAGE
    for option, path in targets:  # before the run, not after it
        problem = unwritable(path)
        if problem is not None:
            print(f"rearrange dupes: {option} {path}: {problem}", file=sys.stderr)
            return REFUSED
    from app.neardup import compare

    try:
        before = compare.load(args.compare) if args.compare is not None else None
    except InputFileError as exc:
        print(f"rearrange dupes: {exc}", file=sys.stderr)
        return REFUSED
    bar = ProgressBar.of(args.progress)
    excluded: list[str] = []
    sink = SignatureWriter(args.signatures, args.width) if args.signatures else None
    try:
        pages = read_pages(args.pages, args.canonical_urls, args.exclude, args.workers,
                           bar, excluded, args.extractor)
        result = dupes.audit(
            pages, width=args.width, measure=args.measure, threshold=args.threshold,
            method=args.method, exact_max=args.exact_max, k=args.num_perm,
            max_size_ratio=args.max_size_ratio, weights=args.lsh_weights,
            threads=args.workers, excluded=excluded, progress=bar, sink=sink,
            reworded=args.reworded)
    except InputFileError as exc:
        bar.close()
        print(f"rearrange dupes: {exc}", file=sys.stderr)
        return REFUSED
    finally:
        if sink is not None:
            sink.close()
    bar.close()
    if sink is not None:
        print(f"{sink.written} signatures written to {args.signatures}", file=sys.stderr)
    if before is not None:
        clusters, then = before
        unlike = compare.differences(then, _params(args, result))
        if unlike:  # clusters of runs made differently differ for that alone
            print(f"rearrange dupes: --compare {args.compare} was made with "
                  + "; ".join(unlike), file=sys.stderr)
        result.compared = (str(args.compare), compare.compare(clusters, result.cluster_urls()))
    with result:
        _report(args, dupes, result, bar)
    return OK


def _params(args: argparse.Namespace, result: Audit) -> dict[str, object]:
    """The run's parameters, as `--json` records them."""
    return {"threshold": args.threshold, "measure": args.measure, "width": result.width,
            "reworded": result.reworded, "method": result.method,
            "num_perm": args.num_perm, "max_size_ratio": args.max_size_ratio,
            "exclude": args.exclude, "all_candidates": args.all_candidates}


def _targets(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """(option, path) of each file the run is to write (`--json -` is stdout)."""
    named = [(f"--{name}", getattr(args, name)) for name in TARGETS]
    return [(option, path) for option, path in named
            if path is not None and not (option == "--json" and str(path) == "-")]


def unwritable(path: Path) -> str | None:
    """Why the file cannot be written, or None: checked by opening it as the run will (a
    file this creates is removed again, one that exists is left as it was)."""
    if path.is_dir():
        return "is a folder"
    folder = path.parent
    if not folder.exists():
        return f"no such folder: {folder}"
    if not folder.is_dir():
        return f"not a folder: {folder}"
    existed = path.exists()
    if existed and not path.is_file():
        # a device or a pipe: opening it could block or touch it; ask the system instead
        return None if os.access(path, os.W_OK) else "cannot write: permission denied"
    try:
        with path.open("ab"):
            pass
    except OSError as exc:
        return f"cannot write: {exc.strerror or exc}"
    if not existed:
        path.unlink()
    return None


def _report(args: argparse.Namespace, dupes: ModuleType, result: Audit,
            bar: ProgressBar) -> None:
    """Print the report and write the files asked for."""
    from app.cli.dupes_report import render
    from app.neardup.report import as_json, write_csv, write_json
    from app.neardup.site import Pairs

    sample = (dupes.near_threshold(result, args.sample, args.margin, args.sample_seed)
              if args.sample else Pairs.empty())
    to_stdout = args.json is not None and str(args.json) == "-"
    if not to_stdout:
        render(result, args.top, sample, args.bins, sys.stdout)
    if args.csv is not None:
        write_csv(args.csv, result, args.all_candidates, bar)
        bar.close()
        print(f"pairs written to {args.csv}", file=sys.stderr)
    if args.verdicts is not None:
        from app.neardup.report import write_verdicts
        from app.neardup.verdict import verdicts

        write_verdicts(args.verdicts, result, verdicts(result), bar)
        bar.close()
        print(f"verdicts written to {args.verdicts}", file=sys.stderr)
    if args.json is not None:
        doc = as_json(result, sample, _params(args, result), args.bins, args.all_candidates,
                      bar)
        bar.close()
        if to_stdout:
            print_json(doc, sys.stdout)
        else:
            write_json(args.json, doc)
            print(f"audit written to {args.json}", file=sys.stderr)
    if args.html is not None:
        from app.neardup.html import write_html

        shown = sample if args.sample else dupes.near_threshold(
            result, HTML_SAMPLE, args.margin, args.sample_seed)
        write_html(args.html, result, shown, args.bins, bar)
        bar.close()
        print(f"report written to {args.html}", file=sys.stderr)
