"""Tensors to save, from ``.npz``, ``.npy``, ``.safetensors`` files or another checkpoint.

Every source is a stream of ``(name, value)``: ``value`` is a numpy array, bytes (a
string scalar kept as stored), or a :class:`RawTensor` (a V2 checkpoint's entry,
copied byte for byte by the writer without decoding). A source lists its tensors
before reading any and yields one at a time, so memory stays bounded by the largest
tensor. It reads what ``convert`` reads (:mod:`ckptool.ops.transform.convert_src`).
:mod:`ckptool.ops.transform.save` is the library side of ``ckptool save``.
"""

from __future__ import annotations

from collections.abc import Iterator

from ckptool.ops.transform.convert_src import RawTensor, kind_of, open_specs


class Source:
    """One ``--from`` argument: ``names()`` without loading, ``items()`` streaming.

    It is what ``convert`` reads (:func:`ckptool.ops.transform.convert_src.open_specs`, one code
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

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._opened.close()

    def names(self) -> list[str]:
        return [s.name for s in self._opened.specs]

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
    from ckptool.ops.retain.prune import record_save

    directory = storage.dirname(prefix) or "."
    return record_save(directory, prefix, max_to_keep=max_to_keep,
                       keep_every_n_hours=keep_every_n_hours, now=now, storage=storage)


__all__ = ["open_source", "Source", "RawTensor", "kind_of"]
