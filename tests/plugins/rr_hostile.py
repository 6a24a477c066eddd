"""Python rules that never answer in time, or answer in ways a process boundary must
survive, one way each (CONTRACT "Python rules", "Time:"): the executor must answer their
request by its deadline whatever they do."""
from __future__ import annotations

import contextlib
import os
import socket
import sys
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


class Exiter(_Rule):
    """Ends its own process (`os._exit`), as a crash or the kernel's OOM killer would."""

    name = "exiter"

    def __call__(self, documents, context):
        os._exit(3)


class Talker(_Rule):
    """Prints to standard output, reads standard input, then keeps the page and says how
    many calls its instance has had and how many instances of it this process built."""

    name = "talker"
    built = 0

    def __init__(self, params: dict) -> None:
        super().__init__(params)
        Talker.built += 1
        self.calls = 0

    def __call__(self, documents, context):
        print("talker: a line on standard output")
        read = sys.stdin.read()
        self.calls += 1
        return documents, [{"doc_id": documents[0]["id"], "action": "rescore", "delta": 0.0,
                            "reason": f"calls={self.calls} built={Talker.built} "
                                      f"read={read!r} pid={os.getpid()}"}]


class Unsendable(_Rule):
    """Returns something pickle cannot carry back (a lambda in a record)."""

    name = "unsendable"

    def __call__(self, documents, context):
        return documents, [{"doc_id": documents[0]["id"], "action": "rescore",
                            "delta": lambda: 0, "reason": "x"}]


RULES = [Sleeper, Spinner, SocketReader, Forger, Exiter, Talker, Unsendable]
