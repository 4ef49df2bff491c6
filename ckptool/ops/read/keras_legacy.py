"""A tf_keras whole-model ``.h5`` file (``model.save("model.h5")``), read as a checkpoint: the
root attributes ``model_config`` and ``training_config`` (JSON), the group ``model_weights``
(attribute ``layer_names``; each layer's group with ``weight_names``, its datasets at
``model_weights/<layer>/<weight name>``) and, compiled, ``optimizer_weights``. Names are the HDF5
paths; the file is opened and checked as a Keras 3 file is
(:class:`~ckptool.ops.read.keras.KerasCheckpoint`). Told from a Keras 3 ``.weights.h5`` by its
content: ``model_config`` and ``model_weights``, which Keras 3 never writes."""

from __future__ import annotations

from typing import Any

from ckptool.errors import CorruptError, UnsupportedError
from ckptool.format.objgraph import ObjectGraph
from ckptool.ops.read.keras import KerasCheckpoint, is_keras_path
from ckptool.ops.read.keras_zip import JSON_LIMIT

MODEL_WEIGHTS = "model_weights"
OPTIMIZER_WEIGHTS = "optimizer_weights"
SUFFIXES = (".h5", ".hdf5")


def is_legacy_path(path: str) -> bool:
    """A name a tf_keras ``model.save`` gives an HDF5 file (not a Keras 3 ``.weights.h5``)."""
    return path.lower().rstrip("/").endswith(SUFFIXES) and not is_keras_path(path)


def _text_list(value: Any) -> list[str]:
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in list(value)]


class LegacyH5Checkpoint(KerasCheckpoint):
    """A tf_keras ``.h5`` model: ``model_config``/``training_config`` (parsed JSON, or None),
    ``layers`` (each of ``layer_names`` with its ``weight_names``, as HDF5 dataset paths) and
    ``optimizer`` (the ``optimizer_weights`` datasets; ``optimizer_names``: those its ``weight_names``
    attribute lists, in the optimizer's order). ``graph``: the object graph a converter
    says this file stands for (:meth:`object_graph` returns it)."""

    def __init__(self, path: str):
        super().__init__(path)
        self.graph: ObjectGraph | None = None
        try:
            self._read_legacy()
        except BaseException:
            self.close()
            raise

    def _read_legacy(self) -> None:
        from ckptool.format.json_doc import load_json

        h5 = self._h5[0]
        try:
            attrs = dict(h5.attrs)
            group = h5.get(MODEL_WEIGHTS)
            names = _text_list(group.attrs.get("layer_names", [])) if group is not None else []
            self.layer_weights = {n: [f"{MODEL_WEIGHTS}/{n}/{w}" for w in _text_list(group[n].attrs.get(
                "weight_names", []))] for n in names} if group is not None else {}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptError(f"{self.path}: damaged tf_keras .h5 model: {exc}") from None
        if "model_config" not in attrs or group is None:
            raise UnsupportedError(f"{self.path}: not a tf_keras whole-model .h5 file (model.save('model.h5')): no "
                             f"{'model_config attribute' if 'model_config' not in attrs else 'model_weights group'}")
        docs = []
        for key in ("model_config", "training_config"):
            raw = attrs.get(key)
            raw = raw.encode("utf-8") if isinstance(raw, str) else raw
            docs.append(None if raw is None else load_json(bytes(raw), f"{self.path}: {key}", max_bytes=JSON_LIMIT,
                                                           what="a tf_keras model config"))
        self.model_config, self.training_config = docs
        if not isinstance(self.model_config, dict) or not isinstance(self.model_config.get("config"), dict):
            raise CorruptError(f"{self.path}: model_config is not a Keras model config")
        for n, keys in self.layer_weights.items():
            gone = [k for k in keys if k not in self.entries]
            if gone:
                raise CorruptError(f"{self.path}: layer {n!r} names weight {gone[0]!r}, which the file lacks")
        self.optimizer = [k for k in self.entries if k.startswith(OPTIMIZER_WEIGHTS + "/")]
        try:
            opt = h5.get(OPTIMIZER_WEIGHTS)
            named = _text_list(opt.attrs.get("weight_names", [])) if opt is not None else []
        except (OSError, ValueError, TypeError) as exc:
            raise CorruptError(f"{self.path}: damaged tf_keras .h5 model: {exc}") from None
        self.optimizer_names = [f"{OPTIMIZER_WEIGHTS}/{n}" for n in named]
        gone = [k for k in self.optimizer_names if k not in self.entries]
        if gone:
            raise CorruptError(f"{self.path}: optimizer_weights names {gone[0]!r}, which the file lacks")

    def object_graph(self) -> ObjectGraph | None:
        return self.graph


__all__ = ["MODEL_WEIGHTS", "OPTIMIZER_WEIGHTS", "LegacyH5Checkpoint", "is_legacy_path"]
