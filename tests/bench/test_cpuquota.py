"""bench.cpuquota: a server started under --quota runs in a cgroup of its own with that CFS
quota, and the cgroup is gone once the server is."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bench import cpuquota
from bench.http_servers import Server, serving
from bench.replicas import free_port

pytestmark = [pytest.mark.python_path("tests the benchmark's own code"),
              pytest.mark.skipif(cpuquota.available() is not None,
                                 reason=str(cpuquota.available()))]

# answers /healthz until killed
_SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _group_of(pid: int) -> Path:
    """The cpu cgroup directory `pid` is in (v1's cpu hierarchy, or v2's one)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "" or "cpu" in controllers.split(","):
            root = cpuquota.CGROUP if controllers == "" else cpuquota.CGROUP / "cpu"
            return root / path.lstrip("/")
    raise AssertionError(f"no cpu cgroup for {pid}")


def _quota(group: Path) -> tuple[int, int]:
    """(quota, period) in microseconds."""
    if (group / "cpu.max").exists():
        quota, period = (group / "cpu.max").read_text().split()
        return int(quota), int(period)
    return (int((group / "cpu.cfs_quota_us").read_text()),
            int((group / "cpu.cfs_period_us").read_text()))


def test_a_server_under_a_budget_runs_in_its_own_cgroup_with_that_quota_then_it_goes():
    port = free_port()
    server = Server("quota", [sys.executable, "-c", _SERVER, str(port)], dict(os.environ), port)
    with serving([server], budget=1.3) as (proc,):
        group = _group_of(proc.pid)
        assert group.name.startswith("rearrange-bench-quota-")
        assert _quota(group) == (130_000, 100_000)
        mine = _group_of(os.getpid())
        assert mine != group  # only the server is limited, not the process measuring it
    assert not group.exists()


def test_without_a_budget_the_server_stays_in_the_callers_cgroup():
    port = free_port()
    server = Server("free", [sys.executable, "-c", _SERVER, str(port)], dict(os.environ), port)
    with serving([server]) as (proc,):
        assert _group_of(proc.pid) == _group_of(os.getpid())
