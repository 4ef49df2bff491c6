"""The files ``convert`` reads that are no TF checkpoint, read as a :class:`Checkpoint`: a
``.safetensors`` file, an ``.npz`` or ``.npy`` file, a Hugging Face folder
(:mod:`ckptool.ops.read.hffolder`). So ``inspect`` (and ``--stats``, ``--tree``), ``list-variables``,
``verify`` and ``diff`` take every source ``convert`` takes, through one reader
(:func:`ckptool.ops.read.source.open_specs`).

What ``verify`` checks is what each format can say: a ``.safetensors`` file's header parses and
its tensors tile the data exactly to the end of the file (on opening), and each tensor is read
in full; an ``.npz`` member's CRC-32 (zipfile checks it as the member is read to its end) and
its ``.npy`` header; an ``.npy`` file's header and length; a Hugging Face folder's index,
``config.json`` and every shard as a ``.safetensors`` file. None of them stores a checksum of a
tensor's bytes, as a TF bundle does (CRC32C): a flipped bit inside a tensor is not seen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptool.io.backends.urls import storage_for
from ckptool.io.layout.checkpoints import Located
from ckptool.ops.read.checkpoint import Checkpoint, Variable
from ckptool.ops.read.hffolder import HF_CONFIG, hf_weights, open_hf
from ckptool.ops.read.source import open_specs
from ckptool.ops.read.spec import NPY, NPZ, SAFETENSORS, kind_of

if TYPE_CHECKING:
    import numpy as np

    from ckptool.io.base import Storage
    from ckptool.ops.read.spec import Opened, Spec

HF = "hf"
#: What each kind of file is shown as (``inspect``'s format line).
FORMAT_NAMES = {SAFETENSORS: "safetensors", NPZ: "npz", NPY: "npy", HF: "Hugging Face folder"}


def file_kind(path: str, storage: Storage | None = None) -> str | None:
    """The kind of ``path`` when it is a file ``convert`` reads that is no TF checkpoint (by its
    suffix; a directory holding a Hugging Face model), else None."""
    kind = kind_of(path)
    if kind in (SAFETENSORS, NPZ, NPY):
        return kind
    if storage is None:
        storage, path = storage_for(path)
    return HF if hf_weights(storage, path) is not None else None


class FileCheckpoint(Checkpoint):
    """A ``.safetensors``, ``.npz``, ``.npy`` file or Hugging Face folder, read as a checkpoint
    (names as the file stores them; ckptool's own ``.safetensors`` metadata restored)."""

    def __init__(self, path: str, kind: str, opened: Opened):
        storage, local = storage_for(path)
        super().__init__(Located(storage, path.rstrip("/") or path, FORMAT_NAMES[kind]))
        self.kind = kind
        self._opened = opened
        self._specs = {s.name: s for s in opened.specs}
        self._variables: list[Variable] | None = None
        self.files = [hf_weights(storage, local) or local] if kind == HF else [local]
        if kind == HF and storage.isfile(storage.join(local, HF_CONFIG)):
            self.files.append(storage.join(local, HF_CONFIG))

    def close(self) -> None:
        self._opened.close()

    def variables(self) -> list[Variable]:
        if self._variables is None:
            self._variables = sorted((Variable(s.name, s.dtype, tuple(s.shape), self._nbytes(s))
                                      for s in self._opened.specs), key=lambda v: v.name)
        return self._variables

    def _nbytes(self, s: Spec) -> int:
        from math import prod

        from ckptool.format import dtypes

        if s.dtype != "string":
            return prod(s.shape) * dtypes.from_name(s.dtype).itemsize
        value = s.stored if s.stored is not None else None
        return len(value) if value is not None else sum(len(x) for x in self.read(s.name).reshape(-1).tolist())

    def read(self, name: str, verify: bool = True) -> np.ndarray:
        """The value (strings as an object array of ``bytes``, as a checkpoint gives them)."""
        s = self._specs.get(name)
        if s is None:
            raise self._not_found(name)
        arr: np.ndarray = s.load()
        if s.dtype == "string" and arr.dtype != object:  # an 'S' (or 'U') array
            import numpy as np

            if arr.dtype.kind == "U":
                arr = np.char.encode(arr, "utf-8")
            arr = arr.astype(object)
        return arr


def open_file(path: str, kind: str) -> FileCheckpoint:
    """``path`` of ``kind`` (:func:`file_kind`) opened as a checkpoint."""
    opened = open_hf(path) if kind == HF else open_specs(path)
    try:
        return FileCheckpoint(path, kind, opened)
    except BaseException:
        opened.close()
        raise


__all__ = ["FORMAT_NAMES", "HF", "FileCheckpoint", "file_kind", "open_file"]
