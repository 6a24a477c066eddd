"""Benchmark: the near_duplicates matcher per result page, as ratios to one orjson parse.

Per page of `--docs` documents × `--words` words (default 100 × 300; about a fifth of them
in template families, from tests/corpus.py), measured interleaved in one run:

  (a) `orjson.loads(body)` of the request carrying the texts: the yardstick;
  (b) datasketch (a separate MinHash library in Python and numpy): a `MinHash` of 128
      permutations per text from the same shingle hashes, and its `jaccard` for every pair
      below a higher document: what MinHash matching costs done well without the engine;
  (c) the engine's Matcher (crates/engine/src/neardup) with `method: exact` (shingle sets,
      all pairs against kept documents), with no shingle-set cache, and with a warm one;
  (d) the Matcher with `method: minhash` and no cache (shingles + signatures + comparison);
  (e) the Matcher with `method: minhash` and a warm cache (every text seen before);
  (f) the Matcher on documents that bring precomputed signatures (no text).

The Matcher runs on a page converted to Rust values beforehand (as the engine's decoder
hands it), its pairs only. Then the crossover behind `exact_max_docs`: exact and MinHash
(no caches) for growing page sizes. Each round calls every function once in a rotated
order; the tables give the median, p99 in µs and the median's ratio to (a). Only ratios
within one run compare across machines.

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

from app import _engine
from app.neardup import shingles
from tests.corpus import corpus
from tests.minhash_reference import signature as reference_signature

Page = list[tuple[str | None, tuple[list[int], int, int, int] | None]]


def page(n: int, words: int, seed: int) -> list[tuple[str, str]]:
    return corpus(n, seed=seed, words=words, family_share=0.2, family_size=(2, 5))


def body(texts: list[tuple[str, str]]) -> bytes:
    return orjson.dumps({"documents": [
        {"id": f"d{i}", "url": f"https://h{i}.example.com{u}", "score": 100.0 - i, "text": t}
        for i, (u, t) in enumerate(texts)]})


def engine(method: str, cache_mb: int = 64, exact_cache_mb: int = 32) -> _engine.NearDupMatcher:
    return _engine.NearDupMatcher(method=method, cache_bytes=cache_mb << 20,
                                  exact_cache_bytes=exact_cache_mb << 20)


def text_page(texts: list[tuple[str, str]]) -> _engine.NearDupPage:
    return _engine.NearDupPage([(t, None) for _, t in texts])


def signed_page(texts: list[tuple[str, str]]) -> _engine.NearDupPage:
    sigs = [reference_signature(t) for _, t in texts]
    return _engine.NearDupPage([(None, (s["values"], s["shingles"], s["width"], s["seed"]))
                                for s in sigs])


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
    text_body = body(texts)
    plain, signed = text_page(texts), signed_page(texts)
    e_exact, e_cold = engine("exact", exact_cache_mb=0), engine("minhash", cache_mb=0)
    e_warm, e_signed, e_warm_exact = engine("minhash"), engine("minhash"), engine("exact")
    e_warm.pairs_page(plain)
    e_warm_exact.pairs_page(plain)
    folded = {name: len(m.pairs_page(p)[0]) for name, m, p in (
        ("exact", e_exact, plain), ("minhash", e_cold, plain), ("signatures", e_signed, signed))}
    funcs: dict[str, Callable[[], object]] = {
        "(a) orjson.loads(body with texts)": lambda: orjson.loads(text_body),
        "(b) datasketch MinHash, all pairs": lambda: datasketch_pairs(texts),
        "(c) engine, exact": lambda: e_exact.pairs_page(plain),
        "(c) engine, exact, warm shingle-set cache": lambda: e_warm_exact.pairs_page(plain),
        "(d) engine, MinHash, cold (no cache)": lambda: e_cold.pairs_page(plain),
        "(e) engine, MinHash, warm cache": lambda: e_warm.pairs_page(plain),
        "(f) engine, precomputed signatures": lambda: e_signed.pairs_page(signed),
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
    ratio = (statistics.median(times["(b) datasketch MinHash, all pairs"])
             / statistics.median(times["(d) engine, MinHash, cold (no cache)"]))
    print(f"\ndatasketch / engine MinHash (cold), medians of the same run: {ratio:.1f}x")

    print("\ncrossover (cold caches): the engine's median µs of exact vs MinHash by "
          "documents with text")
    print(f"{'docs':>6} {'exact':>10} {'minhash':>10} {'exact/minhash':>14}")
    for n in (5, 10, 20, 30, 40, 60, 100):
        p = text_page(page(n, args.words, args.seed + n))
        t = measure({"exact": lambda p=p: e_exact.pairs_page(p),
                     "minhash": lambda p=p: e_cold.pairs_page(p)}, max(10, args.rounds // 3))
        e, m = (statistics.median(t[k]) for k in ("exact", "minhash"))
        print(f"{n:6} {e:10.0f} {m:10.0f} {e / m:14.2f}")


if __name__ == "__main__":
    main()
