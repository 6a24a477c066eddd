"""The tables the human-readable commands print, with rich: one console per stream, one
look for every table (aligned columns, a header, no borders)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import IO, Any

from rich.console import Console, ConsoleRenderable
from rich.table import Table
from rich.text import Text

CELL_MAX = 100  # characters of a cell before it is cut with "…" (a reason, a URL)
PIPED_WIDTH = 10_000  # off a terminal nothing is wrapped: one row, one line, for grep


def console(out: IO[str]) -> Console:
    """A console writing to `out`: a terminal's width (and colours), else no wrapping, no
    colour codes; never markup or emoji (a reason may hold `[entry 1]` or `:x:`)."""
    tty = out.isatty()
    return Console(file=out, width=None if tty else PIPED_WIDTH, markup=False, emoji=False,
                   highlight=False, soft_wrap=not tty)


def show(table: Table, out: IO[str]) -> None:
    """Print a table on `out`; off a terminal without the padding that ends each row (a row
    is then one line that `grep` and `cut` read as the old aligned text)."""
    screen = console(out)
    if out.isatty():
        screen.print(table)
        return
    with screen.capture() as captured:
        screen.print(table)
    out.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def new_table(columns: Iterable[str | tuple[str, str]], title: str | None = None) -> Table:
    """An empty table of these columns (a name, or (name, "right") for numbers)."""
    table = Table(title=title, title_justify="left", box=None, pad_edge=False,
                  padding=(0, 1), show_edge=False, header_style="bold")
    for column in columns:
        name, justify = column if isinstance(column, tuple) else (column, "left")
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    return table


def add_row(table: Table, *cells: Any) -> None:
    """One row; each cell as plain text (never rich markup), `-` for nothing; a rich
    renderable (a bar, a Text the caller did not want cut) as it is."""
    table.add_row(*(c if isinstance(c, ConsoleRenderable) else Text(cell_text(c))
                    for c in cells))


def cell_text(value: Any, limit: int = CELL_MAX) -> str:
    """A value as a cell: `-` for None or an empty list, lists comma-joined, floats with
    %g, each line cut at `limit` characters."""
    if value is None:
        return "-"
    if isinstance(value, list):
        value = ",".join(map(str, value)) or "-"
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return "\n".join(line if len(line) <= limit else line[:limit - 1] + "…"
                     for line in text.split("\n"))


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str], out: IO[str],
          title: str | None = None) -> None:
    """Print dicts as a table of these keys, headed by the keys in capitals."""
    t = new_table([c.upper() for c in columns], title)
    for row in rows:
        add_row(t, *(row.get(c) for c in columns))
    show(t, out)
