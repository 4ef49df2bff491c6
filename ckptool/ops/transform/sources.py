"""Tensors to save, from ``.npz``, ``.npy``, ``.safetensors`` files or another checkpoint.

Every source is a stream of ``(name, value)``: ``value`` is a numpy array, bytes (a
string scalar kept as stored), or a :class:`RawTensor` (a V2 checkpoint's entry,
copied byte for byte by the writer without decoding). A source lists its tensors
before reading any and yields one at a time, so memory stays bounded by the largest
tensor. It reads what ``convert`` reads (:mod:`ckptool.ops.transform.convert.source`).
:mod:`ckptool.ops.transform.save` is the library side of ``ckptool save``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING

from ckptool.ops.read.checkpoint import Checkpoint
from ckptool.ops.read.chunks import tensor_chunks
from ckptool.ops.transform.convert.source import RawTensor, Spec, kind_of, open_specs

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import numpy as np

    from ckptool.io.base import Storage
    from ckptool.ops.retain.outcome import PruneResult


class Source:
    """One ``--from`` argument: ``names()`` without loading, ``items()`` streaming.

    It is what ``convert`` reads (:func:`ckptool.ops.transform.convert.source.open_specs`, one code
    path for both commands): a checkpoint's entries copied as stored (partitioned ones
    with their slices), a ``.safetensors`` file with what ckptool keeps in its
    ``__metadata__`` restored (the object graph, string tensors, the original names of
    ``--names short``), ``.npz``/``.npy`` members by their ``.npy`` headers.
    """

    def __init__(self, path: str, verify: bool = True):
        self.path = path
        self.kind = kind_of(path)
        self._opened = open_specs(path, keep_slices=True, verify=verify)
        self._closed = False
        self.checkpoint = self._opened.checkpoint  # the open Checkpoint of a checkpoint source

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._opened.close()

    def names(self) -> list[str]:
        return [s.name for s in self._opened.specs]

    def total_bytes(self) -> int:
        """The bytes of its tensors as stored, for progress (strings counted as written)."""
        from ckptool.format import dtypes

        total = 0
        for s in self._opened.specs:
            if isinstance(s.raw, RawTensor):
                total += s.raw.nbytes
            elif s.dtype != "string":
                total += prod(s.shape) * dtypes.from_name(s.dtype).itemsize
        return total

    def items(self) -> Iterator[tuple[str, object]]:
        """``(name, value)`` in the source's data order, one value loaded at a time."""
        for s in self._opened.specs:
            if s.raw is not None:
                yield s.name, s.raw
            elif s.stored is not None:
                yield s.name, s.stored
            else:
                yield s.name, s.load()


def open_source(path: str) -> Source:
    return Source(path)


@dataclass(frozen=True)
class Listed:
    """A tensor of a source, as ``diff`` lists it (the fields of a checkpoint's Variable)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    numel: int
    nbytes: int


class ComparedSource:
    """Any source ``convert`` reads, as one side of ``diff``
    (:class:`ckptool.ops.inspect.diff.Side`): the same reader dispatch
    (:func:`ckptool.ops.transform.convert.source.open_specs`), so every format convert
    takes, diff takes. A checkpoint is read in chunks
    (:func:`ckptool.ops.read.chunks.tensor_chunks`); a tensor of another file is
    loaded one at a time, as ``convert`` loads it, and cut into chunks."""

    def __init__(self, path: str):
        self.path = path
        self._opened = open_specs(path, keep_slices=False, verify=True)
        ck = self._opened.checkpoint
        self.checkpoint: Checkpoint | None = ck if isinstance(ck, Checkpoint) else None
        self.prefix: str = self.checkpoint.prefix if self.checkpoint is not None else path
        self._specs = {s.name: s for s in self._opened.specs}
        self._listed: list[Listed] | None = None

    def __enter__(self) -> ComparedSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._opened.close()

    def variables(self) -> Sequence[Listed]:
        if self._listed is None:
            if self.checkpoint is not None:
                self._listed = [Listed(v.name, v.dtype, tuple(v.shape), v.numel, v.nbytes)
                                for v in self.checkpoint.variables()]
            else:
                self._listed = [self._list(s) for s in self._opened.specs]
        return self._listed

    def _list(self, s: Spec) -> Listed:
        numel = prod(s.shape)
        if s.dtype == "string":  # stored size: the strings' bytes (held in memory or in an 'S' array)
            value = s.load()
            nbytes = sum(len(x) for x in value.reshape(-1).tolist())
        else:
            from ckptool.format import dtypes

            nbytes = numel * dtypes.from_name(s.dtype).itemsize
        return Listed(s.name, s.dtype, tuple(s.shape), numel, nbytes)

    def chunks(self, name: str, chunk_bytes: int) -> Iterator[np.ndarray]:
        if self.checkpoint is not None:
            yield from tensor_chunks(self.checkpoint, name, chunk_bytes=chunk_bytes)
            return
        s = self._specs[name]
        arr = s.load()
        if s.dtype == "string" and arr.dtype != object:  # an 'S' (or 'U') array: bytes, as a checkpoint gives
            if arr.dtype.kind == "U":
                import numpy as np

                arr = np.char.encode(arr, "utf-8")
            arr = arr.astype(object)
        flat = arr.reshape(-1)
        per = max(1, chunk_bytes // max(1, flat.dtype.itemsize))
        for i in range(0, len(flat), per):
            yield flat[i:i + per]


def open_side(path: str) -> ComparedSource:
    """One side of ``diff``: a checkpoint, ``.safetensors``, ``.npz`` or ``.npy`` (what convert reads)."""
    return ComparedSource(path)


def wait_lock(storage: Storage, prefix: str, timeout: float | None = None,
               on_wait: Callable[[str, float], None] | None = None) -> AbstractContextManager[object] | None:
    """DIR's lock, waited for (at most ``timeout`` seconds; None: the lock's default) and held
    from before the first write to the record. ``on_wait(directory, seconds)`` is called
    while another process holds it; a refusal names that process (ckptool.io.control.lock.held_refusal)."""
    from ckptool.io.control.lock import DEFAULT_TIMEOUT, lock_directory

    directory = storage.dirname(prefix) or "."
    if not storage.isdir(directory):
        return None
    lock = lock_directory(storage, directory, timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
                          on_wait=None if on_wait is None else (lambda s: on_wait(directory, s)))
    lock.__enter__()
    return lock


def record(storage: Storage, prefix: str, max_to_keep: int | None, keep_every_n_hours: float | None,
            now: float | None) -> PruneResult:
    from ckptool.ops.retain.prune import record_save

    directory = storage.dirname(prefix) or "."
    return record_save(directory, prefix, max_to_keep=max_to_keep,
                       keep_every_n_hours=keep_every_n_hours, now=now, storage=storage)


__all__ = ["open_source", "open_side", "ComparedSource", "Source", "RawTensor", "kind_of"]
