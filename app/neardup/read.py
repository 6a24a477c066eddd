"""Pages for `rearrange dupes`: JSON lines of {url, text}, or saved HTML pages whose main
text is extracted (app/neardup/extract.py) in worker processes, one per core."""
from __future__ import annotations

import fnmatch
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path, PurePosixPath

import orjson

from app.errors import InputFileError
from app.neardup.extract import extract

HTML_SUFFIXES = (".html", ".htm")
# Below this many files the worker processes cost more to start than they save.
POOL_MIN_FILES = 64

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


def excluded(name: str, globs: Sequence[str]) -> bool:
    """Whether a page's name (its path in the folder, or its url) matches an --exclude glob,
    either whole or by its last path component (`print.html` drops every print.html)."""
    last = PurePosixPath(name).name
    return any(fnmatch.fnmatchcase(name, g) or fnmatch.fnmatchcase(last, g) for g in globs)


def read_pages(path: Path, canonical_urls: bool = False, exclude: Sequence[str] = (),
               workers: int = 0, progress: Progress = _no_progress,
               skipped: list[str] | None = None,
               extractor: str = "auto") -> Iterator[tuple[str, str]]:
    """(url, main text) of each page not excluded, in input order; the names of the
    excluded pages are appended to `skipped` when given.

    A saved page is named by its path inside the folder, or with canonical_urls by the URL
    it declares (`<link rel=canonical>`, `og:url`) when it declares one. `workers` is the
    number of extraction processes (0: one per core).
    """
    dropped = skipped if skipped is not None else []
    if path.is_dir():
        yield from _read_html_folder(path, canonical_urls, exclude, workers, progress, dropped,
                                     extractor)
    elif path.is_file():
        yield from _read_jsonl(path, exclude, progress, dropped)
    else:
        raise InputFileError(f"{path}: no such file or folder")


def _read_jsonl(path: Path, exclude: Sequence[str], progress: Progress,
                dropped: list[str]) -> Iterator[tuple[str, str]]:
    total = path.stat().st_size
    done = 0
    with path.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            done += len(line)
            if n % 1000 == 0:
                progress("reading", done, total)
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise InputFileError(f"{path}:{n}: not valid JSON: {exc}") from None
            if not isinstance(row, dict):
                raise InputFileError(f"{path}:{n}: expected an object {{url, text}}")
            url, text = row.get("url"), row.get("text")
            if not isinstance(url, str) or not url:
                raise InputFileError(f"{path}:{n}: `url` must be a non-empty string")
            if text is not None and not isinstance(text, str):
                raise InputFileError(f"{path}:{n}: `text` must be a string")
            if exclude and excluded(url, exclude):
                dropped.append(url)
                continue
            yield url, text or ""
    progress("reading", total, total)


def _check_trafilatura() -> None:
    try:
        import trafilatura  # noqa: F401
    except ImportError:
        raise InputFileError(
            "reading saved HTML needs trafilatura, which is not installed: "
            "pip install 'rearrange[audit]' (or give a JSON-lines file of {url, text})"
        ) from None


def _read_html_folder(path: Path, canonical_urls: bool, exclude: Sequence[str], workers: int,
                      progress: Progress, dropped: list[str],
                      extractor: str) -> Iterator[tuple[str, str]]:
    _check_trafilatura()
    files = sorted(p for p in path.rglob("*") if p.suffix.lower() in HTML_SUFFIXES)
    if not files:
        raise InputFileError(f"{path}: no .html or .htm files in this folder")
    jobs = []
    for file in files:
        name = file.relative_to(path).as_posix()
        if exclude and excluded(name, exclude):
            dropped.append(name)
        else:
            jobs.append((str(file), name, canonical_urls, extractor))
    workers = workers or os.cpu_count() or 1
    progress("extracting", 0, len(jobs))
    if workers == 1 or len(jobs) < POOL_MIN_FILES:
        pages: Iterator[tuple[str, str]] = map(extract, jobs)
        yield from _counted(pages, len(jobs), progress)
        return
    # forkserver: a clean process to fork workers from, whatever threads this one runs.
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        chunk = max(1, min(32, len(jobs) // (workers * 8)))
        yield from _counted(pool.map(extract, jobs, chunksize=chunk), len(jobs), progress)


def _counted(pages: Iterator[tuple[str, str]], total: int,
             progress: Progress) -> Iterator[tuple[str, str]]:
    for n, page in enumerate(pages, 1):
        yield page
        if n % 20 == 0 or n == total:
            progress("extracting", n, total)
