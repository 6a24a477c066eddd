"""The processes that run Python rules for the service (`python -m app.engine.rule_worker`).

The service's RuleExecutor (app/engine/executor.py) starts one of these as a **zygote**: it
imports the served config's plugin modules (`argv[1:]`), says `ready`, and then forks a rule
process each time the service asks, so that a rule process killed for running past its time
is replaced in a millisecond or two, not in the time an interpreter takes to start and
import the plugins. The zygote and the service talk over a Unix socket (its descriptor in
REARRANGE_RULE_SOCKET): the service writes `f`, the zygote answers with the new process's
pid and the service's ends of its two pipes (SCM_RIGHTS). The zygote ignores SIGCHLD, so
the kernel reaps what it forked; when the service closes the socket it waits for its
processes to end, then ends.

A rule process reads calls from one pipe and writes answers to the other, each a frame: 8
bytes of little-endian length, then a pickle.

- A call is `(key, (module, qualname, params), args)`: the rule class `qualname` of
  `module`, built as the config load built it (`cls(Params.model_validate(params))`, or
  `cls(params)` without `Params`) the first time `key` is seen and kept for the next calls
  (the last `KEPT` rules). Its answer is `("ok", value)` or `("raised", type name, type
  module, message, traceback)`: what the rule returned, or what it (or building it, or
  pickling its answer) raised.
- Standard output goes to stderr (the service's log) and standard input is empty, so a rule
  that prints or reads cannot touch a frame.
- It ends when its call pipe closes, when the service kills it, and within a moment of the
  service's end even while a rule spins (a thread waits on a pidfd of the service).
"""
from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections import OrderedDict
from typing import Any

from app.config.plugins import find

HEADER = struct.Struct("<Q")
KEPT = 256  # rules built and kept, the least recently called dropped first
SOCKET_ENV = "REARRANGE_RULE_SOCKET"


def write_frame(fd: int, payload: bytes) -> None:
    """`payload` as one frame on `fd`, whole."""
    view = memoryview(HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view):]


def build(module_name: str, qualname: str, params: Any) -> Any:
    """The rule class `qualname` of `module_name` built on `params` as the config load
    builds it (app/config/plugins.py build_python_rule)."""
    cls = find(module_name, qualname)
    model = getattr(cls, "Params", None)
    return cls(dict(params) if model is None else model.model_validate(params))


def raised(exc: BaseException) -> tuple[str, str, str, str, str]:
    kind = type(exc)
    try:
        message = str(exc)
    except Exception:  # the rule's exception may fail to print: say so, keep its type
        message = "<its str() raised>"
    text = "".join(traceback.format_exception(exc))
    return ("raised", kind.__qualname__, kind.__module__, message, text)


def answer(rules: OrderedDict[bytes, Any], frame: bytes) -> bytes:
    """The answer frame to one call frame."""
    try:
        key, (module_name, name, params), args = pickle.loads(frame)
        rule = rules.get(key)
        if rule is None:
            rule = rules[key] = build(module_name, name, params)
            while len(rules) > KEPT:
                rules.popitem(last=False)
        else:
            rules.move_to_end(key)
        reply: tuple[Any, ...] = ("ok", rule(*args))
    except BaseException as exc:  # the rule's own, handed back: its caller decides
        reply = raised(exc)
    try:
        return pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
    except BaseException as exc:  # what it returned cannot cross: that is its failure
        return pickle.dumps(raised(exc), pickle.HIGHEST_PROTOCOL)


def watch(service: int | None, pid: int) -> None:
    """End this process once the service (`pid`, `service` a pidfd of it) has ended."""
    if service is not None:
        poll = select.poll()
        poll.register(service, select.POLLIN)
        while not poll.poll():
            pass
    else:  # no pidfd (a kernel before 5.3): look every second
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(1.0)
    os._exit(0)


def serve(calls: int, answers: int) -> None:
    """A rule process: answer calls until the call pipe closes. The service writes one call
    and waits for its answer, so whatever the pipe holds is one call: it is read in as few
    reads as it arrived in (usually one)."""
    rules: OrderedDict[bytes, Any] = OrderedDict()
    while True:
        data, need = b"", HEADER.size
        while len(data) < need:
            chunk = os.read(calls, max(need - len(data), 1 << 16))
            if not chunk:
                return
            data += chunk
            if need == HEADER.size and len(data) >= need:
                need += HEADER.unpack_from(data)[0]
        write_frame(answers, answer(rules, data[HEADER.size:]))


def fork(link: socket.socket, service: int | None, service_pid: int) -> None:
    """Fork a rule process and hand the service its pid and its ends of the pipes."""
    calls_in, calls_out = os.pipe()
    answers_in, answers_out = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            link.close()
            os.close(calls_out)
            os.close(answers_in)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            threading.Thread(target=watch, args=(service, service_pid), daemon=True,
                             name="rearrange-rule-watch").start()
            serve(calls_in, answers_out)
        finally:
            os._exit(0)
    os.close(calls_in)
    os.close(answers_out)
    try:
        socket.send_fds(link, [str(pid).encode()], [calls_out, answers_in])
    finally:
        os.close(calls_out)
        os.close(answers_in)


def main() -> None:
    """The zygote: import the plugins, say ready, fork on each request; at the service's
    end, wait for what it forked."""
    link = socket.socket(fileno=int(os.environ.pop(SOCKET_ENV)))
    os.dup2(2, 1)  # a rule's print goes to the log, never into a frame
    sys.stdout = sys.stderr
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)  # nor does a rule that reads stdin read anything
    os.close(nothing)
    service_pid = os.getppid()
    service: int | None = None
    with contextlib.suppress(AttributeError, OSError):  # no pidfd: the forks poll
        service = os.pidfd_open(service_pid)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the forks
    for module_name in sys.argv[1:]:
        importlib.import_module(module_name)
    link.sendall(b"ready")
    while link.recv(1) == b"f":
        fork(link, service, service_pid)
    link.close()
    with contextlib.suppress(ChildProcessError):  # every fork gone: SIG_IGN makes wait
        os.wait()                                   # return then, with ECHILD


if __name__ == "__main__":
    main()
