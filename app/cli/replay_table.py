"""The tables `rearrange replay` prints: the summary, then requests, hosts and rules."""
from __future__ import annotations

from typing import IO, Any

from rich.table import Table

from app.cli.tables import add_row, console, new_table, show
from app.replay.run import Diff, Report


def render(report: Report, out: IO[str], top: int, title: str) -> None:
    """Write the report's tables to `out`, `top` rows each at most."""
    screen = console(out)
    t = report.totals()
    screen.print(title)
    screen.print(
        f"{t['requests']} requests replayed, {t['changed']} would change: "
        f"{t['removed']} results removed, {t['added']} added, {t['moved']} moved"
        + (f", {t['status_changed']} answered with another status" if t["status_changed"]
           else ""))
    if not report.changed:
        return
    for table in (_requests(report, top), _hosts(report, top), _rules(report, top)):
        show(table, out)


def _requests(report: Report, top: int) -> Table:
    table = new_table(("where", "query", "removed", "added", "moved",
                       "rules that fired differently"),
                      f"Requests that change {_shown(top, len(report.changed))}")
    for captured, query, d in report.changed[:top]:
        add_row(table, f"{captured.file}:{captured.line}", query, _docs(d.removed),
                _docs(d.added), _moves(d), _rules_of(d))
    return table


def _shown(top: int, total: int) -> str:
    return f"({total})" if total <= top else f"(first {top} of {total})"


def _docs(docs: list[dict[str, Any]]) -> str:
    return "\n".join(f"{d['id']} @{d['position']} {d['host']}" for d in docs)


def _moves(d: Diff) -> str:
    moves = [f"{m['id']} {m['from']}→{m['to']}" for m in d.moved]
    if d.status[0] != d.status[1]:
        moves.insert(0, f"status {d.status[0]}→{d.status[1]}")
    return "\n".join(moves)


def _rules_of(d: Diff) -> str:
    return "\n".join(f"{r['rule']} {r['action']}{_mode(r)}: {r['served']}→{r['candidate']}"
                     for r in d.rules)


def _mode(r: dict[str, Any]) -> str:
    return " (shadow)" if r["mode"] == "shadow" else ""


def _hosts(report: Report, top: int) -> Table:
    rows = report.host_rows()
    table = new_table(("host", ("results lost", "right"), ("results gained", "right"),
                       ("requests", "right")), f"By host {_shown(top, len(rows))}")
    for r in rows[:top]:
        add_row(table, r["host"], r["lost"], r["gained"], r["requests"])
    return table


def _rules(report: Report, top: int) -> Table:
    rows = report.rule_rows()
    table = new_table(("rule", "phase", "action", ("served", "right"),
                       ("candidate", "right"), ("requests", "right")),
                      f"By rule {_shown(top, len(rows))}: records on the requests that differ")
    for r in rows[:top]:
        add_row(table, r["rule"] + _mode(r), r["phase"], r["action"], r["served"],
                r["candidate"], r["requests"])
    return table
