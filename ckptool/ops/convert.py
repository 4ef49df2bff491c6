"""Convert between TF checkpoints (V1, V2), ``.npz`` and ``.safetensors``.

Streaming: one tensor in memory at a time. V2 -> V2 copies stored bytes
without decoding (CRC kept). ``.npz`` members are written one by one through
zipfile; ``.safetensors`` is written here (header first, then each tensor's
bytes) so memory stays bounded by the largest tensor.

Lossless rules: ``.npz`` holds numpy's own dtypes and byte strings; bfloat16 /
float8 (ml_dtypes) have no portable ``.npy`` descr, so they are refused for
``.npz`` (use ``.safetensors``, which has BF16/F8_E4M3/F8_E5M2). A tensor the
target cannot hold is refused naming it, unless ``skip_unsupported``.
"""

from __future__ import annotations

import fnmatch
import json
import zipfile
from dataclasses import dataclass, field

import numpy as np

from ckptool.errors import CkptError, UnsupportedError
from ckptool.io.storage import storage_for
from ckptool.io.atomic import AtomicFile, check_destination, checkpoint_identity, publish
from ckptool.ops.write import BundleWriter

TF, NPZ, SAFETENSORS = "tf", "npz", "safetensors"

# numpy dtype name -> safetensors dtype
_ST = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "uint16": "U16", "int32": "I32",
       "uint32": "U32", "int64": "I64", "uint64": "U64", "float16": "F16", "float32": "F32",
       "float64": "F64", "complex64": "C64", "bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3",
       "float8_e5m2": "F8_E5M2"}
_NPZ_KINDS = set("biufcS")


@dataclass
class ConvertResult:
    dst: str
    format: str
    tensors: int = 0
    nbytes: int = 0
    files: list = field(default_factory=list)
    skipped: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"dst": self.dst, "format": self.format, "tensors": self.tensors, "bytes": self.nbytes,
                "files": list(self.files), "skipped": list(self.skipped)}


def target_format(dst: str, to: str | None) -> str:
    if to:
        return to
    low = dst.lower()
    if low.endswith(".npz"):
        return NPZ
    if low.endswith(".safetensors"):
        return SAFETENSORS
    return TF


def _selected(name: str, match, exclude) -> bool:
    if match and not any(fnmatch.fnmatchcase(name, g) for g in match):
        return False
    return not any(fnmatch.fnmatchcase(name, g) for g in exclude or ())


def _values(src: str, keep_slices: bool, verify: bool = True):
    """``(source, iterator of (name, value))``; value is an ndarray or a RawTensor."""
    from ckptool.ops.sources import CheckpointSource, RawTensor, open_source

    s = open_source(src)
    if isinstance(s, CheckpointSource) and not s.raw:
        return s, ((n, _Lazy(s.ck, n, verify)) for n in s.ck.names())
    if isinstance(s, CheckpointSource) and s.raw and not keep_slices:
        def gen():
            for name, v in s.items():
                if isinstance(v, RawTensor) and v.entry.slices:
                    yield name, _Lazy(s.ck, name, verify)
                else:
                    yield name, v
        return s, gen()
    return s, s.items()


class _Lazy:
    """A checkpoint tensor read only when its data is written (merged slices, V1 values)."""

    def __init__(self, ck, name: str, verify: bool = True):
        self.ck, self.name, self.verify = ck, name, verify

    def read(self) -> np.ndarray:
        return self.ck.read(self.name, verify=self.verify)

    def meta(self):
        from ckptool.format import dtypes

        var = self.ck.variable(self.name)
        return dtypes.from_name(var.dtype).numpy, tuple(var.shape)


def _as_array(value):
    from ckptool.ops.sources import RawTensor

    if isinstance(value, _Lazy):
        return value.read()
    if isinstance(value, RawTensor):
        return value.checkpoint.read(value.entry.key.decode("utf-8", "surrogateescape"),
                                     verify=value.verify)
    return np.asarray(value)


