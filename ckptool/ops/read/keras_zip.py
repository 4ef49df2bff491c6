"""The members of a ``.keras`` zip, read as Keras reads them and never whole: the weights member
as a file h5py reads in place (stored, as Keras writes it) or streams (deflated, unless it
inflates like a bomb), the JSON members through a bound (docs/FORMAT.md §14.1)."""

from __future__ import annotations

import io
import os
import zipfile
from typing import Any

from ckptool.errors import CorruptError
from ckptool.format.json_doc import load_json

#: the most read of a JSON member (config.json, metadata.json) or --template-config: a config of a
#: thousand layers is a few MB
JSON_LIMIT = 64 << 20
#: a deflated member over this size that inflates over BOMB_RATIO times is a zip bomb, not weights
BOMB_FLOOR = 1 << 30
BOMB_RATIO = 100


def open_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> Any:
    """A seekable file object of a member for h5py: stored, positioned reads of the archive;
    deflated, zipfile's stream (it inflates as it is read: memory stays bounded)."""
    if info.compress_type == zipfile.ZIP_STORED:
        return ZipWindow(path, info)
    if info.file_size > BOMB_FLOOR and info.file_size > BOMB_RATIO * max(1, info.compress_size):
        raise CorruptError(f"{path}: member {info.filename} inflates {info.compress_size} bytes to "
                           f"{info.file_size}: a zip bomb, not a Keras file")
    return zf.open(info)


def read_json_member(zf: zipfile.ZipFile, member: str, where: str) -> Any:
    """A JSON member of a ``.keras`` zip, read through at most :data:`JSON_LIMIT` bytes and parsed
    by :func:`ckptool.format.json_doc.load_json`."""
    with zf.open(member) as f:
        data = f.read(JSON_LIMIT + 1)
    return load_json(data, f"{where}: {member}", max_bytes=JSON_LIMIT, what=f"a Keras file's {member}")


class ZipWindow(io.RawIOBase):
    """A stored (uncompressed) zip member as a seekable read-only file, for h5py: positioned
    reads of the archive, never the whole member in memory."""

    def __init__(self, path: str, info: zipfile.ZipInfo):
        super().__init__()
        self._f = open(path, "rb")  # noqa: SIM115 - closed by close()
        self._f.seek(info.header_offset)
        head = self._f.read(30)
        if len(head) != 30 or head[:4] != b"PK\x03\x04":
            self._f.close()
            raise CorruptError(f"{path}: member {info.filename}: bad local header")
        start = info.header_offset + 30 + int.from_bytes(head[26:28], "little") + int.from_bytes(head[28:30], "little")
        self._start, self._size, self._pos = start, info.file_size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, b: Any) -> int:
        n = max(0, min(len(b), self._size - self._pos))
        if n == 0:
            return 0
        data = os.pread(self._f.fileno(), n, self._start + self._pos)
        b[:len(data)] = data
        self._pos += len(data)
        return len(data)

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()
        super().close()



__all__ = ["BOMB_FLOOR", "BOMB_RATIO", "JSON_LIMIT", "ZipWindow", "open_member", "read_json_member"]
