"""The members of a ``.keras`` zip, read as Keras reads them and never whole: the weights member
as a file h5py reads in place (stored, as Keras writes it) or streams (deflated, unless it
inflates like a bomb), the JSON members through a bound (docs/FORMAT.md §14.1)."""

from __future__ import annotations

import zipfile
from typing import Any

from ckptool.errors import CorruptError
from ckptool.format.json_doc import load_json
from ckptool.format.keras_files import LOCAL_HEADER, member_data_offset
from ckptool.io.readerfile import ReaderFile

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
        return stored_member(path, info)
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


def stored_member(path: str, info: zipfile.ZipInfo) -> ReaderFile:
    """A stored (uncompressed) member as a seekable read-only file, for h5py: positioned reads of
    the archive through its Storage, never the whole member in memory."""
    from ckptool.io.backends.urls import storage_for

    storage, local = storage_for(path)
    reader = storage.open_reader(local)
    try:
        head = bytes(reader.read(info.header_offset, LOCAL_HEADER)) \
            if info.header_offset + LOCAL_HEADER <= reader.size else b""
        start = member_data_offset(head, info, path)
    except BaseException:
        reader.close()
        raise
    return ReaderFile.of(reader, start, info.file_size)


__all__ = ["BOMB_FLOOR", "BOMB_RATIO", "JSON_LIMIT", "open_member", "read_json_member", "stored_member"]
