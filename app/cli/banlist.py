"""`rearrange banlist …`: the T&S tools, against a running service over its HTTP API."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import IO, Any

from app.banlist.model import SCOPES, iso
from app.cli import banlist_history, banlist_review
from app.cli.banlist_bulk import add_filter_flags, filters_of, list_lines
from app.cli.banlist_bulk import remove as remove_matching
from app.cli.banlist_import import import_file
from app.cli.client import Client, Refused
from app.cli.exits import OK, REFUSED, USAGE, calling
from app.cli.flags import (
    ServiceCommand,
    add_json_flag,
    add_progress_flags,
    add_service_arguments,
    client_of,
    duration,
    print_json,
)
from app.cli.tables import table
from app.errors import InputFileError
from app.timespec import parse_time


def add_parser(sub: Any) -> None:
    """The `banlist` sub-commands, added to the `rearrange` parser."""
    p = sub.add_parser("banlist", help="T&S tools against a running service")
    add_service_arguments(p, "the actor comes from it")
    cmds = p.add_subparsers(dest="banlist_command", required=True,
                            parser_class=ServiceCommand)
    add = cmds.add_parser("add", help="ban a url, prefix, host, domain or org group")
    add.add_argument("scope", choices=SCOPES)
    add.add_argument("value")
    add.add_argument("--reason", required=True)
    add.add_argument("--regions", default="", help="comma-separated region codes")
    ttl = add.add_mutually_exclusive_group()
    ttl.add_argument("--ttl", type=duration, metavar="DURATION",
                     help="until the ban lapses: seconds, or 90m, 36h, 7d, 2w")
    ttl.add_argument("--expires-at", help="ISO 8601 time the ban lapses")
    add.add_argument("--urgent", action="store_true", help="ban at once, past the review a "
                     "high-impact ban waits for (needs the right to approve; the ban is "
                     "reviewed after the fact)")
    ext = cmds.add_parser("extend", help="give an entry a new expiry (or none), in place")
    ext.add_argument("id")
    _expiry_flags(ext, required=True)
    ext.add_argument("--reason", required=True, help="why (the change log records it)")
    edit = cmds.add_parser("edit", help="change an entry's regions or expiry, in place")
    edit.add_argument("id")
    where = edit.add_mutually_exclusive_group()
    where.add_argument("--regions", help="comma-separated region codes, in place of its own")
    where.add_argument("--everywhere", action="store_true", help="no regions: everywhere")
    _expiry_flags(edit, required=False)
    edit.add_argument("--reason", required=True, help="why (the change log records it)")
    rm = cmds.add_parser("remove", help="lift an entry (an appeal), or every entry a filter "
                         "takes, as one batch (undo a campaign)")
    rm.add_argument("id", nargs="?", help="the entry to lift; or give a filter instead")
    rm.add_argument("--reason", required=True)
    add_filter_flags(rm)
    rm.add_argument("--dry-run", action="store_true",
                    help="with a filter: count and show what it takes, remove nothing")
    rm.add_argument("-y", "--yes", action="store_true",
                    help="with a filter: remove without asking (the count is shown first)")
    look = cmds.add_parser("lookup", help="why a URL is (not) banned")
    look.add_argument("target", metavar="url")
    look.add_argument("--region")
    add_json_flag(look, "the service's answer (GET /v1/banlist/lookup)")
    lst = cmds.add_parser("list", help="the active entries, in id order, one a line "
                          "(tab-separated); the count on stderr")
    lst.add_argument("--after", metavar="ID", help="entries after this id (to page on)")
    lst.add_argument("--limit", type=int, default=100,
                     help="entries to print (default 100; 0: every one)")
    add_filter_flags(lst)
    add_json_flag(lst, "{entries, next, total, banlist_version}, as GET /v1/banlist/entries")
    grps = cmds.add_parser("groups", help="every org group and its domains")
    add_json_flag(grps, "the service's answer (GET /v1/banlist/groups)")
    imp = cmds.add_parser("import", help="bulk import NDJSON or CSV, validated first")
    imp.add_argument("file", type=Path)
    imp.add_argument("--format", choices=["ndjson", "csv"], help="default: from the extension")
    imp.add_argument("--mode", choices=["all", "valid"], default="all",
                     help="all: nothing unless every line is valid (default); valid: skip bad")
    imp.add_argument("--dry-run", action="store_true", help="validate only")
    add_progress_flags(imp)
    exp = cmds.add_parser("export", help="every active entry")
    exp.add_argument("--format", choices=["ndjson", "csv"], default="ndjson")
    exp.add_argument("-o", "--output", type=Path, help="file (default stdout)")
    banlist_history.add_parser(cmds)
    banlist_review.add_parsers(cmds)
    grp = cmds.add_parser("group", help="define an org group (then `add org NAME`)")
    grp.add_argument("name")
    grp.add_argument("domains", nargs="+")
    grp.add_argument("--reason", required=True)
    res = cmds.add_parser("reseed", help="write this replica's copy back into Redis")
    res.add_argument("--reason", required=True)
    res.add_argument("--store", choices=["banlist", "quarantine", "sanctions"],
                     default="banlist", help="which copy: a list, or the sanction states "
                     "(default banlist; /readyz says which diverged)")
    res.add_argument("--force", action="store_true",
                     help="overwrite Redis even if it holds another history (epoch) or "
                          "changes this replica has not applied")
    fgt = cmds.add_parser("forget-loss", help="forget the loss mark of a replica gone for "
                          "good (the changes it held are accepted as lost)")
    fgt.add_argument("replica", help="the mark's name, as /readyz's *_missing gives it")
    fgt.add_argument("--reason", required=True)
    fgt.add_argument("--store", choices=["banlist", "quarantine", "sanctions"],
                     default="banlist", help="whose mark (default banlist)")


def _expiry_flags(parser: Any, required: bool) -> None:
    """--ttl, --until or --permanent: an entry's new expiry (`extend`, `edit`)."""
    expiry = parser.add_mutually_exclusive_group(required=required)
    expiry.add_argument("--ttl", type=duration, metavar="DURATION",
                        help="lapses this long from now: seconds, or 90m, 36h, 7d, 2w")
    expiry.add_argument("--until", type=_moment, metavar="TIME",
                        help="lapses at this time: ISO 8601 with an offset, or a date")
    expiry.add_argument("--permanent", action="store_true", help="never lapses")


