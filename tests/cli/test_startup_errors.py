"""`rearrange serve` with a bad environment: one line naming what to fix, exit 2, no
traceback (docs/cli.md, exit codes)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from bench.replicas import free_port
from tests.conftest import ROOT


@pytest.mark.parametrize(("env", "line"), [
    ({"REARRANGE_CONFIG": "/nonexistent/rules.yaml"},
     "rearrange: not starting: /nonexistent/rules.yaml: cannot read: No such file or directory"),
    ({"REARRANGE_BANLIST_SEED": "/nonexistent/seed.jsonl"},
     "rearrange: not starting: /nonexistent/seed.jsonl: cannot read: No such file or directory"),
    ({"REARRANGE_ADMIN_TOKENS": "alice"},
     "rearrange: not starting: REARRANGE_ADMIN_TOKENS: the entry of actor 'alice' is not of the "
     "form actor:token, actor:token:read, actor:token:write or actor:token:approve"),
    ({"REARRANGE_DEADLINE_MS": "abc"},
     "rearrange: not starting: REARRANGE_DEADLINE_MS: a number (got \"abc\")"),
    ({"REDIS_URL": "redis+sentinel://127.0.0.1:26379"},
     "rearrange: not starting: REDIS_URL: names no service: "
     "redis+sentinel://HOST:PORT[,…]/SERVICE[/DB] (got \"redis+sentinel://127.0.0.1:26379\")"),
    ({"REARRANGE_ADMIN_JWKS": "https://idp.example/jwks", "REARRANGE_ADMIN_JWT_ISSUER": "i"},
     "rearrange: not starting: REARRANGE_ADMIN_JWT_AUDIENCE: is required with "
     "REARRANGE_ADMIN_JWKS: the `aud` every admin JWT must carry"),
    ({"REARRANGE_ADMIN_JWKS": "/nonexistent/jwks.json", "REARRANGE_ADMIN_JWT_ISSUER": "i",
      "REARRANGE_ADMIN_JWT_AUDIENCE": "a"},
     "rearrange: not starting: REARRANGE_ADMIN_JWKS: /nonexistent/jwks.json: cannot read: No "
     "such file or directory"),
    ({"REARRANGE_REDIS_WAIT_REPLICAS": "some"},
     "rearrange: not starting: REARRANGE_REDIS_WAIT_REPLICAS: is `auto` or a "
     "number of replicas (0: writes do not wait) (got \"some\")"),
])
def test_a_bad_environment_is_one_line_and_exit_2(tmp_path, env, line):
    base = {**os.environ, "REARRANGE_BANLIST_PATH": str(tmp_path / "banlist.jsonl"),
            "REARRANGE_CONFIG": str(ROOT / "config" / "rules.yaml")}
    base.pop("REDIS_URL", None)
    base.pop("REARRANGE_REDIS_WAIT_REPLICAS", None)
    for name in ("JWKS", "JWT_ISSUER", "JWT_AUDIENCE"):
        base.pop(f"REARRANGE_ADMIN_{name}", None)
    run = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--port", str(free_port())],
                         env={**base, **env}, capture_output=True, text=True, timeout=60,
                         cwd=ROOT)
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines()[-1] == line
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("which", ["--port", "--data-port"])
def test_a_busy_port_is_one_line_and_exit_2(tmp_path, which):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        other = "--data-port" if which == "--port" else "--port"
        env = {**os.environ, "REARRANGE_BANLIST_PATH": str(tmp_path / "banlist.jsonl"),
               "REARRANGE_CONFIG": str(ROOT / "config" / "rules.yaml")}
        env.pop("REDIS_URL", None)
        run = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1",
                              which, str(port), other, str(free_port())],
                             env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert run.returncode == 2, run.stderr
    what = "control port" if which == "--port" else "data port"
    assert run.stderr.splitlines()[-1] == (
        f"rearrange: not starting: {what} 127.0.0.1:{port}: Address already in use"
        + ("" if which == "--port" else " (os error 98)"))
    assert "Traceback" not in run.stderr and "Application startup" not in run.stderr
