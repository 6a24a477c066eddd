"""Benchmark: the engine's call on a /v1/rerank body, as a ratio to `orjson.loads` of it.

Per page size (`--sizes`, default 20,100,500; pages from bench.pipeline's generator, with
`--text` ~300 words per document), interleaved in one run:

  (a) `orjson.loads(body)`: the yardstick;
  (c) `Engine.rerank(body)` under a profile of no rules: the engine's decode and page
      checks, the URLs canonicalized, the answer and the audit line written.

The issue's target: the whole engine call for a 100-document page <= 1.5x (a). The
decoder alone: `cargo bench --bench wire` (beside serde_json) and the decode_loop example.
Only the ratios within one run are comparable; nothing here asserts a time.

(b) is left out: the Python decoder the engine replaced is retired.

`--baseline PATH` adds (d), the same call on another build of the engine (another
checkout's `app/_engine*.so`, loaded beside this one), so a change to the engine is
measured against the code before it in the same run: (c) and (d) are timed again in
rounds of their own (so each follows the other as often: a call timed right after
orjson's allocations runs slower), and (c) / (d) is the change's
cost.

Run from the repository root: `python -m bench.contract [--sizes 20,100,500] [--text]
[--baseline ../main/app/_engine.cpython-311-x86_64-linux-gnu.so]`.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
from collections.abc import Callable, Sequence
from types import ModuleType

import orjson

from app import _engine
from app.config.load import load_bytes
from app.config.spec import compile_spec
from bench.pages import make_serp
from bench.pipeline import Measured, Stats, run_interleaved

MAX_DOCUMENTS = 1000
MAX_TEXT_CHARS = 100_000


def load_engine(path: str) -> ModuleType:
    """Another build of the engine, as a module of its own beside app._engine."""
    spec = importlib.util.spec_from_file_location("baseline._engine", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"not an extension module: {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def no_rules(module: ModuleType) -> Callable[[bytes], object]:
    """`module`'s Engine under a profile that runs no rule: its rerank of a body."""
    spec, python_rules = compile_spec(load_bytes(b"profiles: {default: {rerank: []}}"))
    engine = module.Engine(spec, python_rules, module.EngineMetrics())

    def call(body: bytes) -> object:
        return engine.rerank(body, max_documents=MAX_DOCUMENTS,
                             max_text_chars=MAX_TEXT_CHARS)
    return call


def bench_size(n: int, args: argparse.Namespace,
               baseline: ModuleType | None = None) -> dict[str, Stats]:
    body = orjson.dumps(make_serp(n, args.seed, "u-000000", args.text))
    mine = no_rules(_engine)
    answer = mine(body)
    assert isinstance(answer, tuple) and answer[0] == 200, answer  # refuses nothing here
    measured = [
        Measured("(a) orjson.loads(body)", lambda: orjson.loads(body)),
        Measured("(c) Engine.rerank(body)", lambda: mine(body)),
    ]
    gc.collect()
    gc.freeze()
    run_interleaved(measured, args.iterations, args.warmup)
    stats = {m.label: Stats.of(m.samples) for m in measured}
    base = stats[measured[0].label].median_us
    print(f"\n{n} documents, body {len(body):,} bytes")
    print(f"  {'':34} {'median µs':>10} {'p99 µs':>9} {'x (a)':>7}")
    for label, s in stats.items():
        print(f"  {label:34} {s.median_us:10.1f} {s.p99_us:9.1f} {s.median_us / base:7.2f}")
    if baseline is not None:
        theirs = no_rules(baseline)
        pair = [Measured("(c) Engine.rerank(body)", lambda: mine(body)),
                Measured("(d) baseline Engine.rerank(body)", lambda: theirs(body))]
        run_interleaved(pair, args.iterations, args.warmup)
        c, d = (Stats.of(m.samples) for m in pair)
        print(f"  alone: (c) {c.median_us:.1f} µs, (d) {d.median_us:.1f} µs, "
              f"(c) / (d) {c.median_us / d.median_us:.3f}")
    return stats


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="20,100,500")
    p.add_argument("--text", action="store_true", help="~300 words of text per document")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--baseline", help="another build's app/_engine*.so, timed as (d)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    baseline = load_engine(args.baseline) if args.baseline else None
    for n in (int(s) for s in args.sizes.split(",")):
        bench_size(n, args, baseline)


if __name__ == "__main__":
    main()
