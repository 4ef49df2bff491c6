"""The ``.keras`` zip Keras 3's ``load_model`` reads: ``metadata.json``, ``config.json`` and
``model.weights.h5`` (members stored, in the order Keras writes them), written to a temporary name
and renamed into place by the caller's :class:`~ckptool.io.safety.atomic.AtomicFile`."""

from __future__ import annotations

import time
import zipfile
from typing import Any

from ckptool.format.json_doc import dump_json
from ckptool.io.base import Storage
from ckptool.io.safety.atomic import AtomicFile
from ckptool.ops.read.checkpoint import Checkpoint
from ckptool.ops.read.keras import WEIGHTS_MEMBER
from ckptool.ops.transform.convert.keras.synth import Plan, write_h5

#: the Keras 3 whose file layout is written (docs/FORMAT.md §14: observed with Keras 3.15.1)
KERAS_VERSION = "3.15.1"


def metadata(now: float | None = None) -> dict[str, str]:
    """``metadata.json`` as Keras 3 writes it."""
    stamp = time.strftime("%Y-%m-%d@%H:%M:%S", time.gmtime(time.time() if now is None else now))
    return {"keras_version": KERAS_VERSION, "date_saved": stamp}


def write_keras(f: AtomicFile, storage: Storage, ck: Checkpoint, p: Plan, config: dict[str, Any]) -> None:
    """Write the ``.keras`` file into ``f``: the weights laid out by ``p`` (through a scratch
    ``.h5`` beside it, removed after), ``config`` as ``config.json``."""
    scratch = f.name + ".h5"
    try:
        write_h5(scratch, ck, p)
        with zipfile.ZipFile(f.writer(), "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zo:
            zo.writestr("metadata.json", dump_json(metadata(), f"{f.target}: metadata.json"))
            zo.writestr("config.json", dump_json(config, f"{f.target}: config.json"))
            zo.write(scratch, WEIGHTS_MEMBER)
    finally:
        if storage.exists(scratch):
            storage.remove(scratch)


__all__ = ["KERAS_VERSION", "metadata", "write_keras"]
