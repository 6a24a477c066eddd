"""`rearrange replay`: what a candidate config or a proposed ban would change on captured
traffic (docs/replay.md)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import IO, Any

import orjson

from app.cli.exits import invalid
from app.cli.flags import add_json_flag, add_progress_flags, print_json
from app.cli.progress import ProgressBar
from app.errors import BanlistError, ConfigError, InputFileError


def add_parser(sub: Any) -> None:
    """The `replay` command, added to the `rearrange` parser."""
    p = sub.add_parser(
        "replay", help="run captured requests through the served config and a candidate",
        description="Run every captured request (REARRANGE_CAPTURE_PATH files) offline "
        "through what is served (the config file REARRANGE_CONFIG names, or --served, with "
        "--served-banlist) and through the candidate (--config, --banlist, --ban), and "
        "report what would change: per request, per host and per rule.")
    p.add_argument("captures", type=Path, nargs="+", metavar="CAPTURED.jsonl",
                   help="capture files (rotated ones too, in any order)")
    p.add_argument("--config", type=Path, help="the candidate's rules file (default: the "
                   "served one, to try bans alone)")
    p.add_argument("--banlist", type=Path, help="the candidate's banlist: an export (NDJSON "
                   "or CSV) or JSON lines of {scope, value, reason} (default: the served one)")
    p.add_argument("--ban", action="append", default=[], metavar="'SCOPE VALUE [REGIONS]'",
                   help="a proposed ban added to the candidate's banlist, as 'domain "
                   "example.com' or 'host m.example.com RU,KZ' (repeat for more)")
    p.add_argument("--served", type=Path, help="the served rules file "
                   "(default REARRANGE_CONFIG)")
    p.add_argument("--served-banlist", type=Path, help="the served banlist, such as the "
                   "service's GET /v1/banlist/export (default: no bans)")
    p.add_argument("--at-capture-time", action="store_true",
                   help="answer each request at the time it was captured (validity windows, "
                   "ban expiry), not now")
    p.add_argument("--top", type=int, default=20, help="requests, hosts and rules listed "
                   "(default 20; --json lists all)")
    add_json_flag(p, "the whole report: {summary, hosts, rules, requests}")
    add_progress_flags(p)


def run(args: argparse.Namespace, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """0 when the replay ran (changes or not), 1 on a bad config, banlist or capture line."""
    from app.config.settings import Settings
    from app.replay.run import Report, Side, parse_ban, read_captures

    out, err = out or sys.stdout, err or sys.stderr
    settings = Settings()
    served_path = args.served or settings.config
    config = served_path
    try:
        proposed = [parse_ban(text) for text in args.ban]
        served = Side.build(served_path, args.served_banlist, limits=settings)
        config = args.config or served_path
        # imports nothing the served config did not load
        candidate = Side.build(config, args.banlist or args.served_banlist, proposed, settings,
                               served=served.config.plugins)
        total = sum(1 for path in args.captures for _ in read_captures(path))
    except ConfigError as exc:
        print(f"rearrange replay: {invalid(config, exc)}", file=err)
        return 1
    except (ValueError, BanlistError) as exc:  # InputFileError is a ValueError
        print(f"rearrange replay: {exc}", file=err)
        return 1
    report, now = Report(), time.time()
    with ProgressBar.of(args.progress, err) as bar:
        bar("replay", 0, total)
        for path in args.captures:
            try:
                for captured in read_captures(path):
                    at = captured.ts if args.at_capture_time else now
                    d = _diff(served, candidate, captured.body, at)
                    report.add(captured, _query(captured.body), d)
                    bar("replay", report.requests, total)
            except InputFileError as exc:  # the file changed since it was counted
                print(f"rearrange replay: {exc}", file=err)
                return 1
    if args.json:
        print_json(report.as_dict(), out)
    else:
        from app.cli.replay_table import render

        render(report, out, max(args.top, 0), _title(args, served_path))
    return 0


def _diff(served: Any, candidate: Any, body: bytes, now: float) -> Any:
    from app.replay.run import diff

    return diff(served.answer(body, now), candidate.answer(body, now))


def _query(body: bytes) -> str:
    query = orjson.loads(body).get("query")
    text = query.get("text") if isinstance(query, dict) else None
    return text if isinstance(text, str) else ""


def _title(args: argparse.Namespace, served: Path) -> str:
    candidate = [f"config {args.config or served}"]
    if args.banlist:
        candidate.append(f"banlist {args.banlist}")
    candidate += [f"ban {b!r}" for b in args.ban]
    base = f"config {served}" + (f", banlist {args.served_banlist}" if args.served_banlist
                                 else "")
    return f"served: {base}  →  candidate: {', '.join(candidate)}"
