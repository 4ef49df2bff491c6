"""What ``convert`` reads: every source as a list of :class:`Spec` (name, TF dtype, shape,
how to load the value), known before any tensor data is read.

Sources: a checkpoint (V1 or V2; a little-endian V2 entry can also be copied
as stored bytes), a ``.safetensors`` file (string tensors, the object graph
and original names restored from its ``__metadata__``), an ``.npz`` or
``.npy`` file (dtypes and shapes from the ``.npy`` headers).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, CorruptError, UnsupportedError
from ckptool.format import bundle
from ckptool.format.bundle import Entry
from ckptool.format.objgraph import OBJECT_GRAPH_KEY
from ckptool.format.objkeys import key_of

if TYPE_CHECKING:
    import numpy as np

    from ckptool.ops.read.checkpoint import Checkpoint
    from ckptool.ops.read.v2 import BundleCheckpoint
    from ckptool.ops.write.writer import BundleWriter

NPZ, NPY, SAFETENSORS, CHECKPOINT = "npz", "npy", "safetensors", "checkpoint"


# --------------------------------------------------------------------------- raw copies


class RawTensor:
    """A tensor of a V2 checkpoint, to copy without decoding (CRC kept). Its entry is parsed
    when asked for (the reader keeps the last few): a conversion of 300,000 tensors holds
    their names, not their entries."""

    __slots__ = ("checkpoint", "name", "verify")

    def __init__(self, checkpoint: BundleCheckpoint, name: str, verify: bool = True):
        self.checkpoint = checkpoint
        self.name = name
        self.verify = verify

    @property
    def entry(self) -> Entry:
        return self.checkpoint.entry(key_of(self.name))

    def __call__(self) -> np.ndarray:
        """The value, decoded: a RawTensor is also its spec's ``load`` (one object a tensor)."""
        return self.checkpoint.read(self.name, verify=self.verify)

    def write_to(self, writer: BundleWriter, key: str) -> None:
        e = self.entry
        if not e.slices:
            writer.add_raw(key, e, self.checkpoint.read_raw(e, verify=self.verify))
            return
        # A partitioned tensor: its full entry, then each slice under the new name's slice key.
        writer.add_raw(key, e, None)
        new = key_of(key)
        for sl in e.slices:
            part = self.checkpoint.entry(bundle.encode_tensor_name_slice(e.key, sl))
            writer.add_raw(bundle.encode_tensor_name_slice(new, sl), part,
                           self.checkpoint.read_raw(part, verify=self.verify))

    @property
    def nbytes(self) -> int:
        if not self.entry.slices:
            return self.entry.size
        return sum(self.checkpoint.entry(bundle.encode_tensor_name_slice(self.entry.key, sl)).size
                   for sl in self.entry.slices)


# --------------------------------------------------------------------------- source kinds


def kind_of(path: str) -> str:
    low = path.lower()
    if low.endswith(".npz"):
        return NPZ
    if low.endswith(".npy"):
        return NPY
    if low.endswith(".safetensors"):
        return SAFETENSORS
    return CHECKPOINT


@dataclass(slots=True)  # one per tensor: no __dict__
class Spec:
    name: str
    dtype: str  # TensorFlow's dtype name of the stored value
    shape: tuple[int, ...]
    load: Callable[[], Any]  # () -> numpy array (object array of bytes for strings)
    raw: RawTensor | None = None  # a RawTensor: copy stored bytes without decoding
    stored: bytes | None = None  # for strings already in memory


@dataclass
class Opened:
    specs: list[Spec]
    close: Callable[[], None]
    checkpoint: object = None  # the open Checkpoint, for checkpoint sources


def open_specs(src: str, keep_slices: bool = False, verify: bool = True) -> Opened:
    kind = kind_of(src)
    if kind == SAFETENSORS:
        return _safetensors(src)
    if kind in (NPZ, NPY):
        return _numpy_file(src, kind == NPZ)
    return _checkpoint(src, keep_slices, verify)


def _checkpoint(src: str, keep_slices: bool, verify: bool) -> Opened:
    from ckptool.ops.read.reader import BundleCheckpoint
    from ckptool.ops.read.reader import open as open_checkpoint
    ck = open_checkpoint(src)
    try:
        raw = isinstance(ck, BundleCheckpoint) and ck.header.raw_copy
        specs = []
        ordered, last = True, -1  # in the source's data order already (as written, mostly)?
        for v in ck.variables():
            rt = None
            load: Callable[[], np.ndarray] = _Read(ck, v.name, verify)
            if raw and isinstance(ck, BundleCheckpoint):
                e = ck.entry(key_of(v.name))
                load = RawTensor(ck, v.name, verify)
                if not e.slices or keep_slices:
                    rt = load
                place = _place(e)
                ordered = ordered and place >= last
                last = place
            specs.append(Spec(v.name, v.dtype, v.shape, load, rt))
        if raw and not ordered and isinstance(ck, BundleCheckpoint):  # sequential reads: data order
            bundle_ck = ck
            specs.sort(key=lambda s: _place(bundle_ck.entry(key_of(s.name))))
    except BaseException:
        ck.close()
        raise
    return Opened(specs, ck.close, ck)


