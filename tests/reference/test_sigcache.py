"""The reference caches of near_duplicates: signatures in a slab of slots, exact shingle
sets packed; LRU by bytes, hit and miss counts."""
from __future__ import annotations

import gc
import threading

import mmh3
import numpy as np
import pytest

from app.config.load import load_bytes
from app.neardup import shingles
from tests.neardup.test_shingles import KAZAN, PERM
from tests.reference.service import Service
from tests.reference.sigcache import (
    ENTRY_OVERHEAD,
    SET_OVERHEAD,
    ShingleSetCache,
    SignatureCache,
    content_key,
)

K = 16
ENTRY = K * 8 + 8 + ENTRY_OVERHEAD


def row(value: int) -> np.ndarray:
    return np.full(K, value, dtype=np.uint64)


def test_fetch_returns_copies_and_counts_hits_and_misses():
    cache = SignatureCache(10 * ENTRY, K)
    cache.put(11, row(1), 5)
    cache.put(22, row(2), 7)
    values, sizes, missing = cache.fetch([22, 33, 11])
    assert missing == [1]
    assert values[0].tolist() == [2] * K and values[2].tolist() == [1] * K
    assert sizes[0] == 7 and sizes[2] == 5
    assert (cache.hits, cache.misses) == (2, 1)
    values[0] = 99  # the caller's copy: the cache is unchanged
    assert cache.fetch([22])[0][0].tolist() == [2] * K


