"""Reading and writing ``.safetensors`` files with ranged reads and streamed writes.

The header codec is :mod:`ckptool.format.safetensors_meta`. :class:`StFile`
lists tensors from the header alone and reads one tensor at a time with
positioned reads into the array it becomes (no mmap, no whole-file load).
:func:`write_file` writes the header, then each tensor's bytes as the caller
yields them, through a temporary name renamed into place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, UnsupportedError
from ckptool.format import safetensors_meta as stm
from ckptool.io.backends.urls import storage_for
from ckptool.io.safety.atomic import AtomicFile, make_output_dir, publish
from ckptool.io.safety.destination import check_destination
from ckptool.ops.write.writer import WRITEBACK

if TYPE_CHECKING:
    import numpy as np


class StFile:
    """An open ``.safetensors`` file: ``tensors`` (header order by offset), ``extras``
    (what ``__metadata__`` carries), and :meth:`read` one tensor at a time."""

    def __init__(self, path: str):
        self.path = path
        self.storage, local = storage_for(path)
        if not self.storage.exists(local) or self.storage.isdir(local):
            from ckptool.errors import MissingError

            raise MissingError(f"{path}: no such file")
        self._reader = self.storage.open_reader(local)
        try:
            size = self._reader.size
            n = stm.header_length(self._reader.read(0, min(8, size)), size, path)
            self.data_start = 8 + n
            self.tensors, meta = stm.decode_header(self._reader.read(8, n), size - self.data_start, path)
            self.extras = stm.decode_metadata(meta, f"{path}: __metadata__")
        except BaseException:
            self._reader.close()
            raise
        self.by_name = {t.name: t for t in self.tensors}

    def __enter__(self) -> StFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._reader.close()

    def read(self, name: str) -> np.ndarray:
        import numpy as np

        from ckptool.format import dtypes

        t = self.by_name[name]
        arr = np.empty(t.shape, dtype=dtypes.from_name(t.tf_dtype).numpy)
        if t.end > t.begin:
            self._reader.readinto(self.data_start + t.begin, arr.reshape(-1).view(np.uint8))
        return arr


def write_file(dst: str, tensors: Iterable[tuple[str, str, tuple[int, ...]]], extras: stm.Extras,
               chunks: Iterable[Any], *, force: bool | tuple[bool, Sequence[str]] = False,
               progress: Callable[[int, int], None] | None = None, check: Callable[[], None] | None = None,
               sync: bool = True) -> tuple[str, int]:
    """Write ``dst``: ``tensors`` are ``(name, safetensors dtype, shape)`` in data order (a
    collection, or an object whose every ``iter()`` starts afresh: it is gone through twice);
    ``chunks`` yields each tensor's little-endian bytes (buffers), in the same order.
    ``check`` (if given) runs after the data and before the file is put in place: an
    error there leaves nothing behind. Returns ``(path, data bytes)``."""
    force, ids = force if isinstance(force, tuple) else (force, ())
    storage, path = storage_for(dst)
    check_destination(storage, [path], force=force, sources=ids)
    try:
        total, head = stm.header_pieces(tensors, extras)  # tensors gone through twice: not all held
    except UnsupportedError as exc:  # named for the file it was to be (nothing is written yet)
        raise UnsupportedError(str(exc) if str(exc).startswith(dst) else f"{dst}: {exc}") from None
    make_output_dir(storage, storage.dirname(path))
    f = AtomicFile(storage, path, sync=sync)
    try:
        for piece in head:
            f.write(piece)
        done = 0
        for buf in chunks:
            view = memoryview(buf).cast("B")
            for i in range(0, len(view), WRITEBACK):
                f.write(view[i:i + WRITEBACK])
            done += len(view)
            del buf, view  # one tensor in memory at a time, not two
            if progress:
                progress(done, total)
        if done != total:
            raise CkptError(f"{dst}: wrote {done} bytes of tensor data, the header says {total}")
        if check is not None:
            check()
        publish([f])
    except BaseException:
        f.discard()
        raise
    return path, total
