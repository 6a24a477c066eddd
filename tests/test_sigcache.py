"""The signature cache: LRU by bytes in a slab of slots, hit and miss counts."""
from __future__ import annotations

import gc

import numpy as np
import pytest

from app.sigcache import ENTRY_OVERHEAD, SignatureCache, content_key

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
