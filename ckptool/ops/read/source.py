"""What ``convert`` reads, and through :mod:`ckptool.ops.read.files` every reading command:
every source as a list of :class:`~ckptool.ops.read.spec.Spec` (name, TF dtype, shape, how to
load the value), known before any tensor data is read.

Sources: a checkpoint (V1 or V2; a little-endian V2 entry can also be copied as stored
bytes; a Keras 3 file), a ``.safetensors`` file (string tensors, the object graph and
original names restored from its ``__metadata__``), an ``.npz`` or ``.npy`` file
(:mod:`ckptool.ops.read.npfile`: dtypes and shapes from the ``.npy`` headers), a Hugging Face
folder (:mod:`ckptool.ops.read.hffolder`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from ckptool.errors import CkptError, CorruptError
from ckptool.format.bundle import Entry
from ckptool.format.objgraph import OBJECT_GRAPH_KEY
from ckptool.format.objkeys import key_of
from ckptool.ops.read.spec import CHECKPOINT, NPY, NPZ, SAFETENSORS, Opened, RawTensor, Spec, kind_of

if TYPE_CHECKING:
    import numpy as np

    from ckptool.ops.read.checkpoint import Checkpoint


def open_specs(src: str, keep_slices: bool = False, verify: bool = True) -> Opened:
    kind = kind_of(src)
    if kind == SAFETENSORS:
        return _safetensors(src)
    if kind in (NPZ, NPY):
        from ckptool.ops.read.npfile import open_numpy

        return open_numpy(src, kind == NPZ)
    try:
        return _checkpoint(src, keep_slices, verify)
    except CkptError:
        from ckptool.io.backends.urls import storage_for
        from ckptool.ops.read.hffolder import hf_weights, open_hf

        storage, local = storage_for(src)
        if hf_weights(storage, local) is None:  # no Hugging Face folder either: the checkpoint's error
            raise
        return open_hf(src)


def _checkpoint(src: str, keep_slices: bool, verify: bool) -> Opened:
    from ckptool.ops.read.tfopen import open_tf as open_checkpoint
    from ckptool.ops.read.v2 import BundleCheckpoint
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
    from ckptool.ops.read.stfile import StFile

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


__all__ = ["CHECKPOINT", "NPY", "NPZ", "SAFETENSORS", "Opened", "RawTensor", "Spec", "kind_of", "open_specs"]
