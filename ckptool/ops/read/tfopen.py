"""Opening a TF checkpoint (V2 bundle or V1 files, any CHECKPOINT argument form) or a Keras 3
weights file as a :class:`~ckptool.ops.read.checkpoint.Checkpoint`; :func:`ckptool.ops.read.reader.open`
opens every other source too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptool.errors import CkptError
from ckptool.io.layout.checkpoints import V1, V2, locate
from ckptool.ops.read.keras import is_keras_path
from ckptool.ops.read.v1 import V1Checkpoint
from ckptool.ops.read.v2 import BundleCheckpoint

if TYPE_CHECKING:
    from ckptool.io.base import Storage
    from ckptool.ops.read.checkpoint import Checkpoint


def open_tf(path: str, storage: Storage | None = None) -> Checkpoint:
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


__all__ = ["open_tf"]
