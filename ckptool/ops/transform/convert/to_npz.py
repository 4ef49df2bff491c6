"""``convert`` to ``.npz``: each tensor a ``.npy`` member written in turn through zipfile, stored
(not compressed), with numpy's own dtypes and byte strings; a name or a value the archive cannot
hold distinctly is refused before anything is written."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from ckptool.errors import UnsupportedError
from ckptool.format import objkeys
from ckptool.io.safety.atomic import AtomicFile, make_output_dir, publish
from ckptool.io.safety.destination import check_destination
from ckptool.ops.transform.convert.cast import value_of

if TYPE_CHECKING:
    import numpy as np

    from ckptool.format.cast import Overflows
    from ckptool.io.base import Storage
    from ckptool.ops.read.source import Spec
    from ckptool.ops.transform.convert.formats import ConvertResult

#: A zip member name is at most this many bytes (its length is a 2-byte field); a tensor's
#: member is its name plus ".npy".
ZIP_NAME_MAX = 0xFFFF


def check_target(storage: Storage, path: str, force_ids: tuple[bool, Sequence[str]]) -> None:
    """One output file: ``force_ids`` is ``(force, source identities)`` (io.safety.destination.check_destination)."""
    force, ids = force_ids
    check_destination(storage, [path], force=force, sources=ids)
    make_output_dir(storage, storage.dirname(path))


def npz_names(names: Iterable[str], dst: str) -> None:
    """Refuse names an ``.npz`` cannot hold distinctly: a NUL byte (zip names end there),
    not UTF-8, over :data:`ZIP_NAME_MAX` bytes with ``.npy``, or ``x`` beside ``x.npy``
    (np.load's ``z["x.npy"]`` gives ``x``). Before anything is written."""
    seen = set(names)
    for n in names:
        shown = objkeys.shown(n)
        if len(shown) > 80:
            shown = f"{shown[:48]}...{shown[-24:]}"
        if "\0" in n:
            raise UnsupportedError(f"{dst}: tensor {shown!r} has a NUL byte, where a zip member name "
                                   "ends; .npz cannot hold it distinctly")
        try:
            n.encode("utf-8")
        except UnicodeEncodeError:
            raise UnsupportedError(f"{dst}: tensor name {shown!r} is not UTF-8, which .npz member "
                                   "names cannot hold") from None
        size = len(n.encode("utf-8")) + len(".npy")
        if size > ZIP_NAME_MAX:
            raise UnsupportedError(f"{dst}: tensor {shown!r}: its name is {size - 4:,} bytes; a zip member name "
                                   f"(.npz) holds at most {ZIP_NAME_MAX - 4:,} with '.npy'; nothing written "
                                   "(.safetensors or a TF checkpoint holds it)")
        if n.endswith(".npy") and n[:-4] in seen:
            raise UnsupportedError(f"{dst}: tensors {n[:-4]!r} and {n!r} are one name to np.load "
                                   "(it reads 'x.npy' as 'x'); .npz cannot hold both")


def _npz_value(name: str, arr: np.ndarray) -> tuple[np.ndarray | None, str | None]:
    """The array .npz stores for ``arr`` losslessly, or an error message."""
    import numpy as np

    if arr.dtype == object:
        vals = arr.reshape(-1).tolist()
        if all(isinstance(x, bytes) for x in vals):
            if any(x.endswith(b"\0") for x in vals):
                return None, f"tensor {name!r}: string ends in NUL bytes, which a numpy 'S' array drops"
            return np.array(vals, dtype=np.bytes_).reshape(arr.shape), None
        return None, f"tensor {name!r}: object values .npz cannot hold without pickle"
    return arr, None


def to_npz(dst: str, specs: list[Spec], result: ConvertResult, force: tuple[bool, Sequence[str]], skip: bool,
           progress: Callable[[int, int], None] | None, casts: dict[str, str], over: Overflows, sync: bool) -> None:
    import zipfile

    import numpy as np

    from ckptool.io.backends.urls import storage_for
    npz_names([s.name for s in specs], dst)
    storage, path = storage_for(dst)
    check_target(storage, path, force)
    f = AtomicFile(storage, path, sync=sync)
    try:
        with zipfile.ZipFile(f.writer(), "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for s in specs:
                arr, why = _npz_value(s.name, np.asarray(value_of(s, casts, over, result)))
                if arr is None:
                    if skip:
                        result.skipped.append(s.name)
                        continue
                    raise UnsupportedError(f"{dst}: {why}")
                with zf.open(s.name + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, arr if arr.flags.c_contiguous else arr.copy(order="C"),
                                              allow_pickle=False)
                result.tensors += 1
                result.nbytes += arr.nbytes
                if progress:
                    progress(result.nbytes, 0)
        over.check(dst)
        publish([f])
    except BaseException:
        f.discard()
        raise
    result.files = [path]


__all__ = ["ZIP_NAME_MAX", "check_target", "npz_names", "to_npz"]
