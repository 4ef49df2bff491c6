"""Positioned reads as a file: the one adapter for the libraries that want a seekable file object
(:mod:`zipfile`, h5py) where ckptool holds a :class:`~ckptool.io.base.Reader` (a file opened
through its Storage) or a descriptor read by ``os.pread``.

A :class:`ReaderFile` is read-only and seekable, never holds the data (each ``readinto`` is one
positioned read), and may be a window of what it reads: a stored zip member is the bytes from its
data offset, so that h5py reads the member in place. What the bytes mean is format/'s
(:mod:`ckptool.format.keras_files`).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptool.io.base import Reader

#: ``read(offset, n)``: up to ``n`` bytes at ``offset``
Read = Callable[[int, int], Any]


class ReaderFile(io.RawIOBase):
    """``size`` bytes from ``start`` of what ``read`` reads, as a seekable read-only file;
    ``on_close`` (the reader's ``close``) is called once, at :meth:`close`."""

    def __init__(self, read: Read, size: int, start: int = 0, on_close: Callable[[], None] | None = None):
        super().__init__()
        self._read, self._size, self._start, self._pos = read, size, start, 0
        self._on_close = on_close

    @classmethod
    def of(cls, reader: Reader, start: int = 0, size: int | None = None, owns: bool = True) -> ReaderFile:
        """A window of a :class:`~ckptool.io.base.Reader` (to its end by default); ``owns``: closing
        the file closes the reader."""
        return cls(reader.read, reader.size - start if size is None else size, start,
                   reader.close if owns else None)

    @property
    def size(self) -> int:
        return self._size

    def read_at(self, offset: int, n: int) -> bytes:
        """Up to ``n`` bytes at ``offset`` of the window (fewer at its end), the position unmoved:
        the ``read(offset, n)`` the codecs of :mod:`ckptool.format.keras_files` take."""
        n = max(0, min(n, self._size - offset))
        return bytes(self._read(self._start + offset, n)) if n else b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, b: Any) -> int:
        n = max(0, min(len(b), self._size - self._pos))
        if n == 0:
            return 0
        data = self._read(self._start + self._pos, n)
        got = len(data)
        b[:got] = data
        self._pos += got
        return got

    def close(self) -> None:
        if not self.closed and self._on_close is not None:
            self._on_close()
        super().close()


__all__ = ["ReaderFile"]
