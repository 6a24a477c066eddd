"""`rearrange audit search`: the audit log searched by site, for T&S ("why did my site go")."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import IO, Any

import orjson

from app.banlist.model import iso
from app.cli.flags import add_progress_flags
from app.observability import audit_search
from app.timespec import parse_time


def add_parser(sub: Any) -> None:
    """The `audit` sub-commands, added to the `rearrange` parser."""
    p = sub.add_parser("audit", help="search the audit log")
    cmds = p.add_subparsers(dest="audit_command", required=True)
    s = cmds.add_parser(
        "search", help="which requests and rules removed or demoted a site",
        description="Read the audit log (and the files rotated out of it) for the records "
        "of a host (and its subdomains) or one URL: every request and rule that removed, "
        "collapsed or demoted it, with a summary by rule.")
    s.add_argument("--host", help="a host name or URL: that host and its subdomains")
    s.add_argument("--url", help="one URL (matched in canonical form)")
    s.add_argument("--since", help="from this time: ISO 8601 with an offset, a date, or an "
                   "age such as 36h or 7d")
    s.add_argument("--until", help="before this time (same forms as --since)")
    s.add_argument("--rule", action="append", default=[],
                   help="only this rule's records (repeat, or comma-separate)")
    s.add_argument("--every-action", action="store_true",
                   help="every record of the site, not only those that removed, collapsed "
                   "or demoted it (annotations, moves up too)")
    s.add_argument("--log", type=Path, action="append",
                   help="the audit log (default REARRANGE_AUDIT_LOG); its rotated files "
                   "beside it are read too (repeat for logs of several replicas)")
    s.add_argument("--top", type=int, default=50, help="records to print (default 50; "
                   "--json prints all)")
    s.add_argument("--json", action="store_true", help="print JSON: summary and every record")
    add_progress_flags(s)


def run(args: argparse.Namespace, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """0 when records were found, 1 when none were, 2 on bad arguments or no log to read."""
    from app.neardup.report import ProgressBar

    out, err = out or sys.stdout, err or sys.stderr
    try:
        query = _query(args)
        files = _files(args.log)
    except ValueError as exc:
        print(f"rearrange audit search: {exc}", file=err)
        return 2
    enabled = err.isatty() if args.progress is None else args.progress
    bar = ProgressBar(err, enabled)
    try:
        found = audit_search.search(files, query, bar)
    except OSError as exc:
        bar.close()
        print(f"rearrange audit search: {exc}", file=err)
        return 2
    bar.close()
    summary = audit_search.summarize(found)
    what = " ".join(filter(None, (query.url or query.host, _span(args))))
    if args.json:
        out.write(orjson.dumps({"query": _echo(query), "summary": summary,
                                "records": found.hits}, option=orjson.OPT_INDENT_2).decode()
                  + "\n")
    else:
        out.write(audit_search.render(found, summary, what, max(args.top, 0)))
    return 0 if found.hits else 1


def _query(args: argparse.Namespace) -> audit_search.Query:
    if not (args.host or args.url):
        raise ValueError("give --host or --url")
    now = time.time()
    since = parse_time(args.since, now) if args.since else None
    until = parse_time(args.until, now) if args.until else None
    if since is not None and until is not None and since >= until:
        raise ValueError("--since must be before --until")
    rules = frozenset(r.strip() for item in args.rule for r in item.split(",") if r.strip())
    return audit_search.Query(
        host=audit_search.host_of(args.host) if args.host else None,
        url=audit_search.canonical_url(args.url) if args.url else None,
        since=since, until=until, rules=rules, every_action=args.every_action)


def _files(logs: list[Path] | None) -> list[Path]:
    if not logs:
        env = os.environ.get("REARRANGE_AUDIT_LOG", "")
        if not env or env == "-":
            raise ValueError("no audit log: give --log PATH (REARRANGE_AUDIT_LOG is "
                             + ("stdout" if env == "-" else "unset") + ")")
        logs = [Path(env)]
    files = []
    for log in logs:
        found = audit_search.log_files(log)
        if not found:
            raise ValueError(f"{log}: no such audit log (nor files rotated out of it)")
        files += found
    return files


def _span(args: argparse.Namespace) -> str:
    return " ".join(filter(None, (f"since {args.since}" if args.since else "",
                                  f"until {args.until}" if args.until else "")))


def _echo(query: audit_search.Query) -> dict[str, object]:
    return {"host": query.host, "url": query.url,
            "since": iso(query.since) if query.since is not None else None,
            "until": iso(query.until) if query.until is not None else None,
            "rules": sorted(query.rules), "every_action": query.every_action}
