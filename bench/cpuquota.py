"""A CPU budget for a server under test: a cgroup with a CFS quota, so that two serving
threads can be measured against one on a machine whose cores the load generator shares.

On a 2-core machine a server with 2 threads and wrk compete for the same cores, and the
req/s of 2 threads over 1 says more about wrk's share than about the server. With a quota of
`cores` per serving thread (0.65, say: 0.65 of a core for one thread, 1.3 for two) the
server's budget grows with its threads while wrk keeps the rest, and a budget above one core
shows whether the threads really run side by side: two threads that take turns (one lock,
one event loop) could use 1.0 of the 1.3 cores at most, 1.54x one thread's req/s, not 2x.

cgroup v2 (`cpu.max`) or v1 (`cpu.cfs_quota_us`), whichever the machine mounts with a
writable cpu controller; `available()` says which, or why neither.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
PERIOD_US = 100_000  # the kernel's default CFS period


def _root() -> tuple[Path, str] | None:
    """The writable cpu hierarchy and its version ('v1' or 'v2'), or None."""
    v2 = CGROUP / "cgroup.controllers"
    if v2.is_file() and "cpu" in v2.read_text().split() and os.access(CGROUP, os.W_OK):
        return CGROUP, "v2"
    v1 = CGROUP / "cpu"
    if (v1 / "cpu.cfs_quota_us").is_file() and os.access(v1, os.W_OK):
        return v1, "v1"
    return None


def available() -> str | None:
    """None when a quota can be set here, else why not (one line)."""
    if _root() is None:
        return ("no writable cgroup cpu controller at /sys/fs/cgroup (cgroup v2) or "
                "/sys/fs/cgroup/cpu (v1): run as root")
    return None


@contextlib.contextmanager
def quota(cores: float, name: str) -> Iterator[Callable[[], None]]:
    """A cgroup limited to `cores` CPUs' worth of time; yields the function a child runs
    before exec (`preexec_fn`) to join it with everything it will start. The cgroup is
    removed on the way out, once its processes are gone."""
    found = _root()
    if found is None:
        raise RuntimeError(available())
    root, version = found
    group = root / f"rearrange-bench-{name}-{uuid.uuid4().hex[:8]}"
    if version == "v2":
        subtree = root / "cgroup.subtree_control"
        if "cpu" not in subtree.read_text().split():
            try:  # refused (EBUSY) where the top group holds processes, in a container
                subtree.write_text("+cpu")
            except OSError as e:
                raise RuntimeError(f"cannot enable the cpu controller in {root}: {e}") from e
    group.mkdir()
    try:
        microseconds = max(1000, round(cores * PERIOD_US))
        if version == "v2":
            (group / "cpu.max").write_text(f"{microseconds} {PERIOD_US}")
        else:
            (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(microseconds))
        procs = group / "cgroup.procs"

        def join() -> None:
            procs.write_text(str(os.getpid()))

        yield join
    finally:
        deadline = time.monotonic() + 10
        while True:  # a stopped server's threads leave the group as they exit
            try:
                group.rmdir()
                break
            except OSError as e:
                if time.monotonic() > deadline:  # said, not raised over what ended the run
                    print(f"bench: cgroup {group} left behind: {e}", file=sys.stderr)
                    break
                time.sleep(0.05)