def _moment(text: str) -> str:
    """A time to come as the service takes it (an ISO 8601 instant; no ages)."""
    try:
        return iso(parse_time(text, time.time(), ages=False))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args: argparse.Namespace, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """Run one `banlist` sub-command; 0 ok, 1 refused (by the service, or a file the CLI
    cannot read), 3 the service unreachable (docs/cli.md#exit-codes)."""
    out, err = out or sys.stdout, err or sys.stderr
    command = _COMMANDS[args.banlist_command]

    def lines(exc: Refused) -> None:  # an import's refused lines
        if exc.body.get("refused"):
            table(exc.body["refused"], ["line", "field", "problem"], err)

    with client_of(args) as client:
        try:
            return calling(lambda: command(client, args, out, err), err, lines)
        except InputFileError as exc:
            print(f"refused: {exc}", file=err)
            return REFUSED
        except OSError as exc:  # the file to import, or the export to write
            print(f"refused: {exc.filename}: {exc.strerror}", file=err)
            return REFUSED


def _add(client: Client, args: argparse.Namespace, out: IO[str], _: IO[str]) -> int:
    body: dict[str, Any] = {"scope": args.scope, "value": args.value, "reason": args.reason,
                            "regions": [r for r in args.regions.split(",") if r]}
    if args.ttl is not None:
        body["ttl_seconds"] = args.ttl
    if args.expires_at:
        body["expires_at"] = args.expires_at
    if args.urgent:
        body["urgent"] = True
    got = client.add_entry(body)
    banlist_review.said_pending(got, out)
    if "entry" not in got:  # waits for review
        return OK
    table([got["entry"]], ["id", "scope", "value", "regions", "expires_at", "actor", "reason"],
          out)
    if got.get("existing"):
        print(f"already banned by entry {got['entry']['id']}: nothing added", file=out)
    print(f"banlist version {got['banlist_version']}", file=out)
    return 0


