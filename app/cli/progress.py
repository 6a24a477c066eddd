"""The progress bars of the long commands (dupes, audit search, replay, banlist import):
rich, on stderr, one bar per stage; drawn when stderr is a terminal or with --progress."""
from __future__ import annotations

import sys
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def wanted(flag: bool | None, stream: IO[str]) -> bool:
    """--progress (True), --no-progress (False), or neither: whether `stream` is a terminal."""
    return stream.isatty() if flag is None else flag


class ProgressBar:
    """`bar(stage, done, total)`: the callable the audits and imports report through; each
    new stage gets its own bar below the last. `close()` ends the display (a later call
    starts another); off a terminal, the bars are printed once, as they ended."""

    def __init__(self, stream: IO[str] | None = None, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    @classmethod
    def of(cls, flag: bool | None, stream: IO[str] | None = None) -> ProgressBar:
        """The bar a command's --progress/--no-progress asks for, on `stream` (stderr)."""
        stream = stream or sys.stderr
        return cls(stream, wanted(flag, stream))

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self._progress is None:
            self._progress = _display(self.stream)
            self._progress.start()
        task = self._tasks.get(stage)
        if task is None:
            task = self._tasks[stage] = self._progress.add_task(stage, total=total)
        self._progress.update(task, completed=done, total=total)

    def close(self) -> None:
        """Stop drawing: the bars stay as they ended."""
        if self._progress is not None:
            self._progress.stop()
        self._progress, self._tasks = None, {}

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _display(stream: IO[str]) -> Progress:
    console = Console(file=stream, markup=False, emoji=False, highlight=False)
    return Progress(TextColumn("{task.description:<11}", markup=False), BarColumn(),
                    TaskProgressColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=console, transient=False)


