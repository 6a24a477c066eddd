"""What a process group costs, read from /proc: CPU time and resident memory.

bench/http.py starts each server in a process group of its own (a uvicorn server with
workers is several processes), reads the group's CPU time before and after a load run and
divides the difference by the requests served: CPU time per request, the figure that holds
on a shared machine where req/s moves with the neighbours' load.
"""
from __future__ import annotations

import os
import resource
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")  # /proc/<pid>/stat counts CPU time in clock ticks
PROC = Path("/proc")


def _stat_fields(pid: int, proc: Path = PROC) -> list[str]:
    """The fields of /proc/<pid>/stat after the command's `(…)`: state is [0], the process
    group [2], utime [11] and stime [12] (fields 3, 5, 14 and 15 of proc(5))."""
    return (proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()


def group_pids(pgid: int, proc: Path = PROC) -> list[int]:
    """The running processes of process group `pgid` (a zombie has stopped running)."""
    pids = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat_fields(int(entry.name), proc)
        except (OSError, IndexError):  # gone meanwhile
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def cpu_seconds(pids: list[int], proc: Path = PROC) -> float:
    """User plus system CPU time the processes have used so far, every thread of each; a
    process gone meanwhile counts nothing."""
    ticks = 0
    for pid in pids:
        try:
            fields = _stat_fields(pid, proc)
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / TICK


def group_cpu_seconds(pgid: int, proc: Path = PROC) -> float:
    """CPU time used so far by the running processes of group `pgid`."""
    return cpu_seconds(group_pids(pgid, proc), proc)


def rss_kib(pids: list[int], proc: Path = PROC) -> int:
    """Resident memory of the processes now (VmRSS, KiB), summed."""
    total = 0
    for pid in pids:
        try:
            lines = (proc / str(pid) / "status").read_text().splitlines()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in lines if line.startswith("VmRSS:")), 0)
    return total


def children_cpu_seconds() -> float:
    """CPU time of this process's finished and waited-for children (the load generator,
    read after it exits, when /proc no longer has it)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def steal_seconds(proc: Path = PROC) -> float:
    """CPU time the hypervisor has given other guests while this machine's CPUs wanted to
    run so far (/proc/stat's `steal`, every CPU summed). A guest whose vCPU is taken away
    stalls for milliseconds at a time: a latency run over which this grew has tails that
    are the host's, not the server's."""
    for line in (proc / "stat").read_text().splitlines():
        if line.startswith("cpu "):
            fields = line.split()
            return int(fields[8]) / TICK if len(fields) > 8 else 0.0
    return 0.0


def per_request_us(cpu_before: float, cpu_after: float, requests: float) -> float:
    """CPU time per request in µs (NaN when nothing was served)."""
    return (cpu_after - cpu_before) / requests * 1e6 if requests else float("nan")
