"""Tensor bytes inside a bundle's data files: CRC checks and the fixed-size,
string and variant layouts (docs/FORMAT.md §4; tensor_bundle.cc). Pure codecs."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ckptool.errors import ChecksumError, CorruptError
from ckptool.format.coding import (
    FIXED32,
    MAX_VARINT64_BYTES,
    BytesLike,
    crc32c,
    decode_varint,
    encode_varint,
    mask_crc,
    unmask_crc,
)
from ckptool.format.objkeys import shown
from ckptool.format.slices import key_text

if TYPE_CHECKING:  # numpy is imported where arrays are made
    import numpy as np
    from typing_extensions import Buffer

    from ckptool.format.entry import Entry


def check_crc(data: BytesLike | np.ndarray, entry: Entry, where: str) -> None:
    """The stored CRC32C of a fixed-size tensor against its bytes, read whole."""
    check_crc_value(crc32c(data), entry, where, len(data))


def check_crc_value(actual: int, entry: Entry, where: str, nbytes: int) -> None:
    """The one tensor CRC check: ``actual`` (the CRC32C of ``nbytes`` bytes, computed whole
    or across chunks) against the entry's masked one; :class:`ChecksumError` naming the
    tensor (as :func:`ckptool.format.slices.key_text` names it), both values and the offset."""
    if actual != unmask_crc(entry.crc32c):
        raise ChecksumError(
            f"{where}: checksum does not match for tensor "
            f"{key_text(entry.key)!r}: stored {unmask_crc(entry.crc32c):08x}, "
            f"calculated {actual:08x} on {nbytes} bytes at offset {entry.offset}"
        )


def decode_fixed(buf: BytesLike | np.ndarray, entry: Entry, swap: bool) -> np.ndarray:
    """A fixed-size tensor from its stored bytes (a writable buffer is used in place), each
    element byte-swapped when ``swap`` (what :meth:`ckptool.format.bundle.Header.swaps` says
    of the entry's dtype)."""
    import numpy as np
    dt = entry.dtype.numpy
    arr = np.frombuffer(buf, dtype=dt, count=entry.numel) if entry.numel else np.empty(0, dt)
    if swap:
        arr = byteswap(arr, entry.dtype.itemsize)
    return arr.reshape(entry.shape)


def byteswap(arr: np.ndarray, itemsize: int) -> np.ndarray:
    """The one byte swap of stored values (a big-endian bundle read on a little-endian host,
    and back): each ``itemsize``-byte element reversed (a complex number: each part), by
    bit pattern, so that a NaN's payload survives."""
    import numpy as np
    if arr.dtype.kind == "c":
        return arr.byteswap()
    width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[itemsize]
    return arr.view(width).byteswap().view(arr.dtype)


_LEN64 = struct.Struct("<Q")


def _length_checksum(lengths: Sequence[int], big_endian: bool) -> int:
    """CRC32C of the lengths as TF hashes them: each as a uint32, or a uint64 when larger."""
    order = ">" if big_endian else "<"
    if lengths and max(lengths) > 0xFFFFFFFF:
        return crc32c(b"".join(struct.pack(order + ("I" if n <= 0xFFFFFFFF else "Q"), n) for n in lengths))
    return crc32c(struct.pack(f"{order}{len(lengths)}I", *lengths))


def object_array(values: list[bytes], shape: Sequence[int]) -> np.ndarray:
    """``values`` as a numpy object array of ``shape`` (string and variant tensors)."""
    import numpy as np
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


def decode_string(buf: BytesLike, entry: Entry, big_endian: bool, where: str, verify: bool = True) -> np.ndarray:
    """A DT_STRING tensor as an object array of bytes (see :func:`string_values`)."""
    return object_array(string_values(buf, entry, big_endian, where, verify), entry.shape)


def string_values(buf: BytesLike, entry: Entry, big_endian: bool, where: str, verify: bool = True) -> list[bytes]:
    """The elements of a DT_STRING tensor, in order: varint lengths, masked length
    checksum, bytes (§4.2). Needs no numpy."""
    lengths, pos, crc = string_layout(buf, len(buf), entry, big_endian, where, verify)
    view = memoryview(buf)
    if verify:
        check_string_crc(crc32c(view[pos:], crc), entry, where)
    data = bytes(view[pos:])
    out = []
    p = 0
    for length in lengths:
        out.append(data[p:p + length])
        p += length
    return out


def string_head_size(numel: int) -> int:
    """At most how many bytes of a DT_STRING entry of ``numel`` elements come before its
    elements' bytes (a varint length each, then the masked length checksum)."""
    return numel * MAX_VARINT64_BYTES + 4


def string_layout(head: BytesLike, size: int, entry: Entry, big_endian: bool, where: str, verify: bool = True
                  ) -> tuple[list[int], int, int]:
    """``(lengths, where the elements' bytes start, the CRC32C to chain over them)`` of a
    DT_STRING entry of ``size`` bytes, from ``head``: its first bytes, all of them or at
    least ``min(size, string_head_size(entry.numel))``; the lengths, their checksum (unless
    told not to) and the total checked as :func:`string_values` checks them, so that the
    elements' bytes can be checked a part at a time (:func:`check_string_crc`)."""
    view = memoryview(head)
    lengths = []
    pos = 0
    label = shown(entry.key)
    for _ in range(entry.numel):  # (never past the head: a varint is at most 10 bytes)
        length, pos = decode_varint(view, pos, size, what=f"{where}: string length of {label!r}")
        if length > size:  # (a 10-byte varint reaches 2**70: no uint64, no string of this entry)
            raise CorruptError(f"{where}: string length {length} of {label!r} exceeds its {size}-byte entry")
        lengths.append(length)
    if pos + 4 > size:
        raise CorruptError(f"{where}: string lengths longer than expected offset {entry.offset + size} in {label!r}")
    stored = view[pos:pos + 4]
    (masked,) = struct.unpack(">I" if big_endian else "<I", stored)
    expected = _length_checksum(lengths, big_endian)
    if verify and unmask_crc(masked) != expected:
        raise ChecksumError(
            f"{where}: the length checksum does not match for {label!r}: "
            f"expected {expected:08x} but actual is {unmask_crc(masked):08x}"
        )
    pos += 4
    if pos + sum(lengths) != size:
        raise CorruptError(
            f"{where}: string tensor {label!r} holds {pos + sum(lengths)} bytes, its entry says {size}"
        )
    return lengths, pos, crc32c(stored, expected)


def check_string_crc(crc: int, entry: Entry, where: str) -> None:
    """A DT_STRING entry's CRC32C (chained from :func:`string_layout` over the elements'
    bytes) against the stored one."""
    if crc != unmask_crc(entry.crc32c):
        raise ChecksumError(
            f"{where}: checksum does not match for tensor {shown(entry.key)!r}: stored "
            f"{unmask_crc(entry.crc32c):08x}, calculated {crc:08x} at offset {entry.offset}"
        )


def encode_string(values: Iterable[Buffer]) -> tuple[bytes, int]:
    """Encode string elements (row-major); returns (bytes, unmasked crc)."""
    elems = [bytes(v) for v in values]
    lengths = [len(e) for e in elems]
    head = b"".join(encode_varint(n) for n in lengths)
    lcrc = _length_checksum(lengths, False)
    stored = FIXED32.pack(mask_crc(lcrc))
    body = b"".join(elems)
    crc = crc32c(body, crc32c(stored, lcrc))
    return head + stored + body, crc


def string_scalar_head(length: int) -> tuple[bytes, int]:
    """What a string scalar of ``length`` bytes is stored after, and the CRC to go on from:
    ``encode_string([x])`` is ``(head + x, crc32c(x, crc))``; a large value (an object graph) is
    written after its head without being copied."""
    lcrc = _length_checksum([length], False)
    stored = FIXED32.pack(mask_crc(lcrc))
    return encode_varint(length) + stored, crc32c(stored, lcrc)


def decode_variant(buf: BytesLike, entry: Entry, where: str, verify: bool = True) -> np.ndarray:
    """A DT_VARIANT tensor as an object array (see :func:`variant_values`)."""
    return object_array(variant_values(buf, entry, where, verify), entry.shape)


def variant_values(buf: BytesLike, entry: Entry, where: str, verify: bool = True) -> list[bytes]:
    """The elements of a DT_VARIANT tensor as serialized VariantTensorDataProto bytes
    (§4.3). Needs no numpy."""
    view = memoryview(buf)
    size = len(view)
    label = shown(entry.key)
    if entry.numel * 5 > size:  # each element: a varint length and a fixed32 checksum at least
        raise CorruptError(f"{where}: variant tensor {label!r} of {entry.numel} elements cannot fit "
                           f"in its {size} bytes")
    out = []
    pos = 0
    running = 0
    for i in range(entry.numel):
        n, p2 = decode_varint(view, pos, size, what=f"{where}: variant length of {label!r}")
        if p2 + n + 4 > size:
            raise CorruptError(f"{where}: variant element {i} of {label!r} runs past its entry")
        elem = view[p2:p2 + n]
        running = crc32c(elem, crc32c(_LEN64.pack(n), running))
        (stored,) = FIXED32.unpack_from(view, p2 + n)
        if verify and unmask_crc(stored) != running:
            raise ChecksumError(f"{where}: variant element {i} of {label!r} fails its checksum")
        running = crc32c(view[p2 + n:p2 + n + 4], running)
        out.append(bytes(elem))
        pos = p2 + n + 4
    if pos != size:
        raise CorruptError(f"{where}: variant tensor {label!r} holds {pos} bytes, its entry says {size}")
    if verify and running != unmask_crc(entry.crc32c):
        raise ChecksumError(f"{where}: checksum does not match for tensor {label!r}")
    return out