def _edit(client: Client, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """`extend` and `edit`: PATCH the entry with what the flags give."""
    body: dict[str, Any] = {"reason": args.reason}
    if args.ttl is not None:
        body["ttl_seconds"] = args.ttl
    elif args.until is not None:
        body["expires_at"] = args.until
    elif args.permanent:
        body["expires_at"] = None
    if getattr(args, "everywhere", False):
        body["regions"] = []
    elif getattr(args, "regions", None) is not None:
        body["regions"] = [r for r in args.regions.split(",") if r]
    if len(body) == 1:
        print("rearrange banlist edit: nothing to change: give --regions or --everywhere, "
              "--ttl, --until or --permanent", file=err)
        return USAGE
    got = client.edit_entry(args.id, body)
    table([got["entry"]], ["id", "scope", "value", "regions", "expires_at", "actor", "reason"],
          out)
    done = "changed" if got["changed"] else "already so: nothing changed"
    print(f"entry {got['entry']['id']} {done}; banlist version {got['banlist_version']}",
          file=out)
    return OK


def _remove(client: Client, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """One entry by its id, or every entry the filter flags take (banlist_bulk.remove)."""
    filtered = bool(filters_of(args))
    if filtered == (args.id is not None):
        print("rearrange banlist remove: give an entry's id, or a filter (--actor, "
              "--reason-contains, --scope, --value-suffix, --created-before, "
              "--created-after, --expires-before), not both", file=err)
        return USAGE
    if filtered:
        return remove_matching(client, args, out, err)
    if getattr(args, "dry_run", False) or getattr(args, "yes", False):  # getattr: a
        # Namespace made by hand (a script's, a test's) may predate these flags
        print("rearrange banlist remove: --dry-run and --yes go with a filter", file=err)
        return USAGE
    got = client.remove_entry(args.id, args.reason)
    print(f"removed entry {got['removed']['id']} ({got['removed']['scope']} "
          f"{got['removed']['value']}); banlist version {got['banlist_version']}", file=out)
    others = got.get("still_banned_by") or []
    if others:
        print(f"{got['removed']['scope']} {got['removed']['value']} is STILL BANNED by "
              f"{len(others)} other entr{'y' if len(others) == 1 else 'ies'}:", file=out)
        table(others, ["id", "regions", "expires_at", "actor", "reason"], out)
    return 0


def _lookup(client: Client, args: argparse.Namespace, out: IO[str], _: IO[str]) -> int:
    got = client.lookup(args.target, args.region)
    if args.json:
        print_json(got, out)
        return OK
    verdict = "BANNED" if got["banned"] else "not banned"
    held = [m for m in got.get("quarantine", ()) if m["applies"]]
    if held:
        verdict += f", QUARANTINED via {', '.join(m['value'] for m in held)}"
    print(f"{got['canonical']}: {verdict} (region {got['region'] or 'any'}, "
          f"banlist version {got['banlist_version']})", file=out)
    for m in got.get("quarantine", ()):
        print(f"quarantine entry {m['id']} ({m['matched_by']}): "
              f"{'demoted' if m['applies'] else m.get('why_not')}, by {m['actor']}: "
              f"{m['reason']}", file=out)
    if got["matches"]:
        table(got["matches"], ["id", "matched_by", "applies", "why_not", "reason", "actor",
                               "regions", "expires_at"], out)
        for m in got["matches"]:
            if m.get("was"):
                print(f"entry {m['id']} ({m['scope']} {m['value']}) {m['was']}", file=out)
    former = got.get("former")
    if former is None:
        print(f"former entries unknown: {got.get('former_problem')}", file=out)
    elif former:
        print(f"formerly matched ({len(former)}; the change log goes back to "
              f"{got.get('history_since')}):", file=out)
        for f in former:
            print(f"  entry {f['id']} ({f['matched_by']}) {f['was']}", file=out)
    for p in got.get("pending", ()):
        print(f"PENDING REVIEW: pending ban {p['id']} ({p['scope']} {p['value']}, proposed by "
              f"{p['actor']}) would match it once approved", file=out)
    return 0


def _export(client: Client, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    data = client.export(args.format)
    if args.output is None:
        out.write(data.decode())
    else:
        args.output.write_bytes(data)
        print(f"wrote {args.output}", file=err)
    return 0


def _group(client: Client, args: argparse.Namespace, out: IO[str], _: IO[str]) -> int:
    got = client.define_group(args.name, args.domains, args.reason)
    g = got["group"]
    print(f"group {g['name']}: {', '.join(g['domains'])}; banlist version "
          f"{got['banlist_version']}", file=out)
    return 0


def _reseed(client: Client, args: argparse.Namespace, out: IO[str], _: IO[str]) -> int:
    got = client.reseed(args.store, args.reason, args.force)
    r = got["reseeded"]
    if args.store == "sanctions":
        print(f"reseeded Redis with {r['hosts']} host sanction states (epoch {r['epoch']}; "
              f"Redis held epoch {r['replaced']['epoch'] or 'none'})", file=out)
        return 0
    print(f"reseeded Redis's {args.store} with {r['entries']} entries and {r['groups']} "
          f"groups (epoch {r['epoch']}, now seq {r['seq']}; Redis held epoch "
          f"{r['replaced']['epoch'] or 'none'} seq {r['replaced']['seq']})", file=out)
    return 0


def _forget_loss(client: Client, args: argparse.Namespace, out: IO[str], _: IO[str]) -> int:
    got = client.forget_loss(args.store, args.replica, args.reason)
    print(f"forgot {args.replica}'s {args.store} loss mark ({got['forgotten'].get('why')}): "
          "what it held is accepted as lost", file=out)
    return 0


def _list(client: Client, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """Page through the entries (the service gives at most 1,000 a request): one JSON
    document with --json, else lines streamed as they come (banlist_bulk.list_lines)."""
    if not args.json:
        return list_lines(client, args, out, err)
    entries: list[dict[str, Any]] = []
    after, limit = args.after, args.limit if args.limit > 0 else None
    while True:
        want = 1000 if limit is None else min(1000, limit - len(entries))
        got = client.entries(after, want, **filters_of(args))
        entries += got["entries"]
        after = got["next"]
        if after is None or limit is not None and len(entries) >= limit:
            break
    print_json({"entries": entries, "next": after, "total": got["total"],
                "banlist_version": got["banlist_version"]}, out)
    return OK


def _groups(client: Client, args: argparse.Namespace, out: IO[str], _: IO[str]) -> int:
    got = client.groups()
    if args.json:
        print_json(got, out)
        return OK
    table([{"name": n, "domains": d} for n, d in got["groups"].items()], ["name", "domains"],
          out)
    return OK


_COMMANDS = {"add": _add, "extend": _edit, "edit": _edit, "remove": _remove, "lookup": _lookup,
             "list": _list, "groups": _groups, "import": import_file, "export": _export,
             "history": banlist_history.history, "group": _group, "reseed": _reseed,
             "forget-loss": _forget_loss, "pending": banlist_review.pending,
             "approve": banlist_review.decide, "reject": banlist_review.decide}