def _contiguous(arr: np.ndarray) -> np.ndarray:
    """C-contiguous, keeping 0-d shapes (np.ascontiguousarray makes them 1-d)."""
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def convert(src: str, dst: str, *, to: str | None = None, match=(), exclude=(), num_shards: int = 1,
            keep_slices: bool = False, force: bool = False, skip_unsupported: bool = False,
            progress=None) -> ConvertResult:
    fmt = target_format(dst, to)
    if fmt not in (TF, NPZ, SAFETENSORS):
        raise CkptError(f"unknown target format {fmt!r} (tf, npz or safetensors)")
    from ckptool.ops.sources import CheckpointSource

    source, items = _values(src, keep_slices)
    try:
        ids = checkpoint_identity(source.ck) if isinstance(source, CheckpointSource) else [source.path]
        if keep_slices and (fmt != TF or not (isinstance(source, CheckpointSource) and source.raw)):
            raise CkptError("--keep-slices is for V2 -> V2 conversion only")
        names = [n for n in source.names() if _selected(n, match, exclude)]
        wanted = set(names)
        items = ((n, v) for n, v in items if n in wanted)
        result = ConvertResult(dst, fmt)
        if fmt != TF and isinstance(source, CheckpointSource):
            items = _check_tf_dtypes(source.ck, items, fmt, skip_unsupported, result, dst)
        if fmt == TF:
            _to_tf(dst, items, result, num_shards, force, progress, ids)
        elif fmt == NPZ:
            _to_npz(dst, items, result, (force, ids), skip_unsupported, progress)
        else:
            _to_safetensors(dst, items, result, (force, ids), skip_unsupported, progress, src)
        return result
    finally:
        source.close()


def _check_tf_dtypes(ck, items, fmt, skip, result, dst):
    """Refuse (or skip) TF dtypes the target has no type for (quantized, variant, resource;
    strings into .safetensors), before any data is read."""
    allowed = set(_ST) | ({"string", "complex128"} if fmt == NPZ else set())
    target = ".npz" if fmt == NPZ else ".safetensors"
    for name, v in items:
        tfname = ck.variable(name).dtype
        if tfname not in allowed or (fmt == NPZ and tfname in ("bfloat16", "float8_e4m3fn", "float8_e5m2")):
            if skip:
                result.skipped.append(name)
                continue
            hint = " (use .safetensors or a TF checkpoint)" if fmt == NPZ and tfname in _ST else ""
            raise UnsupportedError(f"{dst}: tensor {name!r} has dtype {tfname}, which {target} cannot hold"
                                   f"{hint}; --skip-unsupported leaves it out")
        yield name, v


def _to_tf(dst, items, result, num_shards, force, progress, ids=()):
    from ckptool.ops.sources import RawTensor

    done = 0
    with BundleWriter(dst, num_shards=num_shards, force=force, sources=ids) as w:
        for name, v in items:
            if isinstance(v, RawTensor):
                v.write_to(w, name)
                done += v.nbytes
            else:
                arr = v if isinstance(v, (bytes, str)) else _as_array(v)
                w.add(name, arr)
                done += getattr(arr, "nbytes", 0)
            if progress:
                progress(done, 0)
        res = w.finish()
    result.tensors = res.variables
    result.nbytes = res.nbytes
    result.files = list(res.files)


def _check_target(storage, path, force):
    force, ids = force
    check_destination(storage, [path], force=force, sources=ids)
    storage.makedirs(storage.dirname(path))


def _npz_value(name: str, arr: np.ndarray):
    """The array .npz stores for ``arr`` losslessly, or an error message."""
    if arr.dtype == object:
        vals = arr.reshape(-1).tolist()
        if all(isinstance(x, bytes) for x in vals):
            if any(x.endswith(b"\0") for x in vals):
                return None, f"tensor {name!r}: string ends in NUL bytes, which a numpy 'S' array drops"
            return np.array(vals, dtype=np.bytes_).reshape(arr.shape), None
        return None, f"tensor {name!r}: object values .npz cannot hold without pickle"
    if arr.dtype.kind == "S":
        return arr, None
    if arr.dtype.kind not in _NPZ_KINDS or arr.dtype.name not in _ST and arr.dtype.kind != "c":
        return None, (f"tensor {name!r} has dtype {arr.dtype.name}, which .npz cannot hold losslessly "
                      f"(use .safetensors or a TF checkpoint)")
    return arr, None


