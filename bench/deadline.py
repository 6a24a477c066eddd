"""How long a page too big for the deadline takes through `Rearranger.rerank` (docs/operations.md).

A page of `--docs` documents (default 1,000, the `documents` limit) with ~`--chars` (7,500)
characters of random words each, fresh every run so no text is cached, goes through the
sample config's `default` profile with the configured deadline (`REARRANGE_DEADLINE_MS`,
100 ms by default). Per run: wall time of `rerank`, the response's `skipped` and how many
near_duplicates records it holds; after the first run the same page once more, and how
many signatures the rule's cache then holds (what a cut run leaves for the next one).

Run from the repository root: `python -m bench.deadline [--runs 5]`. Only the public
service API is used, so copied into an older checkout's bench/ it times that one too.
"""
from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import orjson

from app.api.services import build_services
from app.config.settings import Settings


def page(rng: random.Random, vocabulary: list[str], docs: int, chars: int) -> bytes:
    """A request body of `docs` documents, each with its own text of about `chars` chars."""
    documents = []
    for i in range(docs):
        words, size = [], 0
        while size < chars:
            word = rng.choice(vocabulary)
            words.append(word)
            size += len(word) + 1
        documents.append({"id": f"d{i}", "url": f"https://h{i}.example.com/p/{i}",
                          "score": float(docs - i), "text": " ".join(words)})
    return json.dumps({"query": {"text": "q", "region": "RU"},
                       "documents": documents}).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--chars", type=int, default=7500)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9)))
                  for _ in range(5000)]
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(config=Path("config/rules.yaml"), redis_url=None,
                            banlist_path=Path(tmp) / "banlist.jsonl",
                            banlist_snapshot_path=None, banlist_seed=None, audit_log=None)
        service = build_services(settings).rearranger
        print(f"{args.docs} documents x ~{args.chars} chars, deadline_ms "
              f"{settings.deadline_ms:g}")
        for run in range(args.runs):
            body = page(rng, vocabulary, args.docs, args.chars)  # new texts: nothing cached
            took, out = timed(service, body)
            print(f"run {run}: {len(body) / 1e6:.2f} MB, {took:.0f} ms, {summary(out)}")
            if run == 0:
                again, out = timed(service, body)
                cached = sum(row[5] for row in service.config.engine.core.cache_stats()
                             if row[1] == "signature")
                print(f"  the same page again: {again:.0f} ms, {summary(out)}; "
                      f"signatures cached: {cached}")
        service.store.close()
        service.quarantine.close()


def timed(service, body: bytes) -> tuple[float, dict]:
    started = time.perf_counter()
    _, out = service.rerank(body)
    return (time.perf_counter() - started) * 1000, orjson.loads(out)


def summary(out: dict) -> str:
    folds = sum(1 for r in out["audit"] if r["rule"] == "near_duplicates")
    skipped = [s["reason"] for s in out.get("skipped", [])]
    return f"skipped {skipped or None}, near_duplicates records {folds}"


if __name__ == "__main__":
    main()
