"""Where Python rules run: processes of the service's own, so that no rule holds a request
past its time, slows the requests around it, or outlives the call that gave up on it.

The engine (crates/engine/src/rules/python.rs) hands each Python rule call to
`RuleExecutor.call` with the time the rule has, and waits; the wait releases the GIL. The
call goes to an idle rule process (app/engine/rule_worker.py), written and answered within
that time. A call that has not returned by then raises `RuleTimeout` in the caller, which
answers the request as the step's `on_error` says, and its process is killed with its
process group (SIGKILL: a sleep, a socket read, a loop in C or in Python, what the rule
started, all end there) and replaced. A process that dies during a call (the rule called
`os._exit`, the kernel's OOM killer took it) fails that call with `RuleProcessDied`; one
that ended or wrote between calls (a thread a rule left) is replaced before it takes one.
The answer is read back by an unpickler that knows no class or function
(`RuleAnswerRefused` otherwise), so it runs no code here. A rule that spins never takes
the GIL from the service: it runs in another interpreter.

The processes are forked by a zygote that imported the served config's plugins and built
its rules, so a replacement is ready in a millisecond or two, rules built. They start when
a config with `plugins:` is about to be served (`prepare`, which returns once they are up)
and are kept at `Limits.workers` by a keeper thread; a config with a plugin or rule new to
them gets a new zygote and new processes. docs/config.md#python-rules has the model.
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
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

from app._engine import RuleTimeout
from app.config.plugins import RuleHandle
from app.engine.rule_worker import (
    PARENT_ENV,
    SOCKET_ENV,
    FrameTooLong,
    NotPlain,
    frame,
    load_plain,
    read_frame,
)

log = logging.getLogger("rearrange.rules")

# What rule_event reports: the caller gave up on a call (timeout), the call's process was
# killed for it (killed), a process ended during a call (died), a process did not start
# (start_failed: then its rule is "")
EVENTS = ("timeout", "killed", "died", "start_failed")
RETRY_SECONDS = (0.1, 0.5, 2.0, 5.0)  # waits before starting again after failed starts
CLOSE_SECONDS = 5.0  # what close() waits, at most, for a zygote to end
FORK_SECONDS = 2.0  # a zygote that has not forked a process by then is killed and replaced
LEAST_SECONDS = 0.001  # a call with less time left is not made: it would only kill a process
# An answer longer than this many bytes, plus ANSWER_PER_CALL_BYTE for each byte of its call,
# is refused unread: a page and its records come back about as long as the page went, and
# decoding plain data costs time (the GIL held) and memory in proportion to its length
ANSWER_BYTES = 64 << 10
ANSWER_PER_CALL_BYTE = 8


class RuleProcessDied(Exception):
    """The process running a Python rule call ended before it answered."""


class RuleAnswerRefused(Exception):
    """A Python rule's answer is more than plain data, or too long to read."""


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
    start_timeout: float = 60.0  # a new zygote must have imported and built by then


@dataclass(frozen=True, slots=True)
class _Target:
    """What rule processes must have imported and built: a config's plugin modules (in its
    order: the zygote imports them so) and its Python rules' RuleHandle keys."""

    modules: tuple[str, ...] = ()
    keys: frozenset[bytes] = frozenset()
    module_set: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "module_set", frozenset(self.modules))

    def within(self, zygote: _Zygote) -> bool:
        """`zygote` (and so each process it forked) imported and built all of it."""
        return self.module_set <= zygote.target.module_set and self.keys <= zygote.target.keys


