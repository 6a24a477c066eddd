"""The processes that run Python rules for the service (`python -m app.engine.rule_worker`).

The service's RuleExecutor (app/engine/executor.py) starts one of these as a **zygote**: it
imports the served config's plugin modules (`argv[1:]`), builds the config's rules from the
specs the service sends it, says `ready`, and then forks a rule process each time the
service asks. A rule process killed for running past its time is so replaced in a
millisecond or two, with the rules already built, not in the time an interpreter takes to
start, import the plugins and run the rules' constructors.

The zygote and the service talk over a Unix socket (its descriptor in REARRANGE_RULE_SOCKET):
the service sends one frame, the RuleHandle keys of every rule to build,
and reads `ready`; then it writes `f` for each fork, and the zygote answers with the new
process's pid and the service's ends of its two pipes (SCM_RIGHTS). The zygote is a child
subreaper: it reaps what it forked, and what a rule forked and left, and when a rule
process ends (killed, or by itself) it kills that process's group first. When the service
closes the socket the zygote ends, and its rule processes with it.

Nothing outlives the service, even a rule process spinning in C with the GIL held: the
zygote and each rule process ask the kernel to kill them when their parent ends
(PR_SET_PDEATHSIG; the zygote's parent is the service's keeper thread). Each rule process
is the leader of a process group of its own, so the service kills it with everything it
started, and a signal sent to the service's group (a terminal's Ctrl-C, a supervisor's
SIGTERM) does not reach it.

A rule process reads calls from one pipe and writes answers to the other, each a frame: 8
bytes of little-endian length, then a pickle.

- A call is `(key, args)`, `key` being a RuleHandle's, the pickled
  `(module, qualname, params)`: the rule class `qualname` of `module`, built as the config
  load built it (`cls(Params.model_validate(params))`, or
  `cls(params)` without `Params`), by the zygote for the served config's rules, else the
  first time `key` is seen (a candidate config's); the last `KEPT` rules are kept. Its answer
  is `("ok", value)` or `("raised", type name, type module, message, traceback)`: what the
  rule returned, or what it (or building it, or pickling its answer) raised.
- Standard output goes to stderr (the service's log) and standard input is empty, so a rule
  that prints or reads cannot touch a frame.
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib
import io
import numbers
import os
import pickle
import signal
import socket
import struct
import sys
import traceback
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from app.config.plugins import find

HEADER = struct.Struct("<Q")
KEPT = 256  # rules built and kept, the least recently called dropped first
SOCKET_ENV = "REARRANGE_RULE_SOCKET"
PARENT_ENV = "REARRANGE_RULE_PARENT"  # the service's pid: the zygote checks it is its parent
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36


class FrameTooLong(Exception):
    """A frame's header says more bytes than its reader takes (`args[0]`: how many)."""


def frame(payload: bytes) -> bytes:
    """`payload` as a frame: its length, then itself."""
    return HEADER.pack(len(payload)) + payload


def write_frame(fd: int, payload: bytes) -> None:
    """`payload` as one frame on `fd` (a blocking one), whole."""
    view = memoryview(frame(payload))
    while view:
        view = view[os.write(fd, view):]


def read_frame(fd: int, wait: Callable[[], None] | None = None,
               most: int | None = None) -> bytes | None:
    """One frame's payload from `fd`, None at the end of the stream; `wait()` before each
    read (the service's: a poll under the call's deadline), FrameTooLong past `most` bytes.
    The other side writes one frame and waits for the answer, so whatever `fd` holds is one
    frame: it is read in as few reads as it arrived in (usually one)."""
    data, need = bytearray(), HEADER.size
    while len(data) < need:
        if wait is not None:
            wait()
        chunk = os.read(fd, min(max(need - len(data), 1 << 16), 1 << 24))
        if not chunk:
            return None
        data += chunk
        if need == HEADER.size and len(data) >= need:
            size = HEADER.unpack_from(data)[0]
            if most is not None and size > most:
                raise FrameTooLong(size)
            need += size
    return bytes(data[HEADER.size:])


def build(key: bytes) -> Any:
    """The rule a RuleHandle's `key` names (the pickled `(module, qualname, params)`), built
    as the config load builds it (app/config/plugins.py build_python_rule)."""
    module_name, qualname, params = pickle.loads(key)
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


