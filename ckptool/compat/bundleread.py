"""A V2 bundle's values read the way TF's ``BundleReader::Lookup`` reads them, step for step, so
that a damaged data file fails as it fails in TF 2.21, with TF's exception and message:

- a data shard that cannot be opened: ``OpError`` (code UNKNOWN) ``"PATH; No such file or
  directory"`` (or ``"; Is a directory"``), what TF's reader raises for it;
- a read past the end of a data file (a truncated shard): ``IndexError("Read less bytes than
  requested")``, the OUT_OF_RANGE status that TF's Python binding turns into an IndexError;
- a checksum that does not match: ``OpError`` ``"TensorBundle at PREFIX shard N (SIZE bytes):
  Checksum does not match: stored 0123456789 vs. calculated on the restored bytes 42"``, and for
  strings first ``"The length checksum does not match: expected ... but actual is ..."``;
- a partitioned tensor whose slices do not cover it: ``ValueError("Does not have sufficient
  slices for partitioned tensor ...")``; one of a dtype TF's slice copy lacks: ``ValueError("Dtype
  half not supported.")``.

The index comes from ckptool's reader (:class:`~ckptool.ops.read.v2.BundleCheckpoint`, which
opens no data file until asked); the data files are opened here, per :class:`ShardFiles`, as
TF's reader opens them: once per reader, on first use.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from ckptool.compat import errors
from ckptool.compat.hashorder import unordered_map_order
from ckptool.errors import CkptError, MissingError, TensorNotFoundError
from ckptool.format import dtypes as _table
from ckptool.format import tensors
from ckptool.format.bundle import Entry
from ckptool.format.coding import crc32c, unmask_crc
from ckptool.format.slices import Slice, encode_tensor_name_slice, slice_region, slice_shape, tiling_problem
from ckptool.ops.read.checkpoint import name_of

if TYPE_CHECKING:
    import numpy as np

    from ckptool.io.base import Reader
    from ckptool.ops.read.v2 import BundleCheckpoint

SHORT_READ = "Read less bytes than requested"
_CHUNK = 1 << 20  # TF's InputBuffer size
#: The dtypes TF's GetSliceValue copies between slices (HANDLE_COPY); others are "not supported".
_SLICE_COPY = ("float32", "float64", "int32", "uint8", "int16", "int8", "complex64", "complex128", "int64", "bool",
               "qint32", "quint8", "qint8", "bfloat16")


class ShardFiles:
    """The data files of one bundle that one reader has opened, kept open until :meth:`close`
    (TF's reader holds each shard it has read from until it is collected)."""

    def __init__(self, ckpt: BundleCheckpoint) -> None:
        self.ckpt = ckpt
        self._open: dict[int, Reader] = {}

    def get(self, shard_id: int) -> Reader:
        r = self._open.get(shard_id)
        if r is None:
            storage = self.ckpt.storage
            path = self.ckpt.shard_path(shard_id)
            try:
                r = storage.open_reader(path)
            except MissingError:
                why = "Is a directory" if storage.isdir(path) else "No such file or directory"
                raise errors.unknown(f"{path}; {why}") from None
            except CkptError as exc:
                raise errors.unknown(f"{path}; {exc}") from None
            self._open[shard_id] = r
        return r

    def close(self) -> None:
        for r in self._open.values():
            r.close()
        self._open.clear()


class _Stream:
    """Sequential reads from ``offset`` of a data file, buffered, as TF's InputBuffer reads:
    past the end of the file is :data:`SHORT_READ`."""

    def __init__(self, reader: Reader, offset: int) -> None:
        self.r, self.pos = reader, offset
        self.buf, self.start = b"", offset

    def take(self, n: int) -> bytes:
        if self.pos + n > self.r.size:
            raise IndexError(SHORT_READ)
        lo = self.pos - self.start
        if lo + n > len(self.buf):
            self.start = self.pos
            self.buf, lo = bytes(self.r.read(self.pos, min(max(n, _CHUNK), self.r.size - self.pos))), 0
        self.pos += n
        return self.buf[lo:lo + n]

    def varint64(self) -> int:
        value = 0
        for i in range(10):
            b = self.take(1)[0]
            value |= (b & 0x7F) << (7 * i)
            if b < 0x80:
                return value & 0xFFFFFFFFFFFFFFFF
        raise errors.unknown("Stored data longer than 10 bytes.")


def _crc_mismatch(prefix: str, e: Entry, actual: int) -> errors.OpError:
    return errors.unknown(f"TensorBundle at {prefix} shard {e.shard_id} ({e.size} bytes): Checksum does not match: "
                          f"stored {unmask_crc(e.crc32c):08d} vs. calculated on the restored bytes {actual}")


def _fixed(ckpt: BundleCheckpoint, files: ShardFiles, prefix: str, e: Entry) -> np.ndarray:
    import numpy as np

    r = files.get(e.shard_id)
    if e.offset + e.size > r.size:
        raise IndexError(SHORT_READ)
    raw = np.empty(e.size, dtype=np.uint8)
    if e.size:
        r.readinto(e.offset, raw)
    actual = crc32c(raw)
    if actual != unmask_crc(e.crc32c):
        raise _crc_mismatch(prefix, e, actual)
    return tensors.decode_fixed(raw, e, ckpt.header.swaps(e.dtype))


def _strings(ckpt: BundleCheckpoint, files: ShardFiles, prefix: str, e: Entry) -> np.ndarray:
    """TF's ReadStringTensor: varint lengths, their masked checksum, then the bytes."""
    if e.size < e.numel:  # each element has a varint length at least: TF's lower bound, checked before allocating
        raise errors.unknown(f"Invalid size in bundle entry: key {name_of(e.key)}; stored size {e.size}; expected size "
                             f"is at least {e.numel}")
    values = [b""] * e.numel
    actual = 0
    if e.size:
        s = _Stream(files.get(e.shard_id), e.offset)
        swap = ckpt.header.big_endian
        lengths = [s.varint64() for _ in range(e.numel)]
        for n in lengths:
            small = n <= 0xFFFFFFFF
            actual = crc32c(struct.pack((">" if swap else "<") + ("I" if small else "Q"), n), actual)
        if e.offset + e.size < s.pos:
            raise errors.unknown(f"String lengths longer than expected offset {e.offset + e.size}")
        raw = s.take(4)
        stored = unmask_crc(struct.unpack(">I" if swap else "<I", raw)[0])
        if stored != actual:
            raise errors.unknown(f"The length checksum does not match: expected {stored:08d} but actual is "
                                 f"{actual:08d}")
        actual = crc32c(raw, actual)
        for i, n in enumerate(lengths):
            values[i] = s.take(n)
            actual = crc32c(values[i], actual)
    if actual != unmask_crc(e.crc32c):
        raise _crc_mismatch(prefix, e, actual)
    return tensors.object_array(values, e.shape)


def get_value(ckpt: BundleCheckpoint, files: ShardFiles, prefix: str, e: Entry) -> np.ndarray:
    """The value of one plain entry (TF's BundleReader::GetValue)."""
    if e.dtype.kind == _table.STRING:
        return _strings(ckpt, files, prefix, e)
    return _fixed(ckpt, files, prefix, e)


def _debug_string(sl: Slice) -> str:
    """TF's TensorSlice::DebugString: ``-`` for a whole dimension, else ``start,length``."""
    return ":".join("-" if length == -1 else f"{start},{length}" for start, length in sl)


def lookup(ckpt: BundleCheckpoint, files: ShardFiles, prefix: str, key: bytes) -> np.ndarray:
    """The value of the tensor at ``key`` (TF's BundleReader::Lookup): a plain entry read
    whole, a partitioned one slice by slice in the order TF's slice set walks them."""
    try:
        e = ckpt.entry(key)
    except CkptError as exc:
        raise errors.unknown(str(exc)) from exc
    if not e.slices:
        return get_value(ckpt, files, prefix, e)
    import numpy as np

    problem = tiling_problem(e.shape, e.slices)
    if problem is not None:
        if "gaps" in problem or "no slices" in problem:
            full = ":".join("-" for _ in e.shape)
            raise ValueError(f"Does not have sufficient slices for partitioned tensor {name_of(key)} to restore "
                             f"in slice_spec: {full}")
        raise errors.unknown(f"{name_of(key)}: {problem}")
    by_text = {_debug_string(sl).encode(): sl for sl in e.slices}
    order = [by_text[t] for t in unordered_map_order(list(by_text)) or list(by_text)]
    fixed = e.dtype.kind == _table.FIXED
    # TF allocates the whole tensor first; here only once its slices are known to fit in their files
    out = np.empty(e.shape, dtype=e.dtype.numpy) if fixed and _fits(ckpt, files, key, order) else None
    for sl in order:
        part_key = encode_tensor_name_slice(key, sl)
        try:
            part = ckpt.entry(part_key)
        except TensorNotFoundError:
            raise errors.NotFoundError(None, None, f"Key {_printable(part_key)} not found in checkpoint") from None
        except CkptError as exc:
            raise errors.unknown(str(exc)) from exc
        value = get_value(ckpt, files, prefix, part)
        if not fixed or e.dtype.name not in _SLICE_COPY:
            raise ValueError(f"Dtype {e.dtype.enum_name[3:].lower()} not supported.")
        if tuple(value.shape) != slice_shape(sl, e.shape):
            raise errors.unknown(f"{name_of(part_key)}: slice of shape {list(value.shape)}")
        if out is not None:
            out[slice_region(sl, e.shape)] = value
    if out is None:
        raise errors.unknown(f"{name_of(key)}: its slices hold more bytes than its data files")
    return out


def _fits(ckpt: BundleCheckpoint, files: ShardFiles, key: bytes, order: list[Slice]) -> bool:
    """Whether the slices' entries claim no more bytes than their data files hold (so that the
    whole tensor, which they tile, is no larger than the files)."""
    need, shards = 0, set()
    for sl in order:
        try:
            part = ckpt.entry(encode_tensor_name_slice(key, sl))
        except CkptError:
            continue  # reported in order by the reading loop
        need += part.size
        shards.add(part.shard_id)
    have = 0
    for sid in shards:
        try:
            have += files.get(sid).size
        except errors.OpError:
            continue
    return need <= have


def _printable(key: bytes) -> str:
    return key.decode("utf-8", "replace")

