"""The Python rule executor on its own (app/engine/executor.py): results and exceptions
come back from the rule processes, a call past its time raises RuleTimeout and its process
is killed and replaced whatever the rule does, a process that dies fails its call, and a
config with plugins is served once its processes have imported them. Real processes
running the rules of tests/plugins/rr_hostile.py."""
from __future__ import annotations

import os
import re
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from app._engine import RuleTimeout
from app.config.plugins import RuleHandle
from app.engine.executor import Limits, RuleAnswerRefused, RuleExecutor, RuleProcessDied

PAGE = [{"id": "a", "url": "https://a.example/", "score": 1.0}]
CONTEXT = {"query": {}, "profile": "default", "variants": {}, "phase": "rerank"}


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def rule_event(self, rule: str, event: str) -> None:
        self.seen.append((rule, event))


@pytest.fixture
def hostile(plugin_path):
    import rr_hostile

    return rr_hostile


def executor(**limits) -> tuple[RuleExecutor, Events]:
    events = Events()
    ex = RuleExecutor(Limits(**limits), events)
    assert ex.prepare(["rr_hostile"])
    return ex, events


def handle(module, cls: type, **params) -> RuleHandle:
    return RuleHandle(cls(params), module.__name__, cls.__qualname__, params)


def alive(pid: int) -> bool:
    """The process `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # it ended meanwhile
        return False


def pid_of(ex: RuleExecutor, module, rule: RuleHandle) -> int:
    records = ex.call("talker", rule, (PAGE, CONTEXT), 5.0)[1]
    return int(re.search(r"pid=(\d+)", records[0]["reason"])[1])


def wait_for(check, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.01)


def test_a_call_returns_what_the_rule_returns_in_a_process_of_its_own(hostile):
    ex, events = executor(workers=1)
    talker = handle(hostile, hostile.Talker)
    docs, records = ex.call("talker", talker, (PAGE, CONTEXT), 5.0)
    assert docs == PAGE
    reason = records[0]["reason"]
    # built once in its process, which is not this one; what it printed went to the log,
    # and it read nothing from the frames (its standard input is empty)
    assert reason.startswith("calls=1 built=1 read='' pid=") and f"pid={os.getpid()}" not in reason
    docs, records = ex.call("talker", talker, (PAGE, CONTEXT), 5.0)
    assert records[0]["reason"].startswith("calls=2 built=1 ")  # the same rule, kept
    # the same rule and parameters in another handle (a reload's): not built again
    again = handle(hostile, hostile.Talker)
    assert ex.call("talker", again, (PAGE, CONTEXT), 5.0)[1][0]["reason"].startswith(
        "calls=3 built=1 ")
    assert events.seen == [] and ex.state() == {"processes": 1, "busy": 0, "starting": 0,
                                                "queued": 0, "limit": 1}
    ex.close()


def test_what_a_rule_raises_is_raised_here_by_its_name_with_its_traceback(hostile):
    ex, events = executor(workers=1)
    with pytest.raises(Exception) as caught:
        ex.call("forger", handle(hostile, hostile.Forger), (PAGE, CONTEXT), 5.0)
    exc = caught.value
    assert type(exc).__name__ == "ValueError" and type(exc).__module__ == "builtins"
    assert str(exc) == "bad\nINFO:     rearrange: forged line\x1b[2J"
    assert "rr_hostile.py" in exc.__notes__[0] and "raise ValueError" in exc.__notes__[0]
    # an answer pickle cannot carry back is the rule's failure, and the process serves on
    with pytest.raises(Exception, match="lambda") as caught:
        ex.call("unsendable", handle(hostile, hostile.Unsendable), (PAGE, CONTEXT), 5.0)
    assert "Pickl" in type(caught.value).__name__ or "pickle" in str(caught.value).lower()
    assert ex.call("talker", handle(hostile, hostile.Talker), (PAGE, CONTEXT), 5.0)[0] == PAGE
    assert events.seen == []
    ex.close()


@pytest.mark.parametrize("rule,params", [("Spinner", {}), ("Sleeper", {"seconds": 60}),
                                         ("SocketReader", {"seconds": 60})])
def test_a_call_past_its_time_kills_its_process_whatever_the_rule_does(hostile, rule, params):
    ex, events = executor(workers=1)
    talker = handle(hostile, hostile.Talker)
    before = pid_of(ex, hostile, talker)  # the one process, which the rule will run in
    started = time.monotonic()
    with pytest.raises(RuleTimeout, match=f"{rule} did not return within 50 ms"):
        ex.call(rule, handle(hostile, getattr(hostile, rule), **params), (PAGE, CONTEXT), 0.05)
    assert time.monotonic() - started < 1.0
    wait_for(lambda: not alive(before), 5.0)  # killed and reaped: nothing of it runs on
    assert events.seen == [(rule, "timeout"), (rule, "killed")]
    wait_for(lambda: ex.state()["processes"] == 1)  # its successor
    after = pid_of(ex, hostile, talker)
    assert after != before and alive(after)
    ex.close()
    wait_for(lambda: not alive(after))


def test_a_process_that_dies_fails_its_call_and_is_replaced(hostile):
    ex, events = executor(workers=1)
    with pytest.raises(RuleProcessDied, match=r"ended during the call"):
        ex.call("exiter", handle(hostile, hostile.Exiter), (PAGE, CONTEXT), 5.0)
    assert events.seen == [("exiter", "died")]
    assert ex.call("talker", handle(hostile, hostile.Talker), (PAGE, CONTEXT), 5.0)[0] == PAGE
    ex.close()


def test_a_call_that_waits_past_its_time_for_a_process_never_runs(hostile, tmp_path):
    ex, events = executor(workers=1)
    sleeper = handle(hostile, hostile.Sleeper, seconds=60)
    started = []
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(lambda: started.append(1) or ex.call("sleeper", sleeper,
                                                                (PAGE, CONTEXT), 2.0))
        wait_for(lambda: ex.state()["busy"] == 1)
        # the one process is busy: a call waits its turn within its time, in vain
        with pytest.raises(RuleTimeout, match="talker did not start within 50 ms"):
            ex.call("talker", handle(hostile, hostile.Talker), (PAGE, CONTEXT), 0.05)
        with pytest.raises(RuleTimeout):
            busy.result()
    assert events.seen == [("talker", "timeout"), ("sleeper", "timeout"), ("sleeper", "killed")]
    ex.close()


def test_a_call_with_next_to_no_time_left_is_not_made(hostile):
    ex, events = executor(workers=1)
    before = pid_of(ex, hostile, handle(hostile, hostile.Talker))
    with pytest.raises(RuleTimeout, match="talker had 0.50 ms left: not called"):
        ex.call("talker", handle(hostile, hostile.Talker), (PAGE, CONTEXT), 0.0005)
    assert events.seen == [("talker", "timeout")]  # and no process killed for it
    assert pid_of(ex, hostile, handle(hostile, hostile.Talker)) == before
    ex.close()


def test_an_answer_that_is_more_than_plain_data_runs_nothing_here(hostile):
    """A rule's answer is unpickled in the service: one that needs a class or a function
    (here a `__reduce__` that would sleep 2 s) is refused, at once."""
    ex, events = executor(workers=1)
    started = time.monotonic()
    with pytest.raises(RuleAnswerRefused, match="holds a time.sleep: only plain data"):
        ex.call("smuggler", handle(hostile, hostile.Smuggler), (PAGE, CONTEXT), 0.5)
    assert time.monotonic() - started < 1.0 and events.seen == []
    assert ex.call("talker", handle(hostile, hostile.Talker), (PAGE, CONTEXT), 5.0)[0] == PAGE
    ex.close()


def test_an_answer_too_long_to_read_ends_its_process(hostile):
    ex, _ = executor(workers=1)
    scribbler = handle(hostile, hostile.Scribbler, mode="header")
    before = pid_of(ex, hostile, handle(hostile, hostile.Talker))
    with pytest.raises(RuleAnswerRefused, match="18446744073709551615 bytes long, over the "
                       r"\d+ bytes read for a call of its length"):
        ex.call("scribbler", scribbler, (PAGE, CONTEXT), 5.0)
    wait_for(lambda: not alive(before), 5.0)
    assert ex.call("talker", handle(hostile, hostile.Talker), (PAGE, CONTEXT), 5.0)[0] == PAGE
    assert ex.state()["busy"] == 0
    ex.close()


def test_what_a_call_leaves_behind_never_answers_the_next_one(hostile, tmp_path):
    """A thread a rule left writes into its answer pipe after the call, or ends its
    process: the next call, of another rule, runs on a sound process and gets its own
    answer; what the ended one started ends with it."""
    ex, events = executor(workers=1)
    written = tmp_path / "written"
    scribbler = handle(hostile, hostile.Scribbler, mode="later", path=str(written))
    first = pid_of(ex, hostile, handle(hostile, hostile.Talker))
    ex.call("scribbler", scribbler, (PAGE, CONTEXT), 5.0)
    wait_for(written.exists)  # its junk is in the pipe
    docs, records = ex.call("talker", handle(hostile, hostile.Talker), (PAGE, CONTEXT), 5.0)
    second = int(re.search(r"pid=(\d+)", records[0]["reason"])[1])
    assert docs == PAGE and second != first
    child = tmp_path / "child.pid"
    ex.call("leaver", handle(hostile, hostile.Leaver, path=str(child)), (PAGE, CONTEXT), 5.0)
    wait_for(lambda: not alive(second))  # its leftover thread ended it
    assert ex.call("talker", handle(hostile, hostile.Talker), (PAGE, CONTEXT), 5.0)[0] == PAGE
    wait_for(lambda: not alive(int(child.read_text())), 5.0)  # and what it started
    assert events.seen == []
    ex.close()


def test_a_process_that_stopped_reading_cannot_hold_a_call_past_its_time(hostile):
    """A call is written within its time too: a process that stopped (SIGSTOP) does not
    read a page bigger than the pipe holds."""
    ex, events = executor(workers=1)
    os.kill(pid_of(ex, hostile, handle(hostile, hostile.Talker)), signal.SIGSTOP)
    big = [{"id": f"d{i}", "url": f"https://h{i}.example/" + "p" * 100, "score": 1.0}
           for i in range(2000)]
    started = time.monotonic()
    with pytest.raises(RuleTimeout, match="within 100 ms"):
        ex.call("talker", handle(hostile, hostile.Talker), (big, CONTEXT), 0.1)
    assert time.monotonic() - started < 1.0
    assert events.seen == [("talker", "timeout"), ("talker", "killed")]
    assert ex.call("talker", handle(hostile, hostile.Talker), (PAGE, CONTEXT), 5.0)[0] == PAGE
    ex.close()


def test_an_answer_in_subclasses_of_plain_types_comes_back_plain(hostile):
    """The engine reads a dict subclass, an IntEnum, a str subclass as what they extend:
    the rule process hands them back as such (the service unpickles no class)."""
    ex, _ = executor(workers=1)
    docs, records = ex.call("subclassed", handle(hostile, hostile.Subclassed),
                            (PAGE, CONTEXT), 5.0)
    assert docs == [{**PAGE[0], "score": 1}] and type(docs[0]) is dict
    assert type(docs[0]["score"]) is int and type(records[0]["doc_id"]) is str
    ex.close()


def test_a_new_config_is_prepared_while_the_old_one_goes_on_being_served(hostile):
    """A reload whose rules the processes lack forks a new set (its slow constructor run
    once, in the new zygote) beside the old one, which serves every call meanwhile."""
    ex, events = executor(workers=2)
    talker = handle(hostile, hostile.Talker)
    stop, failures, answered = threading.Event(), [], []

    def calls() -> None:
        while not stop.is_set():
            try:
                answered.append(ex.call("talker", talker, (PAGE, CONTEXT), 0.5))
            except Exception as exc:  # what the test counts
                failures.append(exc)

    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(calls)
        wait_for(lambda: len(answered) > 3)
        old = {pid_of(ex, hostile, talker) for _ in range(4)}
        slow = handle(hostile, hostile.SlowStart, seconds=1.0)
        started = time.monotonic()
        assert ex.prepare(["rr_hostile"], [talker, slow])
        assert time.monotonic() - started >= 1.0  # it waited for the new set
        served_during = len(answered)
        wait_for(lambda: len(answered) > served_during + 3)
        stop.set()
        running.result()
    assert failures == [] and events.seen == []
    assert not old & {pid_of(ex, hostile, talker) for _ in range(4)}
    assert ex.call("slow_start", slow, (PAGE, CONTEXT), 0.1)[0] == PAGE
    wait_for(lambda: not any(alive(p) for p in old))
    ex.close()


def test_the_served_rules_are_built_before_their_first_call(hostile):
    """A rule slower to build than its time answers from its first call: the zygote built
    it once, before it forked the processes."""
    slow = handle(hostile, hostile.SlowStart, seconds=0.3)
    ex = RuleExecutor(Limits(workers=2))
    assert ex.prepare(["rr_hostile"], [slow])
    for _ in range(4):
        assert ex.call("slow_start", slow, (PAGE, CONTEXT), 0.1)[0] == PAGE
    ex.close()


def test_what_a_rule_starts_is_killed_with_its_process(hostile, tmp_path):
    ex, _ = executor(workers=1)
    path = tmp_path / "child.pid"
    with pytest.raises(RuleTimeout):
        ex.call("forker", handle(hostile, hostile.Forker, path=str(path)), (PAGE, CONTEXT),
                0.5)
    child = int(path.read_text())
    wait_for(lambda: not alive(child), 5.0)
    ex.close()


def test_no_time_given_is_the_limits_timeout(hostile):
    ex, events = executor(workers=1, timeout=0.05)
    with pytest.raises(RuleTimeout, match="within 50 ms"):
        ex.call("sleeper", handle(hostile, hostile.Sleeper, seconds=60), (PAGE, CONTEXT), None)
    assert events.seen == [("sleeper", "timeout"), ("sleeper", "killed")]
    ex.close()


def test_a_config_with_a_new_plugin_is_served_by_processes_that_imported_it(hostile, plugin_path):
    ex, _ = executor(workers=2)
    talker = handle(hostile, hostile.Talker)
    old = {pid_of(ex, hostile, talker) for _ in range(4)}
    assert ex.prepare(["rr_hostile", "rr_business"])  # returns once both are replaced
    assert ex.state() == {"processes": 2, "busy": 0, "starting": 0, "queued": 0, "limit": 2}
    new = {pid_of(ex, hostile, talker) for _ in range(4)}
    assert not old & new
    wait_for(lambda: not any(alive(p) for p in old))
    ex.close()


def test_a_process_that_cannot_start_is_counted_and_tried_again(hostile, plugin_path, tmp_path,
                                                                 monkeypatch, caplog):
    # a module the service imported but a new process cannot (gone from the path since)
    module = tmp_path / "rr_vanishing.py"
    module.write_text("RULES = []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import rr_vanishing  # noqa: F401

    module.unlink()
    events = Events()
    ex = RuleExecutor(Limits(workers=1, start_timeout=10), events)
    assert not ex.prepare(["rr_vanishing"])
    assert ("", "start_failed") in events.seen and ex.state()["processes"] == 0
    assert "rule processes did not start" in caplog.text
    assert "its zygote ended (exit code 1), its error logged above" in caplog.text
    module.write_text("RULES = []\n")  # back: the keeper's next try starts one
    wait_for(lambda: ex.state()["processes"] == 1)
    ex.close()