class _Zygote:
    """The process that imported the plugins, built the rules and forks rule processes
    (rule_worker.py)."""

    def __init__(self, target: _Target, start_timeout: float) -> None:
        self.target = target
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ)
        # the service's own module path, so the zygote imports what the service imported
        env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
        env[SOCKET_ENV] = str(theirs.fileno())
        env[PARENT_ENV] = str(os.getpid())
        try:
            # a session of its own: a signal to the service's group does not reach it
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "app.engine.rule_worker", *target.modules], env=env,
                stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),), close_fds=True,
                start_new_session=True)
        finally:
            theirs.close()
        self.link = ours
        keys = pickle.dumps(list(target.keys), pickle.HIGHEST_PROTOCOL)
        ours.settimeout(start_timeout)  # it reads them once it has imported the plugins
        # if it ended or hangs, `ready` finds it so, and the keeper logs and counts it
        with contextlib.suppress(OSError):
            ours.sendall(frame(keys))
        ours.settimeout(None)

    def ready(self, deadline: float, clock: Callable[[], float]) -> None:
        """Wait for its `ready` (_Late past `deadline`, _Gone if it ended first)."""
        said, poll = b"", _poll(self.link.fileno())
        while len(said) < len(b"ready"):
            _wait(poll, deadline, clock)
            chunk = self.link.recv(len(b"ready") - len(said))
            if not chunk:
                raise _Gone
            said += chunk

    def fork(self, deadline: float, clock: Callable[[], float]) -> _Process:
        """A new rule process."""
        self.link.sendall(b"f")
        _wait(_poll(self.link.fileno()), deadline, clock)
        message, fds, _, _ = socket.recv_fds(self.link, 32, 2)
        try:
            pid = int(message)
        except ValueError:
            pid = 0
        if not pid or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            raise _Gone
        return _Process(pid, fds[0], fds[1], self)

    def close(self) -> None:
        """Let it go: it ends, and its rule processes with it (`ended` then says so)."""
        self.link.close()

    def kill(self) -> None:
        self.link.close()
        self.popen.kill()
        self.ended(CLOSE_SECONDS)

    def ended(self, wait: float = 0.0) -> bool:
        """Whether it has ended (and is reaped), waiting at most `wait` seconds."""
        try:
            self.popen.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return False
        return True


class _Process:
    """A rule process (forked by `zygote`) and the service's ends of its two pipes."""

    __slots__ = ("pid", "pidfd", "calls", "answers", "poll", "zygote", "ended", "lock")

    def __init__(self, pid: int, calls: int, answers: int, zygote: _Zygote) -> None:
        self.pid, self.calls, self.answers, self.zygote = pid, calls, answers, zygote
        os.set_blocking(calls, False)  # a call is written within its time, or not at all
        self.poll = _poll(answers)
        self.pidfd: int | None = None
        # a pidfd names this process and no other, even once its pid is reused
        with contextlib.suppress(AttributeError, OSError):
            self.pidfd = os.pidfd_open(pid)
        self.ended = False
        self.lock = threading.Lock()  # close() kills what a call's thread may be ending

    def spoiled(self) -> bool:
        """Something came between calls: it ended, or wrote (a thread a rule left behind):
        its next answer could not be trusted."""
        return bool(self.poll.poll(0))

    def kill(self) -> None:
        """SIGKILL it and its process group (what its rules started), whatever it runs;
        nothing once it has been ended."""
        with self.lock:
            if not self.ended:
                self._kill()

    def _kill(self) -> None:
        # Its group only while it lives (a pidfd says so): ended, it may have been reaped and
        # its number given to another; the zygote kills an ended one's group before it reaps.
        alive = self.pidfd is None or not _poll(self.pidfd).poll(0)
        if alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        if self.pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def end(self) -> None:
        """Kill it and close the service's ends of its pipes; once."""
        with self.lock:
            if self.ended:
                return
            self._kill()
            self.ended = True
            for fd in (self.calls, self.answers, self.pidfd):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)


class _Late(Exception):
    """The call's time passed while it was written or its answer awaited."""


class _Gone(Exception):
    """The process ended (its pipe closed) before the whole answer came."""


def _plain(data: bytes) -> Any:
    """The answer, unpickled as plain data only (rule_worker.load_plain): a rule's answer
    runs no code in the service."""
    try:
        return load_plain(data)
    except NotPlain as exc:
        raise RuleAnswerRefused(f"the rule's answer holds a {exc}: only plain data (dicts, "
                                "lists, strings, numbers) comes back from its process") from None


_remote_types: dict[tuple[str, str], type[Exception]] = {}


def _remote(kind: str, module: str, message: str, text: str) -> Exception:
    """What a rule raised in its process, raised here as an exception of the same name (the
    failure's problem says `raised <type>: <message>`), its traceback in a note."""
    cls = _remote_types.get((module, kind))
    if cls is None:
        if len(_remote_types) >= 1024:  # names a rule chose: never more than this many
            _remote_types.clear()
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