def _place(e: Entry) -> int:
    """Where ``e``'s bytes are, as one number ordering shard, then offset; partitioned last."""
    return 1 << 128 if e.slices else e.shard_id << 64 | e.offset


class _Read:
    """``ck.read(name, verify=verify)`` as a call of no arguments (a spec's ``load``), in 64 bytes."""

    __slots__ = ("ck", "name", "verify")

    def __init__(self, ck: Checkpoint, name: str, verify: bool):
        self.ck, self.name, self.verify = ck, name, verify

    def __call__(self) -> np.ndarray:
        return self.ck.read(self.name, verify=self.verify)


def _strings(shape: tuple[int, ...], values: list[bytes]) -> np.ndarray:
    import numpy as np

    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr.reshape(shape)


def _safetensors(src: str) -> Opened:
    from ckptool.ops.transform.convert.stfile import StFile

    f = StFile(src)
    try:
        ex = f.extras
        specs = []
        for t in f.tensors:
            name = ex.names.get(t.name, t.name)
            specs.append(Spec(name, t.tf_dtype, t.shape, functools.partial(f.read, t.name)))
        for name, (shape, values) in ex.strings.items():
            specs.append(Spec(name, "string", shape, functools.partial(_strings, shape, values)))
        if ex.object_graph is not None:
            g = bytes(ex.object_graph)  # decoded from base64: bytes already, not copied
            specs.append(Spec(OBJECT_GRAPH_KEY, "string", (), lambda: _strings((), [g]), stored=g))
        seen: set[str] = set()
        for s in specs:
            if s.name in seen:
                raise CorruptError(f"{src}: tensor {s.name!r} is given twice (header and __metadata__)")
            seen.add(s.name)
            if s.name == OBJECT_GRAPH_KEY:
                _check_graph(src, s)
    except BaseException:
        f.close()
        raise
    return Opened(specs, f.close)


def _check_graph(src: str, spec: Spec) -> None:
    """The object graph a .safetensors file carries is a string scalar that parses, as
    every reader of the output expects (else one error line, not a traceback later)."""
    from ckptool.format.objgraph import ObjectGraph

    if spec.dtype != "string" or tuple(spec.shape) != ():
        raise CorruptError(f"{src}: {OBJECT_GRAPH_KEY} is not a string scalar ({spec.dtype} {list(spec.shape)})")
    data = spec.stored if spec.stored is not None else spec.load().reshape(())[()]
    ObjectGraph.parse(bytes(data), f"{src}: {OBJECT_GRAPH_KEY}")


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


def _numpy_file(src: str, npz: bool) -> Opened:
    import os

    import numpy as np

    from ckptool.errors import MissingError

    if not os.path.isfile(src):
        raise MissingError(f"{src}: no such file")
    if not npz:
        name = os.path.basename(src)[:-len(".npy")] if src.lower().endswith(".npy") else os.path.basename(src)
        try:
            with open(src, "rb") as fh:
                head = _npy_header(fh, src)
        except OSError as exc:
            raise CkptError(f"{src}: cannot read: {exc.strerror or exc}") from None
        if head is None:
            raise UnsupportedError(f"{src}: .npy format version other than 1.0 or 2.0")
        shape, _, dt = head
        return Opened([Spec(name, _tf_name(dt, src), tuple(shape), _npy(src))], lambda: None)
    try:
        z = np.load(src, allow_pickle=False)
    except Exception as exc:
        raise CorruptError(f"{src}: not a readable .npz file: {exc}") from None
    if not hasattr(z, "files"):
        raise CorruptError(f"{src}: is a .npy array, not an .npz archive")
    try:
        specs = []
        for member in z.zip.namelist():
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
            specs.append(Spec(name, _tf_name(dt, where), tuple(shape), _member(z, src, member)))
    except BaseException:
        z.close()
        raise
    return Opened(specs, z.close)


def _npy(src: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        import numpy as np

        try:
            arr: np.ndarray = np.load(src, allow_pickle=False)
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
