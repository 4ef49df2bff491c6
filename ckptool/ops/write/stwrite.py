"""Writing ``.safetensors`` files with streamed writes: :func:`write_file` writes the header,
then each tensor's bytes as the caller yields them, through a temporary name renamed into
place (reading them: :mod:`ckptool.ops.read.stfile`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ckptool.errors import CkptError, UnsupportedError
from ckptool.format import safetensors_meta as stm
from ckptool.io.backends.urls import storage_for
from ckptool.io.safety.atomic import AtomicFile, make_output_dir, publish
from ckptool.io.safety.destination import check_destination
from ckptool.ops.write.writer import ChunkedOut


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
        out = ChunkedOut(f)
        done = 0
        for buf in chunks:
            done += out.put(buf)
            del buf  # one tensor in memory at a time, not two
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


__all__ = ["write_file"]
