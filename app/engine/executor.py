"""Where Python rules run: processes of the service's own, so that no rule holds a request
past its time, slows the requests around it, or outlives the call that gave up on it.

The engine (crates/engine/src/rules/python.rs) hands each Python rule call to
`RuleExecutor.call` with the time the rule has, and waits; the wait releases the GIL. The
call goes to an idle rule process (app/engine/rule_worker.py), which builds its own copy of
the rule the first time it is asked for it. A call that has not returned in its time raises
`RuleTimeout` in the caller, which answers the request as the step's `on_error` says, and
its process is killed (SIGKILL: a sleep, a socket read, a loop in C or in Python, all end
there) and replaced. A process that dies during a call (the rule called `os._exit`, the
kernel's OOM killer took it) fails that call with `RuleProcessDied` and is replaced. A rule
that spins never takes the GIL from the service: it runs in another interpreter.

The processes are forked by a zygote that imported the served config's plugins, so a
replacement is ready in a millisecond or two. They start when a config with `plugins:` is
served (`prepare`, which returns once they are up) and are kept at `Limits.workers` by a
keeper thread; a config with a plugin new to them gets a new zygote and new processes.
docs/config.md#python-rules has the model.
"""
from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app._engine import RuleTimeout
from app.config.plugins import RuleHandle
from app.engine.rule_worker import HEADER, SOCKET_ENV, write_frame

log = logging.getLogger("rearrange.rules")

# What rule_event reports: the caller gave up on a call (timeout), the call's process was
# killed for it (killed), a process ended during a call (died), a process did not start
# (start_failed: then its rule is "")
EVENTS = ("timeout", "killed", "died", "start_failed")
RETRY_SECONDS = (0.1, 0.5, 2.0, 5.0)  # waits before starting again after failed starts
CLOSE_SECONDS = 5.0  # what close() waits, at most, for a zygote to end


class RuleProcessDied(Exception):
    """The process running a Python rule call ended before it answered."""


class RuleEvents(Protocol):
    """What the executor reports as it works (the service's Metrics implement it)."""

    def rule_event(self, rule: str, event: str) -> None:
        """One of EVENTS happened to a call of `rule`."""


class NoRuleEvents:
    """Nobody listens."""

    def rule_event(self, rule: str, event: str) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Limits:
    """The executor's limits, in seconds and processes (docs/config.md#python-rules)."""

    workers: int = 4  # rule processes: calls running at once; more wait their turn
    timeout: float = 1.0  # a call's time when its caller gives none
    start_timeout: float = 60.0  # a new process must have imported the plugins by then


class _Process:
    """A rule process (forked by the zygote), the service's ends of its two pipes, and the
    plugin modules it has imported."""

    __slots__ = ("pid", "pidfd", "calls", "answers", "poll", "modules", "ended")

    def __init__(self, pid: int, calls: int, answers: int, modules: tuple[str, ...]) -> None:
        self.pid, self.calls, self.answers, self.modules = pid, calls, answers, modules
        self.poll = _poll(answers)
        self.pidfd: int | None = None
        # a pidfd names this process and no other, even once its pid is reused: the kill
        # below can never reach another process
        with contextlib.suppress(AttributeError, OSError):
            self.pidfd = os.pidfd_open(pid)
        self.ended = False

    def end(self) -> None:
        """Kill it, at once, whatever it runs (the zygote reaps it), and close the pipes;
        once."""
        if self.ended:
            return
        self.ended = True
        with contextlib.suppress(ProcessLookupError):
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)
        for fd in (self.calls, self.answers, self.pidfd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


class _Zygote:
    """The process that imported the plugins and forks rule processes (rule_worker.py)."""

    def __init__(self, modules: tuple[str, ...]) -> None:
        self.modules = modules
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ)
        # the service's own module path, so the zygote imports what the service imported
        env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
        env[SOCKET_ENV] = str(theirs.fileno())
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "app.engine.rule_worker", *modules], env=env,
                stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),), close_fds=True)
        finally:
            theirs.close()
        self.link = ours

    def ready(self, deadline: float, clock: Callable[[], float]) -> None:
        """Wait for its `ready` (_Late past `deadline`, _Gone if it ended first)."""
        said, poll = b"", _poll(self.link.fileno())
        while len(said) < len(b"ready"):
            _wait_readable(poll, deadline, clock)
            chunk = self.link.recv(len(b"ready") - len(said))
            if not chunk:
                raise _Gone
            said += chunk

    def fork(self, deadline: float, clock: Callable[[], float]) -> _Process:
        """A new rule process."""
        self.link.sendall(b"f")
        _wait_readable(_poll(self.link.fileno()), deadline, clock)
        message, fds, _, _ = socket.recv_fds(self.link, 32, 2)
        if not message or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            raise _Gone
        return _Process(int(message), fds[0], fds[1], self.modules)

    def close(self) -> None:
        """Let it go: it ends once what it forked has ended (`ended` then says so)."""
        self.link.close()

    def ended(self, wait: float = 0.0) -> bool:
        """Whether it has ended (and is reaped), waiting at most `wait` seconds."""
        try:
            self.popen.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return False
        return True


