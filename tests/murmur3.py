"""MurmurHash3 x86 32-bit in pure Python, written from the algorithm (not from mmh3)."""
from __future__ import annotations


def murmur3_32(data: bytes, seed: int) -> int:
    """Reference MurmurHash3 x86 32-bit, written from the algorithm, not from mmh3."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed & mask
    n = len(data) // 4 * 4
    for i in range(0, n, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    k = 0
    tail = data[n:]
    for i in reversed(range(len(tail))):
        k = (k << 8) | tail[i]
    if tail:
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h
