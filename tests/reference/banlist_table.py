"""Open-addressing hash tables over `array.array`: no per-entry Python object for the GC to walk.

Both tables probe linearly from a home slot and hold several items per hash (a multimap),
so a key banned twice, or two keys whose hashes collide, simply occupy more slots: the
caller verifies a hit against what it stored. A removal leaves a tombstone (probes walk
over it, an insertion reuses it); the table is rebuilt at twice its live size once live
slots and tombstones reach its load limit. A rebuild fills a new array and swaps one
reference, so a reader that took the old array finishes on a consistent table.
"""
from __future__ import annotations

from array import array

EMPTY, TOMB = -1, -2  # RowTable slots; every other slot value is a row number (>= 0)
MIN_SLOTS = 8
LOAD = 0.5  # HashBag's load limit
GOLDEN = 0x9E3779B97F4A7C15  # Fibonacci hashing: 2^64 / phi, odd
M64 = (1 << 64) - 1


def capacity_for(items: int, load: float) -> int:
    """The smallest power of two holding `items` at half its load limit (room to grow).

    Growing doubles the table, so between rebuilds the load stays within [load/2, load].
    """
    size = MIN_SLOTS
    while size * load < items * 2:
        size *= 2
    return size


class RowTable:
    """Row numbers keyed by a 64-bit hash that the caller keeps in a column (`hashes[row]`).

    The home slot is `hash & mask`: the low bits of a str hash are already uniform. With
    `spread`, it is the top bits of hash × 2^64/φ instead, so keys that are consecutive
    numbers (entry ids) scatter over the table rather than form one long run that every
    miss inside it would have to walk.
    """

    __slots__ = ("slots", "filled", "live", "load", "spread")

    def __init__(self, items: int = 0, load: float = 0.5, spread: bool = False) -> None:
        self.load = load  # a miss walks the cluster at its home slot: lower load, shorter walks
        self.spread = spread
        self.slots = array("i", [EMPTY]) * capacity_for(items, load)
        self.filled = 0  # live rows + tombstones: what lengthens probes
        self.live = 0

    def home(self, h: int, size: int) -> int:
        """The first slot probed for `h` in a table of `size` slots."""
        if self.spread:
            return ((h * GOLDEN) & M64) >> (65 - size.bit_length())
        return h & (size - 1)

    def insert(self, h: int, row: int, hashes: array) -> None:
        """Add `row` under `h` (its hash, also found at `hashes[row]`)."""
        if self.filled + 1 > len(self.slots) * self.load:
            self._rebuild(hashes)
        slots = self.slots
        mask = len(slots) - 1
        i = self.home(h, len(slots))
        while slots[i] >= 0:
            i = (i + 1) & mask
        if slots[i] == EMPTY:
            self.filled += 1
        slots[i] = row
        self.live += 1

    def find(self, h: int, hashes: array) -> list[int]:
        """Rows stored under `h`, in row order (= insertion order); the caller verifies keys."""
        slots = self.slots
        mask = len(slots) - 1
        # `home` written out for the common table: this runs for every key a check probes
        i = self.home(h, mask + 1) if self.spread else h & mask
        found = []
        row = slots[i]
        while row != EMPTY:
            if row >= 0 and hashes[row] == h:
                found.append(row)
            i = (i + 1) & mask
            row = slots[i]
        if len(found) > 1:
            found.sort()
        return found

    def delete(self, h: int, row: int) -> bool:
        """Tombstone the slot holding `row` (stored under `h`); False when it is not there."""
        slots = self.slots
        mask = len(slots) - 1
        i = self.home(h, len(slots))
        while (found := slots[i]) != EMPTY:
            if found == row:
                slots[i] = TOMB
                self.live -= 1
                return True
            i = (i + 1) & mask
        return False

    def _rebuild(self, hashes: array) -> None:
        new = array("i", [EMPTY]) * capacity_for(self.live, self.load)
        size = len(new)
        mask = size - 1
        for row in self.slots:
            if row >= 0:
                i = self.home(hashes[row], size)
                while new[i] != EMPTY:
                    i = (i + 1) & mask
                new[i] = row
        self.slots, self.filled = new, self.live


class HashBag:
    """Hash values with multiplicity, for a membership filter.

    A false positive (another string with the same hash) only costs the caller a wasted
    probe of the exact table behind the filter, never a wrong answer. The slots hold the
    hashes themselves, so a rebuild needs nothing else; 0 and -1 are the free markers: a
    hash of 0 is stored as 1, and Python never returns -1 as a hash.
    """

    __slots__ = ("slots", "filled", "live")

    def __init__(self) -> None:
        self.slots = array("q", [0]) * MIN_SLOTS
        self.filled = 0
        self.live = 0

    def add(self, h: int) -> None:
        h = h or 1
        if self.filled + 1 > len(self.slots) * LOAD:
            self._rebuild()
        slots = self.slots
        mask = len(slots) - 1
        i = h & mask
        while slots[i] not in (0, -1):
            i = (i + 1) & mask
        if slots[i] == 0:
            self.filled += 1
        slots[i] = h
        self.live += 1

    def __contains__(self, h: int) -> bool:
        return self._slot_of(h or 1) >= 0

    def discard(self, h: int) -> None:
        """Remove one occurrence of `h`."""
        i = self._slot_of(h or 1)
        if i >= 0:
            self.slots[i] = -1
            self.live -= 1

    def _slot_of(self, h: int) -> int:
        """The first slot holding `h` (already mapped off 0), or -1."""
        slots = self.slots
        mask = len(slots) - 1
        i = h & mask
        while (found := slots[i]) != 0:
            if found == h:
                return i
            i = (i + 1) & mask
        return -1

    def _rebuild(self) -> None:
        new = array("q", [0]) * capacity_for(self.live, LOAD)
        mask = len(new) - 1
        for h in self.slots:
            if h not in (0, -1):
                i = h & mask
                while new[i] != 0:
                    i = (i + 1) & mask
                new[i] = h
        self.slots, self.filled = new, self.live
