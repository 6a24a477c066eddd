"""Benchmark: the near_duplicates rule per result page, as ratios to one orjson parse.

Per page of `--docs` documents × `--words` words (default 100 × 300; about a fifth of them
in template families, from tests/corpus.py), measured interleaved in one run:

  (a) `orjson.loads(body)` of the request carrying the texts: the yardstick;
  (b) datasketch (a separate MinHash library in Python and numpy): a `MinHash` of 128
      permutations per text from the same shingle hashes, and its `jaccard` for every pair
      below a higher document: what MinHash matching costs done well without the engine;
  (c) `Engine.rerank` of the body under a profile of near_duplicates alone with
      `method: exact`, with no shingle-set cache, and with a warm one;
  (d) the same with `method: minhash` and no cache (shingles + signatures + comparison);
  (e) the same with `method: minhash` and a warm cache (every text seen before);
  (f) the same on documents that bring precomputed signatures (no text);
  (g) `Engine.rerank` of the body under a profile of no rules: the decoding and answer
      that (c) to (f) include, so that (c) - (g) is the rule's own cost.

Then the crossover behind `exact_max_docs`: exact and MinHash (no caches) for growing
page sizes, less (g). Each round calls every function once in a rotated order; the
tables give the median, p99 in µs and the median's ratio to (a). Only ratios within one
run compare across machines.

Run from the repository root: `python -m bench.near_duplicates [--docs 100] [--words 300]`.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

import numpy as np
import orjson
from datasketch import MinHash

from app._engine import Engine
from app.neardup import shingles
from tests.corpus import corpus
from tests.minhash_reference import signature as reference_signature
from tests.sides import EngineLoaded, only


def page(n: int, words: int, seed: int) -> list[tuple[str, str]]:
    return corpus(n, seed=seed, words=words, family_share=0.2, family_size=(2, 5))


def body(texts: list[tuple[str, str]], signed: bool = False) -> bytes:
    """The request: each document with its text, or (`signed`) its signature alone."""
    return orjson.dumps({"request_id": "bench", "documents": [
        {"id": f"d{i}", "url": f"https://h{i}.example.com{u}", "score": 100.0 - i,
         **({"minhash": reference_signature(t)} if signed else {"text": t})}
        for i, (u, t) in enumerate(texts)]})


def engine(method: str | None, cache_mb: int = 64, exact_cache_mb: int = 32) -> Engine:
    """An engine whose profile runs near_duplicates alone (None: no rule)."""
    steps = [] if method is None else [{"near_duplicates": {
        "method": method, "cache_mb": cache_mb, "exact_cache_mb": exact_cache_mb}}]
    return EngineLoaded(only("diversify", *steps).encode()).core


def rerank(e: Engine, b: bytes) -> dict:
    answer = e.rerank(b, audit_line=False)
    assert answer is not None and answer[0] == 200, answer
    return orjson.loads(answer[1])


def collapsed(e: Engine, b: bytes) -> int:
    return sum(len(d.get("collapsed", [])) for d in rerank(e, b)["documents"])


def datasketch_pairs(texts: list[tuple[str, str]], threshold: float = 0.5) -> int:
    """datasketch's MinHash of each text's shingle hashes, then every pair's Jaccard."""
    hashes = [np.fromiter(shingles.shingles(t), dtype=np.uint64) for _, t in texts]
    sketches = []
    for h in hashes:
        m = MinHash(num_perm=128, seed=1)
        m.update_batch(h.view(np.uint8).reshape(-1, 8))  # each hash's 8 bytes
        sketches.append(m)
    return sum(1 for i in range(len(sketches)) for j in range(i)
               if sketches[i].jaccard(sketches[j]) >= threshold)


def measure(funcs: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    names = list(funcs)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            started = time.perf_counter_ns()
            funcs[name]()
            times[name].append((time.perf_counter_ns() - started) / 1000)
    return times


def p99(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    texts = page(args.docs, args.words, args.seed)
    text_body, signed_body = body(texts), body(texts, signed=True)
    e_exact, e_cold = engine("exact", exact_cache_mb=0), engine("minhash", cache_mb=0)
    e_warm, e_signed, e_warm_exact = engine("minhash"), engine("minhash"), engine("exact")
    e_none = engine(None)
    rerank(e_warm, text_body)
    rerank(e_warm_exact, text_body)
    folded = {name: collapsed(e, b) for name, e, b in (
        ("exact", e_exact, text_body), ("minhash", e_cold, text_body),
        ("signatures", e_signed, signed_body))}
    funcs: dict[str, Callable[[], object]] = {
        "(a) orjson.loads(body with texts)": lambda: orjson.loads(text_body),
        "(b) datasketch MinHash, all pairs": lambda: datasketch_pairs(texts),
        "(c) engine, exact": lambda: e_exact.rerank(text_body),
        "(c) engine, exact, warm shingle-set cache": lambda: e_warm_exact.rerank(text_body),
        "(d) engine, MinHash, cold (no cache)": lambda: e_cold.rerank(text_body),
        "(e) engine, MinHash, warm cache": lambda: e_warm.rerank(text_body),
        "(f) engine, precomputed signatures": lambda: e_signed.rerank(signed_body),
        "(g) engine, no rule": lambda: e_none.rerank(text_body),
    }
    gc.collect()
    gc.freeze()
    times = measure(funcs, args.rounds)
    base = statistics.median(times["(a) orjson.loads(body with texts)"])
    print(f"page: {args.docs} documents x {args.words} words; text body {len(text_body)} "
          f"bytes; {args.rounds} rounds")
    print(f"collapsed: exact {folded['exact']}, MinHash {folded['minhash']}, "
          f"signatures {folded['signatures']}; datasketch pairs >= 0.5: "
          f"{datasketch_pairs(texts)}")
    print(f"{'':45} {'median µs':>10} {'p99 µs':>10} {'x orjson':>9}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:45} {med:10.0f} {p99(values):10.2f} {med / base:9.3f}")
    none = statistics.median(times["(g) engine, no rule"])
    ratio = (statistics.median(times["(b) datasketch MinHash, all pairs"])
             / (statistics.median(times["(d) engine, MinHash, cold (no cache)"]) - none))
    print(f"\ndatasketch / engine MinHash (cold, less (g)), medians of the same run: "
          f"{ratio:.1f}x")

    print("\ncrossover (cold caches): the rule's median µs (less no rule's) of exact vs "
          "MinHash by documents with text")
    print(f"{'docs':>6} {'exact':>10} {'minhash':>10} {'exact/minhash':>14}")
    for n in (5, 10, 20, 30, 40, 60, 100):
        b = body(page(n, args.words, args.seed + n))
        t = measure({"exact": lambda b=b: e_exact.rerank(b),
                     "minhash": lambda b=b: e_cold.rerank(b),
                     "none": lambda b=b: e_none.rerank(b)}, max(10, args.rounds // 3))
        e, m = (statistics.median(t[k]) - statistics.median(t["none"])
                for k in ("exact", "minhash"))
        print(f"{n:6} {e:10.0f} {m:10.0f} {e / m:14.2f}")


if __name__ == "__main__":
    main()