def _to_npz(dst, items, result, force, skip, progress):
    storage, path = storage_for(dst)
    _check_target(storage, path, force)
    f = AtomicFile(storage, path)
    try:
        with zipfile.ZipFile(f.file, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, v in items:
                arr, why = _npz_value(name, _as_array(v))
                if arr is None:
                    if skip:
                        result.skipped.append(name)
                        continue
                    raise UnsupportedError(f"{dst}: {why}")
                with zf.open(name + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, _contiguous(arr), allow_pickle=False)
                result.tensors += 1
                result.nbytes += arr.nbytes
                if progress:
                    progress(result.nbytes, 0)
        publish([f])
    except BaseException:
        f.discard()
        raise
    result.files = [path]


def _st_dtype(name: str, arr: np.ndarray):
    code = _ST.get(arr.dtype.name)
    if code is None or arr.dtype.kind in "OSUV" and arr.dtype.name not in _ST:
        return None, (f"tensor {name!r} has dtype {arr.dtype.name if arr.dtype != object else 'string'}, "
                      f"which .safetensors cannot hold")
    return code, None


def _to_safetensors(dst, items, result, force, skip, progress, src):
    """Two passes over the source: the header (dtypes, shapes) first, then the data. Checkpoint
    tensors are lazy (read in the second pass); a file source (.npz, .safetensors) is read
    twice, one array at a time, so memory stays bounded by the largest tensor."""
    from ckptool.ops.sources import open_source

    storage, path = storage_for(dst)
    _check_target(storage, path, force)
    header, order, offset = {}, [], 0
    reread = False
    for name, v in items:
        meta = _meta(v)
        if meta is None:
            arr = _as_array(v)
            meta = (arr.dtype, arr.shape)
            v = arr = None  # dropped: read again in the second pass
            reread = True
        dt, shape = meta
        probe = np.empty(0, dtype=dt)
        code, why = _st_dtype(name, probe)
        if code is None:
            if skip:
                result.skipped.append(name)
                continue
            raise UnsupportedError(f"{dst}: {why}")
        n = int(np.prod(shape, dtype=np.int64)) * probe.itemsize
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + n]}
        order.append((name, v, n))
        offset += n
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogateescape")
    text += b" " * (-len(text) % 8)
    f = AtomicFile(storage, path)
    try:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        done = 0
        again = None
        if reread:
            again = open_source(src)
            fresh = iter(again.items())
        for name, v, n in order:
            if v is None:
                for other, value in fresh:
                    if other == name:
                        v = value
                        break
                else:
                    raise CkptError(f"{src}: tensor {name!r} vanished while converting")
            arr = _contiguous(_as_array(v))
            v = None
            if arr.dtype.byteorder == ">":
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            if arr.nbytes != n:
                raise CkptError(f"{dst}: tensor {name!r} changed size while converting")
            f.write(memoryview(arr.reshape(-1).view(np.uint8)))
            done += n
            if progress:
                progress(done, offset)
        if again is not None:
            again.close()
        publish([f])
    except BaseException:
        f.discard()
        raise
    result.tensors = len(order)
    result.nbytes = offset
    result.files = [path]


def _meta(v):
    """(numpy dtype, shape) of a RawTensor without reading data, else None."""
    from ckptool.ops.sources import RawTensor

    if isinstance(v, _Lazy):
        try:
            return v.meta()
        except Exception:
            return None
    if not isinstance(v, RawTensor):
        return None
    e = v.entry
    try:
        return e.dtype.numpy, tuple(e.shape)
    except Exception:
        return None
