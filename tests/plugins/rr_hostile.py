"""Python rules that never answer in time, one way each (CONTRACT "Python rules", "Time:"):
the executor must answer their request by its deadline whatever they do."""
from __future__ import annotations

import contextlib
import socket
import time

ALL = {"pre-filter", "rerank", "diversify", "trim", "annotate", "post-filter"}


class _Rule:
    phases = ALL

    def __init__(self, params: dict) -> None:
        self.seconds = float(params.get("seconds", 2.0))


class Sleeper(_Rule):
    """Blocks in C (time.sleep) for `seconds`, then returns the page unchanged."""

    name = "sleeper"

    def __call__(self, documents, context):
        time.sleep(self.seconds)
        return documents, []


class Spinner(_Rule):
    """Loops in pure Python forever: only an exception raised in its thread stops it."""

    name = "spinner"

    def __call__(self, documents, context):
        n = 0
        while True:
            n += 1


class SocketReader(_Rule):
    """Blocks on a socket read that no one ever answers (until `seconds` pass)."""

    name = "socket_reader"

    def __call__(self, documents, context):
        ours, theirs = socket.socketpair()
        with ours, theirs:
            ours.settimeout(self.seconds)
            with contextlib.suppress(TimeoutError):  # nobody writes: it waits it all out
                ours.recv(1)
        return documents, []


class Forger(_Rule):
    """Raises with a message that would forge a line of the service's log."""

    name = "forger"

    def __call__(self, documents, context):
        raise ValueError("bad\nINFO:     rearrange: forged line\x1b[2J")


RULES = [Sleeper, Spinner, SocketReader, Forger]
