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
from ckptool.io.layout.checkpoints import V1, V2, locate
from ckptool.ops.read.checkpoint import NUMPY_MAX_DIMS, Checkpoint, Variable
from ckptool.ops.read.keras import is_keras_path
from ckptool.ops.read.v1 import V1Checkpoint
from ckptool.ops.read.v2 import BundleCheckpoint

if TYPE_CHECKING:
    from ckptool.io.base import Storage


def open(path: str, storage: Storage | None = None) -> Checkpoint:
    """Open a checkpoint given any CHECKPOINT argument form (see the README); a Keras 3 file
    (``.weights.h5``, ``.keras``, ``.weights.json``) opens as a :class:`KerasCheckpoint`."""
    if isinstance(path, str) and is_keras_path(path):
        from ckptool.ops.read.keras import open_keras

        return open_keras(path)
    located = locate(path, storage)
    if located.format == V2:
        return BundleCheckpoint(located)
    if located.format == V1:
        return V1Checkpoint(located)
    raise CkptError(f"{path}: unknown checkpoint format {located.format}")  # pragma: no cover


__all__ = ["NUMPY_MAX_DIMS", "BundleCheckpoint", "Checkpoint", "V1Checkpoint", "Variable", "open"]
