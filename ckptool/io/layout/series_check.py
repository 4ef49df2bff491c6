"""Is a Keras series file whole? Cheap checks of the files Keras writes in place (a few bytes
of each; the CRCs are ``verify``'s), for ``prune --series``, ``inspect`` and ``du``.

Keras 3 writes ``X.keras`` and ``X.weights.h5`` under their final names, not through a
temporary (``saving_lib.save_model``: ``open(filepath, "wb")`` then a zip written into it;
``save_weights_only``: ``h5py.File(filepath, "w")``); tf_keras's ``.h5`` is ``h5py.File(path,
"w")`` too; a sharded ``X.weights.json`` is written after its parts. So a file being written
looks exactly like a write cut short, and the answer here is one of:

- :data:`COMPLETE`: a zip with its end-of-central-directory record and Keras's members; an
  HDF5 file closed (the superblock's "open for writing" flag clear, its end-of-file address
  the file's size); a sharded JSON that parses, whose parts are all there and complete;
- :data:`OPEN`: what a write in progress (or killed) leaves: an empty file, a zip with no end
  record yet, an HDF5 file still flagged open or longer than its superblock says, a JSON that
  does not parse yet or a part still open;
- :data:`DAMAGED`: not what its name says (no HDF5 signature, a zip without a
  ``model.weights.h5``, a part missing, a JSON naming a file that is none of its parts).

HDF5 superblock layout: the HDF5 File Format Specification, section II.A (versions 0-3).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Iterable
from typing import Any

COMPLETE, OPEN, DAMAGED = "complete", "open", "damaged"
H5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
ZIP_LOCAL = b"PK\x03\x04"
#: Members a Keras ``.keras`` file holds (the weights as .h5, or .npz since Keras 3.4).
KERAS_CONFIG, KERAS_WEIGHTS = "config.json", ("model.weights.h5", "model.weights.npz")

Read = Callable[[int, int], bytes]


def h5_state(read: Read, size: int) -> tuple[str, str | None]:
    """``(state, problem)`` of an HDF5 file of ``size`` bytes (``read(offset, n)``)."""
    if size < len(H5_SIGNATURE):
        return OPEN, "empty or cut short before the HDF5 superblock"
    at = 0
    while at + 64 <= size or at == 0:  # the superblock is at 0, 512, 1024, 2048, ...
        head = bytes(read(at, 128))
        if head[:8] == H5_SIGNATURE:
            return _superblock(head, at, size)
        at = 512 if at == 0 else at * 2
        if at >= size:
            break
    return DAMAGED, "not an HDF5 file (no superblock signature)"


def _superblock(b: bytes, at: int, size: int) -> tuple[str, str | None]:
    version = b[8]
    if version in (0, 1):
        so, flags = b[13], int.from_bytes(b[20:24], "little")
        addr = 24 + (4 if version == 1 else 0)
        open_flag = flags & 0x1
    elif version in (2, 3):
        so, flags = b[9], b[11]
        addr = 12
        open_flag = flags & (0x1 | 0x4)  # open for writing; SWMR writing
    else:
        return DAMAGED, f"HDF5 superblock version {version} unknown"
    if so not in (2, 4, 8) or len(b) < addr + 3 * so:
        return DAMAGED, "HDF5 superblock cut short or unreadable"

    def address(i: int) -> int:
        return int.from_bytes(b[addr + i * so: addr + (i + 1) * so], "little")

    base = address(0)
    eof = address(2)  # v0/1: base, free-space info, end of file; v2/3: base, extension, end of file
    if open_flag:
        return OPEN, "HDF5 file still open for writing (being written, or its writer was killed)"
    if eof == (1 << (8 * so)) - 1 or size not in (eof, base + eof, at + eof):
        why = "shorter" if size < eof else "longer"
        return OPEN, f"{why} than its HDF5 superblock says ({size} bytes on disk, {eof} in the superblock)"
    return COMPLETE, None


class _ReaderFile(io.RawIOBase):
    """``read(offset, n)`` as a seekable file, for :mod:`zipfile` (its central directory)."""

    def __init__(self, read: Read, size: int):
        super().__init__()
        self._read, self._size, self._pos = read, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = max(0, {0: 0, 1: self._pos, 2: self._size}[whence] + offset)
        return self._pos

    def readinto(self, b: Any) -> int:
        n = max(0, min(len(b), self._size - self._pos))
        data = bytes(self._read(self._pos, n)) if n else b""
        b[: len(data)] = data
        self._pos += len(data)
        return len(data)


def keras_state(read: Read, size: int) -> tuple[str, str | None]:
    """``(state, problem)`` of a ``.keras`` file (a zip written in place; its central
    directory and end record come last)."""
    if size == 0:
        return OPEN, "empty (a write just started, or cut short)"
    try:
        with zipfile.ZipFile(io.BufferedReader(_ReaderFile(read, size)), "r") as zf:
            names = set(zf.namelist())
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        if bytes(read(0, 4)) == ZIP_LOCAL:
            return OPEN, f"zip without its end record (being written, or cut short): {exc}"
        return DAMAGED, "not a zip file"
    if KERAS_CONFIG not in names or not names.intersection(KERAS_WEIGHTS):
        return DAMAGED, f"a zip without Keras's {KERAS_CONFIG} and {KERAS_WEIGHTS[0]}"
    return COMPLETE, None


def sharded_parts(raw: bytes) -> list[str] | None:
    """The part files a sharded ``.weights.json`` names (its ``weight_map`` values, in
    order, each once), or None when it is not such a document (yet)."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    wm = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(wm, dict):
        return None
    out: list[str] = []
    for v in wm.values():
        for name in [v] if isinstance(v, str) else v if isinstance(v, list) else [None]:
            if not isinstance(name, str):
                return None
            if name not in out:
                out.append(name)
    return out


def worst(states: Iterable[tuple[str, str | None]]) -> tuple[str, str | None]:
    """The worst of several files' states (damaged, then open, then complete)."""
    rank = {COMPLETE: 0, OPEN: 1, DAMAGED: 2}
    out: tuple[str, str | None] = (COMPLETE, None)
    for s in states:
        if rank[s[0]] > rank[out[0]]:
            out = s
    return out


__all__ = ["COMPLETE", "DAMAGED", "H5_SIGNATURE", "KERAS_CONFIG", "KERAS_WEIGHTS", "OPEN", "h5_state",
           "keras_state", "sharded_parts", "worst"]
