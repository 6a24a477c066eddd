"""What one Python rule call costs through the executor, side by side in one run: this
checkout's executor (app/engine/executor.py: a call goes to a rule process and back), the
same rule called in this process, and, with `--against ROOT`, another checkout's executor
(loaded from ROOT/app/engine/executor.py; one whose `call` takes the rule instance itself,
as the thread executor of earlier versions did, is given that).

Usage: python -m bench.rule_calls [--docs 20] [--calls 5000] [--against /tmp/old]

The rule is tests/plugins/rr_business.py's demote_host on a page of `--docs` documents, one
call at a time after 200 to warm. Per call: wall microseconds, and CPU microseconds of this
process and of the rule process (read from /proc, so the figure holds on a loaded host
where the wall time does not). Run it pinned (`taskset -c 0`) to see the cost without a
wake-up across cores.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONTEXT = {"query": {"text": "q"}, "profile": "business", "variants": {}, "phase": "rerank"}
PARAMS = {"host": "h0.example", "by": 1}


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def tree_cpu(pid: int) -> float:
    """CPU seconds of the processes under `pid` (not `pid` itself), alive now."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids = [int(k) for k in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
        for kid in kids:
            try:
                fields = Path(f"/proc/{kid}/stat").read_text().rpartition(")")[2].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            total += tree_cpu(kid)
    return total


def measure(call: Any, docs: list[dict], calls: int) -> tuple[float, float, float]:
    """(wall, own CPU, rule processes' CPU) microseconds per call."""
    for _ in range(200):
        call([dict(d) for d in docs], CONTEXT)
    wall, own, theirs = time.perf_counter(), own_cpu(), tree_cpu(os.getpid())
    for _ in range(calls):
        call([dict(d) for d in docs], CONTEXT)
    per = 1e6 / calls
    return ((time.perf_counter() - wall) * per, (own_cpu() - own) * per,
            (tree_cpu(os.getpid()) - theirs) * per)


def executor_of(path: Path) -> Any:
    """The executor module at `path`, under a name of its own."""
    spec = importlib.util.spec_from_file_location(f"executor_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--against", type=Path, help="another checkout")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "plugins"))
    import rr_business

    from app.config.plugins import RuleHandle
    from app.engine import executor

    cls = rr_business.DemoteHost
    instance = cls(cls.Params.model_validate(PARAMS))
    handle = RuleHandle(instance, "rr_business", "DemoteHost", PARAMS)
    docs = [{"id": f"d{i}", "url": f"https://h{i}.example/", "score": float(args.docs - i)}
            for i in range(args.docs)]
    rows = {"in this process": measure(instance, docs, args.calls)}
    sides = [("this executor", executor)]
    if args.against is not None:
        sides.append(("against's executor",
                      executor_of(args.against / "app" / "engine" / "executor.py")))
    for name, module in sides:
        ex = module.RuleExecutor(module.Limits(workers=1))
        if hasattr(ex, "prepare"):
            ex.prepare(["rr_business"])
        fn = handle if hasattr(module, "RuleHandle") or hasattr(ex, "prepare") else instance
        rows[name] = measure(lambda d, c, ex=ex, fn=fn: ex.call("demote_host", fn, (d, c), 5.0),
                             docs, args.calls)
        ex.close()
    print(f"{args.docs} documents, {args.calls} calls; microseconds per call")
    print(f"{'':<20} {'wall':>8} {'own CPU':>8} {'rule CPU':>9} {'all CPU':>8}")
    for name, (wall, own, theirs) in rows.items():
        print(f"{name:<20} {wall:>8.1f} {own:>8.1f} {theirs:>9.1f} {own + theirs:>8.1f}")


if __name__ == "__main__":
    main()
