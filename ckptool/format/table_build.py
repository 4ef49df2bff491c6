"""Writing the LevelDB-style sorted table of ``.index`` files (docs/FORMAT.md §2): blocks
with restart points, shortened index keys, the footer. Reading is :mod:`ckptool.format.table`."""

from __future__ import annotations

from typing import Protocol

from ckptool.format.coding import FIXED32, crc32c, encode_varint, mask_crc
from ckptool.format.table import (
    BLOCK_SIZE,
    INDEX_RESTART_INTERVAL,
    NO_COMPRESSION,
    RESTART_INTERVAL,
    TRAILER,
    BlockHandle,
    write_footer,
)


def _shortest_separator(start: bytes, limit: bytes) -> bytes:
    n = min(len(start), len(limit))
    i = 0
    while i < n and start[i] == limit[i]:
        i += 1
    if i >= n:
        return start
    b = start[i]
    if b < 0xFF and b + 1 < limit[i]:
        return start[:i] + bytes((b + 1,))
    return start


def _short_successor(key: bytes) -> bytes:
    for i, b in enumerate(key):
        if b != 0xFF:
            return key[:i] + bytes((b + 1,))
    return key


class _BlockBuilder:
    def __init__(self, restart_interval: int):
        self.interval = restart_interval
        self.reset()

    def reset(self) -> None:
        self.parts: list[bytes] = []
        self.nbytes = 0
        self.restarts = [0]
        self.counter = 0
        self.last_key = b""

    @property
    def empty(self) -> bool:
        return not self.parts

    def size_estimate(self) -> int:
        return self.nbytes + 4 * len(self.restarts) + 4

    def add(self, key: bytes, value: bytes) -> None:
        shared = 0
        if self.counter < self.interval:
            last = self.last_key
            n = min(len(last), len(key))
            while shared < n and last[shared] == key[shared]:
                shared += 1
        else:
            self.restarts.append(self.nbytes)
            self.counter = 0
        head = encode_varint(shared) + encode_varint(len(key) - shared) + encode_varint(len(value))
        self.parts.append(head)
        self.parts.append(key[shared:])
        self.parts.append(value)
        self.nbytes += len(head) + len(key) - shared + len(value)
        self.last_key = key
        self.counter += 1

    def finish(self) -> bytes:
        tail = b"".join(FIXED32.pack(r) for r in self.restarts) + FIXED32.pack(len(self.restarts))
        return b"".join(self.parts) + tail


class _Sink(Protocol):
    def write(self, data: bytes, /) -> object: ...


class TableBuilder:
    """Builds a table into ``out`` (a binary file object) entry by entry.

    Keys must be added in strictly increasing bytewise order.
    """

    def __init__(self, out: _Sink, block_size: int = BLOCK_SIZE):
        self.out = out
        self.offset = 0
        self.block_size = block_size
        self.data = _BlockBuilder(RESTART_INTERVAL)
        self.index = _BlockBuilder(INDEX_RESTART_INTERVAL)
        self.pending: BlockHandle | None = None
        self.last_key: bytes | None = None

    def add(self, key: bytes, value: bytes) -> None:
        if self.last_key is not None and key <= self.last_key:
            raise ValueError(f"table keys must be strictly increasing: {key!r} after {self.last_key!r}")
        if self.last_key is not None and len(key) + len(value) >= 2 * self.block_size:
            self._flush()
        if self.pending is not None and self.last_key is not None:  # a pending block ends at a key
            self.index.add(_shortest_separator(self.last_key, key), self.pending.encode())
            self.pending = None
        self.data.add(key, value)
        self.last_key = key
        if self.data.size_estimate() >= self.block_size:
            self._flush()

    def _flush(self) -> None:
        if self.data.empty:
            return
        self.pending = self._write_block(self.data.finish())
        self.data.reset()

    def _write_block(self, contents: bytes) -> BlockHandle:
        handle = BlockHandle(self.offset, len(contents))
        crc = mask_crc(crc32c(bytes((NO_COMPRESSION,)), crc32c(contents)))
        self.out.write(contents)
        self.out.write(TRAILER.pack(NO_COMPRESSION, crc))
        self.offset += len(contents) + TRAILER.size
        return handle

    def finish(self) -> int:
        """Write the remaining blocks and the footer; return the file size."""
        self._flush()
        metaindex = self._write_block(_BlockBuilder(RESTART_INTERVAL).finish())
        if self.pending is not None and self.last_key is not None:
            self.index.add(_short_successor(self.last_key), self.pending.encode())
            self.pending = None
        index = self._write_block(self.index.finish())
        footer = write_footer(metaindex, index)
        self.out.write(footer)
        self.offset += len(footer)
        return self.offset


# ---------------------------------------------------------------------------
# Probing a file through a positioned reader (anything with ``size`` and
# ``read(offset, n)``): the footer first, then only the blocks it names.


__all__ = ["TableBuilder"]
