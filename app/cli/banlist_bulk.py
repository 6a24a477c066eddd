"""`rearrange banlist remove --actor … --reason WHY` and `banlist list --actor …`: the bulk
form of a removal (a dry run's count and sample first, then a confirmation) and the listing
streamed as plain lines, both filtered as `POST /v1/banlist/remove` filters."""
from __future__ import annotations

import argparse
import sys
import time
from typing import IO, Any

from app.banlist.model import SCOPES, iso
from app.cli.client import Client, Json
from app.cli.exits import OK, REFUSED
from app.cli.tables import table
from app.timespec import parse_duration, parse_time

# flag → the filter field it sets (docs/banlist.md, "Undo a campaign")
FILTERS = {"actor": "actor", "reason_contains": "reason_contains", "scope": "scope",
           "value_suffix": "value_suffix", "created_before": "created_before",
           "created_after": "created_after", "expires_before": "expires_before"}
COLUMNS = ("id", "scope", "value", "regions", "created_at", "expires_at", "actor", "reason")
PAGE = 1000  # entries a request (the most GET /v1/banlist/entries gives)


def add_filter_flags(parser: Any) -> None:
    """--actor, --reason-contains, --scope, --value-suffix, --created-before|after,
    --expires-before: which active entries (every one given must hold)."""
    parser.add_argument("--actor", help="made by this actor (exactly)")
    parser.add_argument("--reason-contains", metavar="WORDS",
                        help="whose reason holds these words (in any case)")
    parser.add_argument("--scope", choices=SCOPES)
    parser.add_argument("--value-suffix", metavar="TEXT", help="whose value ends with this "
                        "(.camp.example: every host under camp.example)")
    parser.add_argument("--created-after", type=_back, metavar="TIME",
                        help="created at or after: ISO 8601 with an offset, a date, or an "
                        "age such as 36h or 7d")
    parser.add_argument("--created-before", type=_back, metavar="TIME",
                        help="created before this time (same forms)")
    parser.add_argument("--expires-before", type=_ahead, metavar="TIME",
                        help="expiring before: ISO 8601 with an offset, a date, or a "
                        "duration from now such as 7d (expiring within a week)")


def filters_of(args: argparse.Namespace) -> dict[str, str]:
    """The filter the flags give (empty: none given)."""
    return {field: value for flag, field in FILTERS.items()
            if (value := getattr(args, flag, None)) is not None}


def remove(client: Client, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """Count and show what the filter takes (a dry run), then, unless `--dry-run`, ask
    (unless `--yes`) and remove them as one batch."""
    filters = filters_of(args)
    seen = client.remove_matching(filters, args.reason, dry_run=True)
    matched = seen["matched"]
    print(f"{matched} active entr{'y' if matched == 1 else 'ies'} match "
          f"{_said(seen['filter'])} (banlist version {seen['banlist_version']})", file=out)
    if seen["sample"]:
        table(seen["sample"], ["id", "scope", "value", "created_at", "actor", "reason"], out)
        if matched > len(seen["sample"]):
            print(f"… and {matched - len(seen['sample'])} more", file=out)
    if args.dry_run or not matched:
        print("nothing removed" + (" (--dry-run)" if args.dry_run and matched else ""),
              file=out)
        return OK
    if not args.yes and not _confirmed(matched, err):
        print("refused: not confirmed: nothing removed (--yes removes without asking)",
              file=err)
        return REFUSED
    done = client.remove_matching(filters, args.reason, dry_run=False)
    changed = (f" (the list changed since the count: {matched} matched then)"
               if done["removed"] != matched else "")
    print(f"removed {done['removed']} entries as one batch{changed}; banlist version "
          f"{done['banlist_version']}", file=out)
    return OK


def _confirmed(count: int, err: IO[str]) -> bool:
    err.write(f"remove these {count} entries? [y/N] ")
    err.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _said(filters: Json) -> str:
    return " ".join(f"{k}={v!r}" for k, v in filters.items())


def list_lines(client: Client, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """The entries as plain lines, tab-separated (a header first), written page by page as
    they come: no table is built, so 100,000 entries take seconds. The count goes to
    stderr, so stdout is the entries alone."""
    filters, after = filters_of(args), args.after
    limit = args.limit if args.limit > 0 else None
    shown, got = 0, None
    while limit is None or shown < limit:
        page = client.entries(after, PAGE if limit is None else min(PAGE, limit - shown),
                              **filters)
        if got is None:  # once the service answered: a refusal prints no header
            out.write("\t".join(c.upper() for c in COLUMNS) + "\n")
        got = page
        out.write("".join("\t".join(_cell(e.get(c)) for c in COLUMNS) + "\n"
                          for e in got["entries"]))
        shown += len(got["entries"])
        after = got["next"]
        if after is None:
            break
    if got is not None:
        more = f"; more after {after} (--after {after})" if after else ""
        print(f"{shown} of {got['total']} entries; banlist version "
              f"{got['banlist_version']}{more}", file=err)
    return OK


def _cell(value: Any) -> str:
    """A value as one field of a line: `-` for none, lists comma-joined, no tab or line
    break (a reason may hold them)."""
    if value is None or value == []:
        return "-"
    text = ",".join(value) if isinstance(value, list) else str(value)
    return " ".join(text.split()) if any(c in text for c in "\t\n\r") else text


def _back(text: str) -> str:
    """A time as the service takes it; an age (7d) counts back from now."""
    try:
        return iso(parse_time(text, time.time()))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _ahead(text: str) -> str:
    """A time as the service takes it; a duration (7d) counts on from now."""
    now = time.time()
    try:
        seconds: int | None = parse_duration(text)
    except ValueError:
        seconds = None  # not a duration: a time, then
    if seconds is not None:
        return iso(now + seconds)
    try:
        return iso(parse_time(text, now, ages=False))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, or a duration from now such as 7d"
                                         ) from None
