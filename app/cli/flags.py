"""Options several commands share, defined once."""
from __future__ import annotations

import argparse
import math
import os
from typing import IO, Any

import orjson

from app.cli.client import Client
from app.timespec import parse_duration


def add_progress_flags(parser: Any) -> None:
    """`--progress` / `--no-progress`: whether a command draws its progress bars on stderr
    (`args.progress`: True, False, or None for "when stderr is a terminal")."""
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None,
                          help="always draw the progress bar on stderr")
    progress.add_argument("--no-progress", dest="progress", action="store_false",
                          help="never draw it (default: only when stderr is a terminal)")


def add_json_flag(parser: Any, what: str) -> None:
    """`--json`: print `what` as one JSON document on stdout instead of the text."""
    parser.add_argument("--json", action="store_true", help=f"print JSON: {what}")


def print_json(doc: Any, out: IO[str]) -> None:
    """One JSON document, indented, on `out` (docs/cli.md: what each --json prints)."""
    out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")


def duration(text: str) -> int:
    """The type of a duration option (--ttl, --pin): seconds, or 90m, 36h, 7d, 2w."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def timeout(text: str) -> float:
    """The type of --timeout: seconds, fractions too (0.5, 60), or a duration (90s, 2m)."""
    try:
        seconds = float(text)
    except ValueError:
        return duration(text)
    if not 0 < seconds < math.inf:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: a timeout is more than 0 seconds")
    return seconds


def add_service_arguments(p: argparse.ArgumentParser, token_help: str) -> None:
    """--url, --token and --timeout: the service a command talks to, and how."""
    p.add_argument("--url", dest="service_url",
                   default=os.environ.get("REARRANGE_URL", "http://127.0.0.1:8080"),
                   help="the service (default REARRANGE_URL or http://127.0.0.1:8080)")
    p.add_argument("--token", default=os.environ.get("REARRANGE_TOKEN"),
                   help=f"bearer token (default REARRANGE_TOKEN); {token_help}")
    p.add_argument("--timeout", type=timeout, default=60.0, metavar="DURATION",
                   help="how long to wait for each answer: seconds, or 90s, 2m (default 60)")


def client_of(args: argparse.Namespace) -> Client:
    return Client(args.service_url, args.token, getattr(args, "timeout", 60.0))
