"""Records on one line (app/observability/logs.py): what a rule or a client wrote cannot
start a line that reads as a record of its own."""
from __future__ import annotations

import io
import logging

from app.observability.logs import OneLineRecords, one_line


def test_a_record_and_its_traceback_are_written_on_marked_lines():
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(OneLineRecords())
    logger = logging.getLogger("tests.one_line")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        reason = "appeal\nERROR rearrange: forged\x1b[2J"
        logger.warning("banlist: removed by %s: %s", "t&s", reason)
        try:
            raise ValueError("bad\nINFO rearrange: forged too")
        except ValueError as exc:
            logger.error("rule failed", exc_info=exc)
    finally:
        logger.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert lines[0] == "WARNING tests.one_line: banlist: removed by t&s: appeal\\nERROR " \
                       "rearrange: forged\\x1b[2J"
    assert lines[1] == "ERROR tests.one_line: rule failed"
    assert lines[2] == "  | Traceback (most recent call last):"
    assert all(line.startswith("  | ") for line in lines[2:])
    assert lines[-2:] == ["  | ValueError: bad", "  | INFO rearrange: forged too"]


def test_one_line_leaves_printable_text_as_it_is():
    text = "rule raises in rerank: raised RuntimeError: boom ±1e+15 é"
    assert one_line(text) is text
    assert one_line("a\u2028b\tc\r") == "a\\u2028b\\tc\\r"
