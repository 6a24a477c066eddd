"""Options several commands share, defined once."""
from __future__ import annotations

from typing import Any


def add_progress_flags(parser: Any) -> None:
    """`--progress` / `--no-progress`: whether a command draws its ProgressBar on stderr
    (`args.progress`: True, False, or None for "when stderr is a terminal")."""
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None,
                          help="always draw the progress bar on stderr")
    progress.add_argument("--no-progress", dest="progress", action="store_false",
                          help="never draw it (default: only when stderr is a terminal)")
