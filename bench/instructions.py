"""Benchmark: instructions per engine call against one `orjson.loads`, counted by callgrind.

Wall-clock ratios on a shared 2-core machine move by 10 % between runs; an instruction
count does not (valgrind counts the same total for the same binary and input whatever
else the machine does). So this is the figure to compare a change to the engine by, next
to bench.pipeline's times. Instructions are not time: orjson retires more of them per
cycle than the engine does, so the time ratio is higher than this one.

The child process (`--child`) builds the service as bench.pipeline does (a small banlist:
valgrind runs it ~50x slower), warms up, then calls `Rearranger.rerank(body)` and
`orjson.loads(body)` alternately. callgrind counts only inside the engine's entry point
(`Engine.__pymethod_rerank__`, the PyO3 call with its argument parsing and result
building) and inside orjson's `loads`, each over the same number of calls; the Python
around the call (Rearranger.rerank's few lines) is not counted.

`--no-unit` sends the page without its `unit`: a request in no experiment (by default the
page's user is in the treatment of every experiment of the sample config).

`--audit-line` gives the service an audit log (to /dev/null), so the engine also writes the
audit-log line of each call (without one it skips that work); the log's writer thread is
not counted.

Run from the repository root: `python -m bench.instructions [--sizes 20,100,500]
[--profiles default,commercial] [--calls 50] [--audit-line] [--no-unit]`. Needs `valgrind` (Debian
package).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ENGINE_ENTRY = "*Engine::__pymethod_rerank__*"
ORJSON_ENTRY = "loads"


def child(profile: str, size: int, calls: int, warmup: int, audit_line: bool,
          no_unit: bool = False) -> None:
    """The measured process: warm-up calls, then `calls` of each, alternately."""
    import orjson

    from app.observability.audit import AuditLog
    from bench.pages import make_serp
    from bench.pipeline import build, pick_user

    service, _ = build(1000, 2024, 1000)
    if audit_line:
        service.audit_log = AuditLog(os.devnull, lambda n: None)
    user, _ = pick_user(service, "treatment")
    page = make_serp(size, 2024, user, False)
    page["profile"] = profile
    if no_unit:
        del page["unit"]
    body = orjson.dumps(page)
    status, _ = service.rerank(body)
    if status != 200:
        raise SystemExit(f"the page was refused ({status})")
    for _ in range(warmup):
        service.rerank(body)
        orjson.loads(body)
    for _ in range(calls):
        service.rerank(body)
        orjson.loads(body)


def count(profile: str, size: int, calls: int, warmup: int,
          audit_line: bool = False, no_unit: bool = False) -> tuple[float, float]:
    """(engine, orjson) instructions per call."""
    with tempfile.TemporaryDirectory(prefix="rearrange-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
             f"--toggle-collect={ENGINE_ENTRY}", f"--toggle-collect={ORJSON_ENTRY}",
             sys.executable, "-m", "bench.instructions", "--child", profile, str(size),
             str(calls), str(warmup), *(["--audit-line"] if audit_line else []),
             *(["--no-unit"] if no_unit else [])],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONHASHSEED": "0"})  # str hashes, hence dict work, repeat
        report = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(out)],
                                check=True, capture_output=True, text=True).stdout
    engine = _inclusive(report, "Engine::__pymethod_rerank__")
    loads = _inclusive(report, ":loads ")
    # The service's first call and the warm-up calls are counted too.
    return engine / (calls + warmup + 1), loads / (calls + warmup)


def _inclusive(report: str, symbol: str) -> int:
    for line in report.splitlines():
        if symbol in line:
            match = re.match(r"\s*([\d,]+)", line)
            if match:
                return int(match.group(1).replace(",", ""))
    raise SystemExit(f"callgrind reported no {symbol.strip()!r}: was it called?")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--child"]:
        profile, size, calls, warmup = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
        child(profile, size, calls, warmup, "--audit-line" in argv[5:], "--no-unit" in argv[5:])
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.instructions",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20,100,500")
    parser.add_argument("--profiles", default="default,commercial")
    parser.add_argument("--calls", type=int, default=50, help="counted calls of each")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--audit-line", action="store_true",
                        help="with an audit log: the engine writes each call's audit line too")
    parser.add_argument("--no-unit", action="store_true",
                        help="the page without its unit: a request in no experiment")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    print("instructions per call, callgrind (repeatable; not time)"
          + (", audit line written" if args.audit_line else "")
          + (", no unit (in no experiment)" if args.no_unit else ""))
    print(f"{'profile':>10} {'docs':>5} | {'engine':>10} {'orjson':>10} | {'engine / orjson':>15}")
    for profile in args.profiles.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            engine, loads = count(profile, size, args.calls, args.warmup, args.audit_line,
                                  args.no_unit)
            print(f"{profile:>10} {size:>5} | {engine:>10,.0f} {loads:>10,.0f} | "
                  f"{engine / loads:>14.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
