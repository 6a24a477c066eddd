"""`rearrange config show [VERSION] | versions | rollback VERSION`, against a running service."""
from __future__ import annotations

import argparse
import sys
from typing import IO, Any

from app.cli.client import Client, Refused
from app.cli.exits import OK, calling
from app.cli.flags import (
    ServiceCommand,
    add_json_flag,
    add_service_arguments,
    client_of,
    print_json,
)
from app.cli.tables import table


def add_parser(sub: Any) -> None:
    """The `config` sub-commands, added to the `rearrange` parser."""
    p = sub.add_parser("config", help="the config a running service serves: show, versions, "
                       "rollback")
    add_service_arguments(p, "any admin token reads, a rollback needs a write token")
    cmds = p.add_subparsers(dest="config_command", required=True,
                            parser_class=ServiceCommand)
    show = cmds.add_parser("show", help="the YAML served (or of VERSION) on stdout, what it "
                           "is on stderr")
    show.add_argument("version", nargs="?")
    add_json_flag(show, "the service's answer: version, how, by, when, and the YAML as "
                  "`source` (GET /v1/admin/config)")
    versions = cmds.add_parser("versions", help="the configs served, newest (the one "
                               "served) first")
    add_json_flag(versions, "{versions: [...]}, as GET /v1/admin/config/versions")
    back = cmds.add_parser("rollback", help="serve an earlier version now (with Redis: on "
                           "every replica)")
    back.add_argument("version")


def run(args: argparse.Namespace, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """Run one `config` sub-command; 0 ok, 1 refused by the service, 3 unreachable."""
    out, err = out or sys.stdout, err or sys.stderr

    def serving(exc: Refused) -> None:  # a rollback refused: what is served still
        if exc.body.get("serving"):
            print(f"still serving {exc.body['serving']}", file=err)

    with client_of(args) as client:
        return calling(lambda: _COMMANDS[args.config_command](client, args, out, err), err,
                       serving)


def _show(client: Client, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    got = client.config(args.version)
    if args.json:
        print_json(got, out)
        return OK
    print(f"config_version {got['version']}, loaded {got['loaded_at']} ({_how(got)})",
          file=err)
    if not args.version and got["file_version"] != got["version"]:
        print(f"the file holds {got['file_version']}: a reload of it as it is keeps this one",
              file=err)
    out.write(got["source"])  # exactly the YAML: `show > f.yaml` hashes to the version
    return 0


def _versions(client: Client, args: argparse.Namespace, out: IO[str], _: IO[str]) -> int:
    rows = client.config_versions()
    if args.json:
        print_json({"versions": rows}, out)
        return OK
    table([{**r, "serving": "*" if i == 0 else ""} for i, r in enumerate(rows)],
          ["serving", "version", "loaded_at", "how", "by", "origin", "file_version"], out)
    return 0


def _rollback(client: Client, args: argparse.Namespace, out: IO[str], _: IO[str]) -> int:
    got = client.rollback(args.version)
    if got["changed"]:
        print(f"now serving {got['config_version']} (rolled back by {got['by']} at "
              f"{got['loaded_at']})", file=out)
    else:
        print(f"already serving {got['config_version']}: nothing changed", file=out)
    return 0


def _how(v: dict[str, Any]) -> str:
    origin = f" of a {v['origin']}" if v.get("origin") else ""
    return f"{v['how']}{origin} by {v['by']}"


_COMMANDS = {"show": _show, "versions": _versions, "rollback": _rollback}
