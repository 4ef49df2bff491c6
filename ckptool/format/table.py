"""The LevelDB-style sorted table TensorFlow uses for ``.index`` and V1 files.

Layout (docs/FORMAT.md §2, tsl/lib/io/{format,block,block_builder,table_builder}.cc)::

    [data block][trailer] ... [metaindex block][trailer] [index block][trailer] [footer]

Every block ends with a 5-byte trailer: a compression type byte (0 none,
1 raw Snappy) and the masked CRC32C of the block contents plus that byte.
The 48-byte footer holds two block handles (varint64 offset and size),
zero padding, and the magic number.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from ckptool.errors import ChecksumError, CorruptError, UnsupportedError
from ckptool.format.coding import (
    FIXED32,
    MAX_VARINT32_BYTES,
    BytesLike,
    crc32c,
    decode_varint,
    encode_varint,
    unmask_crc,
)
from ckptool.format.objkeys import name_of
from ckptool.format.table_scan import BULK_MIN_BYTES, TableEntries, bulk_entries

MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
#: The footer's magic, two fixed32 halves at bytes 40..47.
FOOTER_MAGIC = struct.Struct("<Q")
FOOTER_HANDLES_SIZE = 40  # two handles of at most 20 bytes, zero padded
#: Block trailer: compression type, masked CRC32C of contents + type byte.
TRAILER = struct.Struct("<BI")
NO_COMPRESSION = 0
SNAPPY_COMPRESSION = 1

BLOCK_SIZE = 262144
RESTART_INTERVAL = 16
INDEX_RESTART_INTERVAL = 1
#: Raw Snappy cannot expand beyond this ratio (a 3-byte copy yields 64 bytes).
SNAPPY_MAX_RATIO = 22


class PositionedReader(Protocol):
    """A file read by position (a storage's reader): ``size`` bytes, ``read(offset, n)``."""

    size: int

    def read(self, offset: int, size: int, /) -> bytes | bytearray: ...


@dataclass(frozen=True)
class BlockHandle:
    offset: int
    size: int  # excludes the trailer

    def encode(self) -> bytes:
        return encode_varint(self.offset) + encode_varint(self.size)

    @classmethod
    def decode(cls, buf: BytesLike, pos: int, limit: int, what: str) -> tuple[BlockHandle, int]:
        offset, pos = decode_varint(buf, pos, limit, what=f"{what} block handle")
        size, pos = decode_varint(buf, pos, limit, what=f"{what} block handle")
        return cls(offset, size), pos


def read_footer(buf: BytesLike, name: str) -> tuple[BlockHandle, BlockHandle]:
    """Parse the footer at the end of ``buf``: (metaindex, index) handles."""
    n = len(buf)
    if n < FOOTER_SIZE:
        raise CorruptError(f"{name}: file is too short to be an sstable ({n} bytes)")
    start = n - FOOTER_SIZE
    (magic,) = FOOTER_MAGIC.unpack_from(buf, start + FOOTER_HANDLES_SIZE)
    if magic != MAGIC:
        raise CorruptError(f"{name}: not an sstable (bad magic number)")
    limit = start + FOOTER_HANDLES_SIZE
    meta, pos = BlockHandle.decode(buf, start, limit, f"{name}: footer metaindex")
    index, _ = BlockHandle.decode(buf, pos, limit, f"{name}: footer index")
    return meta, index


def write_footer(metaindex: BlockHandle, index: BlockHandle) -> bytes:
    handles = metaindex.encode() + index.encode()
    return handles.ljust(FOOTER_HANDLES_SIZE, b"\0") + FOOTER_MAGIC.pack(MAGIC)


def read_block(buf: BytesLike, handle: BlockHandle, name: str, file_size: int | None = None) -> memoryview | bytes:
    """The verified, decompressed contents of the block at ``handle``."""
    size = len(buf) if file_size is None else file_size
    end = handle.offset + handle.size
    if end + TRAILER.size > size:
        raise CorruptError(
            f"{name}: truncated block read (block at offset {handle.offset}, "
            f"{handle.size} bytes, file is {size} bytes)"
        )
    contents = memoryview(buf)[handle.offset:end]
    ctype, stored = TRAILER.unpack_from(buf, end)
    actual = crc32c(bytes((ctype,)), crc32c(contents))
    if unmask_crc(stored) != actual:
        raise ChecksumError(f"{name}: block checksum mismatch in block at offset {handle.offset}")
    if ctype == NO_COMPRESSION:
        return contents
    if ctype == SNAPPY_COMPRESSION:
        return _snappy_decompress(contents, name, handle.offset)
    raise CorruptError(f"{name}: bad block type {ctype} in block at offset {handle.offset}")


def _snappy_decompress(contents: memoryview, name: str, offset: int) -> bytes:
    length, _ = decode_varint(contents, 0, len(contents), what=f"{name}: snappy length")
    if length > SNAPPY_MAX_RATIO * len(contents) + 32:
        raise CorruptError(
            f"{name}: corrupted compressed block contents at offset {offset} "
            f"(claims {length} bytes from {len(contents)})"
        )
    try:
        import cramjam
    except ImportError:
        raise UnsupportedError(
            f"{name}: block at offset {offset} is Snappy-compressed; "
            "install the snappy extra (pip install 'ckptool[snappy]')"
        ) from None
    try:
        out = bytes(cramjam.snappy.decompress_raw(bytes(contents)))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise CorruptError(
            f"{name}: corrupted compressed block contents at offset {offset}: {exc}"
        ) from None
    if len(out) != length:
        raise CorruptError(f"{name}: corrupted compressed block contents at offset {offset}")
    return out


def iter_block(block: BytesLike, name: str, offset: int = 0) -> Iterator[tuple[bytes, bytes]]:
    """Yield ``(key, value)`` for every entry of a decompressed block, keys rebuilt from
    their shared prefixes and checked strictly increasing (:func:`scan_block` decodes it:
    blocks are small, so a block's entries are decoded whole and then yielded)."""
    keys: list[bytes] = []
    values: list[bytes] = []
    scan_block(block, name, offset, keys, values)
    yield from zip(keys, values)


def scan_block(block: BytesLike, name: str, offset: int, keys: list[bytes], values: list[bytes]) -> None:
    """The one decoder of a table block: every entry of the decompressed ``block`` appended
    to ``keys`` and ``values``, keys rebuilt from their shared prefixes and each checked to be
    above the one before it (the last one already in ``keys`` too). The block is copied to
    ``bytes`` once (blocks are small): indexing and slicing bytes is several times cheaper
    than a memoryview's."""
    if not isinstance(block, bytes):
        block = bytes(block)
    n = len(block)
    if n < 4:
        raise CorruptError(f"{name}: bad block contents at offset {offset} (too short)")
    (num_restarts,) = FIXED32.unpack_from(block, n - 4)
    if num_restarts > (n - 4) // 4:
        raise CorruptError(f"{name}: bad block contents at offset {offset} ({num_restarts} restarts)")
    limit = n - 4 - 4 * num_restarts
    if num_restarts == 0:
        if limit:
            raise CorruptError(f"{name}: bad block contents at offset {offset} (no restarts)")
        return
    pos = 0
    key = b""
    start = len(keys)
    last = keys[-1] if keys else b""
    where = f"{name}: bad entry in block at offset {offset}"
    add_key, add_value = keys.append, values.append
    while pos < limit:
        # pos < limit <= n - 4: the three bytes exist; a varint read past ``limit`` makes
        # end_value pass it, which the bounds check below refuses.
        if (shared := block[pos]) < 0x80 and (non_shared := block[pos + 1]) < 0x80 and \
                (value_len := block[pos + 2]) < 0x80:
            pos += 3
        else:
            shared, pos = decode_varint(block, pos, limit, MAX_VARINT32_BYTES, where)
            non_shared, pos = decode_varint(block, pos, limit, MAX_VARINT32_BYTES, where)
            value_len, pos = decode_varint(block, pos, limit, MAX_VARINT32_BYTES, where)
        end_key = pos + non_shared
        end_value = end_key + value_len
        if shared > len(key) or end_value > limit:
            raise CorruptError(f"{where} (entry at byte {pos})")
        key = key[:shared] + block[pos:end_key] if shared else block[pos:end_key]
        if key <= last:
            if start or len(keys) > start:  # the very first key of the table may be b""
                raise CorruptError(f"{name}: keys out of order at block offset {offset}")
        last = key
        add_key(key)
        add_value(block[end_key:end_value])
        pos = end_value


class TableReader:
    """Reads a whole table held in a buffer (bytes, bytearray or mmap)."""

    def __init__(self, buf: BytesLike, name: str):
        self.buf = buf
        self.name = name
        self.size = len(buf)
        _, index_handle = read_footer(buf, name)
        self._index = read_block(buf, index_handle, name)

    def block_handles(self) -> Iterator[BlockHandle]:
        for _, value in iter_block(self._index, self.name, -1):
            handle, end = BlockHandle.decode(value, 0, len(value), f"{self.name}: index entry")
            yield handle

    def read_block(self, handle: BlockHandle) -> memoryview | bytes:
        return read_block(self.buf, handle, self.name)

    def scan(self) -> tuple[list[bytes], list[bytes]]:
        """Every key and value of the table, in two lists, keys checked strictly increasing.

        The bulk form of iterating the table (listing's inner loop): the block
        entries are decoded inline, without a generator per block."""
        keys: list[bytes] = []
        values: list[bytes] = []
        for handle in self.block_handles():
            scan_block(self.read_block(handle), self.name, handle.offset, keys, values)
        return keys, values

    def entries(self) -> TableEntries:
        """Every entry of the table, keys as names (:func:`~ckptool.format.objkeys.name_of`),
        each block's CRC32C checked: in bulk for a big table
        (:func:`~ckptool.format.table_scan.bulk_entries`), else as :meth:`scan` reads them."""
        buf = self.buf if isinstance(self.buf, (bytes, bytearray)) else bytes(self.buf)  # values are sliced from it
        blocks = [(h, read_block(buf, h, self.name)) for h in self.block_handles()]
        if self.size >= BULK_MIN_BYTES:
            got = bulk_entries(buf, [(h.offset, h.size, contents) for h, contents in blocks])
            if got is not None:
                return got
        keys: list[bytes] = []
        values: list[bytes] = []
        for handle, contents in blocks:
            scan_block(contents, self.name, handle.offset, keys, values)
        return TableEntries(list(map(name_of, keys)), values=values)

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        last = None
        for handle in self.block_handles():
            for key, value in iter_block(self.read_block(handle), self.name, handle.offset):
                if last is not None and key <= last:
                    raise CorruptError(f"{self.name}: keys out of order at block offset {handle.offset}")
                last = key
                yield key, value


# ---------------------------------------------------------------------------
# Writing: byte-identical to TF's TableBuilder with compression off.


def footer_of(reader: PositionedReader, name: str) -> tuple[BlockHandle, BlockHandle]:
    """The (metaindex, index) handles of the table ``reader`` holds, reading its last
    48 bytes only; a CorruptError when it is no table (or names blocks past its end)."""
    size = reader.size
    if size < FOOTER_SIZE:
        raise CorruptError(f"{name}: file is too short to be an sstable ({size} bytes)")
    meta, index = read_footer(reader.read(size - FOOTER_SIZE, FOOTER_SIZE), name)
    for what, h in (("metaindex", meta), ("index", index)):
        if h.offset + h.size + TRAILER.size > size - FOOTER_SIZE:
            raise CorruptError(f"{name}: not an sstable ({what} block at offset {h.offset}, {h.size} bytes, "
                               f"runs past the end of the {size}-byte file)")
    return meta, index


def _read_block_at(reader: PositionedReader, handle: BlockHandle, name: str) -> memoryview | bytes:
    buf = reader.read(handle.offset, handle.size + TRAILER.size)
    contents = read_block(buf, BlockHandle(0, handle.size), name)
    return contents


def first_entry(reader: PositionedReader, name: str) -> tuple[bytes, bytes] | None:
    """The first ``(key, value)`` of the table ``reader`` holds (None if it is empty),
    reading the footer, the index block and the first data block only. A CorruptError
    when it is no table. V1 checkpoints are recognised by this entry (their metadata)."""
    _, index_handle = footer_of(reader, name)
    index = _read_block_at(reader, index_handle, name)
    for _, value in iter_block(index, name, index_handle.offset):
        handle, _ = BlockHandle.decode(value, 0, len(value), f"{name}: index entry")
        if handle.offset + handle.size + TRAILER.size > reader.size:
            raise CorruptError(f"{name}: index names a block past the end of the file")
        for key, val in iter_block(_read_block_at(reader, handle, name), name, handle.offset):
            return key, val
    return None


def read_table(reader: PositionedReader, name: str) -> TableReader:
    """A :class:`TableReader` of the file ``reader`` holds: its footer is checked first
    (48 bytes read), so that a large file that is no table is refused unread."""
    footer_of(reader, name)
    return TableReader(reader.read(0, reader.size), name)