def _poll(fd: int, events: int = select.POLLIN) -> select.poll:
    """A poll of `fd` (not select(): a busy service has descriptors past 1023)."""
    poll = select.poll()
    poll.register(fd, events)
    return poll


def _wait(poll: select.poll, deadline: float, clock: Callable[[], float]) -> None:
    """Return once `poll` says its descriptor is ready (or ended), _Late past `deadline`."""
    while True:
        left = deadline - clock()
        if left <= 0:
            raise _Late
        if poll.poll(max(1, int(left * 1000 + 0.999))):
            return


def _write(process: _Process, call: bytes, deadline: float,
           clock: Callable[[], float]) -> None:
    """`call` as a frame into the process's call pipe, whole, by `deadline` (else _Late)."""
    view, poll = memoryview(frame(call)), None
    while view:
        try:
            view = view[os.write(process.calls, view):]
        except BlockingIOError:  # the pipe is full: it reads slowly, or not at all
            poll = poll or _poll(process.calls, select.POLLOUT)
            _wait(poll, deadline, clock)


def _read(process: _Process, deadline: float, clock: Callable[[], float],
          most: int) -> bytes:
    """One answer frame's payload from `process`, whole, by `deadline` (else _Late; _Gone
    when its pipe closes first; RuleAnswerRefused past `most` bytes)."""
    try:
        answer = read_frame(process.answers, lambda: _wait(process.poll, deadline, clock),
                            most)
    except FrameTooLong as exc:
        raise RuleAnswerRefused(f"the rule's answer is {exc.args[0]} bytes long, over the "
                                f"{most} bytes read for a call of its length") from None
    if answer is None:
        raise _Gone
    return answer


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
        self._busy: set[_Process] = set()
        self._starting = 0
        self._waiting = 0
        self._ended: list[_Process] = []  # let go idle (retired): the keeper ends them
        # what the processes must have imported and built: the served config's plugins and
        # rules (handle key → spec)
        self._serving = _Target()
        # what new processes are forked for: the config being prepared, or the one served;
        # `_fresh` holds those forked for a config being prepared, until it is served
        self._target = _Target()
        self._fresh: list[_Process] = []
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
        process ended first, RuleAnswerRefused for an answer that is not plain data. `fn`
        is the rule's RuleHandle; `rule` names the call in the log and events."""
        if not isinstance(fn, RuleHandle):
            raise TypeError(f"{rule}: a rule process builds a rule from its RuleHandle, "
                            f"not from a {type(fn).__name__}")
        seconds = self.limits.timeout if timeout is None else max(0.0, timeout)
        if seconds < LEAST_SECONDS:
            self.expired(rule)
            raise RuleTimeout(f"{rule} had {seconds * 1000:.2f} ms left: not called")
        deadline = self.clock() + seconds
        call = pickle.dumps((fn.key, tuple(args)), pickle.HIGHEST_PROTOCOL)
        while True:
            process = self._take(deadline)
            if process is None:
                self.expired(rule)
                raise RuleTimeout(f"{rule} did not start within {seconds * 1000:.0f} ms "
                                  "(every rule process busy or starting)")
            if process.spoiled():  # it ended or wrote since its last call: not this one's
                self._end(process)
                continue
            try:
                _write(process, call, deadline, self.clock)
            except BrokenPipeError:  # it ended before it took the call: another will
                self._end(process)
                continue
            except _Late:
                self._late(rule, process, seconds)
            except BaseException:
                self._end(process)
                raise
            break
        try:
            answer = _read(process, deadline, self.clock,
                           ANSWER_BYTES + ANSWER_PER_CALL_BYTE * len(call))
        except _Late:
            self._late(rule, process, seconds)
        except (_Gone, OSError):
            self._end(process)
            if self._closed:  # close() ended it: nothing died
                raise RuleProcessDied("the rule processes were closed") from None
            self.events.rule_event(rule, "died")
            log.error("python rule %s: its process (pid %d) ended during the call; another "
                      "takes its place", rule, process.pid)
            raise RuleProcessDied(f"the rule's process (pid {process.pid}) ended during the "
                                  "call") from None
        except BaseException:  # an answer too long to read, or worse: the process goes
            self._end(process)
            raise
        self._give_back(process)
        reply = _plain(answer)
        if reply[0] == "ok":
            return reply[1]
        raise _remote(*reply[1:])

    def expired(self, rule: str) -> None:
        """A call of `rule` past its time: given up by `call`, or not made at all because
        its request had no time left for it (the engine's check, before `call`). Either way
        the request goes on without the rule, and this is the one place it is counted."""
        self.events.rule_event(rule, "timeout")

    def prepare(self, modules: Iterable[str], rules: Iterable[RuleHandle] = ()) -> bool:
        """Have the processes up for a config whose `plugins:` are `modules` and whose
        Python rules are `rules`, each having imported and built them, before this returns
        (at most `start_timeout`). When the processes up lack a module or a rule, a new set
        is forked beside them (from a new zygote) while they go on serving the config in
        use, and they are retired once it is up: calls are never left without a process.
        No modules: nothing to do. False when the new set did not all come up in time (the
        log says why; the keeper goes on trying, and what is up serves meanwhile)."""
        modules = tuple(dict.fromkeys(modules))
        if not modules:
            return True
        target = _Target(modules, frozenset(handle.key for handle in rules))
        with self._lock:
            self._target = target
            self._fresh = []
            self._want()
            deadline = self.clock() + self.limits.start_timeout
            failed, done = self._failed_starts, False
            while not self._closed:
                up = [p for p in (*self._idle, *self._busy, *self._fresh)
                      if target.within(p.zygote)]
                if len(up) >= self.limits.workers:
                    done = True
                    break
                left = deadline - self.clock()
                if left <= 0 or self._failed_starts > failed:
                    break
                self._changed.wait(left)
            # the switch: the new set serves from now on, the old one ends as it comes free
            self._serving = target
            stale = [p for p in self._idle if not self._current(p)]
            self._idle = [p for p in self._idle if self._current(p)] + self._fresh
            self._fresh = []
            self._ended += stale
            self._changed.notify_all()
            return done

    def state(self) -> dict[str, Any]:
        """Rule processes up, busy ones, starting ones, calls waiting for one, and the
        limit (/readyz, the gauges)."""
        with self._lock:
            return {"processes": len(self._idle) + len(self._busy) + len(self._fresh),
                    "busy": len(self._busy),
                    "starting": self._starting, "queued": self._waiting,
                    "limit": self.limits.workers}

    def close(self) -> None:
        """End every process, busy ones too (their calls fail), and the zygotes; return once
        they have ended (a few seconds at most)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            busy = list(self._busy)
            keeper = self._keeper
            self._changed.notify_all()
        for process in idle:
            process.end()
        for process in busy:  # its call's thread closes its pipes
            process.kill()
        if keeper is not None:
            keeper.join(timeout=CLOSE_SECONDS)

    # ---- the pool (under the lock) -----------------------------------------------------
    def _current(self, process: _Process) -> bool:
        """It imported the served config's plugins and built its rules."""
        return self._serving.within(process.zygote)

    def _want(self) -> None:
        """Keep processes up from now on: start the keeper (again, should it have failed)."""
        self._wanted = True
        if (self._keeper is None or not self._keeper.is_alive()) and not self._closed:
            self._keeper = threading.Thread(target=self._keep, daemon=True,
                                            name="rearrange-rule-processes")
            self._keeper.start()
        self._changed.notify_all()

    def _missing(self) -> int:
        """Processes to start now for the target: short of the limit, wanted, not waiting to
        retry (the ones of an older config, still serving, do not count)."""
        if not self._wanted or self._closed or self.clock() < self._retry_at:
            return 0
        up = sum(self._target.within(p.zygote) for p in (*self._idle, *self._busy, *self._fresh))
        return max(0, self.limits.workers - up - self._starting)

    # ---- a call's process --------------------------------------------------------------
    def _take(self, deadline: float) -> _Process | None:
        """An idle process, waited for until `deadline`; None if none came."""
        with self._lock:
            if not self._wanted or (self._keeper is not None and not self._keeper.is_alive()):
                self._want()
            self._waiting += 1
            try:
                while not self._idle:
                    left = deadline - self.clock()
                    if left <= 0 or self._closed:
                        return None
                    self._changed.wait(left)
                process = self._idle.pop()
                self._busy.add(process)
                return process
            finally:
                self._waiting -= 1

    def _give_back(self, process: _Process) -> None:
        with self._lock:
            self._busy.discard(process)
            keep = not self._closed and self._current(process)
            if keep:
                self._idle.append(process)
            self._changed.notify_all()
        if not keep:  # closing, or retired by a config with new plugins or rules
            process.end()

    def _end(self, process: _Process) -> None:
        """Kill a busy process (its call gave up, or it died): the keeper replaces it."""
        process.end()
        with self._lock:
            self._busy.discard(process)
            self._changed.notify_all()

    def _late(self, rule: str, process: _Process, seconds: float) -> NoReturn:
        self._end(process)
        self.expired(rule)
        self.events.rule_event(rule, "killed")
        raise RuleTimeout(f"{rule} did not return within {seconds * 1000:.0f} ms (its "
                          "process was killed)") from None

    # ---- the keeper: starts processes, ends the ones let go -----------------------------
    def _keep(self) -> None:
        zygote: _Zygote | None = None
        retired: list[_Zygote] = []  # older zygotes: killed once none of theirs is up
        try:
            while True:
                with self._lock:
                    while not self._ended and not self._missing() and not retired:
                        if self._closed:
                            return
                        retry = self._retry_at - self.clock()
                        self._changed.wait(retry if self._wanted and retry > 0 else None)
                    if self._closed and not self._ended:
                        return
                    ended, self._ended = self._ended, []
                    missing = self._missing()
                    self._starting += missing
                    target = self._target
                    serving = {p.zygote for p in (*self._idle, *self._busy, *self._fresh)}
                for process in ended:
                    process.end()
                for old in [z for z in retired if z not in serving]:
                    old.kill()  # none of its processes is left: it has nothing to do
                    retired.remove(old)
                if zygote is not None and not (target.within(zygote) and not zygote.ended()):
                    retired.append(zygote)
                    zygote = None
                if missing:
                    zygote = self._start(zygote, missing, target)
                elif retired:
                    with self._lock:  # woken when a retired zygote's last process goes
                        self._changed.wait(RETRY_SECONDS[1])
        except Exception:  # a bug of ours: logged with its cause; the next call starts another
            log.exception("python rules: the rule processes' keeper failed")
            self.events.rule_event("", "start_failed")
        finally:
            for z in [*retired, *([zygote] if zygote is not None else [])]:
                z.close()
                if not z.ended(CLOSE_SECONDS):
                    z.kill()

    def _start(self, zygote: _Zygote | None, count: int, target: _Target) -> _Zygote | None:
        """Fork `count` processes from the zygote (a new one when there is none) and add
        them to the idle ones; after a failure, wait before trying again (RETRY_SECONDS).
        The zygote to keep."""
        forked, problem = 0, ""
        try:
            if zygote is None:
                zygote = _Zygote(target, self.limits.start_timeout)
                zygote.ready(self.clock() + self.limits.start_timeout, self.clock)
            while forked < count:
                self._add(zygote.fork(self.clock() + FORK_SECONDS, self.clock))
                forked += 1
        except _Late:
            problem = "its zygote did not answer in time"
        except (_Gone, OSError) as exc:
            ended = None
            if zygote is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    ended = zygote.popen.wait(timeout=1.0)
            problem = (f"its zygote ended ({_status(ended)}), its error logged above"
                       if ended is not None else f"{type(exc).__name__}: {exc}")
        if problem and zygote is not None:
            zygote.kill()
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
        """A process just forked: idle; or fresh, while a config that needs it waits in
        `prepare` for its set; or ended if the executor closed meanwhile or another config
        came while it started."""
        with self._lock:
            self._starting -= 1
            keep = not self._closed and self._target.within(process.zygote)
            if keep and self._current(process) and not self._fresh:
                self._idle.append(process)
            elif keep:
                self._fresh.append(process)
            self._changed.notify_all()
        if not keep:
            process.end()
