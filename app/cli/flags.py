"""Options several commands share, defined once."""
from __future__ import annotations

import argparse
import math
import os
from typing import IO, Any

import httpx
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


DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 60.0


def url(text: str) -> str:
    """The type of --url: an http(s) URL with a host. One that is not is a usage error
    (exit 2) before anything is sent, not a service that cannot be reached (exit 3)."""
    try:
        parsed = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a URL such as "
                                         f"{DEFAULT_URL} (http or https, and a host)")
    return text


def add_global_arguments(parser: argparse.ArgumentParser) -> None:
    """What `rearrange` takes before any command: the service options and `--json`."""
    _service_options(parser, "bearer token (default REARRANGE_TOKEN)")
    _json_anywhere(parser)


def add_service_arguments(p: argparse.ArgumentParser, token_help: str) -> None:
    """--url, --token and --timeout on a group of commands that call the service (and
    --json for those of its commands that print it); its commands are to be made with
    `parser_class=ServiceCommand`, so that each takes them too."""
    _service_options(p, f"bearer token (default REARRANGE_TOKEN); {token_help}")
    _json_anywhere(p)


class ServiceCommand(argparse.ArgumentParser):
    """A command that calls the service: it takes --url, --token and --timeout after its
    name too (`rearrange banlist history --url X`), as `rearrange` and its group do."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _service_options(self, "bearer token (default REARRANGE_TOKEN)")
        self.set_defaults(calls_service=True)


def _service_options(p: argparse.ArgumentParser, token_help: str) -> None:
    """--url, --token, --timeout. Their defaults are SUPPRESS: a sub-command's default would
    overwrite a value given before it (argparse copies a sub-command's whole namespace onto
    its parent's); so, given anywhere, the last one given holds, and client_of supplies the
    defaults of those not given."""
    p.add_argument("--url", dest="service_url", type=url, default=argparse.SUPPRESS,
                   metavar="URL",
                   help=f"the service (default REARRANGE_URL or {DEFAULT_URL})")
    p.add_argument("--token", default=argparse.SUPPRESS, help=token_help)
    p.add_argument("--timeout", type=timeout, default=argparse.SUPPRESS, metavar="DURATION",
                   help="how long to wait for each answer: seconds, or 90s, 2m (default 60)")


def _json_anywhere(p: argparse.ArgumentParser) -> None:
    """--json before the command that prints it (`rearrange --json banlist list`): its own
    dest, as `dupes --json FILE` is another option of that name."""
    p.add_argument("--json", dest="json_anywhere", action="store_true",
                   default=argparse.SUPPRESS,
                   help="print JSON, for the commands that take --json")


def json_given_before(args: argparse.Namespace) -> str | None:
    """Apply a --json given before the command (`args.json` set): None, or the problem
    when the command prints no JSON or takes a file with its --json (`dupes`)."""
    if not getattr(args, "json_anywhere", False):
        return None
    command = " ".join(str(getattr(args, name)) for name in vars(args)
                       if name == "command" or name.endswith("_command"))
    takes = getattr(args, "json", None)
    if isinstance(takes, bool):
        args.json = True
        return None
    if hasattr(args, "json"):
        return f"--json: `rearrange {command}` takes --json FILE (or --json - for stdout)"
    return f"--json: `rearrange {command}` prints no JSON"


def default_url() -> str:
    """The service of a command given no --url: REARRANGE_URL, else the local default."""
    return os.environ.get("REARRANGE_URL") or DEFAULT_URL


def service_given(args: argparse.Namespace) -> str | None:
    """Give a command that calls the service the defaults of the service options not given
    (REARRANGE_URL, REARRANGE_TOKEN, 60 s): None, or the problem of REARRANGE_URL (a
    usage error, as a bad --url is)."""
    if not getattr(args, "calls_service", False):
        return None
    if not hasattr(args, "service_url"):
        try:
            args.service_url = url(default_url())
        except argparse.ArgumentTypeError as exc:
            return f"REARRANGE_URL: {exc}"
    if not hasattr(args, "token"):
        args.token = os.environ.get("REARRANGE_TOKEN")
    if not hasattr(args, "timeout"):
        args.timeout = DEFAULT_TIMEOUT
    return None


def client_of(args: argparse.Namespace) -> Client:
    """The client of the service the options name (service_given filled in those not
    given on the command line)."""
    return Client(getattr(args, "service_url", None) or default_url(),
                  getattr(args, "token", None), getattr(args, "timeout", DEFAULT_TIMEOUT))
