"""The exit codes every `rearrange` command keeps (docs/cli.md#exit-codes), and the one line
a call to the service that failed, or a config that does not load, prints."""
from __future__ import annotations

from collections.abc import Callable
from typing import IO

from app.cli.client import Refused, Unreachable
from app.errors import ConfigError

OK = 0
FINDING = 1      # an SRM flagged, an invalid config, nothing found by a search
REFUSED = 1      # the service said no, or a file the command cannot read, write or parse
USAGE = 2        # argparse's own, and values it cannot check (`dupes --width 0`)
UNREACHABLE = 3  # no answer from the service
INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT


def invalid(path: object, exc: ConfigError) -> str:
    """`PATH: invalid: PLACE: PROBLEM`, naming the file once: a problem of the file itself
    (it cannot be read, is not YAML) has the file for its place."""
    problem = exc.problem if exc.place in ("", str(path)) else str(exc)
    return f"{path}: invalid: {problem}"


def calling(command: Callable[[], int], err: IO[str],
            refused: Callable[[Refused], None] | None = None) -> int:
    """Run a command that calls the service: its code, or REFUSED / UNREACHABLE with one line
    on `err` (then whatever `refused` adds, such as an import's refused lines)."""
    try:
        return command()
    except Refused as exc:
        print(f"refused: {exc}", file=err)
        if refused is not None:
            refused(exc)
        return REFUSED
    except Unreachable as exc:
        print(exc, file=err)
        return UNREACHABLE
