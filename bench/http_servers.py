"""The servers bench/http.py measures side by side, and starting and stopping them.

| name | what serves the request |
|---|---|
| `echo` | the floor: bench/echo, hyper on tokio, sonic-rs parses the body and writes it back |
| `echo-serde` | the same echo parsing with serde_json::Value |
| `echo-pgo` | the echo built with profile-guided optimization, trained on the run's pages |
| `bare` | bench/bare_app.py on uvicorn: orjson parses the body and writes it back |
| `python` | Rearrange on uvicorn (`rearrange serve`), the FastAPI path |
| `native` | `rearrange serve`'s native data-plane listener, on its REARRANGE_DATA_PORT |

`threads` is the echo's tokio worker threads and the native listener's serving threads;
for `python` and `bare` it is uvicorn's worker processes (`python` with one is
`rearrange serve`'s control port, with several `uvicorn app.main:app --workers N`).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench import cpuquota
from bench.procstat import group_pids

ROOT = Path(__file__).resolve().parents[1]
ECHO = ROOT / "bench" / "echo"
SERVERS = ("echo", "echo-serde", "echo-pgo", "bare", "python", "native")
NATIVE_MISSING = (
    "`rearrange serve` answered on its control port {control} but not on its data port {port} "
    "(REARRANGE_DATA_PORT) within {timeout:.0f} s: this checkout has no native data-plane "
    "listener (issue 47), or it did not start")


@dataclass
class Server:
    """One server to start: its command line, environment and directory, the port the load
    goes to and the path it posts to. `control_port`, when set, is a port whose /healthz
    answers first (the banlist's replay), then `port`'s must within `data_timeout`."""

    name: str
    argv: list[str]
    env: dict[str, str]
    port: int
    path: str = "/v1/rerank"
    cwd: Path = ROOT
    control_port: int | None = None
    data_timeout: float = 60.0


def cores_for(workers: int, cores: set[int] | None = None) -> tuple[set[int], set[int]] | None:
    """The cores to pin the servers to and those left to wrk, or None (nothing pinned) when
    the workers would leave wrk no core of its own."""
    mine = sorted(cores if cores is not None else os.sched_getaffinity(0))
    if workers >= len(mine):
        return None
    return set(mine[:workers]), set(mine[workers:])


def _answers(proc: subprocess.Popen[bytes], port: int, deadline: float) -> bool:
    """Whether /healthz on `port` answers 200 before `deadline` (False once proc exits)."""
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).status_code == 200:
                return True
        except httpx.TransportError:
            time.sleep(0.2)
        if proc.poll() is not None:
            return False
    return False


def start(server: Server, cores: set[int] | None = None, timeout: float = 900.0,
          join: Callable[[], None] | None = None) -> subprocess.Popen[bytes]:
    """Start a server in a process group of its own and wait until /healthz answers (a 1 M-entry
    replay takes a while). One that does not answer in time is stopped, workers and all.
    `cores`: the CPUs the server and every process and thread it starts may run on; `join`:
    run in the child before exec (bench/cpuquota.py's, to put it under a CPU quota)."""
    def before_exec() -> None:
        if cores:
            os.sched_setaffinity(0, cores)
        if join is not None:
            join()

    proc = subprocess.Popen(server.argv, cwd=server.cwd, env=server.env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True,
                            preexec_fn=before_exec if cores or join else None)
    try:
        first = server.control_port if server.control_port is not None else server.port
        if not _answers(proc, first, time.monotonic() + timeout):
            raise SystemExit(f"{server.name}: server on port {first} did not start: "
                             f"{' '.join(server.argv)}")
        if first != server.port and not _answers(
                proc, server.port, time.monotonic() + server.data_timeout):
            raise SystemExit(f"{server.name}: " + NATIVE_MISSING.format(
                control=first, port=server.port, timeout=server.data_timeout))
    except BaseException:  # Ctrl-C while waiting, or no answer: nothing may be left running
        stop(proc)
        raise
    return proc


def stop(proc: subprocess.Popen[bytes], grace: float = 30.0) -> None:
    """Stop a server started by `start` and everything in its process group (a server with
    several workers forks them): SIGTERM, then SIGKILL for whatever is left after `grace`."""
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):  # none left: the usual case
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # a signal is delivered when its process next runs: a worker may outlive its leader
    deadline = time.monotonic() + 10
    while group_pids(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.01)


@contextlib.contextmanager
def serving(servers: list[Server], cores: set[int] | None = None,
            budget: float | None = None) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start each server in turn (`start`, pinned to `cores`; each in a cgroup of its own
    limited to `budget` cores when given) and stop them all (`stop`) on the way out; when
    one fails to start, those started before it are stopped too."""
    with contextlib.ExitStack() as running:
        procs = []
        for server in servers:
            join = (running.enter_context(cpuquota.quota(budget, server.name))
                    if budget is not None else None)
            procs.append(start(server, cores, join=join))
            running.callback(stop, procs[-1])
        yield procs


def cargo_build(crate: Path, what: str, rustflags: str | None = None,
                target_dir: Path | None = None) -> Path:
    """A bench crate (bench/echo, bench/pace) built (release) if it is not already; the path
    of its binary. With `rustflags` (PGO's), built into `target_dir` so that the plain build
    stays as it is. `what` names it in the messages."""
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    manifest = crate / "Cargo.toml"
    if not Path(cargo).exists():
        raise SystemExit(f"{what} needs cargo (https://rustup.rs) to build "
                         f"{crate.relative_to(ROOT)}")
    print(f"building {what}: cargo build --release --manifest-path {manifest.relative_to(ROOT)} "
          + (f"with RUSTFLAGS={rustflags} " if rustflags else "")
          + "(the first build takes a minute or two)", flush=True)
    env = dict(os.environ)
    if rustflags:
        env["RUSTFLAGS"] = " ".join(filter(None, (env.get("RUSTFLAGS"), rustflags)))
    if target_dir is not None:
        env["CARGO_TARGET_DIR"] = str(target_dir)
    out = subprocess.run([cargo, "build", "--release", "--manifest-path", str(manifest),
                          "--message-format=json-render-diagnostics"],
                         stdout=subprocess.PIPE, text=True, check=True, env=env).stdout
    for line in out.splitlines():
        message = json.loads(line)
        if message.get("reason") == "compiler-artifact" and message.get("executable"):
            return Path(message["executable"])
    raise SystemExit(f"cargo built {crate.relative_to(ROOT)} but named no executable")


def build_echo(rustflags: str | None = None, target_dir: Path | None = None) -> Path:
    """bench/echo, the floor, built as `cargo_build` says."""
    return cargo_build(ECHO, "the floor", rustflags, target_dir)


def build_echo_pgo(bodies: list[Path], train: Callable[[int, Path], None]) -> Path:
    """bench/echo built as bench.pgo builds the engine: instrumented, served `bodies` (each
    posted by `train(port, body)`, wrk for a few seconds), compiled again with the counts.
    The floor built the way the image's engine is, so that the two compare like with like;
    the path of its binary (in bench/echo/target/pgo-use)."""
    from bench.pgo import llvm_profdata  # rustup's, checked before the first build
    from bench.replicas import free_port

    profdata = llvm_profdata()
    profiles = ECHO / "target" / "pgo-profiles"
    shutil.rmtree(profiles, ignore_errors=True)
    profiles.mkdir(parents=True)
    instrumented = build_echo(f"-Cprofile-generate={profiles}", ECHO / "target" / "pgo-generate")
    shutil.rmtree(profiles)  # what the build scripts and proc macros wrote while compiling
    profiles.mkdir()
    port = free_port()
    proc = start(Server("echo-pgo training", [str(instrumented), "--port", str(port),
                                              "--threads", "1"], dict(os.environ), port))
    try:
        for body in bodies:
            train(port, body)
    finally:
        stop(proc)  # SIGTERM: the echo exits through exit(), which writes the counts
    if proc.returncode != 0 or not any(profiles.iterdir()):
        raise SystemExit(f"echo-pgo: the instrumented echo wrote no profile (exit status "
                         f"{proc.returncode})")
    # A path of its own each run: cargo rebuilds a dependency (hyper, tokio, sonic-rs: most
    # of the hot code) when RUSTFLAGS change, not when the file they name does.
    for old in (ECHO / "target").glob("pgo-*.profdata"):
        old.unlink()
    merged = ECHO / "target" / f"pgo-{os.getpid()}-{time.time_ns()}.profdata"
    subprocess.run([str(profdata), "merge", "-o", str(merged), str(profiles)], check=True)
    return build_echo(f"-Cprofile-use={merged}", ECHO / "target" / "pgo-use")


def make(name: str, threads: int, port: int, env: dict[str, str], echo: Path | None,
         control_port: int | None = None, cwd: Path = ROOT,
         echo_pgo: Path | None = None) -> Server:
    """The server `name` (one of SERVERS) with `threads` serving threads (or uvicorn
    workers), the load on `port`; `native` also takes `control_port` for its FastAPI port,
    `echo-pgo` the PGO build of the echo (`build_echo_pgo`)."""
    serve = [sys.executable, "-m", "app.cli", "serve", "--workers", str(threads)]
    if name in ("echo", "echo-serde", "echo-pgo"):
        binary = echo_pgo if name == "echo-pgo" else echo
        if binary is None:
            raise ValueError(f"{name} needs its build of bench/echo")
        serde = ["--serde"] if name == "echo-serde" else []
        return Server(name, [str(binary), "--port", str(port), "--threads", str(threads),
                             *serde], env, port, cwd=cwd)
    if name == "bare":
        uvicorn = [sys.executable, "-m", "uvicorn", "--loop", "uvloop", "--http", "httptools",
                   "--log-level", "warning", "--no-access-log"]
        return Server(name, [*uvicorn, "--workers", str(threads), "--port", str(port),
                             "bench.bare_app:app"], env, port, path="/", cwd=cwd)
    if name == "python":
        if threads > 1:  # `serve --workers N` is N data-port threads: uvicorn's processes here
            return Server(name, [sys.executable, "-m", "uvicorn", "--loop", "uvloop", "--http",
                                 "httptools", "--log-level", "warning", "--no-access-log",
                                 "--workers", str(threads), "--port", str(port),
                                 "app.main:app"], env, port, cwd=cwd)
        # its data port anywhere free: only the control port is measured
        return Server(name, [*serve, "--port", str(port)],
                      {**env, "REARRANGE_DATA_PORT": "0"}, port, cwd=cwd)
    if name == "native":
        if control_port is None:
            raise ValueError("the native server needs a control port beside its data port")
        return Server(name, [*serve, "--port", str(control_port)],
                      {**env, "REARRANGE_DATA_PORT": str(port)}, port, cwd=cwd,
                      control_port=control_port)
    raise SystemExit(f"--servers: unknown server {name!r} (known: {', '.join(SERVERS)})")
