"""Reading checkpoints: :func:`open` and the :class:`Checkpoint` it returns.

Listing reads the ``.index`` alone. A tensor is read lazily from its shard
with positioned reads straight into the array it becomes (never the whole
shard), its CRC32C checked unless ``verify=False``. Values are bit-identical
to ``tf.train.load_checkpoint(p).get_tensor(name)``. The readers live in
:mod:`ckptool.ops.read.v2` (tensor bundles) and :mod:`ckptool.ops.read.v1`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptool.errors import CkptError
from ckptool.ops.read.checkpoint import NUMPY_MAX_DIMS, Checkpoint, Variable
from ckptool.ops.read.tfopen import open_tf
from ckptool.ops.read.v1 import V1Checkpoint
from ckptool.ops.read.v2 import BundleCheckpoint

if TYPE_CHECKING:
    from ckptool.io.base import Storage


def open(path: str, storage: Storage | None = None) -> Checkpoint:
    """Open a checkpoint given any CHECKPOINT argument form (see the README); a Keras 3 file
    (``.weights.h5``, ``.keras``, ``.weights.json``) opens as a :class:`KerasCheckpoint`, and every
    other source ``convert`` reads (``.safetensors``, ``.npz``, ``.npy``, a Hugging Face folder)
    as a :class:`~ckptool.ops.read.files.FileCheckpoint`."""
    from ckptool.ops.read.files import HF, file_kind, open_file
    from ckptool.ops.read.spec import NPY, NPZ, SAFETENSORS, kind_of

    if isinstance(path, str) and kind_of(path) in (SAFETENSORS, NPZ, NPY):
        return open_file(path, kind_of(path))
    try:
        return open_tf(path, storage)
    except CkptError:
        if not isinstance(path, str) or file_kind(path, storage) != HF:
            raise
        return open_file(path, HF)


__all__ = ["NUMPY_MAX_DIMS", "BundleCheckpoint", "Checkpoint", "V1Checkpoint", "Variable", "open"]
