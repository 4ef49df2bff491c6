"""``CheckpointReader`` as TensorFlow 2.21 opens and answers it, on ckptool's readers.

Opening follows TF's ``CheckpointReader`` constructor: ``P.index`` present means a V2
bundle at ``P``; otherwise ``P`` is a file pattern of V1 tables (no match: ``NotFoundError``
"Unsuccessful TensorSliceReader constructor: Failed to find any matching files for P").
The reading itself is ckptool's (:func:`ckptool.io.layout.checkpoints.locate`,
:mod:`ckptool.ops.read`), values as ``get_tensor`` returns them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptool.compat import bundleread, errors
from ckptool.compat.dtypes import DType
from ckptool.compat.hashorder import unordered_map_order
from ckptool.compat.schemes import served, unimplemented
from ckptool.format import dtypes as _table
from ckptool.format.bundle import INDEX_SUFFIX
from ckptool.format.table import FOOTER_SIZE
from ckptool.io.backends.urls import storage_for
from ckptool.io.base import Storage
from ckptool.io.layout.checkpoints import V2, is_index, is_v1_table
from ckptool.ops.read.checkpoint import Checkpoint, Variable, key_of, name_of
from ckptool.ops.read.reader import open as open_checkpoint
from ckptool.ops.read.v1 import V1Checkpoint
from ckptool.ops.read.v2 import BundleCheckpoint

if TYPE_CHECKING:
    import numpy as np

_MAGIC = "*?["
#: What TF's V1 reader (TensorSliceReader::GetTensor) copies; other dtypes are UnimplementedError there.
V1_READABLE = ("float32", "float64", "int32", "uint8", "int16", "int8", "int64", "bool", "string")
_AGAIN = "perhaps your file is in a different file format and you need to use a different restore operator?"


def matching_files(storage: Storage, path: str) -> list[str]:
    """TF's ``GetMatchingPaths``: the files a pattern names (glob characters in the last
    component), or the path itself when it exists."""
    base = storage.basename(path)
    if any(c in base for c in _MAGIC):
        d = storage.dirname(path)
        return [storage.join(d, n) if d else n for n in storage.glob(d, base)]
    return [path] if path and storage.exists(path) else []


def as_path(value: Any, what: str = "filepattern") -> str:
    """A str from the str or bytes TF's C++ readers accept; anything else is TF's TypeError."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, str):
        return value
    raise TypeError(f"Expected binary or unicode string, got {value!r}")


def _tensor_name(value: Any) -> str:
    if isinstance(value, bytes):
        return name_of(value)
    if isinstance(value, str):
        return value
    raise TypeError(f"Expected binary or unicode string, got {value!r}")


