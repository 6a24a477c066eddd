"""`rearrange sanctions show HOST | clear HOST`: spam-score sanctions of a running service."""
from __future__ import annotations

import argparse
import sys
from typing import IO, Any

from app.banlist.model import iso
from app.cli.client import Client
from app.cli.exits import OK, calling
from app.cli.flags import (
    ServiceCommand,
    add_json_flag,
    add_service_arguments,
    client_of,
    duration,
    print_json,
)
from app.cli.tables import table


def add_parser(sub: Any) -> None:
    """The `sanctions` sub-commands, added to the `rearrange` parser."""
    p = sub.add_parser("sanctions", help="spam-score sanctions of a running service: a "
                       "host's state and history, appeals")
    add_service_arguments(p, "any admin token reads, an appeal needs a write token")
    cmds = p.add_subparsers(dest="sanctions_command", required=True,
                            parser_class=ServiceCommand)
    show = cmds.add_parser("show", help="a host's (or domain's) state, last score, pin, its "
                           "ban or quarantine entry and every transition")
    show.add_argument("host")
    add_json_flag(show, "the service's answer (GET /v1/sanctions/{host})")
    clear = cmds.add_parser("clear", help="an appeal: lift the host's ban or quarantine and "
                            "pin it clean")
    clear.add_argument("host")
    clear.add_argument("--reason", required=True)
    pin = clear.add_mutually_exclusive_group()
    pin.add_argument("--pin", type=duration, metavar="DURATION",
                     help="how long it stays pinned clean: seconds, or 90m, 36h, 7d, 2w "
                     "(default: the service's appeal immunity, 90 days unless configured)")
    pin.add_argument("--permanent", action="store_true",
                     help="pinned clean for good: no score can sanction it again")
    clear.add_argument("--force", action="store_true",
                       help="clear a host the sanctions never scored (refused otherwise: "
                       "likely a typo), pinning it clean all the same")


def run(args: argparse.Namespace, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """0 ok, 1 refused by the service, 3 unreachable (docs/cli.md#exit-codes)."""
    out, err = out or sys.stdout, err or sys.stderr
    command = _show if args.sanctions_command == "show" else _clear
    with client_of(args) as client:
        return calling(lambda: command(client, args, out), err)


def _show(client: Client, args: argparse.Namespace, out: IO[str]) -> int:
    got = client.sanction(args.host)
    if args.json:
        print_json(got, out)
        return OK
    for line in summary(got):
        print(line, file=out)
    table([{**t, "at": iso(t["at"])} for t in got["history"]],
          ["at", "from", "to", "score", "actor", "reason"], out)
    return OK


def _clear(client: Client, args: argparse.Namespace, out: IO[str]) -> int:
    got = client.clear_sanction(args.host, args.reason, args.pin, permanent=args.permanent,
                                force=args.force)
    print(f"{args.host}: {_state(got)}", file=out)
    return OK


def _state(got: dict[str, Any]) -> str:
    """`banned, score 0.95 at …; ban entry 3; pinned clean until …`."""
    score = ("no score yet" if got.get("score") is None
             else f"score {got['score']:g} at {iso(got['observed_at'])}")
    entries = "".join(f"; {what} entry {got[key]}" for what, key in (
        ("ban", "ban_entry_id"), ("quarantine", "quarantine_entry_id")) if got.get(key))
    pin = ("; pinned clean for good" if got.get("pinned_forever") else
           f"; pinned clean until {iso(got['pinned_until'])}" if got.get("pinned")
           else f"; appeal immunity ended {iso(got['pinned_until'])}: scored as usual"
           if got.get("pinned_until") else "")
    return f"{got.get('state')}, {score}{entries}{pin}"


def summary(got: dict[str, Any]) -> list[str]:
    """`sanctions show`'s lines above the transitions, from GET /v1/sanctions/{host}: the
    host's state, then what that state does not say: a sanction its pin holds back, and
    what it inherits from its parent domains (a quarantined parent demotes it too)."""
    via = "; ".join(f"{'banned' if e['sanction'] == 'banned' else 'quarantined'} via "
                    f"{e['via']}" for e in got.get("inherited", ()))
    lines = [f"{got['key']} ({got['scope']}): {_state(got)}{f'; but {via}' if via else ''}"]
    if got.get("suppressed"):
        lines.append(f"suppressed: {got['suppressed']['why']}")
    for e in got.get("inherited", ()):
        banned = e["sanction"] == "banned"
        lines.append(f"inherited: {'banned' if banned else 'quarantined'} via "
                     f"{e['matched_by']} [{'ban' if banned else 'quarantine'} entry {e['id']}] "
                     f"by {e['actor']}: {e['reason']}")
    for p in got.get("parents", ()):
        score = "" if p.get("score") is None else f", score {p['score']:g}"
        reach = ("covers its subdomains" if p["covers_subdomains"] else
                 f"scored as a host: {got['key']} is not covered")
        lines.append(f"parent {p['key']} ({p['scope']}): {p['state']}{score}; {reach}")
    return lines
