"""Bounded LRUs of what near_duplicates computes from a text, keyed by a content hash of it.

The reference model's caches; the engine's are crates/engine/src/neardup/, and
tests/neardup/test_neardup_engine.py holds their counters together.

Popular pages appear on many result pages, so what is computed once from a text is reused
by every later request that carries the same text: a MinHash signature (20-30 ms of
shingling for a 100-document page) or, for the exact method on small pages, the shingle
set itself (~37 us for an 80-word text). Memory is capped in bytes; the least recently
used entries go first.

The signatures live in one preallocated uint64 slab (rows are slots) and the LRU maps
content key → slot, ints only: the cache adds no objects for the garbage collector to
scan however full it gets, and a page's rows are gathered with one fancy index. The
slab is allocated with np.empty, so the OS commits its pages only as slots are used.
"""
from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence

import mmh3
import numpy as np

from app.neardup import shingles as shingling

# The OrderedDict node and its two ints, per entry (sys.getsizeof, rounded up).
ENTRY_OVERHEAD = 120


def content_key(text: str) -> int:
    """A 128-bit MurmurHash3 of the text's UTF-8 bytes (collisions are out of practical reach).

    Encoded here, with lone surrogates passed through: mmh3 given such a str crashes the
    interpreter (mmh3 5.3, SIGSEGV). msgspec refuses them in a request, but a rule called
    in process must not take the worker down; valid text hashes exactly as before.
    """
    return mmh3.hash128(text.encode("utf-8", "surrogatepass"), seed=0, signed=False)


class SignatureCache:
    """LRU of k-value signatures and their shingle counts, at most max_bytes; counts hits.

    One lock guards every operation, and `fetch` copies rows out under it, so
    `rearrange run`, uvicorn's event loop and worker threads may share one cache.
    """

    def __init__(self, max_bytes: int, k: int) -> None:
        if max_bytes < 0 or k < 1:
            raise ValueError(f"need max_bytes >= 0 and k >= 1, got {max_bytes!r}, {k!r}")
        self.k = k
        self.entry_bytes = k * 8 + 8 + ENTRY_OVERHEAD
        self.capacity = max_bytes // self.entry_bytes
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._values = np.empty((self.capacity, k), dtype=np.uint64)
        self._sizes = np.empty(self.capacity, dtype=np.int64)
        self._slots: OrderedDict[int, int] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def bytes(self) -> int:
        """Bytes the entries held account for (the slab's committed part plus bookkeeping)."""
        return len(self._slots) * self.entry_bytes

    def fetch(self, keys: Sequence[int]) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """(values, sizes) rows for keys, copied; and the indexes of keys not cached.

        Rows of missing keys are left unset for the caller to fill. Each key found
        counts a hit and becomes the most recently used; each missing one a miss.
        """
        found_at, slots, missing = [], [], []
        with self._lock:
            for n, key in enumerate(keys):
                slot = self._slots.get(key)
                if slot is None:
                    missing.append(n)
                else:
                    self._slots.move_to_end(key)
                    found_at.append(n)
                    slots.append(slot)
            values = np.empty((len(keys), self.k), dtype=np.uint64)
            sizes = np.empty(len(keys), dtype=np.int64)
            values[found_at] = self._values[slots]
            sizes[found_at] = self._sizes[slots]
            self.hits += len(found_at)
            self.misses += len(missing)
        return values, sizes, missing

    def put(self, key: int, values: np.ndarray, shingles: int) -> None:
        """Store a signature, reusing the least recently used slot when full."""
        if self.capacity == 0:
            return
        with self._lock:
            slot = self._slots.get(key)
            if slot is not None:
                self._slots.move_to_end(key)
            elif len(self._slots) < self.capacity:
                slot = len(self._slots)
            else:
                _, slot = self._slots.popitem(last=False)
                self.evictions += 1
            self._slots[key] = slot
            self._values[slot] = values
            self._sizes[slot] = shingles


# The OrderedDict node, its 128-bit int key and the bytes object's header (rounded up).
SET_OVERHEAD = 200


class ShingleSetCache:
    """LRU of exact shingle sets (what the exact method compares), at most max_bytes.

    A set is kept packed, as the bytes of its uint64 hashes: bytes are not tracked by the
    garbage collector, where a frozenset would be, so a full cache adds nothing for it to
    scan (tail latency is mostly GC). Unpacking an 80-word text's ~70 hashes into a
    frozenset costs ~2.4 us, against ~37 us to shingle the text again. One lock guards
    the LRU; shingling a missed text runs outside it.
    """

    def __init__(self, max_bytes: int, width: int) -> None:
        if max_bytes < 0 or width < 1:
            raise ValueError(f"need max_bytes >= 0 and width >= 1, got {max_bytes!r}, {width!r}")
        self.width = width
        self.max_bytes = max_bytes
        self.bytes = 0  # what the entries account for: packed hashes plus SET_OVERHEAD each
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._sets: OrderedDict[int, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sets)

    def shingles(self, text: str) -> frozenset[int]:
        """`shingles.shingles(text, width)`, from the cache when this text was seen before."""
        key = content_key(text)
        with self._lock:
            packed = self._sets.get(key)
            if packed is None:
                self.misses += 1
            else:
                self._sets.move_to_end(key)
                self.hits += 1
        if packed is not None:
            return frozenset(memoryview(packed).cast("Q"))
        found = shingling.shingles(text, self.width)
        self._put(key, array("Q", found).tobytes())
        return found

    def _put(self, key: int, packed: bytes) -> None:
        size = len(packed) + SET_OVERHEAD
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._sets.pop(key, None)  # another thread shingled the same text meanwhile
            if old is not None:
                self.bytes -= len(old) + SET_OVERHEAD
            while self.bytes + size > self.max_bytes:
                _, gone = self._sets.popitem(last=False)
                self.bytes -= len(gone) + SET_OVERHEAD
                self.evictions += 1
            self._sets[key] = packed
            self.bytes += size
