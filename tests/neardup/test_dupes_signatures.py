"""`rearrange dupes --signatures`: the published MinHash values in a layout datasketch takes
(in memory and Redis-backed, on the suite's real redis-server), and LSH parameters as
datasketch chooses them."""
from __future__ import annotations

import json

import numpy as np
import pytest
from datasketch import MinHash, MinHashLSH

from app.cli.main import main
from app.neardup import minhash, shingles
from tests.corpus import corpus
from tests.neardup.test_dupes import write_jsonl

PAGES = corpus(120, seed=9, words=120)


def exported(tmp_path, method: str) -> list[dict]:
    pages = write_jsonl(tmp_path / "p.jsonl", [*PAGES, ("/empty", " — ")])
    out = tmp_path / "sig.jsonl"
    assert main(["dupes", str(pages), "--no-progress", "--method", method,
                 "--signatures", str(out)]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("method", ["exact", "minhash"])
def test_each_page_with_words_gets_the_published_signature(tmp_path, capsys, method):
    rows = exported(tmp_path, method)
    assert f"{len(PAGES)} signatures written to" in capsys.readouterr().err
    assert [r["url"] for r in rows] == [u for u, _ in PAGES]  # "/empty" has no words
    for row, (_, text) in zip(rows, PAGES, strict=True):
        want = minhash.signature(shingles.shingles(text), 128)
        assert row["minhash"] == {"values": want.values.tolist(), "shingles": want.shingles,
                                  "width": 10, "seed": 1}


def datasketch_minhash(row: dict) -> MinHash:
    values = np.array(row["minhash"]["values"], dtype=np.uint64)
    # affine64: datasketch's own family is a*h + b mod 2**64 with a odd, as ours is
    return MinHash(num_perm=values.size, seed=row["minhash"]["seed"], hashvalues=values,
                   scheme="affine64")


def test_datasketch_lsh_finds_the_template_families(tmp_path, capsys, redis_server):
    rows = exported(tmp_path, "minhash")
    capsys.readouterr()
    sets = {u: shingles.shingles(t) for u, t in PAGES}
    close = {(u, v) for u in sets for v in sets
             if u != v and shingles.jaccard(sets[u], sets[v]) >= 0.7}
    assert len(close) > 20
    storages = [None, {"type": "redis", "basename": b"dupes",
                       "redis": {"host": "127.0.0.1", "port": redis_server.port}}]
    for storage in storages:
        lsh = MinHashLSH(threshold=0.5, num_perm=128, storage_config=storage)
        sigs = {r["url"]: datasketch_minhash(r) for r in rows}
        for url, m in sigs.items():
            lsh.insert(url, m)
        found = {(u, v) for u, m in sigs.items() for v in lsh.query(m) if v != u}
        assert close <= found  # P(candidate) at J = 0.7 is 0.99 with 25 bands x 5 rows
        # datasketch's estimate is the share of agreeing values, as app/neardup/minhash.py's
        a, b = rows[0], rows[1]
        agree = np.mean(np.array(a["minhash"]["values"]) == np.array(b["minhash"]["values"]))
        assert sigs[a["url"]].jaccard(sigs[b["url"]]) == pytest.approx(agree)
    assert redis_server.client().dbsize() > 0  # the Redis-backed index was really there


@pytest.mark.parametrize("threshold", [0.1, 0.2, 1 / 3, 0.5, 0.7, 0.9])
@pytest.mark.parametrize("weights", [(0.5, 0.5), (0.2, 0.8), (0.9, 0.1)])
def test_lsh_params_are_datasketchs(threshold, weights):
    lsh = MinHashLSH(threshold=threshold, num_perm=128, weights=weights)
    assert minhash.lsh_params(threshold, 128, *weights) == (lsh.b, lsh.r)
