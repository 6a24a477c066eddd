"""bench.procstat and bench.http_load's pure parts: CPU time and RSS from /proc (checked
against the kernel's getrusage and a fake /proc), the fixed rate, bench/pace's report read."""
from __future__ import annotations

import math
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from bench.http_load import fixed_rate, pace_figures
from bench.procstat import (
    children_cpu_seconds,
    cpu_seconds,
    group_pids,
    per_request_us,
    rss_kib,
    steal_seconds,
)
from tests.helpers import until


def test_cpu_seconds_of_this_process_agree_with_getrusage():
    sum(i * i for i in range(300_000))  # some CPU time of our own to read
    usage = resource.getrusage(resource.RUSAGE_SELF)
    read = cpu_seconds([os.getpid()])
    # the same kernel account, /proc's in clock ticks (10 ms): a tick or two apart at most
    assert read > 0
    assert read == pytest.approx(usage.ru_utime + usage.ru_stime, abs=0.05)


def test_a_process_gone_counts_nothing():
    assert cpu_seconds([2**22 + 12345]) == 0  # above the kernel's pid_max: never a process
    assert rss_kib([2**22 + 12345]) == 0


def test_the_rss_of_this_process_is_its_vmrss():
    status = Path(f"/proc/{os.getpid()}/status").read_text()
    vmrss = int(next(line for line in status.splitlines() if line.startswith("VmRSS:"))
                .split()[1])
    # read twice a moment apart: the figure of a live process moves a little
    assert rss_kib([os.getpid()]) == pytest.approx(vmrss, rel=0.2)
    assert rss_kib([os.getpid(), os.getpid()]) > rss_kib([os.getpid()])


def _fake_stat(proc, pid, command, state, group, utime, stime):
    (proc / str(pid)).mkdir()
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
    # stime ...: fields 1 to 15 of proc(5)
    (proc / str(pid) / "stat").write_text(
        f"{pid} ({command}) {state} 1 {group} {group} 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20\n")


def test_the_group_and_its_cpu_time_read_from_a_proc_tree(tmp_path):
    tick = os.sysconf("SC_CLK_TCK")
    _fake_stat(tmp_path, 100, "uvicorn", "S", 100, 3 * tick, tick)
    _fake_stat(tmp_path, 101, "a (worker) name", "R", 100, 2 * tick, 0)  # `)` in the name
    _fake_stat(tmp_path, 102, "gone", "Z", 100, 50 * tick, 0)  # a zombie runs no more
    _fake_stat(tmp_path, 200, "wrk", "R", 200, 9 * tick, 0)
    (tmp_path / "self").mkdir()  # not a process directory
    assert sorted(group_pids(100, tmp_path)) == [100, 101]
    assert cpu_seconds(group_pids(100, tmp_path), tmp_path) == pytest.approx(6.0)


def test_the_group_of_a_new_session_is_its_leader_and_its_children():
    leader = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; subprocess.Popen([sys.executable, "
         "'-c', 'import time; time.sleep(60)']).wait()"], start_new_session=True)
    try:
        until(lambda: len(group_pids(leader.pid)) == 2)
        assert leader.pid in group_pids(leader.pid)
        assert os.getpid() not in group_pids(leader.pid)
    finally:
        os.killpg(leader.pid, 9)
        leader.wait()


def test_a_finished_childs_cpu_time_is_counted_once_it_is_waited_for():
    before = children_cpu_seconds()
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(2_000_000))"], check=True)
    assert children_cpu_seconds() > before


def test_cpu_per_request_in_microseconds():
    assert per_request_us(10.0, 12.5, 50_000) == pytest.approx(50.0)
    assert math.isnan(per_request_us(1.0, 1.0, 0))


def test_the_fixed_rate_is_the_fraction_of_the_maximum():
    assert fixed_rate(10_000, 0.7) == pytest.approx(7_000)
    assert fixed_rate(1.0, 0.5) == 1.0  # never below one request a second
    for bad in (0, -0.5, 1.5):
        with pytest.raises(ValueError, match="fraction"):
            fixed_rate(1000, bad)


def test_pace_report_read_for_its_latencies_errors_lateness_and_cpu():
    # the report bench/pace prints (bench/pace/src/main.rs, `run`), latencies in µs
    report = {"rate": 700.0, "seconds": 4.0, "connections": 32, "sent": 2800,
              "answered": 2798, "rps": 699.5, "non_2xx": 8, "failed": 2,
              "last_failure": "2 answers not in 2s after the last was due", "queued": 5,
              "latency_us": {"p50": 1000, "p90": 1800, "p99": 2500, "p999": 4000,
                             "max": 9000},
              "send_lag_us": {"p50": 1, "p90": 2, "p99": 40, "p999": 300, "max": 900},
              "late_us": {"p50": 1, "p90": 1, "p99": 30, "p999": 250, "max": 800}}
    got = pace_figures(report, server_cpu=0.28, load_cpu=0.14, stolen=0.4)
    assert got["p99_over_p50"] == pytest.approx(2.5)
    assert (got["p50_ms"], got["p99_ms"], got["late_p99_ms"]) == (1.0, 2.5, 0.03)
    assert (got["requests"], got["errors"], got["rps"], got["rate"]) == (2798, 10, 699.5, 700.0)
    assert got["cpu_us"] == pytest.approx(0.28 / 2798 * 1e6)
    assert (got["server_cores"], got["load_cores"]) == (pytest.approx(0.07),
                                                        pytest.approx(0.035))
    # 0.4 s stolen over a 4 s run: a tenth of one core, of however many this machine has
    assert got["steal"] == pytest.approx(0.1 / (os.cpu_count() or 1))
    # a run that answered nothing has no ratio rather than a division by zero
    silent = {**report, "answered": 0, "latency_us": {**report["latency_us"], "p50": 0}}
    assert math.isnan(pace_figures(silent, 0.0, 0.0)["p99_over_p50"])


def test_steal_is_read_from_the_cpu_line_of_proc_stat(tmp_path):
    (tmp_path / "stat").write_text(
        "cpu  291037 0 75683 220881 1043 0 25084 780 0 0\n"
        "cpu0 145000 0 37000 110000 500 0 12000 400 0 0\n")
    assert steal_seconds(tmp_path) == 780 / os.sysconf("SC_CLK_TCK")
    (tmp_path / "stat").write_text("cpu  1 2 3 4\n")  # a kernel without the field
    assert steal_seconds(tmp_path) == 0
    assert steal_seconds() >= 0  # this machine's
