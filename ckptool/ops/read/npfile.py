"""Reading ``.npz`` and ``.npy`` files as sources (:class:`ckptool.ops.read.spec.Opened`): dtypes
and shapes from each ``.npy`` header, values loaded one member at a time, never unpickled."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, CorruptError, UnsupportedError
from ckptool.ops.read.spec import Opened, Spec

if TYPE_CHECKING:
    import numpy as np


_BUFFER = 1 << 20


def _tf_name(dtype: np.dtype, where: str) -> str:
    from ckptool.format import dtypes

    if dtype.kind in "SU":
        return "string"
    if dtype.hasobject:
        raise UnsupportedError(f"{where} holds an object array, which only pickle can load; "
                               "ckptool does not unpickle files (store strings as a bytes 'S' array)")
    try:
        return dtypes.from_numpy(dtype).name
    except UnsupportedError as exc:
        raise UnsupportedError(f"{where}: {exc}") from None


def _npy_header(fh: Any, where: str) -> Any:
    import numpy as np

    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            return fmt.read_array_header_1_0(fh)
        if version == (2, 0):
            return fmt.read_array_header_2_0(fh)
    except Exception as exc:  # noqa: BLE001 - numpy parses the header dict with ast: ValueError, SyntaxError, ...
        raise CorruptError(f"{where}: not a readable .npy header: {exc}") from None
    return None


def _opened_file(src: str) -> tuple[Any, str]:
    """``src`` opened through its Storage as a seekable file (positioned reads of 1 MiB: zipfile and
    numpy read a few KiB at a time), and its name without the storage's scheme."""
    import io

    from ckptool.errors import MissingError
    from ckptool.io.backends.urls import storage_for
    from ckptool.io.readerfile import ReaderFile

    storage, local = storage_for(src)
    if not storage.isfile(local):
        raise MissingError(f"{src}: no such file")
    try:
        return io.BufferedReader(ReaderFile.of(storage.open_reader(local)), _BUFFER), storage.basename(local)
    except OSError as exc:
        raise CkptError(f"{src}: cannot read: {exc.strerror or exc}") from None


def open_numpy(src: str, npz: bool) -> Opened:
    fh, base = _opened_file(src)
    if not npz:
        name = base[:-len(".npy")] if base.lower().endswith(".npy") else base
        with fh:
            head = _npy_header(fh, src)
        if head is None:
            raise UnsupportedError(f"{src}: .npy format version other than 1.0 or 2.0")
        shape, _, dt = head
        return Opened([Spec(name, _tf_name(dt, src), tuple(shape), _npy(src))], lambda: None)
    try:
        z = _npz(fh, src)
        specs = [_member_spec(z, src, member) for member in z.zip.namelist()]
    except BaseException:
        fh.close()
        raise

    def close() -> None:
        z.close()
        fh.close()
    return Opened(specs, close)


def _npz(fh: Any, src: str) -> Any:
    import numpy as np

    try:
        z = np.load(fh, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - numpy/zipfile on a damaged archive: BadZipFile, ValueError, ...
        raise CorruptError(f"{src}: not a readable .npz file: {exc}") from None
    if not hasattr(z, "files"):
        raise CorruptError(f"{src}: is a .npy array, not an .npz archive")
    return z


def _member_spec(z: Any, src: str, member: str) -> Spec:
    name = member.removesuffix(".npy")
    where = f"{src}: member {name!r}"
    try:
        with z.zip.open(member) as fh:
            head = _npy_header(fh, where)
        if head is None:
            arr = z[name]
            shape, dt = arr.shape, arr.dtype
        else:
            shape, _, dt = head
    except CkptError:
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile/zlib on a damaged archive: BadZipFile, EOFError, ...
        raise CorruptError(f"{where}: cannot read: {exc}") from None
    return Spec(name, _tf_name(dt, where), tuple(shape), _member(z, src, member))


def _npy(src: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        import numpy as np

        fh, _ = _opened_file(src)
        try:
            with fh:
                arr: np.ndarray = np.load(fh, allow_pickle=False)
            return arr
        except Exception as exc:  # noqa: BLE001 - numpy on a damaged file: ValueError, EOFError, OSError, ...
            raise CorruptError(f"{src}: not a readable .npy file: {exc}") from None
    return load


def _member(z: Any, src: str, member: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        import numpy as np

        try:
            with z.zip.open(member) as fh:
                return np.lib.format.read_array(fh, allow_pickle=False)
        except Exception as exc:
            raise CkptError(f"{src}: cannot read member {member!r}: {exc}") from None
    return load


__all__ = ["open_numpy"]