class CheckpointReader:
    """TF's ``CheckpointReader`` (what ``tf.train.load_checkpoint`` and
    ``tf.compat.v1.train.NewCheckpointReader`` return)."""

    def __init__(self, filepattern: Any) -> None:
        self._pattern = as_path(filepattern)
        self._map_order: list[Variable] | None = None
        self._files: bundleread.ShardFiles | None = None
        if not served(self._pattern):  # TF's reader, on a scheme with no file system
            raise ValueError(f"Unsuccessful TensorSliceReader constructor: Failed to get matching files on "
                             f"{self._pattern}: UNIMPLEMENTED: {unimplemented(self._pattern).message}")
        with errors.translated():
            storage, path = storage_for(self._pattern)
            if storage.isfile(path + INDEX_SUFFIX):
                self._ckpt: Checkpoint | None = open_checkpoint(path, storage)
            elif matching_files(storage, path + INDEX_SUFFIX):  # a pattern: TF opens it literally
                raise errors.unknown(f"{self._pattern}{INDEX_SUFFIX}; No such file or directory")
            else:
                self._ckpt = self._open_v1(storage, path)
        if isinstance(self._ckpt, BundleCheckpoint):
            self._files = bundleread.ShardFiles(self._ckpt)

    @classmethod
    def over_index(cls, filepattern: str, ckpt: BundleCheckpoint) -> CheckpointReader:
        """A reader of the V2 bundle ``filepattern`` whose index ``ckpt`` has already read (a
        cached one): it opens the data files afresh, as a new TF reader does."""
        self = cls.__new__(cls)
        self._pattern, self._map_order = filepattern, None
        self._ckpt, self._files = ckpt, bundleread.ShardFiles(ckpt)
        return self

    def _open_v1(self, storage: Storage, path: str) -> Checkpoint | None:
        """TF's TensorSliceReader on a file pattern; None for V2 index files, which it
        reads as tables without tensors."""
        files = matching_files(storage, path)
        if not files:
            raise errors.NotFoundError(None, None, "Unsuccessful TensorSliceReader constructor: Failed to find any "
                                                   f"matching files for {self._pattern}")
        tables = []
        for f in files:
            if storage.isdir(f):
                raise errors.DataLossError(None, None, f"Unable to open table file {f}: FAILED_PRECONDITION: "
                                                       f"{f.rstrip('/')}; Is a directory: {_AGAIN}")
            if is_v1_table(storage, f):
                tables.append(f)
            elif not is_index(storage, f):
                why = "file is too short to be an sstable" if storage.size(f) < FOOTER_SIZE else \
                    "not an sstable (bad magic number)"
                raise errors.DataLossError(None, None, f"Unable to open table file {f}: DATA_LOSS: {why}: {_AGAIN}")
        if not tables:
            return None
        return open_checkpoint(tables[0] if len(files) == 1 else path, storage)

    def __repr__(self) -> str:
        return f"<ckptool.compat.tf CheckpointReader {self._pattern!r}>"

    def close(self) -> None:
        """Close the data files opened so far (TF's reader has no such method: its files
        close when it is collected; so do these)."""
        if self._files is not None:
            self._files.close()
        elif self._ckpt is not None:
            self._ckpt.close()

    def __del__(self) -> None:
        files = getattr(self, "_files", None)
        if files is not None:
            files.close()

    @property
    def _v1(self) -> bool:
        return self._ckpt is not None and self._ckpt.format != V2

    def has_tensor(self, tensor_str: Any) -> bool:
        """Whether the checkpoint holds a variable of that name (no ``:0`` stripping; as in
        TF, ``""``, the key of a V2 bundle's header, is there too)."""
        name = _tensor_name(tensor_str)
        if self._ckpt is None:
            return False
        return name in self._ckpt or (name == "" and not self._v1)

    def get_tensor(self, tensor_str: Any) -> Any:
        """The value as TF returns it: an ndarray; a numpy scalar for rank 0, ``bytes`` for a
        scalar string; an object array of bytes for strings."""
        name = _tensor_name(tensor_str)
        if self._ckpt is None or name not in self._ckpt:
            msg = f"{name} not found in checkpoint file" if self._v1 or self._ckpt is None else \
                f"Key {name} not found in checkpoint"
            raise errors.NotFoundError(None, None, msg)
        if isinstance(self._ckpt, BundleCheckpoint) and self._files is not None:
            with errors.translated():
                dt = self._ckpt.entry(key_of(name)).dtype
            if dt.kind in (_table.VARIANT, _table.NONE):
                raise errors.InternalError(None, None, f"Tensorflow type {dt.value} not convertible to numpy dtype.")
            value: np.ndarray = bundleread.lookup(self._ckpt, self._files, self._pattern, key_of(name))
            return value[()] if value.ndim == 0 else value
        with errors.translated():
            dt, sliced = self._kind(name)
            if dt.kind in (_table.VARIANT, _table.NONE):
                raise errors.InternalError(None, None, f"Tensorflow type {dt.value} not convertible to numpy dtype.")
            if sliced:
                raise errors.UnimplementedError(None, None, "Sliced checkpoints are not supported")
            if dt.name not in V1_READABLE:
                raise errors.UnimplementedError(None, None, "Data type not supported")
            value = self._ckpt.read(name)
        return value[()] if value.ndim == 0 else value

    def _kind(self, name: str) -> tuple[_table.DType, bool]:
        """The dtype of a V1 variable and whether it is partitioned."""
        ckpt = self._ckpt
        if ckpt is None:  # pragma: no cover - callers check
            raise errors.NotFoundError(None, None, f"{name} not found in checkpoint file")
        v = ckpt.variable(name)
        return _table.from_name(v.dtype), v.num_slices > 0

    def variables(self) -> list[Variable]:
        """The variables sorted by name (what ``list_variables`` lists)."""
        if self._ckpt is None:
            return []
        with errors.translated():
            return self._ckpt.variables()

    def _in_map_order(self) -> list[Variable]:
        """The variables in the order TF's maps iterate: TF fills a C++ ``unordered_map`` (V2:
        in key order; V1: from another one, filled file by file) and the dict follows it."""
        if self._map_order is None:
            variables = self.variables()
            if isinstance(self._ckpt, V1Checkpoint):
                first = unordered_map_order([key_of(n) for n in self._ckpt.stored_order()])
                order = unordered_map_order(first) if first is not None else None
            else:
                order = unordered_map_order([key_of(v.name) for v in variables])
            if order is None:
                self._map_order = variables
            else:
                by_key = {key_of(v.name): v for v in variables}
                self._map_order = [by_key[k] for k in order]
        return self._map_order

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        """Name -> shape (a list) of every variable; partitioned ones once, full shape."""
        return {v.name: list(v.shape) for v in self._in_map_order()}

    def get_variable_to_dtype_map(self) -> dict[str, DType]:
        """Name -> :class:`~ckptool.compat.dtypes.DType` of every variable."""
        return {v.name: DType(_table.from_name(v.dtype).value) for v in self._in_map_order()}

    def debug_string(self) -> bytes:
        """TF's ``DebugString``: ``key (DT_X) [d0,d1]`` per line; for V2 every index entry
        but partitioned ones (their slice keys instead), for V1 every tensor with
        ``, N slices`` when partitioned, in TF's order (:mod:`ckptool.compat.hashorder`)."""
        ckpt = self._ckpt
        if ckpt is None:
            return b""
        lines = []
        with errors.translated():
            if isinstance(ckpt, BundleCheckpoint):
                for key in ckpt.keys():
                    e = ckpt.entry(key)
                    if not e.slices:
                        lines.append(key + f" ({e.dtype.enum_name}) {_shape(e.shape)}\n".encode())
            elif isinstance(ckpt, V1Checkpoint):
                # TF walks its std::unordered_map of the tensors, filled file by file
                names = [key_of(n) for n in ckpt.stored_order()]
                order = unordered_map_order(names) or sorted(names)
                for key in order:
                    v = ckpt.variable(name_of(key))
                    more = f", {v.num_slices} slices" if v.num_slices > 1 else ""
                    dt = _table.from_name(v.dtype)
                    lines.append(key + f" ({dt.enum_name}) {_shape(v.shape)}{more}\n".encode())
        return b"".join(lines)


def _shape(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"
