"""Benchmark: the near_duplicates rule per result page, as ratios to one orjson parse.

Per page of `--docs` documents × `--words` words (default 100 × 300; about a fifth of them
in template families, from tests/corpus.py), measured interleaved in one run. "The rule"
is the Python one the engine replaced (tests/reference/rules/diversity.py):

  (a) `orjson.loads(body)` of the request carrying the texts: the yardstick;
  (b) `contract.decode` (tests/reference/contract.py) of that body, and of the same page
      carrying `minhash` signatures instead of texts (what precomputed signatures cost to
      travel and decode);
  (c) the rule with `method: exact` (shingle sets, all pairs against kept documents), with
      no shingle-set cache, and with a warm one (every text seen before);
  (d) the rule with `method: minhash` and no cache (shingles + signatures + comparison);
  (e) the rule with `method: minhash` and a warm cache (every text seen before);
  (f) the rule on documents that bring precomputed signatures (no text);
  (g) the engine's Matcher (crates/engine/src/neardup) on the same pages, for (c) to (f):
      its pairs only, on a page converted to Rust values beforehand (as the engine's
      decoder will hand it), beside the Python rule's time, whose folding into records
      and collapsed lists is a small share of it.

Then the crossover behind `exact_max_docs`: (c) and (d) for growing page sizes, with (c)
warm beside them, and the engine's exact and MinHash (no caches) for the same pages.
Each round calls every function once in a rotated order; the tables give the median,
p99 in µs and the median's ratio to (a). Only ratios within one run compare across machines.

Run from the repository root: `python -m bench.near_duplicates [--docs 100] [--words 300]`.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

import orjson

from app import _engine
from app.phases import Phase
from tests.corpus import corpus
from tests.minhash_reference import signature as reference_signature
from tests.reference import contract
from tests.reference.pipeline import Context, Doc
from tests.reference.rules.diversity import NearDuplicates


def rule(**params: object) -> NearDuplicates:
    return NearDuplicates(NearDuplicates.Params.model_validate(params), Phase.DIVERSIFY)


def page(n: int, words: int, seed: int) -> list[tuple[str, str]]:
    return corpus(n, seed=seed, words=words, family_share=0.2, family_size=(2, 5))


def bodies(texts: list[tuple[str, str]]) -> tuple[bytes, bytes]:
    docs = [{"id": f"d{i}", "url": f"https://h{i}.example.com{u}", "score": 100.0 - i}
            for i, (u, _) in enumerate(texts)]
    with_text = {"documents": [{**d, "text": t} for d, (_, t) in zip(docs, texts, strict=True)]}
    signed = {"documents": [{**d, "minhash": reference_signature(t)}
                            for d, (_, t) in zip(docs, texts, strict=True)]}
    return orjson.dumps(with_text), orjson.dumps(signed)


def engine(method: str, cache_mb: int = 64, exact_cache_mb: int = 32) -> _engine.NearDupMatcher:
    return _engine.NearDupMatcher(method=method, cache_bytes=cache_mb << 20,
                                  exact_cache_bytes=exact_cache_mb << 20)


def engine_page(docs: list[Doc]) -> _engine.NearDupPage:
    sig = [d.signature for d in docs]
    return _engine.NearDupPage([
        (d.text, (s.values, s.shingles, s.width, s.seed) if s is not None else None)
        for d, s in zip(docs, sig, strict=True)])


def to_docs(body: bytes) -> list[Doc]:
    return contract.to_docs(contract.decode(body), 10_000, 10_000_000)


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
    text_body, signed_body = bodies(texts)
    text_docs, signed_docs = to_docs(text_body), to_docs(signed_body)
    ctx = Context()
    exact, cold = rule(method="exact", exact_cache_mb=0), rule(method="minhash", cache_mb=0)
    warm, signed = rule(method="minhash"), rule(method="minhash")
    warm_exact = rule(method="exact")
    warm(text_docs, ctx)
    warm_exact(text_docs, ctx)
    text_page, signed_page = engine_page(text_docs), engine_page(signed_docs)
    e_exact, e_cold = engine("exact", exact_cache_mb=0), engine("minhash", cache_mb=0)
    e_warm, e_signed, e_warm_exact = engine("minhash"), engine("minhash"), engine("exact")
    e_warm.pairs_page(text_page)
    e_warm_exact.pairs_page(text_page)
    for name, r, e, docs, page_ in (
            ("exact", exact, e_exact, text_docs, text_page),
            ("minhash", cold, e_cold, text_docs, text_page),
            ("signatures", signed, e_signed, signed_docs, signed_page)):
        records = r(docs, ctx)[1]
        pairs, _ = e.pairs_page(page_)
        assert [rec.doc_id for rec in records] == [docs[i].id for i, _, _ in pairs], name
    folded = {name: len(r(docs, ctx)[1]) for name, r, docs in (
        ("exact", exact, text_docs), ("minhash", cold, text_docs),
        ("signatures", signed, signed_docs))}
    funcs: dict[str, Callable[[], object]] = {
        "(a) orjson.loads(body with texts)": lambda: orjson.loads(text_body),
        "(b) contract.decode(body with texts)": lambda: contract.decode(text_body),
        "(b) contract.decode(body with signatures)": lambda: contract.decode(signed_body),
        "(c) rule, exact": lambda: exact(text_docs, ctx),
        "(c) rule, exact, warm shingle-set cache": lambda: warm_exact(text_docs, ctx),
        "(d) rule, MinHash, cold (no cache)": lambda: cold(text_docs, ctx),
        "(e) rule, MinHash, warm cache": lambda: warm(text_docs, ctx),
        "(f) rule, precomputed signatures": lambda: signed(signed_docs, ctx),
        "(g) engine, exact": lambda: e_exact.pairs_page(text_page),
        "(g) engine, exact, warm shingle-set cache": lambda: e_warm_exact.pairs_page(text_page),
        "(g) engine, MinHash, cold (no cache)": lambda: e_cold.pairs_page(text_page),
        "(g) engine, MinHash, warm cache": lambda: e_warm.pairs_page(text_page),
        "(g) engine, precomputed signatures": lambda: e_signed.pairs_page(signed_page),
    }
    gc.collect()
    gc.freeze()
    times = measure(funcs, args.rounds)
    base = statistics.median(times["(a) orjson.loads(body with texts)"])
    print(f"page: {args.docs} documents x {args.words} words; text body {len(text_body)} "
          f"bytes, signed body {len(signed_body)} bytes; {args.rounds} rounds")
    print(f"collapsed: exact {folded['exact']}, MinHash {folded['minhash']}, "
          f"signatures {folded['signatures']}; warm cache {warm.cache.hits} hits, "
          f"{warm.cache.misses} misses")
    print(f"{'':45} {'median µs':>10} {'p99 µs':>10} {'x orjson':>9}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:45} {med:10.0f} {p99(values):10.2f} {med / base:9.3f}")

    print("\nPython rule / engine, medians of the same run:")
    for python, rust in (("(c) rule, exact", "(g) engine, exact"),
                         ("(c) rule, exact, warm shingle-set cache",
                          "(g) engine, exact, warm shingle-set cache"),
                         ("(d) rule, MinHash, cold (no cache)",
                          "(g) engine, MinHash, cold (no cache)"),
                         ("(e) rule, MinHash, warm cache", "(g) engine, MinHash, warm cache"),
                         ("(f) rule, precomputed signatures",
                          "(g) engine, precomputed signatures")):
        ratio = statistics.median(times[python]) / statistics.median(times[rust])
        print(f"{python[4:]:45} {ratio:9.1f}x")

    print("\ncrossover (cold caches): median µs of exact vs MinHash by documents with text;"
          " exact with a warm shingle-set cache beside them; the engine's the same")
    print(f"{'docs':>6} {'exact':>10} {'minhash':>10} {'exact/minhash':>14} {'exact warm':>11}"
          f" {'engine exact':>13} {'e. minhash':>11} {'e. ratio':>9}")
    for n in (5, 10, 20, 30, 40, 60, 100):
        docs = to_docs(bodies(page(n, args.words, args.seed + n))[0])
        page_ = engine_page(docs)
        warm_exact(docs, ctx)
        t = measure({"exact": lambda d=docs: exact(d, ctx),
                     "minhash": lambda d=docs: cold(d, ctx),
                     "warm": lambda d=docs: warm_exact(d, ctx),
                     "e_exact": lambda p=page_: e_exact.pairs_page(p),
                     "e_minhash": lambda p=page_: e_cold.pairs_page(p)},
                    max(10, args.rounds // 3))
        e, m, w, ee, em = (statistics.median(t[k])
                           for k in ("exact", "minhash", "warm", "e_exact", "e_minhash"))
        print(f"{n:6} {e:10.0f} {m:10.0f} {e / m:14.2f} {w:11.0f} {ee:13.0f} {em:11.0f}"
              f" {ee / em:9.2f}")


if __name__ == "__main__":
    main()
