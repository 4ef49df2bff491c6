"""Entries for a table (:mod:`ckptool.format.table_build`) held packed until written, given
back in key order: their bytes in one buffer and two offsets each (~16 bytes an entry over its
bytes, where a sorted list of ``(key, value)`` pairs held ~150 in Python objects; an index of
100,000 renamed variables is written from here)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator


class PackedEntries:
    """``(key, value)`` pairs, kept in the order they came when it is key order (the usual case:
    an index rewritten from a sorted one), else sorted through an array of positions."""

    def __init__(self, entries: Iterable[tuple[bytes, bytes]]):
        self.data = bytearray()
        self.offsets = array("Q", [0])  # key i: offsets[2i]..[2i+1], its value: ..[2i+2]
        self.order: array[int] | None = None
        prev: bytes | None = None
        in_order = True
        for k, v in entries:
            k = bytes(k)
            if in_order and prev is not None and k < prev:
                in_order = False
            prev = k
            self.data += k
            self.offsets.append(len(self.data))
            self.data += v
            self.offsets.append(len(self.data))
        if not in_order:
            self.order = array("Q", sorted(range(len(self)), key=self.key))

    def __len__(self) -> int:
        return len(self.offsets) // 2

    def key(self, i: int) -> bytes:
        """Key ``i`` in the order the entries came."""
        return bytes(self.data[self.offsets[2 * i]:self.offsets[2 * i + 1]])

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        """The entries in key order."""
        data, off = memoryview(self.data), self.offsets
        for i in (range(len(self)) if self.order is None else self.order):
            yield bytes(data[off[2 * i]:off[2 * i + 1]]), bytes(data[off[2 * i + 1]:off[2 * i + 2]])

    def keys(self) -> Iterator[bytes]:
        """The keys in key order."""
        return (self.key(i) for i in (range(len(self)) if self.order is None else self.order))


__all__ = ["PackedEntries"]
