"""The signature cache: LRU by bytes, hit and miss counts."""
from __future__ import annotations

import numpy as np
import pytest

from app.minhash import Signature
from app.sigcache import ENTRY_OVERHEAD, SignatureCache, content_key


def sig(k: int = 16) -> Signature:
    return Signature(np.zeros(k, dtype=np.uint64), 5)


def test_hits_misses_and_least_recently_used_eviction():
    entry = 16 * 8 + ENTRY_OVERHEAD
    cache = SignatureCache(3 * entry)
    for key in (1, 2, 3):
        cache.put(key, sig())
    assert len(cache) == 3 and cache.bytes == 3 * entry
    assert cache.get(1) is not None  # 1 is now the most recent
    cache.put(4, sig())  # evicts 2, the least recently used
    assert cache.get(2) is None and cache.get(3) is not None and cache.get(1) is not None
    assert (cache.hits, cache.misses, cache.evictions) == (3, 1, 1)
    assert len(cache) == 3 and cache.bytes <= cache.max_bytes


def test_replacing_a_key_does_not_double_count_and_oversized_is_not_kept():
    cache = SignatureCache(2000)
    cache.put(1, sig())
    cache.put(1, sig())
    assert len(cache) == 1 and cache.bytes == 16 * 8 + ENTRY_OVERHEAD
    cache.put(2, sig(1024))  # 8 KiB: larger than the whole cache
    assert cache.get(2) is None and len(cache) == 1
    with pytest.raises(ValueError):
        SignatureCache(-1)


def test_content_key_is_stable_and_distinguishes_texts():
    assert content_key("доставка") == content_key("доставка")
    assert content_key("доставка") != content_key("доставка ")
    assert 0 <= content_key("x") < 2**128
