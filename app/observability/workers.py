"""The series of the process and the platform, and what makes every scrape the service's
when several workers serve it.

With `PROMETHEUS_MULTIPROC_DIR` set (`rearrange serve --workers N` sets it), each worker
writes its prometheus_client series and the engine's into its own files there, and the
scrape, whichever worker answers it, reads them all: counters and histograms summed,
gauges by the mode each declares. A worker that died is noticed at scrape (its process is
gone): its counts stay in the sums, its gauges leave them.
"""
from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    ProcessCollector,
    multiprocess,
    values,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app import __version__

ENGINE_FILE = re.compile(r"engine_(\d+)\.slab$")
# Each worker's own CPU seconds, written to its files at every refresh and never exported
# as such: process_cpu_seconds_total sums them, the dead workers' too, so it never drops.
CPU_FAMILY = "rearrange_worker_cpu_seconds"
# What a service start wipes from the directory: prometheus_client's files and the engine's.
OWN_FILES = ("*.db", "engine_*.slab")


def multiprocess_on() -> bool:
    """Whether prometheus_client was imported with PROMETHEUS_MULTIPROC_DIR set (it decides
    then, once, how every metric stores its values)."""
    return values.ValueClass is not values.MutexValue


def wipe(directory: Path) -> None:
    """Empty the directory of the last run's metric files (at the service's start only)."""
    for pattern in OWN_FILES:
        for path in directory.glob(pattern):
            path.unlink()


def worker_pids(directory: Path) -> list[int]:
    """The workers that ever counted into `directory`, living or not (one engine file each)."""
    return sorted(int(m.group(1)) for name in os.listdir(directory)
                  if (m := ENGINE_FILE.match(name)))


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie not yet reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


class Workers(Collector):
    """Every worker's series at each scrape: prometheus_client's multiprocess files (a dead
    worker's live-mode gauges removed first) and the standard process series summed over
    the live workers and their supervisor (memory, CPU, file descriptors: the service's).

    `drop_zero` names gauges whose 0-valued series are left out: an info series a worker
    no longer serves (rearrange_config_info) is set to 0, not removed, in these files.
    """

    def __init__(self, directory: Path, drop_zero: Iterable[str] = ()) -> None:
        self.directory = directory
        self.files = multiprocess.MultiProcessCollector(None, path=str(directory))
        self.drop_zero = set(drop_zero)

    def live(self) -> list[int]:
        """The live workers, after marking the dead ones dead (their live gauges go)."""
        pids = []
        for pid in worker_pids(self.directory):
            if alive(pid):
                pids.append(pid)
            else:
                multiprocess.mark_process_dead(pid, str(self.directory))
        return pids

    def collect(self) -> Iterator[Metric]:
        live = self.live()
        workers_cpu = 0.0
        for family in self.files.collect():
            if family.name == CPU_FAMILY:
                workers_cpu = sum(s.value for s in family.samples)
                continue
            if family.name in self.drop_zero:
                family.samples = [s for s in family.samples if s.value != 0]
            yield family
        supervisor = os.getppid()
        has_supervisor = supervisor not in live and supervisor > 1
        for family in summed_process(live + ([supervisor] if has_supervisor else [])):
            if family.name == "process_cpu_seconds":
                # Every worker's, living or dead, as it last wrote it, and the supervisor's
                # now: live readings alone would drop when uvicorn replaces a worker.
                own = cpu_seconds(supervisor) if has_supervisor else 0.0
                family.samples = [s._replace(value=workers_cpu + own) for s in family.samples]
            yield family
        yield GaugeMetricFamily("rearrange_workers", "Worker processes alive",
                                value=len(live))


def _constant(pid: int) -> Callable[[], int]:
    return lambda: pid


def summed_process(pids: list[int]) -> Iterator[Metric]:
    """The standard process_* families of `pids` as one: times, memory and descriptors
    summed, the limit of descriptors the lowest, the start the earliest."""
    merged: dict[str, Metric] = {}
    pick = {"process_start_time_seconds": min, "process_max_fds": min}
    for pid in pids:
        for family in ProcessCollector(pid=_constant(pid), registry=None).collect():
            if family.name not in merged:
                merged[family.name] = family
                continue
            into = merged[family.name]
            combine = pick.get(family.name, sum)
            into.samples = [s._replace(value=combine((s.value, other.value)))
                            for s, other in zip(into.samples, family.samples, strict=True)]
    yield from merged.values()


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process `pid` (0 when it is gone)."""
    for family in ProcessCollector(pid=lambda: pid, registry=None).collect():
        if family.name == "process_cpu_seconds":
            return sum(s.value for s in family.samples)
    return 0.0


def own_cpu_seconds() -> float:
    """This process's user and system CPU seconds."""
    times = os.times()
    return times.user + times.system


def standard(registry: CollectorRegistry) -> None:
    """One process: prometheus_client's own process, platform and GC collectors."""
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)


class BuildInfo(Collector):
    """`rearrange_build_info{version, commit} 1` and `rearrange_memory_limit_bytes`."""

    def __init__(self, commit: str, limit: Callable[[], float | None]) -> None:
        self.version = __version__  # the one source: crates/engine/Cargo.toml, via app
        self.commit = commit
        self.limit = limit

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily("rearrange_build_info", "The build served (always 1)",
                                 labels=["version", "commit"])
        info.add_metric([self.version, self.commit], 1)
        yield info
        limit = self.limit()
        family = GaugeMetricFamily(
            "rearrange_memory_limit_bytes",
            "Memory limit of the service's cgroup (absent when unlimited)")
        if limit is not None:
            family.add_metric([], limit)
        yield family


def build_commit() -> str:
    """The commit built: REARRANGE_BUILD_COMMIT (the image sets it), else the checkout the
    app runs from, else `unknown`."""
    commit = os.environ.get("REARRANGE_BUILD_COMMIT", "").strip()
    if commit:
        return commit
    try:
        done = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=5, cwd=Path(__file__).parent, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max",  # cgroup v2
                 "/sys/fs/cgroup/memory/memory.limit_in_bytes")  # v1
UNLIMITED_V1 = 1 << 62  # v1 spells "no limit" as a page-rounded 2^63 - 1


def memory_limit(paths: Iterable[str] = CGROUP_LIMITS) -> float | None:
    """The memory limit of this process's cgroup in bytes, or None when there is none."""
    for path in paths:
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text == "max" or not text.isdigit() or int(text) >= UNLIMITED_V1:
            return None
        return float(int(text))
    return None

