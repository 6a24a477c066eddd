"""Python rules that never answer in time, or answer in ways a process boundary must
survive, one way each (CONTRACT "Python rules", "Time:"): the executor must answer their
request by its deadline whatever they do."""
from __future__ import annotations

import contextlib
import enum
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

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


class Smuggler(_Rule):
    """Answers with an object whose unpickling would sleep in the service (`__reduce__`)."""

    name = "smuggler"

    def __call__(self, documents, context):
        return documents, [{"doc_id": documents[0]["id"], "action": "rescore", "delta": 0.0,
                            "reason": _Sleepy()}]


class _Sleepy:
    def __reduce__(self):
        return (time.sleep, (2.0,))


def _answer_pipe() -> int:
    """The descriptor a rule process writes its answers to: its one pipe open for writing."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        with contextlib.suppress(OSError):
            info = Path(f"/proc/self/fdinfo/{fd}").read_text()
            flags = int(info.split("flags:")[1].split()[0], 8)
            if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode) and flags & os.O_WRONLY:
                return fd
    raise RuntimeError("no answer pipe")


class Scribbler(_Rule):
    """Writes into its own answer pipe: a length of 2**64 - 1 bytes (`mode: header`), or,
    50 ms after it has answered, from a thread left behind (`mode: later`), which then
    writes `path`."""

    name = "scribbler"

    def __init__(self, params: dict) -> None:
        super().__init__(params)
        self.mode = params.get("mode", "header")
        self.path = params.get("path")

    def __call__(self, documents, context):
        fd = _answer_pipe()
        if self.mode == "header":
            os.write(fd, b"\xff" * 8)
        else:
            def later():
                time.sleep(0.05)
                os.write(fd, b"junk")
                Path(self.path).write_text("written")
            threading.Thread(target=later).start()
        return documents, []


class Subclassed(_Rule):
    """Answers with what the engine reads but Python's own types do not hold: a dict
    subclass, an IntEnum score, a str subclass."""

    name = "subclassed"

    def __call__(self, documents, context):
        docs = [_Doc({**d, "score": _Score.ONE}) for d in documents]
        return docs, [{"doc_id": _Id(documents[0]["id"]), "action": "rescore",
                       "delta": None, "reason": _Id("to one")}]


class _Doc(dict):
    pass


class _Score(enum.IntEnum):
    ONE = 1


class _Id(str):
    pass


class _Starter(_Rule):
    """Starts `sleep 600` at each call, its pid written to `path`."""

    def __init__(self, params: dict) -> None:
        super().__init__(params)
        self.path = params["path"]

    def start(self) -> None:
        Path(self.path).write_text(str(subprocess.Popen(["sleep", "600"]).pid))


class Leaver(_Starter):
    """Starts `sleep 600` and answers; 50 ms later a thread it left behind ends its
    process."""

    name = "leaver"

    def __call__(self, documents, context):
        self.start()
        threading.Thread(target=lambda: (time.sleep(0.05), os._exit(1))).start()
        return documents, []


class SlowStart(_Rule):
    """Takes `seconds` to build; answers at once."""

    name = "slow_start"

    def __init__(self, params: dict) -> None:
        super().__init__(params)
        time.sleep(self.seconds)

    def __call__(self, documents, context):
        return documents, []


class Forker(_Starter):
    """Starts `sleep 600`, then sleeps itself."""

    name = "forker"

    def __call__(self, documents, context):
        self.start()
        time.sleep(600)


class Hog(_Rule):
    """Holds the GIL in C for good (a sum over a range too long to finish)."""

    name = "hog"

    def __call__(self, documents, context):
        return sum(range(10**15))


RULES = [Sleeper, Spinner, SocketReader, Forger, Exiter, Talker, Unsendable, Smuggler,
         Scribbler, Leaver, SlowStart, Forker, Hog, Subclassed]
