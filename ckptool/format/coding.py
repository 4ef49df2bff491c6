"""Primitive encodings shared by the table and bundle formats.

LEB128 varints (docs/FORMAT.md notation), little-endian fixed32/fixed64, and the
masked CRC32C that LevelDB-style tables and tensor bundles store
(xla/tsl/lib/hash/crc32c.h).
"""

from __future__ import annotations

import struct
import sys
from typing import TYPE_CHECKING, Protocol, TypeAlias, cast

from ckptool.errors import CorruptError

if TYPE_CHECKING:
    import numpy as np
    from typing_extensions import Buffer

    #: Any buffer, numpy arrays included: numpy's stubs give ndarray ``__buffer__`` (what makes
    #: it a ``Buffer``) only from Python 3.12 on.
    AnyBuffer: TypeAlias = Buffer | np.ndarray


class _Crc32c(Protocol):
    def crc32c(self, data: AnyBuffer, value: int = 0) -> int: ...


def _load_crc32c() -> _Crc32c:
    """The ``crc32c`` package's C extension. Its ``__init__`` imports importlib.metadata
    just to set ``__version__`` (~50 ms, a tenth of ``ckptool list-variables``), so the
    extension is loaded directly where it can be found, and registered under its own
    name so that a later ``import crc32c`` reuses it; else the package is imported."""
    name = "crc32c._crc32c"
    if name not in sys.modules:
        try:
            import importlib.machinery as m
            import importlib.util

            package = importlib.util.find_spec("crc32c")  # finds the package, runs nothing
            for d in (package.submodule_search_locations if package else None) or ():
                spec = m.FileFinder(d, (m.ExtensionFileLoader, m.EXTENSION_SUFFIXES)).find_spec(name)
                if spec is not None and spec.loader is not None:
                    module = importlib.util.module_from_spec(spec)
                    spec.loader.exec_module(module)
                    sys.modules[name] = module
                    return cast(_Crc32c, module)
        except Exception:  # an unusual installation: the plain import below
            pass
        import crc32c  # noqa: F401  (imports crc32c._crc32c)
    return cast(_Crc32c, sys.modules[name])


_crc32c = _load_crc32c()

#: What the decoders take: bytes-like, with len() and indexing.
BytesLike: TypeAlias = bytes | bytearray | memoryview

FIXED32 = struct.Struct("<I")
FIXED64 = struct.Struct("<Q")

MASK_DELTA = 0xA282EAD8
MAX_VARINT32_BYTES = 5
MAX_VARINT64_BYTES = 10


def crc32c(data: AnyBuffer, value: int = 0) -> int:
    """CRC-32C of ``data`` (any buffer), continuing from ``value``."""
    return _crc32c.crc32c(data, value=value)


def mask_crc(crc: int) -> int:
    """The masked form of a CRC that TF stores on disk."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + MASK_DELTA) & 0xFFFFFFFF


def unmask_crc(masked: int) -> int:
    rot = (masked - MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def decode_varint(buf: BytesLike, pos: int, limit: int, max_bytes: int = MAX_VARINT64_BYTES,
                  what: str = "varint") -> tuple[int, int]:
    """Decode an unsigned varint at ``buf[pos:]`` not reaching ``limit``.

    Returns ``(value, new_pos)``. Raises :class:`CorruptError` on a varint
    that runs past ``limit`` or is longer than ``max_bytes``.
    """
    if pos < limit:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
    result = 0
    shift = 0
    end = min(limit, pos + max_bytes)
    while pos < end:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise CorruptError(f"bad {what} at offset {pos}")


def encode_varint(value: int) -> bytes:
    if value < 0:
        raise ValueError("varints are unsigned")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
