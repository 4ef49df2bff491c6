"""What every reader of a source gives ``convert`` (and every reading command): a list of
:class:`Spec` (name, TF dtype, shape, how to load the value), known before any tensor data is
read, in an :class:`Opened`; a V2 entry copied as stored is a :class:`RawTensor`. The kinds
of source by name: :func:`kind_of`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ckptool.format import bundle
from ckptool.format.bundle import Entry
from ckptool.format.objkeys import key_of

if TYPE_CHECKING:
    import numpy as np

    from ckptool.ops.read.v2 import BundleCheckpoint

NPZ, NPY, SAFETENSORS, CHECKPOINT = "npz", "npy", "safetensors", "checkpoint"


class RawSink(Protocol):
    """Where a :class:`RawTensor` copies its stored bytes (a V2 bundle writer's ``add_raw``)."""

    def add_raw(self, key: str | bytes, entry: Entry, data: Any) -> None: ...


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

    def write_to(self, writer: RawSink, key: str) -> None:
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


__all__ = ["CHECKPOINT", "NPY", "NPZ", "SAFETENSORS", "Opened", "RawSink", "RawTensor", "Spec", "kind_of"]
