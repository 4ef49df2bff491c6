"""What a tf_keras model recorded of itself, as the ``config.json`` Keras 3 rebuilds it from: the
model config of a SavedModel's ``keras_metadata.pb`` (or a ``--template-config`` file: what
``model.to_json()`` wrote), translated by :func:`ckptool.format.keras2_config.model`, and with
``--with-optimizer`` the training config as a ``compile_config``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptool.errors import UsageError
from ckptool.format.keras2_compile import compile_config
from ckptool.format.keras2_config import model as translate_model
from ckptool.format.keras_metadata import KerasNode
from ckptool.ops.read.checkpoint import Checkpoint
from ckptool.ops.read.keras_legacy import LegacyH5Checkpoint
from ckptool.ops.transform.convert.keras.whole.vocab import fill_vocabularies


@dataclass
class WholeConfig:
    """``config`` (the ``config.json`` document), ``notes`` (what was left out or changed, said)
    and, for a checkpoint without ``keras_metadata.pb``, ``nodes``: each object's class and name
    as that file would give them, from the model config."""

    config: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    nodes: list[KerasNode] | None = None


#: the sublayers tf_keras checkpoints under a layer: (config key, child name); RNN cells by class
_SUBLAYERS = {"Bidirectional": (("layer", "forward_layer"), ("backward_layer", "backward_layer")),
              "TimeDistributed": (("layer", "layer"),), "RNN": (("cell", "cell"),)}
_CELLS = {"LSTM": "LSTMCell", "GRU": "GRUCell", "SimpleRNN": "SimpleRNNCell"}
_MHA = ("_query_dense", "_key_dense", "_value_dense", "_output_dense")


def nodes_from_config(doc: Any, training: Any = None) -> list[KerasNode]:
    """The ``keras_metadata.pb`` nodes a tf_keras model config implies: ``root.layer-K`` for the
    K-th of ``model.layers`` (a Sequential model's InputLayer is not one), and sublayers; the root's
    optimizer from ``training`` (a tf_keras training config), if given."""
    out: list[KerasNode] = []
    stack: list[tuple[Any, str]] = [(doc, "root")]
    while stack:
        d, path = stack.pop()
        if not isinstance(d, dict) or not isinstance(d.get("config"), dict):
            continue
        cls, cfg = str(d.get("class_name", "")).rsplit(">", 1)[-1], d["config"]
        out.append(KerasNode(0, path, "", cls, str(cfg.get("name", ""))))
        if path == "root" and isinstance(training, dict) and isinstance(training.get("optimizer_config"), dict):
            out[-1].optimizer, out[-1].training_config = training["optimizer_config"], training
        layers = cfg.get("layers") if isinstance(cfg.get("layers"), list) else []
        if cls == "Sequential":
            layers = [e for e in layers if not (isinstance(e, dict) and e.get("class_name") == "InputLayer")]
        stack += [(e, f"{path}.layer-{k}") for k, e in enumerate(layers)]
        for key, child in _SUBLAYERS.get(cls, ()):
            stack.append((cfg.get(key) or (cfg.get("layer") if key == "backward_layer" else None), f"{path}.{child}"))
        if cls in _CELLS:
            stack.append(({"class_name": _CELLS[cls], "config": {"name": "cell"}}, f"{path}.cell"))
        if cls == "StackedRNNCells" and isinstance(cfg.get("cells"), list):
            stack += [(c, f"{path}.cells.{k}") for k, c in enumerate(cfg["cells"])]
        if cls == "MultiHeadAttention":
            stack += [({"class_name": "EinsumDense", "config": {"name": a[1:]}}, f"{path}.{a}") for a in _MHA]
    return out


def read_model_json(path: str) -> Any:
    """A ``--template-config`` file for a tf_keras model: what ``model.to_json()`` wrote (or that
    string, JSON-quoted again)."""
    from ckptool.errors import CorruptError, MissingError
    from ckptool.format.json_doc import load_json
    from ckptool.io.backends.urls import storage_for
    from ckptool.ops.read.keras_zip import JSON_LIMIT

    storage, p = storage_for(path)
    if not storage.isfile(p):
        raise MissingError(f"{path}: no such file (--template-config)")
    if storage.size(p) > JSON_LIMIT:
        raise CorruptError(f"{path}: over {JSON_LIMIT >> 20} MiB, more than a model config (--template-config)")
    doc = load_json(storage.read_bytes(p), path, what="a Keras model config")
    if isinstance(doc, str):
        doc = load_json(doc, path, what="a Keras model config")
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise UsageError(f"{path}: not a Keras model config (model.to_json() writes an object with 'class_name' "
                         "and 'config')")
    return doc


def prepare(ck: Checkpoint, src: str, template_config: str | None, with_optimizer: bool) -> WholeConfig:
    """The ``config.json`` of the model whose variables ``ck`` holds: from its SavedModel's
    ``keras_metadata.pb``, or from ``template_config`` (then the layout comes from it too)."""
    from ckptool.format.keras_metadata import parse
    from ckptool.ops.transform.convert.keras.synth import metadata_path

    meta = metadata_path(ck)
    root, config, smdir, training = None, None, None, None
    if isinstance(ck, LegacyH5Checkpoint):  # a tf_keras .h5 model (whole.h5_source): its own model config
        if template_config is not None:
            raise UsageError(f"{src}: a tf_keras .h5 model carries its own model config: no --template-config")
        config, training = ck.model_config, ck.training_config
    if template_config is not None:
        config = read_model_json(template_config)
    if meta is not None:
        from ckptool.io.backends.urls import storage_for

        storage, mp = storage_for(meta)
        root = next((n for n in parse(storage.read_bytes(mp), meta) if n.path == "root"), None)
        smdir = storage.dirname(mp)
    elif config is None:
        raise UsageError(f"{src}: converting to a .keras file without --template takes the model's config from a "
                         "tf_keras SavedModel's keras_metadata.pb, and there is none: give --template-config "
                         "model.json (the tf_keras model's model.to_json())")
    out = model_config(root, src, smdir, with_optimizer, config, training)
    if meta is None:
        out.nodes = nodes_from_config(config, training)
    return out


def model_config(root: KerasNode | None, src: str, saved_model_dir: str | None, with_optimizer: bool,
                 config: Any = None, training: Any = None) -> WholeConfig:
    """The Keras 3 ``config.json`` of the model ``root`` (the ``keras_metadata.pb`` root node) or
    ``config`` (a tf_keras ``model.to_json()`` document, or a ``.h5`` model's ``model_config`` with its
    ``training`` config) describes."""
    doc = config if config is not None else (root.model_config if root is not None else None)
    if doc is None:
        raise UsageError(f"{src}: no model config: a tf_keras SavedModel's keras_metadata.pb holds one "
                         "(model.save('dir') with tf_keras), or give --template-config model.json (model.to_json())")
    out = translate_model(doc, src)
    notes = fill_vocabularies(out, src, saved_model_dir)
    if with_optimizer:
        training = root.training_config if root is not None else training
        if config is not None and training is None:
            raise UsageError(f"{src}: --with-optimizer needs the training config, which a SavedModel's "
                             "keras_metadata.pb or a compiled model's .h5 holds and model.to_json() does not")
        out["compile_config"] = compile_config(training, src)
    return WholeConfig(out, notes)


__all__ = ["WholeConfig", "model_config", "nodes_from_config", "prepare", "read_model_json"]
