"""Reading a tensor in bounded chunks, for statistics and diff (and a string's bytes, for
verify and convert).

Fixed-size tensors of a V2 bundle are read at most :data:`CHUNK_BYTES` at a
time (string and variant tensors, V1 checkpoints and, for ordered reads,
partitioned tensors are read whole), so memory stays bounded by the chunk
size or the largest tensor. :func:`string_parts` gives the bytes of a string
tensor's elements a part at a time: an object graph is never held whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ckptool.format import tensors
from ckptool.format.coding import crc32c
from ckptool.format.tensors import byteswap
from ckptool.ops.read.v2 import BundleCheckpoint

if TYPE_CHECKING:
    import numpy as np

    from ckptool.format.bundle import Entry
    from ckptool.ops.read.checkpoint import Checkpoint

#: Largest read made at once by statistics and diff.
CHUNK_BYTES = 8 << 20


def entry_chunks(ck: BundleCheckpoint, e: Entry, verify: bool = True, chunk_bytes: int = CHUNK_BYTES,
                 on_bytes: Callable[[int], None] | None = None) -> Iterator[np.ndarray]:
    """Flat chunks of a plain fixed-size V2 entry, its CRC32C checked across them.

    The chunks share one buffer: use each before asking for the next. A
    mismatch raises ChecksumError after the last chunk.
    """
    import numpy as np  # here: verify reads strings from this module without numpy

    itemsize = e.dtype.itemsize
    buf = np.empty(min(max(1, chunk_bytes // itemsize), e.numel), dtype=e.dtype.numpy)
    swap = ck.header.swaps(e.dtype)
    for part in ck.iter_fixed(e, buf.view(np.uint8).data, verify):
        n = len(part) // itemsize
        if on_bytes is not None:
            on_bytes(len(part))
        yield byteswap(buf[:n], itemsize) if swap else buf[:n]


def string_parts(ck: BundleCheckpoint, e: Entry, buf: memoryview, verify: bool = True) -> Iterator[memoryview]:
    """The elements' bytes of a plain DT_STRING entry, one after the other, read into ``buf`` a
    part at a time (each a prefix of ``buf``, full but the last: use it before asking for the
    next), once its lengths are checked as :meth:`BundleCheckpoint.varlen_values` checks them;
    the CRC32C chained across the parts and checked after the last unless told not to. An
    object graph (tens of MB, one string) is never held whole."""
    reader = ck.shard_reader(e)
    head = reader.read(e.offset, min(e.size, tensors.string_head_size(e.numel)))
    _lengths, pos, crc = tensors.string_layout(head, e.size, e, ck.header.big_endian, reader.path, verify)
    left = memoryview(head)[pos:]  # elements' bytes read with the lengths: each byte is read once
    at, end = e.offset + len(head), e.offset + e.size  # (an object store's fetch-ahead counts them)
    while left or at < end:
        part = buf[:min(len(buf), len(left) + end - at)]
        k = min(len(left), len(part))
        part[:k] = left[:k]
        left = left[k:]
        if k < len(part):
            reader.readinto(at, part[k:])
            at += len(part) - k
        if verify:
            crc = crc32c(part, crc)
        yield part
    if verify:
        tensors.check_string_crc(crc, e, reader.path)


def tensor_chunks(ck: Checkpoint, name: str, ordered: bool = True, verify: bool = True,
                  chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
    """The elements of tensor ``name`` as flat chunks.

    Fixed-size tensors of a V2 bundle are read ``chunk_bytes`` at a time;
    with ``ordered=False`` a partitioned tensor's slices are streamed one
    after the other (element order then follows the slices, which is all
    statistics need). Anything else is read whole and then cut up.
    """
    v = ck.variable(name)
    if isinstance(ck, BundleCheckpoint):
        e = ck.lookup(name)
        if e.dtype.is_fixed and not e.slices:
            yield from entry_chunks(ck, e, verify, chunk_bytes)
            return
        if e.dtype.is_fixed and not ordered:
            for p, _ in ck.slice_parts(e):  # they tile the shape exactly once: no value counted twice
                yield from entry_chunks(ck, p, verify, chunk_bytes)
            return
    arr = ck.read(name, verify=verify).reshape(-1)
    itemsize = max(1, arr.dtype.itemsize)
    per = max(1, chunk_bytes // itemsize)
    for i in range(0, max(v.numel, 0), per):
        yield arr[i:i + per]

