"""A tf_keras whole-model ``.h5`` (``model.save("model.h5")``) as a source of ``convert``: its
``model_config`` is the one a SavedModel's ``keras_metadata.pb`` records, so it takes the same path
(:mod:`~ckptool.ops.transform.convert.keras.synth`), from the object graph the file's
``model_weights`` stand for: each of ``layer_names`` a ``layer-K`` of the model, its
``weight_names`` (``lstm/lstm_cell/kernel:0``) placed on the sublayers tf_keras named them by (an
RNN's ``cell``, a Bidirectional's ``forward_*``/``backward_*``, a MultiHeadAttention's ``query``,
``key``, ``value``, ``attention_output``, a nested model's layers by their names). With
``--with-optimizer`` its ``optimizer_weights`` (``iteration:0``, then the slots, ``Adam/m/dense/kernel:0``,
in the optimizer's order) stand for a tf_keras >= 2.11 optimizer's ``_iterations`` and ``_variables``;
the learning rate, which tf_keras does not write there, comes from the training config
(:mod:`~ckptool.ops.transform.convert.keras.synth`). Otherwise they are left out, and said so."""

from __future__ import annotations

from typing import Any

from ckptool.errors import UsageError
from ckptool.format.keras_metadata import KerasNode
from ckptool.format.objgraph import VARIABLE_VALUE, Attribute, Node, ObjectGraph
from ckptool.ops.read.checkpoint import Checkpoint
from ckptool.ops.read.keras_legacy import LegacyH5Checkpoint, is_legacy_path
from ckptool.ops.transform.convert.keras.synth import RNN, Plan

_MODELS = ("Functional", "Sequential", "Model")
_MHA = {"query": "_query_dense", "key": "_key_dense", "value": "_value_dense", "attention_output": "_output_dense"}
Weights = list[tuple[str, str]]  # (weight name below the object, HDF5 dataset path)


def open_source(src: str) -> Checkpoint:
    """``src`` opened: a tf_keras ``.h5`` model by name, anything else as ``convert`` opens it."""
    if is_legacy_path(src):
        return LegacyH5Checkpoint(src)
    from ckptool.ops.read.reader import open as open_checkpoint

    return open_checkpoint(src)


