"""What `rearrange dupes` holds of a site: page texts in a temporary file, shingle sets in
the engine (`NearDupSets`), and pairs of pages as numpy arrays."""
from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from app._engine import NearDupSets


class Texts:
    """Page texts in a temporary file, read back one at a time (memory holds offsets)."""

    def __init__(self) -> None:
        # Closed by close(), the audit's to call: it outlives any one `with` block here.
        self._file = tempfile.TemporaryFile(prefix="rearrange-dupes-")  # noqa: SIM115
        self._ends = array("q", [0])

    def add(self, text: str) -> None:
        data = text.encode("utf-8", errors="replace")
        self._file.seek(0, os.SEEK_END)
        self._file.write(data)
        self._ends.append(self._ends[-1] + len(data))

    def __len__(self) -> int:
        return len(self._ends) - 1

    def close(self) -> None:
        """Delete the file."""
        self._file.close()

    def get(self, i: int) -> str:
        start, end = self._ends[i], self._ends[i + 1]
        self._file.seek(start)
        return self._file.read(end - start).decode("utf-8")

    def batches(self, size: int) -> Iterable[list[str]]:
        """All texts in order, `size` at a time."""
        self._file.flush()
        for first in range(0, len(self), size):
            last = min(first + size, len(self))
            self._file.seek(self._ends[first])
            data = self._file.read(self._ends[last] - self._ends[first])
            base = self._ends[first]
            yield [data[self._ends[i] - base:self._ends[i + 1] - base].decode("utf-8")
                   for i in range(first, last)]


@dataclass(slots=True)
class Site:
    """The pages with words: their texts and shingle sets, by page index."""

    sets: NearDupSets
    texts: Texts
    ids: np.ndarray  # page i is entry ids[i] of sets and texts
    sizes: np.ndarray  # page i's shingle count
    threads: int

    def text(self, i: int) -> str:
        return self.texts.get(int(self.ids[i]))

    def shingles(self, i: int) -> np.ndarray:
        return np.frombuffer(self.sets.shingles(int(self.ids[i])), dtype=np.uint64)

    def shared(self, i: int, others: np.ndarray) -> np.ndarray:
        """bool (len(others), |page i|): which of page i's shingles each other page holds."""
        rows = self.sets.shared(int(self.ids[i]), self._u32(others))
        return np.frombuffer(rows, dtype=np.bool_).reshape(len(others), int(self.sizes[i]))

    def intersections(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        both = self.sets.intersections(self._u32(a), self._u32(b), self.threads)
        return np.frombuffer(both, dtype=np.uint32)

    def _u32(self, pages: np.ndarray) -> bytes:
        return self.ids[np.asarray(pages, dtype=np.int64)].astype("<u4").tobytes()


@dataclass(slots=True)
class Pairs:
    """Pairs of pages (a before b in the input) with the number of shingles they share."""

    a: np.ndarray  # int32
    b: np.ndarray  # int32
    both: np.ndarray  # uint32

    @staticmethod
    def empty() -> Pairs:
        return Pairs(np.empty(0, np.int32), np.empty(0, np.int32), np.empty(0, np.uint32))

    def __len__(self) -> int:
        return int(self.a.size)

    def take(self, which: np.ndarray | slice) -> Pairs:
        return Pairs(self.a[which], self.b[which], self.both[which])
