"""`rearrange banlist pending | approve ID | reject ID`: the review queue of high-impact bans
(docs/banlist.md#high-impact-bans-four-eyes), and how `banlist add` says a ban waits."""
from __future__ import annotations

import argparse
from typing import IO, Any

from app.cli.client import Client
from app.cli.exits import OK
from app.cli.flags import add_json_flag, print_json
from app.cli.tables import table

COLUMNS = ["id", "scope", "value", "regions", "expires_at", "actor", "reason", "in_effect",
           "share"]


def add_parsers(cmds: Any) -> None:
    """`pending`, `approve` and `reject`, added to the `banlist` sub-commands."""
    pending = cmds.add_parser("pending", help="the high-impact bans waiting for a second "
                              "person, oldest first")
    add_json_flag(pending, "{pending: [...], review_share}, as GET /v1/banlist/pending")
    for name, what in (("approve", "ban what a pending ban asks (not your own)"),
                       ("reject", "drop a pending ban (lifting it if urgent and in effect)")):
        p = cmds.add_parser(name, help=what)
        p.add_argument("id", help="the pending ban's id (`banlist pending`)")
        p.add_argument("--reason", required=True, help="why (the review list's history "
                       "records it)")


def said_pending(got: dict[str, Any], out: IO[str]) -> None:
    """What `banlist add` prints when the ban waits for review (a 202), or was banned at
    once and queued for review after the fact (urgent)."""
    review = got if got.get("status") == "pending_review" else got.get("review")
    if review is None:
        return
    p = review["pending"]
    share = review.get("share")
    weighed = (f"it would have removed results from {share:.2%} of the last hour's requests"
               if share is not None else "it was sent to review")
    if got.get("status") == "pending_review":
        again = " (already proposed)" if got.get("existing") else ""
        print(f"PENDING REVIEW{again}: {weighed} (over {review['review_share']:g}); nothing "
              f"is banned until someone else approves pending ban {p['id']}:\n"
              f"  rearrange banlist approve {p['id']} --reason '…'", file=out)
    else:
        print(f"banned at once (urgent); queued for review after the fact as pending ban "
              f"{p['id']}: {weighed}", file=out)


def pending(client: Client, args: argparse.Namespace, out: IO[str], _: IO[str]) -> int:
    got = client.json("GET", "/v1/banlist/pending")
    if args.json:
        print_json(got, out)
        return OK
    rows = [{**p, "share": _share(p["impact"]["share"])} for p in got["pending"]]
    if not rows:
        print("no ban waits for review", file=out)
        return OK
    table(rows, COLUMNS, out)
    print(f"{len(rows)} waiting; approve one with `rearrange banlist approve ID --reason …` "
          f"(a second person), or reject it", file=out)
    return OK


def decide(client: Client, args: argparse.Namespace, out: IO[str], _: IO[str]) -> int:
    """`approve` and `reject`."""
    verb = args.banlist_command
    got = client.json("POST", f"/v1/banlist/pending/{args.id}/{verb}",
                      json={"reason": args.reason})
    if verb == "approve":
        e = got["entry"]
        print(f"approved: entry {e['id']} bans {e['scope']} {e['value']} (proposed by "
              f"{e['actor']}); banlist version {got['banlist_version']}", file=out)
        return OK
    r = got["rejected"]
    print(f"rejected pending ban {r['id']} ({r['scope']} {r['value']}, proposed by "
          f"{r['actor']})", file=out)
    for e in got["lifted"]:
        print(f"lifted entry {e['id']}, in effect since the urgent ban", file=out)
    return OK


def _share(share: float | None) -> str:
    return "not weighed" if share is None else f"{share:.3%}"
