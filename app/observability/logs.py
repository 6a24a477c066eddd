"""Log records on one line each: what a rule or a client wrote is escaped before it is
written, so that a newline in it cannot start a line that reads as a record of its own.

`OneLineRecords` is a logging filter: on a handler (`configure_logging`, below) it
covers every record the handler writes; on a logger it covers that logger's records under
any handler (the rule-failure logger carries a rule's exception text and traceback).
"""
from __future__ import annotations

import logging
import traceback

from uvicorn.logging import DefaultFormatter

CONTINUED = "  | "  # starts every line of a traceback written under a record


def one_line(text: str) -> str:
    """`text` with its control characters and line separators (whatever is not printable
    but the space) escaped as Python's repr spells them: `\\n`, `\\x1b`, `\\u2028`."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def continued(text: str) -> str:
    """A multi-line text (a traceback) as lines each escaped and marked `  | `."""
    return "\n".join(CONTINUED + one_line(line) for line in text.splitlines())


class OneLineRecords(logging.Filter):
    """Escape a record's message and write its traceback as continued lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        escaped = one_line(message)
        if escaped is not message:
            record.msg, record.args = escaped, None
        info = record.exc_info
        if info and info[1] is not None and not record.exc_text:
            record.exc_text = continued("".join(traceback.format_exception(info[1])))
        return True


def configure_logging(level: str) -> None:
    """Our loggers ("rearrange" and the app.* modules) write to stderr as uvicorn's do.

    uvicorn configures only its own loggers. Ours propagated to a root logger without a
    handler, where Python's last resort printed warnings and errors and dropped every INFO
    line (config reloaded, bans expired, resyncs). Where the root logger has a handler
    (an embedding application, pytest's log capture) it is left to do the job. Each record
    is written on one line, its traceback's lines marked `  | `: a client's or a rule's
    text in it cannot forge a record.
    """
    if logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(DefaultFormatter("%(levelprefix)s %(name)s: %(message)s"))
    handler.addFilter(OneLineRecords())  # what a rule or a client wrote, escaped
    for name in ("rearrange", "app"):
        logger = logging.getLogger(name)
        logger.setLevel(level.upper())
        if not logger.handlers:
            logger.addHandler(handler)
