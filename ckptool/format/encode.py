"""Tensor values as a V2 data file stores them (dtype, shape, bytes, CRC), and key checks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload

from ckptool.errors import CkptError, UnsupportedError
from ckptool.format import bundle, dtypes
from ckptool.format.coding import crc32c
from ckptool.format.objkeys import key_of, shown

if TYPE_CHECKING:
    import numpy


class _Numpy:
    """numpy, imported on first use: a rename that copies stored bytes never needs it."""

    def __getattr__(self, name: str) -> Any:
        import numpy

        return getattr(numpy, name)


np: Any = _Numpy()


def key_bytes(name: object) -> bytes:
    if isinstance(name, bytes):
        key = name
    elif isinstance(name, str):
        key = key_of(name)
    else:
        raise CkptError(f"tensor names must be str or bytes, not {type(name).__name__} ({name!r})")
    if not key:
        raise CkptError("the empty string cannot name a tensor (it is the bundle header's key)")
    return key


def as_dtype(dtype: Any) -> dtypes.DType:
    if isinstance(dtype, dtypes.DType):
        return dtype
    if isinstance(dtype, str):
        return dtypes.from_name(dtype)
    if isinstance(dtype, int):
        return dtypes.from_value(dtype)
    return dtypes.from_numpy(dtype)


def _is_string_value(value: object) -> bool:
    return isinstance(value, (bytes, bytearray, memoryview, str))


def _to_bytes(elem: object, key: bytes) -> bytes:
    if isinstance(elem, bytes):
        return elem
    if isinstance(elem, str):
        return elem.encode("utf-8")
    if isinstance(elem, (bytearray, memoryview, np.bytes_)):
        return bytes(elem)
    if isinstance(elem, np.str_):
        return str(elem).encode("utf-8")
    raise UnsupportedError(
        f"string tensor {shown(key)!r} holds a {type(elem).__name__}; only bytes and str can be stored"
    )


@overload
def encode_tensor(key: bytes, value: object, checksum: Literal[True] = ...
                  ) -> tuple[dtypes.DType, tuple[int, ...], bytes | numpy.ndarray, int]: ...


@overload
def encode_tensor(key: bytes, value: object, checksum: bool
                  ) -> tuple[dtypes.DType, tuple[int, ...], bytes | numpy.ndarray, int | None]: ...


def encode_tensor(key: bytes, value: object, checksum: bool = True
                  ) -> tuple[dtypes.DType, tuple[int, ...], bytes | numpy.ndarray, int | None]:
    """(dtype, shape, buffer, unmasked crc) of a value as a V2 data file stores it.

    The buffer of a fixed-size array is a view of the array's own memory (no copy
    when it is C-contiguous and little-endian). With ``checksum=False`` the CRC of
    a fixed-size array is left to the caller (None); a string's comes with its bytes.
    """
    if _is_string_value(value):
        data, crc = bundle.encode_string([_to_bytes(value, key)])
        return dtypes.STRING_DTYPE, (), data, crc
    try:
        arr = np.asarray(value)
    except Exception as exc:  # arbitrary objects: say which tensor
        raise UnsupportedError(f"tensor {shown(key)!r}: cannot convert {type(value).__name__} "
                               f"to an array ({exc})") from None
    shape = tuple(int(d) for d in arr.shape)
    bundle.check_shape(shape, f"tensor {shown(key)!r}")
    try:
        dt = dtypes.from_numpy(arr.dtype)
    except UnsupportedError as exc:
        raise UnsupportedError(f"tensor {shown(key)!r}: {exc}") from None
    if dt.kind == dtypes.STRING:
        data, crc = bundle.encode_string([_to_bytes(e, key) for e in arr.ravel(order="C")])
        return dt, shape, data, crc
    native = dt.numpy
    if arr.dtype.names is not None:  # a quantized type given as TF's structured dtype
        arr = arr.view(arr.dtype[0])
    if arr.dtype != native:  # big-endian input, or an equivalent spelling
        arr = arr.astype(native)
    arr = np.ascontiguousarray(arr)
    buf = arr.reshape(-1).view(np.uint8)
    return dt, shape, buf, crc32c(buf) if checksum else None
