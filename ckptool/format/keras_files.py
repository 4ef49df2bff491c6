"""The bytes of the files Keras writes: is a Keras series file whole (cheap checks of the files
Keras writes in place, a few bytes of each; the CRCs are ``verify``'s: ``prune --series``,
``inspect``, ``du``, ``verify``), and where a stored ``.keras`` member's data begins (its local
header), for the reader that hands it to h5py. The bytes come through a ``read(offset, n)`` or a
file object of :class:`ckptool.io.readerfile.ReaderFile`: no file I/O here.

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

HDF5 superblock layout: the HDF5 File Format Specification, section II.A (versions 0-3); zip
records: PKWARE's APPNOTE, 4.3.7 (the local file header).
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterable
from typing import IO

from ckptool.errors import CkptError, CorruptError
from ckptool.format.json_doc import load_json

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


def keras_state(f: IO[bytes]) -> tuple[str, str | None]:
    """``(state, problem)`` of a ``.keras`` file (a zip written in place; its central
    directory and end record come last), read through the seekable file ``f``."""
    size = f.seek(0, 2)
    if size == 0:
        return OPEN, "empty (a write just started, or cut short)"
    try:
        f.seek(0)
        with zipfile.ZipFile(f, "r") as zf:
            names = set(zf.namelist())
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        f.seek(0)
        if f.read(4) == ZIP_LOCAL:
            return OPEN, f"zip without its end record (being written, or cut short): {exc}"
        return DAMAGED, "not a zip file"
    if KERAS_CONFIG not in names or not names.intersection(KERAS_WEIGHTS):
        return DAMAGED, f"a zip without Keras's {KERAS_CONFIG} and {KERAS_WEIGHTS[0]}"
    return COMPLETE, None


#: the fixed part of a zip local file header
LOCAL_HEADER = 30


def member_data_offset(head: bytes, info: zipfile.ZipInfo, where: str) -> int:
    """Where a member's data begins: after its local header (``head``, the
    :data:`LOCAL_HEADER` bytes at ``info.header_offset``) and the name and extra field it
    declares."""
    if len(head) != LOCAL_HEADER or head[:4] != ZIP_LOCAL:
        raise CorruptError(f"{where}: member {info.filename}: bad local header")
    return info.header_offset + LOCAL_HEADER + int.from_bytes(head[26:28], "little") + \
        int.from_bytes(head[28:30], "little")


def sharded_parts(raw: bytes) -> list[str] | None:
    """The part files a sharded ``.weights.json`` names (its ``weight_map`` values, in
    order, each once), or None when it is not such a document (yet)."""
    try:
        doc = load_json(raw, "a sharded weights index")
    except CkptError:
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


__all__ = ["COMPLETE", "DAMAGED", "H5_SIGNATURE", "KERAS_CONFIG", "KERAS_WEIGHTS", "LOCAL_HEADER", "OPEN", "h5_state",
           "keras_state", "member_data_offset", "sharded_parts", "worst"]