def _split(doc: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        return "", {}
    return str(doc.get("class_name", "")).rsplit(">", 1)[-1], doc["config"]


def _tail(rel: str) -> str:
    return rel.split("/", 1)[1] if "/" in rel else rel


def _head(rel: str) -> str:
    return rel.split("/", 1)[0]


def _leaf_names(doc: Any) -> set[str]:
    cls, cfg = _split(doc)
    if cls in _MODELS:
        return set().union(*(_leaf_names(d) for d in cfg.get("layers") or []))
    return {str(cfg.get("name", ""))}


class _Graph:
    def __init__(self, src: str):
        self.src, self.nodes = src, [Node(0)]

    def new(self, parent: int | None = None, edge: str = "") -> int:
        self.nodes.append(Node(len(self.nodes)))
        if parent is not None:
            self.nodes[parent].children.append((edge, len(self.nodes) - 1))
        return len(self.nodes) - 1

    def own(self, nid: int, w: Weights) -> None:
        used: set[str] = set()
        for rel, key in w:
            short = rel.rsplit("/", 1)[-1].removesuffix(":0")
            name, n = short, 0
            while name in used:
                n += 1
                name = f"{short}_{n}"
            used.add(name)
            self.var(self.new(nid, name), key, key.split("/", 2)[2])  # full name: the weight's, as slots name it

    def var(self, nid: int, key: str, full_name: str) -> None:
        self.nodes[nid].attributes.append(Attribute(VARIABLE_VALUE, full_name, key))

    def optimizer(self, names: list[str]) -> None:
        """The ``optimizer_weights`` (HDF5 paths, in their ``weight_names`` order) as a tf_keras
        optimizer's ``_iterations`` and ``_variables`` (the slots, numbered from 1)."""
        if not names:
            return
        head = names[0].split("/", 1)[1]
        if head != "iteration:0":
            raise UsageError(f"{self.src}: its optimizer_weights start with {head!r}, not iteration:0 (a legacy "
                             "optimizer, before tf_keras 2.11?): their Keras 3 layout is not matched; convert without "
                             "--with-optimizer")
        opt = self.new(0, "optimizer")
        self.var(self.new(opt, "_iterations"), names[0], head)
        slots = self.new(opt, "_variables")
        for k, key in enumerate(names[1:], 1):
            self.var(self.new(slots, str(k)), key, key.split("/", 1)[1])

    def refuse(self, label: str, what: str) -> UsageError:
        return UsageError(f"{self.src}: layer {label!r}: {what}; its weights cannot be placed in Keras 3's layout")

    def model(self, nid: int, doc: Any, w: Weights, top: dict[str, list[str]] | None) -> None:
        cls, cfg = _split(doc)
        layers = [d for d in cfg.get("layers") or []
                  if not (cls == "Sequential" and isinstance(d, dict) and d.get("class_name") == "InputLayer")]
        taken = 0
        for k, d in enumerate(layers):
            name = str(_split(d)[1].get("name", ""))
            if top is not None:
                mine = [(key.split("/", 2)[2], key) for key in top.get(name, [])]
            else:
                leaves = _leaf_names(d)
                mine = [(rel, key) for rel, key in w if _head(rel) in leaves]
            taken += len(mine)
            self.layer(self.new(nid, f"layer-{k}"), d, mine)
        if top is None and taken != len(w):
            raise self.refuse(str(cfg.get("name", "")), "a nested model whose weights are not all named by its layers")

    def layer(self, nid: int, doc: Any, w: Weights) -> None:
        cls, cfg = _split(doc)
        label = str(cfg.get("name", ""))
        if cls in _MODELS:
            self.model(nid, doc, w, None)
            return
        inner = [(_tail(rel), key) for rel, key in w]
        if cls in RNN:
            self.cell(self.new(nid, "cell"), cfg.get("cell") if cls == "RNN" else None, inner, label)
        elif cls == "Bidirectional":
            sides = [[(r, k) for r, k in inner if r.startswith(p)] for p in ("forward_", "backward_")]
            if sum(map(len, sides)) != len(inner):
                raise self.refuse(label, "a Bidirectional weight named neither forward_* nor backward_*")
            back = cfg.get("backward_layer") or cfg.get("layer")
            self.layer(self.new(nid, "forward_layer"), cfg.get("layer"), sides[0])
            self.layer(self.new(nid, "backward_layer"), back, sides[1])
        elif cls == "TimeDistributed":
            self.layer(self.new(nid, "layer"), cfg.get("layer"), [(label + "/" + r, k) for r, k in inner])
        elif cls == "MultiHeadAttention":
            if any(_head(r) not in _MHA for r, _ in inner):
                raise self.refuse(label, f"a MultiHeadAttention weight outside {sorted(_MHA)}")
            for part, edge in _MHA.items():
                self.own(self.new(nid, edge), [(r, k) for r, k in inner if _head(r) == part])
        else:
            self.own(nid, w)

    def cell(self, nid: int, doc: Any, w: Weights, label: str) -> None:
        cls, cfg = _split(doc)
        if cls != "StackedRNNCells":
            self.own(nid, w)
            return
        cells, inner = self.new(nid, "cells"), [(_tail(rel), key) for rel, key in w]
        names = [str(_split(c)[1].get("name", "")) for c in cfg.get("cells") or []]
        for k, name in enumerate(names):
            self.own(self.new(cells, str(k)), [(r, key) for r, key in inner if _head(r) == name])
        if sum(1 for r, _ in inner if _head(r) in names) != len(inner):
            raise self.refuse(label, "a stacked RNN cell's weights not named by its cells")


def source_nodes(ck: Checkpoint, src: str, with_optimizer: bool = False) -> list[KerasNode] | None:
    """For a tf_keras ``.h5`` model: the object graph its weights (and ``with_optimizer`` its
    ``optimizer_weights``) stand for (set on ``ck``) and its layers' ``keras_metadata.pb`` nodes (from
    its model and training configs); None for any other source."""
    if not isinstance(ck, LegacyH5Checkpoint):
        return None
    from ckptool.ops.transform.convert.keras.whole.model_config import nodes_from_config

    g = _Graph(src)
    cls, _cfg = _split(ck.model_config)
    if cls not in ("Functional", "Sequential"):
        raise UsageError(f"{src}: the model is a {cls or 'model of no class'}, not a Functional or Sequential "
                         "model: a subclassed model's layout cannot be known without its code")
    g.model(0, ck.model_config, [], ck.layer_weights)
    if with_optimizer:
        opt = ck.training_config.get("optimizer_config") if isinstance(ck.training_config, dict) else None
        if ck.optimizer_names and "LossScaleOptimizer" in str(_split(opt)[0]):
            raise UsageError(f"{src}: a mixed-precision optimizer, whose loss scale tf_keras does not write in a .h5 "
                             "file (its inner optimizer's variables only): its state cannot be carried exactly; "
                             "convert without --with-optimizer, or from a SavedModel (model.save('dir'))")
        g.optimizer(ck.optimizer_names)
    ck.graph = ObjectGraph(g.nodes)
    return nodes_from_config(ck.model_config, ck.training_config)


def left_out(ck: Checkpoint, p: Plan) -> None:
    """A tf_keras ``.h5`` model's ``optimizer_weights`` when not carried: said so."""
    if not isinstance(ck, LegacyH5Checkpoint) or not ck.optimizer:
        return
    if ck.graph is None or "optimizer" not in dict(ck.graph.nodes[0].children):
        p.dropped += ck.optimizer
        p.notes.append(f"left out the {len(ck.optimizer)} optimizer_weights of the tf_keras .h5 file (--with-optimizer "
                       "carries them to a .keras file): Keras starts the optimizer fresh")


__all__ = ["left_out", "open_source", "source_nodes"]