def answer(rules: OrderedDict[bytes, Any], call: bytes) -> bytes:
    """The answer frame's payload to one call frame's."""
    try:
        key, args = pickle.loads(call)
        rule = rules.get(key)
        if rule is None:
            rule = rules[key] = build(key)
            while len(rules) > KEPT:
                rules.popitem(last=False)
        else:
            rules.move_to_end(key)
        reply: tuple[Any, ...] = ("ok", rule(*args))
    except BaseException as exc:  # the rule's own, handed back: its caller decides
        reply = raised(exc)
    try:
        data = pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
        if reply[0] == "ok":
            try:  # what the service will accept, checked as it checks: a C load, cheaper
                load_plain(data)  # than walking every answer in Python
            except NotPlain:  # subclasses of plain types as their base types; anything
                data = pickle.dumps(("ok", plain(reply[1])), pickle.HIGHEST_PROTOCOL)
        return data  # else stays, for the service to refuse by its class
    except BaseException as exc:  # what it returned cannot cross: that is its failure
        return pickle.dumps(raised(exc), pickle.HIGHEST_PROTOCOL)


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent ends; end now if it has already."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(0)


def reap(signum: int = 0, frame: Any = None) -> None:
    """SIGCHLD: for each child that ended, kill its process group (what its rules started),
    then reap it. The ended child is waited for with WNOWAIT first: until it is reaped its
    pid, and so its group's number, cannot be given to another process."""
    while True:
        try:
            ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if ended is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(ended.si_pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(ended.si_pid, 0)


class NotPlain(Exception):
    """A pickle that holds more than plain data; the message names the class."""


class _PlainOnly(pickle.Unpickler):
    """Unpickles plain data only: dicts, lists, tuples, sets, strings, bytes, numbers,
    booleans, None. Anything that needs a class or a function (an object, a `__reduce__`
    that would run code) is refused: find_class is the only way a pickle reaches one (the
    extension registry's codes go through it too)."""

    def find_class(self, module: str, name: str) -> Any:
        raise NotPlain(f"{module}.{name}")


def load_plain(data: bytes) -> Any:
    """`data` unpickled, if it is plain data; NotPlain otherwise."""
    return _PlainOnly(io.BytesIO(data)).load()


def plain(value: Any) -> Any:
    """`value` in Python's own types, as the engine reads them: a numpy number or an
    IntEnum as int or float, a str, dict or list subclass as str, dict or list. What is
    none of these stays as it is (the service refuses it, naming its class)."""
    kind = type(value)
    if kind in (str, int, float, bool) or value is None:
        return value
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [plain(v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, set | frozenset):
        return {plain(v) for v in value}
    return value


def serve(calls: int, answers: int, rules: OrderedDict[bytes, Any]) -> None:
    """A rule process: answer calls until the call pipe closes."""
    while (call := read_frame(calls)) is not None:
        write_frame(answers, answer(rules, call))


def fork(link: socket.socket, rules: OrderedDict[bytes, Any]) -> None:
    """Fork a rule process and hand the service its pid and its ends of the pipes."""
    calls_in, calls_out = os.pipe()
    answers_in, answers_out = os.pipe()
    zygote = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            link.close()
            os.close(calls_out)
            os.close(answers_in)
            os.setpgid(0, 0)  # a group of its own: killed with what it starts
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # a rule may wait for its own
            die_with_parent(zygote)
            serve(calls_in, answers_out, rules)
        finally:
            os._exit(0)
    with contextlib.suppress(OSError):  # the child does it too: whichever runs first
        os.setpgid(pid, pid)
    os.close(calls_in)
    os.close(answers_out)
    try:
        socket.send_fds(link, [str(pid).encode()], [calls_out, answers_in])
    finally:
        os.close(calls_out)
        os.close(answers_in)


def main() -> None:
    """The zygote: import the plugins, build the rules, say ready, fork on each request;
    end when the service closes the socket (its rule processes end with it)."""
    link = socket.socket(fileno=int(os.environ.pop(SOCKET_ENV)))
    die_with_parent(int(os.environ.pop(PARENT_ENV)))
    _prctl(PR_SET_CHILD_SUBREAPER, 1)  # what a rule forks and leaves is ours to reap
    signal.signal(signal.SIGCHLD, reap)
    os.dup2(2, 1)  # a rule's print goes to the log, never into a frame
    sys.stdout = sys.stderr
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)  # nor does a rule that reads stdin read anything
    os.close(nothing)
    for module_name in sys.argv[1:]:
        importlib.import_module(module_name)
    keys = read_frame(link.fileno())
    rules: OrderedDict[bytes, Any] = OrderedDict()
    for key in pickle.loads(keys or pickle.dumps([])):
        try:
            rules[key] = build(key)
        except Exception:  # built in the service, refused here: it fails at its calls
            module_name, qualname, _ = pickle.loads(key)
            print(f"rearrange rule processes: building {module_name}.{qualname} failed; "
                  "its calls build it again and fail as it does:", file=sys.stderr)
            traceback.print_exc()
    link.sendall(b"ready")
    with contextlib.suppress(ConnectionError):
        while link.recv(1) == b"f":
            fork(link, rules)
    os._exit(0)  # not waiting for a thread a plugin started: its rule processes die with it


if __name__ == "__main__":
    main()
