"""Tensors to save, from ``.npz``, ``.npy``, ``.safetensors`` files or another checkpoint.

Every source is a stream of ``(name, value)``: ``value`` is a numpy array, or
a :class:`RawTensor` (a V2 checkpoint's entry, copied byte for byte by the
writer without decoding). Sources open lazily and yield one tensor at a time,
so memory stays bounded by the largest tensor. :func:`save` is the library
side of ``ckptool save``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ckptool.errors import CkptError, CorruptError, MissingError, UnsupportedError
from ckptool.format import bundle
from ckptool.format.bundle import Entry

if TYPE_CHECKING:
    from ckptool.ops.read_v2 import BundleCheckpoint

NPZ, NPY, SAFETENSORS, CHECKPOINT = "npz", "npy", "safetensors", "checkpoint"


# --------------------------------------------------------------------------- raw copies


@dataclass
class RawTensor:
    """A tensor of a V2 checkpoint, to copy without decoding (CRC kept)."""

    checkpoint: BundleCheckpoint
    entry: Entry
    verify: bool = True

    def write_to(self, writer, key: str) -> None:
        e = self.entry
        if not e.slices:
            writer.add_raw(key, e, self.checkpoint.read_raw(e, verify=self.verify))
            return
        # A partitioned tensor: its full entry, then each slice under the new name's slice key.
        writer.add_raw(key, e, None)
        new = key.encode("utf-8", "surrogateescape")
        for sl in e.slices:
            part = self.checkpoint.entry(bundle.encode_tensor_name_slice(e.key, sl))
            writer.add_raw(bundle.encode_tensor_name_slice(new, sl), part,
                           self.checkpoint.read_raw(part, verify=self.verify))

    @property
    def nbytes(self) -> int:
        if not self.entry.slices:
            return self.entry.size
        return sum(self.checkpoint.entry(bundle.encode_tensor_name_slice(self.entry.key, sl)).size
                   for sl in self.entry.slices)


# --------------------------------------------------------------------------- sources


def kind_of(path: str) -> str:
    low = path.lower()
    if low.endswith(".npz"):
        return NPZ
    if low.endswith(".npy"):
        return NPY
    if low.endswith(".safetensors"):
        return SAFETENSORS
    return CHECKPOINT


class Source:
    """One ``--from`` argument: ``names()`` without loading, ``items()`` streaming."""

    def __init__(self, path: str):
        self.path = path
        self.kind = kind_of(path)
        self._closers: list[Callable[[], object]] = []

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        while self._closers:
            try:
                self._closers.pop()()
            except Exception:
                pass

    def names(self) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def items(self) -> Iterator[tuple[str, object]]:  # pragma: no cover - abstract
        raise NotImplementedError


def _check_file(path: str) -> None:
    import os

    if not os.path.exists(path):
        raise MissingError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise CkptError(f"{path}: is not a file")


def _pickle_hint(path: str, exc: Exception, what: str) -> CkptError:
    if "allow_pickle" in str(exc):
        return UnsupportedError(f"{path}: {what} holds an object array, which only pickle can load; "
                                f"ckptool does not unpickle files (store strings as a bytes 'S' array)")
    return CorruptError(f"{path}: cannot read {what}: {exc}")


class NpzSource(Source):
    def __init__(self, path: str):
        super().__init__(path)
        _check_file(path)
        try:
            self._z = np.load(path, allow_pickle=False)
        except Exception as exc:
            raise CorruptError(f"{path}: not a readable .npz file: {exc}") from None
        if not hasattr(self._z, "files"):
            raise CorruptError(f"{path}: is a .npy array, not an .npz archive")
        self._closers.append(self._z.close)

    def names(self) -> list[str]:
        return list(self._z.files)

    def items(self):
        for name in self._z.files:
            try:
                arr = self._z[name]
            except ValueError as exc:
                raise _pickle_hint(self.path, exc, f"member {name!r}") from None
            except Exception as exc:
                raise CorruptError(f"{self.path}: cannot read member {name!r}: {exc}") from None
            yield name, arr


class NpySource(Source):
    def __init__(self, path: str):
        super().__init__(path)
        _check_file(path)
        import os

        base = os.path.basename(path)
        self.name = base[: -len(".npy")] if base.lower().endswith(".npy") else base

    def names(self) -> list[str]:
        return [self.name]

    def items(self):
        try:
            arr = np.load(self.path, mmap_mode="r", allow_pickle=False)
        except ValueError as exc:
            raise _pickle_hint(self.path, exc, "the array") from None
        except Exception as exc:
            raise CorruptError(f"{self.path}: not a readable .npy file: {exc}") from None
        yield self.name, arr


# safetensors dtype -> numpy dtype (spec), for tensors read from the raw bytes.
_ST_DTYPES = {
    "BOOL": "?", "U8": "u1", "I8": "i1", "I16": "<i2", "U16": "<u2", "I32": "<i4", "U32": "<u4",
    "I64": "<i8", "U64": "<u8", "F16": "<f2", "F32": "<f4", "F64": "<f8", "C64": "<c8",
    "BF16": "ml:bfloat16", "F8_E5M2": "ml:float8_e5m2", "F8_E4M3": "ml:float8_e4m3fn",
}


def _st_numpy(spec: str) -> np.dtype:
    if spec.startswith("ml:"):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, spec[3:]))
    return np.dtype(spec)


class SafetensorsSource(Source):
    """A ``.safetensors`` file.

    The header (8-byte length, JSON) is parsed here to list names, dtypes and
    offsets without loading data. Values come from the safetensors package's
    numpy loader (``safe_open(..., framework="np")``, which loads BF16 as
    ml_dtypes.bfloat16). Its numpy loader cannot build float8 arrays (0.8.0
    looks for ``np.float8_e4m3fn``, which numpy lacks), so for any dtype the
    package fails on, the tensor's raw little-endian bytes are read directly at
    the header's offsets and viewed as the ml_dtypes type: no value changes.
    """

    _LEN = struct.Struct("<Q")

    def __init__(self, path: str):
        super().__init__(path)
        _check_file(path)
        self._header, self._data_start = self._read_header(path)
        self._handle: Any = None  # safetensors' safe_open, when the package is there

    @classmethod
    def _read_header(cls, path: str):
        import os

        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise CorruptError(f"{path}: too short to be a .safetensors file ({size} bytes)")
            (n,) = cls._LEN.unpack(head)
            if n > size - 8:
                raise CorruptError(f"{path}: header length {n} runs past the end of the file ({size} bytes)")
            raw = f.read(n)
        try:
            header = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            raise CorruptError(f"{path}: unparsable safetensors header: {exc}") from None
        if not isinstance(header, dict):
            raise CorruptError(f"{path}: safetensors header is not a JSON object")
        data_start = 8 + n
        out = []
        for name, info in header.items():
            if name == "__metadata__":
                continue
            try:
                dtype = info["dtype"]
                shape = tuple(int(d) for d in info["shape"])
                begin, end = (int(x) for x in info["data_offsets"])
            except (KeyError, TypeError, ValueError):
                raise CorruptError(f"{path}: malformed header entry for {name!r}") from None
            if not 0 <= begin <= end or data_start + end > size:
                raise CorruptError(f"{path}: tensor {name!r} at [{begin}, {end}) runs past the end of the file")
            out.append((name, dtype, shape, begin, end))
        out.sort(key=lambda t: t[3])  # file order: sequential reads
        return out, data_start

    def names(self) -> list[str]:
        return [t[0] for t in self._header]

    def _package(self):
        if self._handle is None:
            try:
                from safetensors import safe_open
            except ImportError:
                return None
            try:
                self._handle = safe_open(self.path, framework="np")
            except Exception as exc:
                raise CorruptError(f"{self.path}: safetensors cannot open it: {exc}") from None
            self._closers.append(lambda: setattr(self, "_handle", None))
        return self._handle

    def items(self):
        for name, dtype, shape, begin, end in self._header:
            arr = None
            handle = self._package()
            if handle is not None:
                try:
                    arr = handle.get_tensor(name)
                except Exception:
                    arr = None  # a dtype the package's numpy side cannot build: read the bytes
            if arr is None:
                arr = self._raw(name, dtype, shape, begin, end)
            yield name, arr

    def _raw(self, name, dtype, shape, begin, end) -> np.ndarray:
        spec = _ST_DTYPES.get(dtype)
        if spec is None:
            raise UnsupportedError(f"{self.path}: tensor {name!r} has safetensors dtype {dtype}, "
                                   f"which no TensorFlow dtype holds exactly")
        dt = _st_numpy(spec)
        numel = 1
        for d in shape:
            numel *= d
        if numel * dt.itemsize != end - begin:
            raise CorruptError(f"{self.path}: tensor {name!r} ({dtype} {list(shape)}) needs "
                               f"{numel * dt.itemsize} bytes, its offsets span {end - begin}")
        arr = np.fromfile(self.path, dtype=dt, count=numel, offset=self._data_start + begin)
        if arr.size != numel:
            raise CorruptError(f"{self.path}: tensor {name!r} is truncated")
        return arr.reshape(shape)


class CheckpointSource(Source):
    """Another checkpoint (any CHECKPOINT form). V2 entries are copied raw; V1 is decoded."""

    def __init__(self, path: str, verify: bool = True):
        super().__init__(path)
        from ckptool.ops.read import BundleCheckpoint
        from ckptool.ops.read import open as open_checkpoint

        self.ck = open_checkpoint(path)
        self._closers.append(self.ck.close)
        self.raw = isinstance(self.ck, BundleCheckpoint) and not self.ck.header.big_endian
        self.verify = verify

    def names(self) -> list[str]:
        return self.ck.names()

    def items(self):
        if not self.raw:
            for name in self.ck.names():
                yield name, self.ck.read(name, verify=self.verify)
            return
        ck = cast("BundleCheckpoint", self.ck)  # raw: a V2 bundle
        names = ck.names()
        # Data order of the source (shard, offset): a single-shard copy reproduces its data file.
        def order(name):
            e = ck.entry(name.encode("utf-8", "surrogateescape"))
            return (1, 0, 0) if e.slices else (0, e.shard_id, e.offset)
        for name in sorted(names, key=order):
            yield name, RawTensor(ck, ck.entry(name.encode("utf-8", "surrogateescape")), self.verify)


def open_source(path: str) -> Source:
    kind = kind_of(path)
    if kind == NPZ:
        return NpzSource(path)
    if kind == NPY:
        return NpySource(path)
    if kind == SAFETENSORS:
        return SafetensorsSource(path)
    return CheckpointSource(path)


def _wait_lock(storage, prefix: str):
    """DIR's lock, waited for (bounded) and held from before the first write to the record."""
    from ckptool.io.lock import lock_directory

    directory = storage.dirname(prefix) or "."
    if not storage.isdir(directory):
        return None
    lock = lock_directory(storage, directory)
    lock.__enter__()
    return lock


def _record(storage, prefix: str, max_to_keep, keep_every_n_hours, now):
    from ckptool.ops.prune import record_save

    directory = storage.dirname(prefix) or "."
    return record_save(directory, prefix, max_to_keep=max_to_keep,
                       keep_every_n_hours=keep_every_n_hours, now=now, storage=storage)


__all__ = ["open_source", "Source", "RawTensor", "kind_of"]
