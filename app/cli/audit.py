"""`rearrange audit search`: the audit log searched by site, for T&S ("why did my site go")."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import IO, Any

from app.banlist.model import iso
from app.cli.exits import FINDING, OK, REFUSED, USAGE
from app.cli.flags import add_json_flag, add_progress_flags, print_json
from app.cli.progress import ProgressBar
from app.cli.tables import add_row, new_table, show
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
    add_json_flag(s, "{query, summary, records}: the summary and every record")
    add_progress_flags(s)


def run(args: argparse.Namespace, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """0 when records were found, 1 when none were or a log cannot be read, 2 on bad
    arguments (docs/cli.md#exit-codes)."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        query = _query(args)
        files = _files(args.log)
        with ProgressBar.of(args.progress, err) as bar:
            found = audit_search.search(files, query, bar)
    except ValueError as exc:
        print(f"rearrange audit search: {exc}", file=err)
        return USAGE
    except OSError as exc:  # a log named that is not there, or one that cannot be read
        print(f"rearrange audit search: {exc}", file=err)
        return REFUSED
    summary = audit_search.summarize(found)
    what = " ".join(filter(None, (query.url or query.host, _span(args))))
    if args.json:
        print_json({"query": _echo(query), "summary": summary, "records": found.hits}, out)
    else:
        render(found, summary, what, max(args.top, 0), out)
    return OK if found.hits else FINDING


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
            raise FileNotFoundError(f"{log}: no such audit log (nor files rotated out of it)")
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


def render(found: audit_search.Found, summary: dict[str, Any], what: str, top: int,
           out: IO[str]) -> None:
    """The summary, then the last `top` records as a table."""
    read = summary["read"]
    lines = [f"{what}: {summary['records']} records in {summary['requests']} requests"
             + (f", {summary['first']} to {summary['last']}" if summary["records"] else "")]
    if summary["applied"]:
        lines.append("  applied: " + ", ".join(f"{c['rule']} {c['action']} {c['records']}"
                                               for c in summary["applied"]))
    if summary["shadow"]:
        lines.append("  shadow (computed, not applied): " + ", ".join(
            f"{c['rule']} {c['action']} {c['records']}" for c in summary["shadow"]))
    if summary["records"]:
        low, high = summary["banlist_versions"]
        configs = ", ".join(f"{v} ({n})" for v, n in summary["config_versions"].items())
        lines.append(f"  {summary['urls']} URLs; config versions {configs}; banlist "
                     f"versions {low}" + (f" to {high}" if high != low else ""))
    lines.append(f"  read {len(read['files'])} file(s), {read['lines']} lines, "
                 f"{read['parsed']} parsed" + (f", {read['unreadable']} unreadable (torn "
                                              "by a failed write, skipped)"
                                              if read["unreadable"] else ""))
    shown = found.hits[-top:] if top else []
    if shown and len(shown) < len(found.hits):
        lines.append(f"the last {len(shown)} records (--top, or --json for all):")
    out.write("\n".join(lines) + "\n")
    if shown:
        columns = ("at", "request_id", "rule", "action", "mode", "delta", "url", "reason")
        table = new_table(c.upper() for c in columns)
        for hit in shown:
            add_row(table, *(hit[c] for c in columns))
        show(table, out)
