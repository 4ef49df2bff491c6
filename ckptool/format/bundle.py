"""Tensor bundles (V2 checkpoints): file names, the header and the entries of the index.

Tensor byte layouts are in :mod:`ckptool.format.tensors`, slices in
:mod:`ckptool.format.slices` (both re-exported here).

docs/FORMAT.md §1, §3, §4 (tensorflow/core/util/tensor_bundle/{naming,tensor_bundle}.cc).
The ``.index`` table maps ``""`` to a BundleHeaderProto and every tensor key
to a BundleEntryProto; tensor bytes live in ``.data-NNNNN-of-MMMMM`` files.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from ckptool.errors import CkptError, CorruptError, UnsupportedError
from ckptool.format import dtypes
from ckptool.format.coding import BytesLike
from ckptool.format.entry import Entry as Entry  # X as X: re-exported, callers name it bundle.Entry
from ckptool.format.entry import numel
from ckptool.format.objkeys import shown
from ckptool.format.protos.tensor_bundle_pb2 import BundleEntryProto, BundleHeaderProto, TensorShapeProto
from ckptool.format.slices import Slice as Slice  # X as X: re-exported, callers name them bundle.*
from ckptool.format.slices import encode_tensor_name_slice as encode_tensor_name_slice
from ckptool.format.slices import is_full_slice as is_full_slice
from ckptool.format.slices import slice_region as slice_region
from ckptool.format.slices import slice_shape as slice_shape
from ckptool.format.slices import tiling_problem as tiling_problem
from ckptool.format.tensors import check_crc as check_crc
from ckptool.format.tensors import decode_string as decode_string
from ckptool.format.tensors import decode_variant as decode_variant
from ckptool.format.tensors import encode_string as encode_string

HEADER_KEY = b""
INDEX_SUFFIX = ".index"
BUNDLE_VERSION = 1  # kTensorBundleVersion: producer written, min_consumer 0
CONSUMER_VERSION = 1
MAX_DIMS = 254
INT64_MAX = (1 << 63) - 1
LITTLE, BIG = 0, 1
HOST_ENDIANNESS = BIG if sys.byteorder == "big" else LITTLE

DATA_RE = re.compile(r"^(?P<prefix>.*)\.data-(?P<shard>\d{5,})-of-(?P<num>\d{5,})$")


def data_filename(prefix: str, shard_id: int, num_shards: int) -> str:
    return f"{prefix}.data-{shard_id:05d}-of-{num_shards:05d}"


def index_filename(prefix: str) -> str:
    return prefix + INDEX_SUFFIX


# --------------------------------------------------------------------------- header


@dataclass(frozen=True)
class Header:
    num_shards: int
    endianness: int
    producer: int
    min_consumer: int
    bad_consumers: tuple[int, ...] = ()

    @property
    def big_endian(self) -> bool:
        return self.endianness == BIG

    @property
    def raw_copy(self) -> bool:
        """Whether the stored bytes of a fixed-size tensor are its values as ckptool reads and
        writes them (little-endian): then they may be copied, or viewed, as they are."""
        return self.endianness == LITTLE

    def swaps(self, dtype: dtypes.DType) -> bool:
        """Whether ``dtype``'s stored elements are byte-swapped when read (a big-endian
        bundle; a one-byte element reads the same either way)."""
        return self.endianness == BIG and dtype.itemsize > 1


def parse_header(value: BytesLike, name: str) -> Header:
    try:
        proto = BundleHeaderProto.FromString(bytes(value))
    except DecodeError:
        raise CorruptError(f"{name}: unable to parse header") from None
    v = proto.version
    if v.producer < 0:
        raise CorruptError(f"{name}: checkpoint producer version {v.producer} below min producer 0")
    if v.min_consumer > CONSUMER_VERSION:
        raise UnsupportedError(
            f"{name}: checkpoint min consumer version {v.min_consumer} above supported version "
            f"{CONSUMER_VERSION}; it was written by a newer TensorFlow"
        )
    if CONSUMER_VERSION in v.bad_consumers:
        raise UnsupportedError(f"{name}: checkpoint disallows consumer version {CONSUMER_VERSION}")
    if proto.num_shards <= 0:
        raise CorruptError(f"{name}: header says num_shards = {proto.num_shards}")
    if proto.endianness not in (LITTLE, BIG):
        raise CorruptError(f"{name}: header has unknown endianness {proto.endianness}")
    return Header(proto.num_shards, proto.endianness, v.producer, v.min_consumer, tuple(v.bad_consumers))


def encode_header(num_shards: int, endianness: int = HOST_ENDIANNESS) -> bytes:
    proto = BundleHeaderProto(num_shards=num_shards, endianness=endianness)
    proto.version.producer = BUNDLE_VERSION
    return proto.SerializeToString()  # type: ignore[no-any-return]  # protobuf messages are untyped


# --------------------------------------------------------------------------- entries


def shape_from_proto(shape: TensorShapeProto, what: str) -> tuple[int, ...]:
    if shape.unknown_rank:
        raise CorruptError(f"invalid tensor shape: {what} has unknown rank")
    dims = tuple(d.size for d in shape.dim)
    check_shape(dims, what)
    return dims


def check_shape(dims: Sequence[int], what: str) -> None:
    if len(dims) > MAX_DIMS:
        raise CorruptError(f"invalid tensor shape: {what} has {len(dims)} dimensions (max {MAX_DIMS})")
    n = 1
    for d in dims:
        if d < 0:
            raise CorruptError(f"invalid tensor shape: {what} {list(dims)}")
        n *= d
        if n > INT64_MAX:
            raise CorruptError(f"invalid tensor shape: {what} {list(dims)} (element count overflows)")


def slice_from_proto(proto: Any, rank: int, what: str) -> Slice:
    if len(proto.extent) != rank:
        raise CorruptError(f"{what}: slice has {len(proto.extent)} dimensions, tensor has {rank}")
    out = []
    for ext in proto.extent:
        if ext.WhichOneof("has_length") is None:
            if ext.start:
                raise CorruptError(f"{what}: slice extent starts at {ext.start} without a length")
            out.append((0, -1))
        else:
            if ext.start < 0 or ext.length < 0:
                raise CorruptError(f"{what}: slice extent ({ext.start}, {ext.length}) is negative")
            out.append((ext.start, ext.length))
    return tuple(out)


_Head = tuple[dtypes.DType, tuple[int, ...], int]
_HEADS: dict[bytes, _Head] = {}  # serialized dtype + shape fields -> (dtype, shape, numel), validated
_HEADS_MAX = 4096


def _entry_head(value: bytes) -> bytes | None:
    """The leading ``dtype`` and ``shape`` fields of a serialized entry, as TF (and
    every protobuf serializer) writes them: tag 0x08, a one-byte dtype, tag 0x12, a
    one-byte length and the shape message. None for any other layout."""
    if len(value) > 3 and value[0] == 0x08 and value[2] == 0x12 and value[1] < 0x80 and value[3] < 0x80:
        return value[:4 + value[3]]
    return None


def _varint(value: bytes, pos: int, max_bytes: int) -> tuple[int | None, int]:
    """``(value, end)`` of the varint at ``pos``; ``(None, pos)`` if it runs past
    ``max_bytes`` or the buffer."""
    x = shift = 0
    for pos in range(pos, min(pos + max_bytes, len(value))):  # noqa: B020 - pos continues past the loop
        b = value[pos]
        x |= (b & 0x7F) << shift
        if b < 0x80:
            return x, pos + 1
        shift += 7
    return None, pos


def _entry_tail(value: bytes, pos: int) -> tuple[int, int, int, int] | None:
    """``(shard_id, offset, size, crc32c)`` from the fields after the head, when they
    are laid out as TF writes them: each at most once, in field order, varints short
    enough to be non-negative (shard_id up to 4 bytes, offset and size up to 9),
    nothing else (no slices). None otherwise."""
    n = len(value)
    shard_id: int | None
    offset: int | None
    size: int | None
    shard_id = offset = size = crc = 0
    if pos < n and value[pos] == 0x18:  # shard_id
        shard_id, pos = _varint(value, pos + 1, 4)
        if shard_id is None:
            return None
    if pos < n and value[pos] == 0x20:  # offset: the one long varint, inlined up to 3 bytes
        if pos + 3 < n and (b := value[pos + 1]) & value[pos + 2] & value[pos + 3] & 0x80 == 0:
            if b < 0x80:
                offset, pos = b, pos + 2
            elif (c := value[pos + 2]) < 0x80:
                offset, pos = (b & 0x7F) | c << 7, pos + 3
            else:
                offset, pos = (b & 0x7F) | (c & 0x7F) << 7 | value[pos + 3] << 14, pos + 4
        else:
            offset, pos = _varint(value, pos + 1, 9)
            if offset is None:
                return None
    if pos < n and value[pos] == 0x28:  # size
        if pos + 1 < n and (b := value[pos + 1]) < 0x80:
            size, pos = b, pos + 2
        else:
            size, pos = _varint(value, pos + 1, 9)
            if size is None:
                return None
    if pos + 5 == n and value[pos] == 0x35:  # crc32c, fixed32
        crc = int.from_bytes(value[pos + 1:], "little")
    elif pos != n:
        return None
    return shard_id, offset, size, crc


def listing_head(value: bytes) -> tuple[bytes, str, tuple[int, ...], int] | None:
    """For listing: ``(head, dtype name, shape, nbytes)`` of an entry laid out as TF
    writes it (see :func:`_entry_head`) whose dtype has a fixed size, read from its
    ``dtype`` and ``shape`` fields alone; None for any other entry, which
    :func:`parse_entry` then parses in full. The stored size, offset and CRC are
    checked when the tensor is read."""
    head = _entry_head(value)
    if head is None:
        return None
    try:
        dtype, shape, n = _validate_head(BundleEntryProto.FromString(head), b"", "")
    except (DecodeError, CkptError):
        return None
    if dtype.kind != dtypes.FIXED:
        return None
    return head, dtype.name, shape, n * dtype.itemsize


def parse_entry(key: bytes, value: BytesLike, name: str) -> Entry:
    """Parse and validate one BundleEntryProto.

    This is the inner loop of listing a checkpoint, so the layout TF writes takes a
    fast path: its dtype and shape fields, which most entries of a checkpoint share,
    are parsed (by protobuf) and validated once per distinct serialization, and the
    four integers after them are decoded here. Any other layout (slices, fields out
    of order or repeated, unknown fields, anything invalid) is left to
    :func:`parse_entry_proto`; both give the same result."""
    if type(value) is not bytes:
        value = bytes(value)
    head = _entry_head(value)
    if head is not None:
        known = _HEADS.get(head)
        if known is None and len(_HEADS) < _HEADS_MAX:
            try:
                known = _HEADS[head] = _validate_head(BundleEntryProto.FromString(head), key, name)
            except (DecodeError, CkptError):
                known = None  # the full parse below says what is wrong
        tail = _entry_tail(value, len(head)) if known is not None else None
        if tail is not None and known is not None:
            dtype, shape, n = known
            return _checked(Entry(key, dtype, shape, *tail, ()), n, name)
    return parse_entry_proto(key, value, name)


def parse_entry_proto(key: bytes, value: BytesLike, name: str) -> Entry:
    """:func:`parse_entry` by protobuf alone, for every layout."""
    try:
        proto = BundleEntryProto.FromString(value)
    except DecodeError:
        raise CorruptError(f"{name}: entry for key {shown(key)!r} not parseable") from None
    dtype, shape, n = _validate_head(proto, key, name)
    shard_id, offset, size = proto.shard_id, proto.offset, proto.size
    if shard_id < 0 or offset < 0 or size < 0:
        raise CorruptError(
            f"{name}: entry {shown(key)!r} has negative shard/offset/size ({shard_id}, {offset}, {size})")
    slices = tuple(slice_from_proto(sl, len(shape), f"{name}: entry {shown(key)!r}")
                   for sl in proto.slices) if proto.slices else ()
    return _checked(Entry(key, dtype, shape, shard_id, offset, size, proto.crc32c, slices), n, name)


def _checked(e: Entry, n: int, name: str) -> Entry:
    """``e`` if its size agrees with its dtype and shape (``n`` elements)."""
    kind = e.dtype.kind
    if not e.slices and kind == dtypes.FIXED:
        if e.size != n * e.dtype.itemsize:
            raise CorruptError(
                f"{name}: invalid size in bundle entry: key {shown(e.key)!r}; stored size {e.size}; "
                f"expected size {n * e.dtype.itemsize}"
            )
    elif not e.slices and kind == dtypes.STRING and e.size < 4:
        raise CorruptError(f"{name}: invalid size in bundle entry: key {shown(e.key)!r}; string tensor of "
                           f"{e.size} bytes")
    elif kind == dtypes.NONE:
        raise UnsupportedError(f"{name}: entry {shown(e.key)!r} has dtype {e.dtype.name}, which holds no data")
    return e


def _validate_head(proto: Any, key: bytes, name: str) -> _Head:
    """The entry's dtype, shape and element count, or the error that says what is wrong."""
    dtype = dtypes.BY_VALUE.get(proto.dtype)
    if dtype is None:
        dtype = dtypes.from_value(proto.dtype, f"{name}: entry {shown(key)!r}")  # raises, naming it
    shape = shape_from_proto(proto.shape, f"{name}: entry {shown(key)!r}")
    return dtype, shape, numel(shape)


def encode_entry(dtype: dtypes.DType, shape: Iterable[int], shard_id: int, offset: int, size: int, crc: int,
                 slices: Iterable[Slice] = ()) -> bytes:
    proto = BundleEntryProto(dtype=dtype.value, shard_id=shard_id, offset=offset, size=size, crc32c=crc)
    proto.shape.SetInParent()
    for d in shape:
        proto.shape.dim.add(size=d)
    for sl in slices:
        sp = proto.slices.add()
        for start, length in sl:
            ext = sp.extent.add()
            if length != -1:
                ext.start = start
                ext.length = length
    return proto.SerializeToString()  # type: ignore[no-any-return]  # protobuf messages are untyped