class _Late(Exception):
    """The call's time passed while its answer was awaited."""


class _Gone(Exception):
    """The process ended (its pipe closed) before the whole answer came."""


_remote_types: dict[tuple[str, str], type[Exception]] = {}


def _remote(kind: str, module: str, message: str, text: str) -> Exception:
    """What a rule raised in its process, raised here as an exception of the same name (the
    failure's problem says `raised <type>: <message>`), its traceback in a note."""
    cls = _remote_types.get((module, kind))
    if cls is None:
        cls = type(kind.rpartition(".")[2], (Exception,), {"__module__": module,
                                                             "__qualname__": kind})
        _remote_types[(module, kind)] = cls
    exc = cls(message)
    exc.add_note(f"raised in the rule's process:\n{text.rstrip()}")
    return exc


def _status(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by signal {-code}"
    return f"exit code {code}"


def _poll(fd: int) -> select.poll:
    """A poll of `fd` for reading (not select(): a busy service has descriptors past 1023)."""
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return poll


def _wait_readable(poll: select.poll, deadline: float, clock: Callable[[], float]) -> None:
    """Return once `poll`'s descriptor has something to read (or its end), _Late past
    `deadline`."""
    while True:
        left = deadline - clock()
        if left <= 0:
            raise _Late
        if poll.poll(max(1, int(left * 1000 + 0.999))):
            return


def _read(process: _Process, deadline: float, clock: Callable[[], float]) -> bytes:
    """One answer frame's payload from `process`, whole, by `deadline` (else _Late; _Gone
    when its pipe closes first). A process writes one frame per call, so whatever the pipe
    holds is this frame: it is read in as few reads as it arrived in (usually one)."""
    data = b""
    need = HEADER.size
    while len(data) < need:
        _wait_readable(process.poll, deadline, clock)
        chunk = os.read(process.answers, max(need - len(data), 1 << 16))
        if not chunk:
            raise _Gone
        data += chunk
        if need == HEADER.size and len(data) >= need:
            need += HEADER.unpack_from(data)[0]
    return data[HEADER.size:]


class RuleExecutor:
    """Runs Python rule calls in its processes, each within its time (module docstring)."""

    def __init__(self, limits: Limits | None = None, events: RuleEvents | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or Limits()
        self.events: RuleEvents = events or NoRuleEvents()
        self.clock = clock
        self._lock = threading.Lock()
        # a process idle, ended or started (or not), or closing
        self._changed = threading.Condition(self._lock)
        self._idle: list[_Process] = []
        self._busy = 0
        self._starting = 0
        self._waiting = 0
        self._ended: list[_Process] = []  # died, timed out or retired: the keeper kills them
        self._processes: set[_Process] = set()  # every one up, idle or busy
        self._modules: tuple[str, ...] = ()  # what a process imports before its first call
        self._wanted = False  # processes are kept up once a config or a call asks for them
        self._closed = False
        self._failed_starts = 0  # in a row; the keeper waits before trying again
        self._retry_at = 0.0
        self._keeper: threading.Thread | None = None

    # ---- the engine's side -------------------------------------------------------------
    def call(self, rule: str, fn: Callable[..., Any], args: Sequence[Any],
             timeout: float | None) -> Any:
        """`fn(*args)` in one of the executor's processes: what it returns, or what it raises
        (an exception of the same name) raised here; RuleTimeout once `timeout` seconds
        have passed (None: the limits' timeout) without an answer, RuleProcessDied when its
        process ended first. `fn` is the rule's RuleHandle; `rule` names the call in the
        log and events."""
        if not isinstance(fn, RuleHandle):
            raise TypeError(f"{rule}: a rule process builds a rule from its RuleHandle, "
                            f"not from a {type(fn).__name__}")
        seconds = self.limits.timeout if timeout is None else max(0.0, timeout)
        deadline = self.clock() + seconds
        frame = pickle.dumps((fn.key, fn.spec, tuple(args)), pickle.HIGHEST_PROTOCOL)
        process = self._take(deadline)
        if process is None:
            self.expired(rule)
            raise RuleTimeout(f"{rule} did not start within {seconds * 1000:.0f} ms "
                              "(every rule process busy or starting)")
        try:
            write_frame(process.calls, frame)
            answer = _read(process, deadline, self.clock)
        except _Late:
            self._end(process)
            self.expired(rule)
            self.events.rule_event(rule, "killed")
            raise RuleTimeout(f"{rule} did not return within {seconds * 1000:.0f} ms "
                              "(its process was killed)") from None
        except (_Gone, OSError):
            self._end(process)
            if self._closed:  # close() ended it: nothing died
                raise RuleProcessDied("the rule processes were closed") from None
            self.events.rule_event(rule, "died")
            log.error("python rule %s: its process (pid %d) ended during the call; another "
                      "takes its place", rule, process.pid)
            raise RuleProcessDied(f"the rule's process (pid {process.pid}) ended during the "
                                  "call") from None
        self._give_back(process)
        reply = pickle.loads(answer)
        if reply[0] == "ok":
            return reply[1]
        raise _remote(*reply[1:])

    def expired(self, rule: str) -> None:
        """A call of `rule` past its time: given up by `call`, or not made at all because
        its request had no time left for it (the engine's check, before `call`). Either way
        the request goes on without the rule, and this is the one place it is counted."""
        self.events.rule_event(rule, "timeout")

    def prepare(self, modules: Iterable[str]) -> bool:
        """Have the processes up for a config whose `plugins:` are `modules`, each having
        imported them, before this returns (at most `start_timeout`): a config is served
        once its rules can run. A module new to the executor retires the processes that
        have not imported it. No modules: nothing to do. False when they did not all come
        up in time (the log says why; the keeper goes on trying)."""
        modules = tuple(modules)
        if not modules:
            return True
        with self._lock:
            new = tuple(m for m in dict.fromkeys(modules) if m not in self._modules)
            self._modules += new
            if new:
                stale = [p for p in self._idle if not self._current(p)]
                self._ended += stale
                self._processes.difference_update(stale)
                self._idle = [p for p in self._idle if self._current(p)]
            self._want()
            deadline = self.clock() + self.limits.start_timeout
            failed = self._failed_starts
            while not self._closed:
                if (len(self._idle) + self._busy >= self.limits.workers
                        and all(self._current(p) for p in self._idle)):
                    return True
                left = deadline - self.clock()
                if left <= 0 or self._failed_starts > failed:
                    return False
                self._changed.wait(left)
            return False

    def state(self) -> dict[str, Any]:
        """Rule processes up, busy ones, starting ones, calls waiting for one, and the
        limit (/readyz, the gauges)."""
        with self._lock:
            return {"processes": len(self._idle) + self._busy, "busy": self._busy,
                    "starting": self._starting, "queued": self._waiting,
                    "limit": self.limits.workers}

    def close(self) -> None:
        """End every process, busy ones too (their calls fail), and the zygote; return once
        they have ended (a few seconds at most)."""
        with self._lock:
            self._closed = True
            self._idle = []
            processes, self._processes = self._processes, set()
            keeper = self._keeper
            self._changed.notify_all()
        for process in processes:
            process.end()
        if keeper is not None:
            keeper.join(timeout=CLOSE_SECONDS)

    # ---- the pool (under the lock) -----------------------------------------------------
    def _current(self, process: _Process) -> bool:
        return set(self._modules) <= set(process.modules)

    def _want(self) -> None:
        """Keep processes up from now on: start the keeper."""
        self._wanted = True
        if self._keeper is None and not self._closed:
            self._keeper = threading.Thread(target=self._keep, daemon=True,
                                            name="rearrange-rule-processes")
            self._keeper.start()
        self._changed.notify_all()

    def _missing(self) -> int:
        """Processes to start now: short of the limit, wanted, not waiting to retry."""
        if not self._wanted or self._closed or self.clock() < self._retry_at:
            return 0
        return max(0, self.limits.workers - len(self._idle) - self._busy - self._starting)

    # ---- a call's process --------------------------------------------------------------
    def _take(self, deadline: float) -> _Process | None:
        """An idle process, waited for until `deadline`; None if none came."""
        with self._lock:
            if not self._wanted:
                self._want()
            self._waiting += 1
            try:
                while not self._idle:
                    left = deadline - self.clock()
                    if left <= 0 or self._closed:
                        return None
                    self._changed.wait(left)
                self._busy += 1
                return self._idle.pop()
            finally:
                self._waiting -= 1

    def _give_back(self, process: _Process) -> None:
        with self._lock:
            self._busy -= 1
            closed = self._closed
            if closed:
                pass
            elif self._current(process):
                self._idle.append(process)
            else:  # retired by a config with new plugins: the keeper starts its successor
                self._processes.discard(process)
                self._ended.append(process)
            self._changed.notify_all()
        if closed:
            process.end()

    def _end(self, process: _Process) -> None:
        """Kill a busy process (its call gave up, or it died): the keeper replaces it."""
        process.end()
        with self._lock:
            self._busy -= 1
            self._processes.discard(process)
            self._changed.notify_all()

    # ---- the keeper: starts processes, ends the ones let go ------------------------------
    def _keep(self) -> None:
        zygote: _Zygote | None = None
        retired: list[_Zygote] = []  # the zygotes of older plugins, until they end
        try:
            while True:
                with self._lock:
                    while not self._ended and not self._missing():
                        if self._closed:
                            return
                        retry = self._retry_at - self.clock()
                        self._changed.wait(retry if self._wanted and retry > 0 else None)
                    ended, self._ended = self._ended, []
                    missing = self._missing()
                    self._starting += missing
                    modules = self._modules
                for process in ended:
                    process.end()
                retired = [z for z in retired if not z.ended()]
                if zygote is not None and (zygote.modules != modules or zygote.ended()):
                    zygote.close()  # its forks still serving end as they are let go
                    retired.append(zygote)
                    zygote = None
                if missing:
                    zygote = self._start(zygote, missing, modules)
        finally:
            for z in [*retired, *([zygote] if zygote is not None else [])]:
                z.close()
                if not z.ended(CLOSE_SECONDS):
                    z.popen.kill()
                    z.ended(CLOSE_SECONDS)

    def _start(self, zygote: _Zygote | None, count: int,
               modules: tuple[str, ...]) -> _Zygote | None:
        """Fork `count` processes from a zygote that imported `modules` (a new one when
        there is none, it ended, or it imported fewer) and add them to the idle ones; after
        a failure, wait before trying again (RETRY_SECONDS). The zygote to keep."""
        deadline = self.clock() + self.limits.start_timeout
        forked, problem = 0, ""
        try:
            if zygote is None:
                zygote = _Zygote(modules)
                zygote.ready(deadline, self.clock)
            while forked < count:
                self._add(zygote.fork(deadline, self.clock))
                forked += 1
        except _Late:
            problem = f"not ready within {self.limits.start_timeout:g} s"
        except (_Gone, OSError) as exc:
            ended = None
            if zygote is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    ended = zygote.popen.wait(timeout=1.0)
            problem = (f"it ended ({_status(ended)}) while importing the plugins, its error "
                       "logged above" if ended is not None else f"{type(exc).__name__}: {exc}")
        if problem and zygote is not None:
            zygote.close()
            if not zygote.ended(CLOSE_SECONDS):
                zygote.popen.kill()
                zygote.ended(CLOSE_SECONDS)
            zygote = None
        with self._lock:
            self._starting -= count - forked
            if problem:
                self._failed_starts += 1
                wait = RETRY_SECONDS[min(self._failed_starts, len(RETRY_SECONDS)) - 1]
                self._retry_at = self.clock() + wait
                # said before prepare() learns of it
                self.events.rule_event("", "start_failed")
                if self._failed_starts == 1:
                    log.error("python rules: rule processes did not start (%s); trying "
                              "again, every %g s at most, until they do", problem,
                              RETRY_SECONDS[-1])
            else:
                self._failed_starts = 0
            self._changed.notify_all()
        return zygote

    def _add(self, process: _Process) -> None:
        """A process that said it is ready: idle, or ended if the executor closed meanwhile
        or a config with new plugins came while it started."""
        with self._lock:
            self._starting -= 1
            if self._closed:
                process.end()
            elif self._current(process):
                self._processes.add(process)
                self._idle.append(process)
            else:
                self._ended.append(process)
            self._changed.notify_all()
