"""`rearrange banlist history`: the change log, newest first a page at a time, each page
ending with the exact command of the next (GET /v1/banlist/changes)."""
from __future__ import annotations

import argparse
import shlex
import time
from typing import IO, Any

from app.banlist.model import iso
from app.cli.client import Client
from app.cli.exits import OK
from app.cli.flags import add_json_flag, default_url, print_json
from app.cli.tables import table
from app.timespec import parse_time

LIMIT = 100  # changes a page (the service gives at most 1,000)
# (option, attribute, query parameter) of the filters, as the next page's command repeats them
FILTERS = (("--value", "value", "value"), ("--host", "host", "host"),
           ("--actor", "actor", "actor"), ("--since", "start", "from"),
           ("--until", "until", "until"))


def add_parser(cmds: Any) -> None:
    """`history`, added to the `banlist` sub-commands."""
    hist = cmds.add_parser(
        "history", help="the change log, newest first: who changed what, when, why",
        description="The newest changes first, a page at a time; the last line gives the "
        "command of the page before (--before SEQ). --after-seq SEQ reads the other way, "
        "the oldest changes after SEQ first.")
    hist.add_argument("--limit", type=int, default=LIMIT,
                      help=f"changes a page (default {LIMIT}, at most 1000)")
    pages = hist.add_mutually_exclusive_group()
    pages.add_argument("--before", type=_seq, metavar="SEQ",
                       help="the newest changes before this seq (to page back)")
    pages.add_argument("--after-seq", type=_seq, metavar="SEQ",
                       help="the oldest changes after this seq, oldest first (0: from the "
                       "first change on)")
    hist.add_argument("--value", help="changes of entries (or groups) of this value")
    hist.add_argument("--host", help="changes of entries banning this host, a subdomain or "
                      "a parent domain of it")
    hist.add_argument("--actor", help="changes made by this actor")
    hist.add_argument("--since", "--from", dest="start", metavar="TIME", type=_since,
                      help="from this time: ISO 8601 with an offset, a date, or an age such "
                      "as 2h or 7d")
    hist.add_argument("--until", metavar="TIME", type=_instant,
                      help="before this time (same forms)")
    add_json_flag(hist, "the service's answer (GET /v1/banlist/changes): {changes, more, "
                  "banlist_version}")


def history(client: Client, args: argparse.Namespace, out: IO[str], _: IO[str]) -> int:
    """One page of the change log, then what the page before (or after) it is."""
    oldest_first = args.after_seq is not None
    query: dict[str, Any] = {"limit": args.limit, "order": "asc" if oldest_first else "desc"}
    if oldest_first:
        query["since"] = args.after_seq
    elif args.before is not None:
        query["before"] = args.before
    query.update({param: v for _, name, param in FILTERS
                  if (v := getattr(args, name)) is not None})
    got = client.changes(**query)
    if args.json:
        print_json(got, out)
        return OK
    changes = got["changes"]
    if changes:
        table([{**c, "what": _what(c)} for c in changes],
              ["seq", "at", "op", "what", "actor", "reason"], out)
    print(_footer(args, changes, got.get("more", False)), file=out)
    return OK


def _footer(args: argparse.Namespace, changes: list[dict[str, Any]], more: bool) -> str:
    """`100 changes, newest first; older: rearrange banlist history --before 3913`."""
    oldest_first = args.after_seq is not None
    order = "oldest first" if oldest_first else "newest first"
    if not changes:
        return "no changes" + (" after seq " + str(args.after_seq) if oldest_first else
                               f" before seq {args.before}" if args.before else "")
    said = f"{len(changes)} change{'s' if len(changes) != 1 else ''}, {order}"
    if not more:
        return f"{said}; none {'newer' if oldest_first else 'older'}"
    option = "--after-seq" if oldest_first else "--before"
    return (f"{said}; {'newer' if oldest_first else 'older'}: "
            f"{_command(args, option, changes[-1]['seq'])}")


def _command(args: argparse.Namespace, option: str, seq: int) -> str:
    """The command of the next page: this one's filters (times as the instants they were
    taken to be, so that `--since 2h` means the same on every page) and service, never its
    token."""
    words = ["rearrange", "banlist", "history", option, str(seq)]
    if args.service_url != default_url():  # given on the command line: the same service
        words += ["--url", args.service_url]
    if args.limit != LIMIT:
        words += ["--limit", str(args.limit)]
    for flag, name, _ in FILTERS:
        if (value := getattr(args, name)) is not None:
            words += [flag, value]
    return shlex.join(words)


def _what(c: dict[str, Any]) -> str:
    """What a change changed: `host spam.example [entry 4]`, `group acme: 2 domains`, an
    edit's fields before and after."""
    what = (f"{c['entry']['scope']} {c['entry']['value']} [entry {c['entry']['id']}]"
            if "entry" in c else f"group {c['name']}: {len(c['domains'])} domains"
            if c["op"] == "group" else f"{c['entries']} entries"
            if c["op"] == "seed" else f"entry {c.get('id', '-')}")
    if c["op"] == "edit":
        what += ": " + "; ".join(f"{k} {_shown(k, v)} -> {_shown(k, c['after'][k])}"
                                 for k, v in c["before"].items())
    return what


def _shown(field: str, value: Any) -> str:
    """An edited field's value in the history table: no expiry, no regions said in words."""
    if field == "regions":
        return ",".join(value) or "everywhere"
    return "permanent" if value is None else str(value)


def _instant(text: str) -> str:
    """A time argument as the service takes it (an ISO 8601 instant; ages are the CLI's)."""
    try:
        return iso(parse_time(text, time.time()))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _since(text: str) -> str:
    """--since: a time or an age, as everywhere in the CLI. A bare number was a seq once:
    say where that went rather than that it is no time."""
    if text.strip().isdigit():
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is no time: --since takes a time (2026-03-01T12:00:00Z, "
            f"2026-03-01) or an age (2h, 7d); the changes after a seq are --after-seq {text}")
    return _instant(text)


def _seq(text: str) -> int:
    """A change's sequence number, as the SEQ column shows it."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a seq (a whole number, as "
                                         "the SEQ column shows)")
    return int(text)

