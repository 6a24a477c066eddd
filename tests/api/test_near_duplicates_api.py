"""near_duplicates through the API: signatures in the request, their refusals, cache metrics."""
from __future__ import annotations

import pytest

from tests.corpus import corpus
from tests.minhash_reference import signature
from tests.neardup.test_shingles import KAZAN, OMSK, PERM, RETURNS


def signed_page():
    """Omsk first, then Kazan and Perm (0.83 inside Omsk), then the returns article."""
    texts = [OMSK, KAZAN, PERM, RETURNS]
    docs = [{"id": f"d{i}", "url": f"https://h{i}.example.com/", "score": 10.0 - i,
             "minhash": signature(t)} for i, t in enumerate(texts)]
    return {"query": {"text": "доставка", "region": "RU"}, "documents": docs}


def test_precomputed_signatures_collapse_the_template_pages(client):
    r = client.post("/v1/rerank", json=signed_page())
    assert r.status_code == 200, r.text
    out = r.json()["documents"]
    assert [d["id"] for d in out] == ["d0", "d3"]
    assert [c["id"] for c in out[0]["collapsed"]] == ["d1", "d2"]
    reasons = [a["reason"] for a in r.json()["audit"] if a["rule"] == "near_duplicates"]
    assert len(reasons) == 2 and all("MinHash estimate, k=128" in x for x in reasons)


def _mutate(body, n, **changes):
    body["documents"][n]["minhash"].update(changes)
    return body


BAD = [
    ("wrong k", lambda b: _mutate(b, 1, values=b["documents"][1]["minhash"]["values"][:64]),
     "documents[1].minhash.values"),
    ("wrong width", lambda b: _mutate(b, 2, width=5), "documents[2].minhash.width"),
    ("wrong seed", lambda b: _mutate(b, 0, seed=7), "documents[0].minhash.seed"),
    ("value over 64 bits", lambda b: b["documents"][0]["minhash"]["values"].__setitem__(
        3, 2**64) or b, "documents[0].minhash.values[3]"),
    ("negative value", lambda b: b["documents"][0]["minhash"]["values"].__setitem__(
        5, -1) or b, "documents[0].minhash.values[5]"),
    ("value as string", lambda b: b["documents"][0]["minhash"]["values"].__setitem__(
        0, "12") or b, "documents[0].minhash.values[0]"),
    ("no values", lambda b: _mutate(b, 1, values=[]), "documents[1].minhash.values"),
    ("shingles missing", lambda b: b["documents"][1]["minhash"].pop("shingles") and b,
     "documents[1].minhash.shingles"),
    ("negative shingles", lambda b: _mutate(b, 1, shingles=-3), "documents[1].minhash.shingles"),
    ("unknown key", lambda b: _mutate(b, 2, k=128), "documents[2].minhash.k"),
    ("not an object", lambda b: b["documents"][3].__setitem__("minhash", [1, 2]) or b,
     "documents[3].minhash"),
]


@pytest.mark.parametrize(("name", "mutate", "field"), BAD, ids=[b[0] for b in BAD])
def test_bad_signature_is_a_4xx_naming_the_field(client, name, mutate, field):
    r = client.post("/v1/rerank", json=mutate(signed_page()))
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and r.json()["problem"]


def _metric(text: str, name: str, profile: str = "default") -> float:
    line = next(x for x in text.splitlines() if x.startswith(f'{name}{{profile="{profile}"}}'))
    return float(line.split()[-1])


def test_signature_cache_hits_show_in_metrics(client):
    texts = [t for _, t in corpus(40, seed=21)]  # 40 texts: over exact_max_docs, MinHash
    body = {"documents": [{"id": f"d{i}", "url": f"https://h{i}.example.com/", "score": 50 - i,
                           "text": t} for i, t in enumerate(texts)]}
    distinct = len(set(texts))
    for _ in range(3):
        assert client.post("/v1/rerank", json=body).status_code == 200
    metrics = client.get("/metrics").text
    assert _metric(metrics, "rearrange_signature_cache_misses_total") == 40
    assert _metric(metrics, "rearrange_signature_cache_hits_total") == 80
    assert _metric(metrics, "rearrange_signature_cache_entries") == distinct
    assert _metric(metrics, "rearrange_signature_cache_bytes") > distinct * 128 * 8
    assert _metric(metrics, "rearrange_signature_cache_hits_total", "commercial") == 0


def test_shingle_cache_hits_show_in_metrics(client):
    texts = [t for _, t in corpus(12, seed=5)]  # 12 texts: the exact method
    body = {"documents": [{"id": f"d{i}", "url": f"https://h{i}.example.com/", "score": 50 - i,
                           "text": t} for i, t in enumerate(texts)]}
    for _ in range(2):
        assert client.post("/v1/rerank", json=body).status_code == 200
    metrics = client.get("/metrics").text
    distinct = len(set(texts))
    assert _metric(metrics, "rearrange_shingle_cache_misses_total") == distinct
    assert _metric(metrics, "rearrange_shingle_cache_hits_total") == 24 - distinct
    assert _metric(metrics, "rearrange_shingle_cache_entries") == len(set(texts))
    assert _metric(metrics, "rearrange_shingle_cache_bytes") > len(set(texts)) * 200
    assert _metric(metrics, "rearrange_shingle_cache_hits_total", "commercial") == 0
