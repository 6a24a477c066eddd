"""A bounded LRU of MinHash signatures keyed by a content hash of the text they came from.

Popular pages appear on many result pages, so a signature computed once (20-30 ms of
shingling for a 100-document page) is reused by every later request that carries the
same text. Memory is capped in bytes; the least recently used signatures go first.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import mmh3

from app.minhash import Signature

# What one entry costs besides its values: the OrderedDict slot, the int key, the
# Signature object and the ndarray header (measured with sys.getsizeof, rounded up).
ENTRY_OVERHEAD = 300


def content_key(text: str) -> int:
    """A 128-bit MurmurHash3 of the text's UTF-8 bytes (collisions are out of practical reach)."""
    return mmh3.hash128(text, seed=0, signed=False)


class SignatureCache:
    """LRU of Signature by content key, at most max_bytes; counts hits and misses.

    One lock guards every operation, so `rearrange run`, uvicorn's event loop and any
    worker thread may share one cache; each operation is a few dict steps, so contention
    costs nothing measurable at one request per core.
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.bytes = 0
        self._entries: OrderedDict[int, Signature] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: int) -> Signature | None:
        """The cached signature (now most recently used), or None; counts a hit or a miss."""
        with self._lock:
            sig = self._entries.get(key)
            if sig is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return sig

    def put(self, key: int, sig: Signature) -> None:
        """Store a signature, evicting the least recently used ones past max_bytes."""
        size = sig.values.nbytes + ENTRY_OVERHEAD
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old.values.nbytes + ENTRY_OVERHEAD
            self._entries[key] = sig
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, gone = self._entries.popitem(last=False)
                self.bytes -= gone.values.nbytes + ENTRY_OVERHEAD
                self.evictions += 1
