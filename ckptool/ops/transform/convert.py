"""Convert between TF checkpoints (V1, V2), ``.npz`` and ``.safetensors``.

Streaming: one tensor in memory at a time. V2 -> V2 copies stored bytes
without decoding (CRC kept). ``.npz`` members are written one by one through
zipfile; ``.safetensors`` is written header first (dtypes and shapes are
known from the source's index or header), then each tensor's bytes.

Lossless rules: ``.safetensors`` holds the numeric types it has a dtype for
(BF16, F8_E4M3, F8_E5M2 included); string tensors and the object graph go in
its ``__metadata__`` (``ckptool.format.safetensors_meta``), so converting
back restores the checkpoint exactly. ``.npz`` holds numpy's own dtypes and
byte strings; bfloat16 / float8 have no portable ``.npy`` descr, so they are
refused for ``.npz``. A tensor the target cannot hold is refused naming it,
unless ``skip_unsupported`` (or ``exclude``, or a cast) takes care of it.
Casts (``casts={"float32": "bfloat16"}``) round to nearest even; finite
values overflowing to inf are refused unless ``allow_overflow``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, UnsupportedError, UsageError
from ckptool.format import dtypes, objkeys
from ckptool.format.cast import Overflows, target_dtype
from ckptool.io.safety.atomic import AtomicFile, make_output_dir, publish
from ckptool.io.safety.destination import check_destination, checkpoint_identity
from ckptool.ops.transform.cast import value_of

if TYPE_CHECKING:
    import numpy as np

    from ckptool.io.base import Storage
    from ckptool.ops.transform.convert_src import Opened, Spec

TF, NPZ, SAFETENSORS = "tf", "npz", "safetensors"
FORMATS = (TF, NPZ, SAFETENSORS)
HF = "hf"  # a Hugging Face folder: ckptool.ops.transform.hf.export.convert_hf
#: Suffixes of formats ckptool does not write: a DST ending so is refused unless --to says.
FOREIGN = (".pt", ".pth", ".bin", ".h5", ".hdf5", ".keras", ".onnx", ".pb", ".pbtxt", ".pkl", ".pickle",
           ".npy", ".json", ".msgpack", ".gguf", ".tflite", ".zip", ".tar", ".gz", ".index", ".meta")
WRITES = ".safetensors, .npz, or a TF checkpoint prefix (no suffix, or e.g. model.ckpt)"


@dataclass
class ConvertResult:
    dst: str
    format: str
    tensors: int = 0
    nbytes: int = 0
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    cast: dict[str, str] = field(default_factory=dict)  # tensor -> "from->to"
    overflow: dict[str, int] = field(default_factory=dict)  # tensor -> values that became inf (allowed)
    ema: dict[str, Any] | None = None  # --ema: ckptool.ops.transform.ema.EmaReport.to_json()

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"dst": self.dst, "format": self.format, "tensors": self.tensors, "bytes": self.nbytes,
               "files": list(self.files), "skipped": list(self.skipped)}
        if self.cast:
            doc["cast"] = dict(self.cast)
            doc["overflow"] = dict(self.overflow)
        if self.ema is not None:
            doc["ema"] = dict(self.ema)
        return doc


def target_format(dst: str, to: str | None) -> str:
    if to:
        return to
    low = dst.lower().rstrip("/")
    if low.endswith(".npz"):
        return NPZ
    if low.endswith(".safetensors"):
        return SAFETENSORS
    ext = os.path.splitext(low)[1]
    if ext in FOREIGN or low.endswith(".data") or ".data-0" in os.path.basename(low):
        raise UsageError(f"{dst}: ckptool does not write {ext or 'this'} files; it writes {WRITES} "
                         "(give --to tf|npz|safetensors to write this name anyway)")
    return TF


def convert(src: str, dst: str, *, to: str | None = None, match: Sequence[str] = (), exclude: Sequence[str] = (),
            num_shards: int = 1,
            keep_slices: bool = False, force: bool = False, skip_unsupported: bool = False,
            casts: dict[str, Any] | None = None, allow_overflow: bool = False, names: str = "full",
            progress: Any = None, sync: bool = True, jobs: int | None = None, ema: bool = False,
            strip_optimizer: bool = False) -> ConvertResult:
    """Convert ``src`` to ``dst`` (format from ``to`` or the suffix); see the module doc.

    ``names="short"`` (``.safetensors`` only) stores PyTorch-style names: object
    keys without ``/.ATTRIBUTES/VARIABLE_VALUE``, no optimizer state; the
    mapping stays in the metadata, so converting back restores the checkpoint's names.
    ``jobs``: ranged GETs in flight when ``src`` is on an object store (default 8; no effect on
    local files). ``ema``: each variable written with its moving average's value
    (:mod:`ckptool.ops.transform.ema`); ``strip_optimizer``: the optimizer's state (and the
    averages) left out.
    """
    from ckptool.ops.read.plan import prefetch
    from ckptool.ops.read.select import select
    from ckptool.ops.transform.convert_src import open_specs
    from ckptool.ops.transform.keras_convert import keras_target, no_template_message

    if keras_target(dst) is not None and to is None:
        raise UsageError(no_template_message(src, dst))
    if to == HF:  # its own options (arch, config, vocab, ...): ckptool.convert(..., to="hf") goes there
        raise UsageError("to='hf' is convert_hf (ckptool.ops.transform.hf.export), not convert")
    opened = open_specs(src, keep_slices)
    source: dict[str, str] = {}
    ema_report = None
    try:
        if ema or strip_optimizer:  # a view of the source: the writers below see the averages' values
            from ckptool.ops.transform.ema import ema_source

            opened, ema_report = ema_source(opened, ema=ema, strip_optimizer=strip_optimizer, where=src)
            source = ema_report.source if ema_report is not None else {}
        from ckptool.ops.read.keras import KerasCheckpoint

        ck = opened.checkpoint
        ids = list(ck.files) if isinstance(ck, KerasCheckpoint) else \
            checkpoint_identity(ck) if ck is not None else [src]
        _check_not_source(dst, ids)
        fmt = target_format(dst, to)
        if fmt not in FORMATS:
            raise UsageError(f"unknown target format {fmt!r} (tf, npz or safetensors)")
        if names not in ("full", "short"):
            raise UsageError(f"--names is full or short, not {names!r}")
        if names == "short" and fmt != SAFETENSORS:
            raise UsageError("--names short is for .safetensors output")
        casts = dict(casts or {})
        if keep_slices and (fmt != TF or opened.checkpoint is None or not any(s.raw for s in opened.specs)):
            raise CkptError("--keep-slices is for V2 -> V2 conversion only")
        # a --match/--exclude that leaves nothing is an error (ops.read.select), before anything is written
        specs = opened.specs
        if match or exclude:
            kept = set(select([s.name for s in specs], src, tuple(match), None, tuple(exclude), writes=True))
            specs = [s for s in specs if s.name in kept]
        result = ConvertResult(dst, fmt)
        result.ema = ema_report.to_json() if ema_report is not None else None
        over = Overflows(allow_overflow)
        # the read order, fetched ahead from an object store (.safetensors reads strings first)
        order = sorted(specs, key=lambda s: s.dtype != "string") if fmt == SAFETENSORS else specs
        with prefetch(opened.checkpoint, [source.get(s.name, s.name) for s in order if s.stored is None], jobs):
            _write(dst, fmt, specs, result, num_shards, (force, ids), progress, casts, over, sync,
                   skip_unsupported, names, opened)
        return result
    finally:
        opened.close()


def _write(dst: str, fmt: str, specs: list[Spec], result: ConvertResult, num_shards: int,
           force: tuple[bool, Sequence[str]], progress: Callable[[int, int], None] | None, casts: dict[str, str],
           over: Overflows, sync: bool, skip: bool, names: str, opened: Opened) -> None:
    if fmt == TF:
        _to_tf(dst, specs, result, num_shards, force, progress, casts, over, sync)
    elif fmt == NPZ:
        _to_npz(dst, _supported(specs, NPZ, casts, skip, result, dst), result, force, skip, progress, casts,
                over, sync)
    else:
        from ckptool.ops.transform.convert_st import to_safetensors

        kept = _supported(specs, SAFETENSORS, casts, skip, result, dst)
        to_safetensors(dst, kept, result, force, progress, casts, over, names, opened, sync)


def _supported(specs: list[Spec], fmt: str, casts: dict[str, str], skip: bool, result: ConvertResult,
               dst: str) -> list[Spec]:
    """Refuse (or skip) dtypes the target has no type for, before any data is read."""
    from ckptool.format.safetensors_meta import TF_TO_ST

    out = []
    target = ".npz" if fmt == NPZ else ".safetensors"
    for s in specs:
        dt = target_dtype(casts, s.dtype)
        if fmt == NPZ:
            ok = dt == "string" or (dt in dtypes.BY_NAME and dtypes.BY_NAME[dt].npy_portable)
        else:
            ok = dt in TF_TO_ST or dt == "string"
        if ok:
            out.append(s)
            continue
        if skip:
            result.skipped.append(s.name)
            continue
        hint = " (use .safetensors or a TF checkpoint)" if fmt == NPZ and dt in TF_TO_ST else ""
        raise UnsupportedError(f"{dst}: tensor {s.name!r} has dtype {dt}, which {target} cannot hold{hint}; "
                               "--exclude it, --cast it, or --skip-unsupported leaves out all such")
    return out


def _to_tf(dst: str, specs: list[Spec], result: ConvertResult, num_shards: int, force_ids: tuple[bool, Sequence[str]],
           progress: Callable[[int, int], None] | None, casts: dict[str, str], over: Overflows, sync: bool) -> None:
    from ckptool.ops.write.writer import BundleWriter

    done = 0
    force, ids = force_ids
    with BundleWriter(dst, num_shards=num_shards, force=force, sync=sync, sources=ids) as w:
        for s in specs:
            if s.raw is not None and s.dtype not in casts:
                s.raw.write_to(w, s.name)
                done += s.raw.nbytes
            elif s.stored is not None:
                w.add(s.name, s.stored)
                done += len(s.stored)
            else:
                arr = value_of(s, casts, over, result)
                w.add(s.name, arr)
                done += getattr(arr, "nbytes", 0)
            if progress:
                progress(done, 0)
        over.check(dst)  # before finish: an error here leaves nothing behind
        res = w.finish()
    result.tensors = res.variables
    result.nbytes = res.nbytes
    result.files = list(res.files)


def _check_not_source(dst: str, ids: Sequence[str]) -> None:
    """DST names the source itself (in any form): refused before anything else, even with --force."""
    from ckptool.io.backends.urls import storage_for

    storage, path = storage_for(dst)
    check_destination(storage, [path, path + ".index"], force=True, sources=ids, label=dst)


def check_target(storage: Storage, path: str, force_ids: tuple[bool, Sequence[str]]) -> None:
    """One output file: ``force_ids`` is ``(force, source identities)`` (io.atomic.check_destination)."""
    force, ids = force_ids
    check_destination(storage, [path], force=force, sources=ids)
    make_output_dir(storage, storage.dirname(path))


#: A zip member name is at most this many bytes (its length is a 2-byte field); a tensor's
#: member is its name plus ".npy".
ZIP_NAME_MAX = 0xFFFF


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


def _to_npz(dst: str, specs: list[Spec], result: ConvertResult, force: tuple[bool, Sequence[str]], skip: bool,
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


__all__ = ["HF", "NPZ", "SAFETENSORS", "TF", "ConvertResult", "convert", "target_format"]