def test_least_recently_used_slot_is_reused_within_the_byte_cap():
    cache = SignatureCache(3 * ENTRY + ENTRY // 2, K)
    assert cache.capacity == 3
    for key in (1, 2, 3):
        cache.put(key, row(key), key)
    cache.fetch([1])  # 1 is now the most recent
    cache.put(4, row(4), 4)  # evicts 2, the least recently used
    values, sizes, missing = cache.fetch([1, 2, 3, 4])
    assert missing == [1]
    assert [values[n][0] for n in (0, 2, 3)] == [1, 3, 4] and sizes.tolist()[3] == 4
    assert cache.evictions == 1 and len(cache) == 3 and cache.bytes == 3 * ENTRY
    assert cache.bytes <= cache.max_bytes


def test_replacing_a_key_keeps_one_slot_and_a_zero_cache_keeps_nothing():
    cache = SignatureCache(2 * ENTRY, K)
    cache.put(1, row(1), 1)
    cache.put(1, row(5), 5)
    values, sizes, _ = cache.fetch([1])
    assert len(cache) == 1 and values[0][0] == 5 and sizes[0] == 5
    empty = SignatureCache(ENTRY - 1, K)
    empty.put(1, row(1), 1)
    assert len(empty) == 0 and empty.fetch([1])[2] == [0]
    with pytest.raises(ValueError):
        SignatureCache(-1, K)


def test_a_full_cache_adds_nothing_for_the_garbage_collector():
    cache = SignatureCache(2000 * ENTRY, K)
    gc.collect()
    before = len(gc.get_objects())
    for key in range(2000):
        cache.put(content_key(str(key)), row(key), 3)
    gc.collect()
    assert len(gc.get_objects()) - before < 50


def test_content_key_is_stable_and_distinguishes_texts():
    assert content_key("доставка") == content_key("доставка")
    assert content_key("доставка") != content_key("доставка ")
    assert 0 <= content_key("x") < 2**128


# --- the exact method's shingle-set cache ---


def test_shingle_sets_come_back_equal_from_the_cache():
    cache = ShingleSetCache(1 << 20, 10)
    texts = [KAZAN, PERM, "Привет, мир: Ёлка и straße", "three short words", ""]
    first = [cache.shingles(t) for t in texts]
    assert first == [shingles.shingles(t, 10) for t in texts]
    assert (cache.hits, cache.misses, len(cache)) == (0, 5, 5)
    assert [cache.shingles(t) for t in texts] == first
    assert (cache.hits, cache.misses) == (5, 5)
    assert cache.bytes == sum(8 * len(s) + SET_OVERHEAD for s in first)
    wide = ShingleSetCache(1 << 20, 3)  # the width is the cache's: a rule has one
    assert wide.shingles(KAZAN) == shingles.shingles(KAZAN, 3) != first[0]


def test_shingle_cache_evicts_the_least_recently_used_to_stay_under_its_bytes():
    texts = [" ".join(f"w{n}x{i}" for i in range(20)) for n in range(4)]  # 11 shingles each
    entry = 11 * 8 + SET_OVERHEAD
    cache = ShingleSetCache(3 * entry, 10)
    for t in texts[:3]:
        cache.shingles(t)
    cache.shingles(texts[0])  # now texts[1] is the least recently used
    cache.shingles(texts[3])
    assert (len(cache), cache.evictions, cache.bytes) == (3, 1, 3 * entry)
    misses = cache.misses
    cache.shingles(texts[0])
    assert cache.misses == misses  # kept
    cache.shingles(texts[1])
    assert cache.misses == misses + 1  # evicted, shingled again
    tiny = ShingleSetCache(entry - 1, 10)  # an entry over the whole budget is not kept
    assert tiny.shingles(texts[0]) == shingles.shingles(texts[0], 10) and len(tiny) == 0
    with pytest.raises(ValueError):
        ShingleSetCache(-1, 10)


def test_a_full_shingle_cache_adds_nothing_for_the_collector():
    cache = ShingleSetCache(1 << 20, 10)
    gc.collect()
    before = len(gc.get_objects())
    for n in range(200):
        cache.shingles(f"{KAZAN} {n}")
    gc.collect()
    assert len(cache) == 200
    assert len(gc.get_objects()) - before < 20  # the packed sets are bytes, never tracked


def test_content_key_takes_any_str_and_keys_valid_text_as_its_utf8_bytes():
    text = "Ёлка straße 漢字 🙂"
    assert content_key(text) == mmh3.hash128(text.encode(), seed=0, signed=False)
    # a lone surrogate (only an in-process caller can pass one: msgspec refuses it in JSON)
    # crashed the interpreter inside mmh3; it must hash like any other text
    odd = content_key("hello world foo \ud800")
    assert odd != content_key("hello world foo ")
    cache = ShingleSetCache(1 << 20, 2)
    assert cache.shingles("hello world foo \ud800") == shingles.shingles("hello world foo", 2)


def test_threads_sharing_a_shingle_cache_get_right_sets_and_keep_its_accounts():
    texts = [" ".join(f"t{n % 7}w{i}" for i in range(12 + n % 5)) for n in range(30)]
    expected = {t: shingles.shingles(t, 10) for t in texts}
    cache = ShingleSetCache(6 * (8 * 7 + SET_OVERHEAD), 10)  # room for a few: constant eviction
    wrong: list[str] = []

    def work(seed: int) -> None:
        for n in range(400):
            text = texts[(seed * 7 + n * 13) % len(texts)]
            if cache.shingles(text) != expected[text]:
                wrong.append(text)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
    assert cache.hits + cache.misses == 1600
    assert cache.bytes == sum(len(p) + SET_OVERHEAD for p in cache._sets.values())
    assert cache.bytes <= cache.max_bytes


def test_each_profile_rule_gets_caches_sized_from_the_config():
    raw = (b"profiles:\n  default:\n    diversify: [{near_duplicates: "
           b"{cache_mb: 1, exact_cache_mb: 2, num_perm: 64, shingle_words: 7}}]\n"
           b"  other:\n    extends: default\n")
    caches = {(profile, kind): cache for profile, kind, cache in Service(load_bytes(raw)).caches()}
    assert set(caches) == {(p, k) for p in ("default", "other") for k in ("signature", "shingle")}
    assert caches["default", "signature"] is not caches["other", "signature"]
    signature, shingle = caches["default", "signature"], caches["default", "shingle"]
    assert signature.k == 64 and signature.capacity == (1 << 20) // (64 * 8 + 8 + ENTRY_OVERHEAD)
    assert shingle.max_bytes == 2 << 20 and shingle.width == 7
