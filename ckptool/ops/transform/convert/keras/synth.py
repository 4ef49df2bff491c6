"""A Keras 3 ``.weights.h5`` without a template, from a Keras 2 SavedModel whose
``keras_metadata.pb`` names each layer's class: where that suffices.

It suffices for a Functional or Sequential model (nested ones too) whose layers with weights
are of classes whose Keras 3 layout is the Keras 2 one (:data:`SIMPLE`: own variables in
creation order; another class holding only its own variables when their shapes tell them apart,
so that a wrong order could not load quietly) or recurrent layers holding one ``cell``
(:data:`RNN`). Keras 3 names a model's layers by their snake-cased class with ``_N`` suffixes in
``model.layers`` order (``layers/dense_1/vars/0``); the optimizer goes to ``optimizer/vars/N``
(a LossScaleOptimizer's to ``optimizer/vars`` and ``optimizer/inner_optimizer/vars``) as with a
template, when the training config says what Keras 3 keeps. Anything else (a subclassed model,
another layer class) needs a template, and the error says so."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from ckptool.errors import UsageError
from ckptool.format.objgraph import VARIABLE_VALUE, ObjectGraph
from ckptool.ops.read.checkpoint import Checkpoint
from ckptool.ops.transform.convert.keras.mapping import unique
from ckptool.ops.transform.convert.keras.optim import expected_kinds, source_kinds, tf_optimizer, trailing_state

SIMPLE = {"Dense", "Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
          "DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D", "SeparableConv2D", "BatchNormalization",
          "LayerNormalization", "GroupNormalization", "Embedding", "PReLU", "Normalization", "EinsumDense",
          "LSTMCell", "GRUCell", "SimpleRNNCell"}
RNN = {"LSTM", "GRU", "SimpleRNN", "RNN", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"}
#: layers made of named sublayers, each saved at the name Keras 3 gives it (tf.keras's attribute -> Keras 3's)
NESTED = {"MultiHeadAttention": {"_query_dense": "query_dense", "_key_dense": "key_dense",
                                 "_value_dense": "value_dense", "_output_dense": "output_dense"},
          "Bidirectional": {"forward_layer": "forward_layer", "backward_layer": "backward_layer"},
          "TimeDistributed": {"layer": "layer"}}
#: tf_keras lookup layers' always-empty ``token_counts`` table (its keys and values): Keras 3 keeps none
TOKEN_COUNTS = ("/token_counts/.ATTRIBUTES/table-keys", "/token_counts/.ATTRIBUTES/table-values")
_LAYER_K = re.compile(r"^layer-(\d+)$")
NEEDS_TEMPLATE = ("give --template NEW.weights.h5 (what the Keras 3 model saves: "
                  "model.save_weights('NEW.weights.h5'), untrained is fine)")


def snake_case(name: str) -> str:
    """Keras's name for a saved list item: the class name in snake case."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def metadata_path(ck: Checkpoint) -> str | None:
    """The ``keras_metadata.pb`` beside a SavedModel's ``variables/variables``, if any."""
    prefix = ck.prefix.replace(os.sep, "/")
    if not prefix.endswith("variables/variables"):
        return None
    st = ck.storage
    p = st.join(st.dirname(st.dirname(ck.prefix)), "keras_metadata.pb")
    return p if st.isfile(p) else None


def _resolve(g: ObjectGraph, path: str) -> int | None:
    nid = 0
    for seg in path.split(".")[1:]:
        nid_next = dict(g.nodes[nid].children).get(seg)
        if nid_next is None:
            return None
        nid = nid_next
    return nid


@dataclass
class Plan:
    """What :func:`write_h5` writes: ``pairs`` (TF key, Keras dataset path) in write order,
    ``groups`` (group path, the ``name`` attribute of its ``vars``), ``consts`` (Keras datasets
    with no TF counterpart: a loss scaler's own iterations and learning rate, which Keras 3 keeps at
    0; the learning rate of a tf_keras ``.h5``, from its training config), TF keys Keras 3 keeps no
    place for (``dropped``: a plain SGD's unused momentum slots, or the optimizer with
    ``skip_optimizer``), and notes."""

    pairs: list[tuple[str, str]] = field(default_factory=list)
    groups: list[tuple[str, str]] = field(default_factory=list)
    consts: list[tuple[str, Any]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    optimizer: int = 0  # how many datasets hold optimizer state


def plan(ck: Checkpoint, src: str, skip_optimizer: bool = False, nodes: list[Any] | None = None) -> Plan:
    """The layout of ``ck`` (a SavedModel's variables) as Keras 3 writes it; a UsageError saying
    why when a template is needed. ``nodes``: each object's class and name as
    ``keras_metadata.pb`` would give them (from a model config), for a checkpoint without one."""
    g, by_node, root = _model_nodes(ck, src, nodes)
    layout = _Layout(ck, g, by_node, src, Plan(groups=[("", root.name)]))
    layout.model(0, root.class_name, "")
    opt = dict(g.nodes[0].children).get("optimizer")
    if opt is not None:
        _optimizer(layout.out, g, opt, layout.order, layout.var_key, root.optimizer, ck, src, skip_optimizer)
    empty = [v.name for v in ck.variables() if v.name.endswith(TOKEN_COUNTS) and not any(v.shape)]
    if empty:
        layout.out.dropped += empty
        layout.out.notes.append(f"left out {len(empty)} tensors of lookup layers' token_counts tables: tf_keras writes "
                                "them always empty, and Keras 3 keeps no such table")
    return layout.out


def _model_nodes(ck: Checkpoint, src: str, nodes: list[Any] | None) -> tuple[ObjectGraph, dict[int, Any], Any]:
    """The object graph, the ``keras_metadata.pb`` node of each object it names, and the model's
    own node (a Functional or Sequential model's, else a UsageError)."""
    from ckptool.format.keras_metadata import parse

    meta = metadata_path(ck)
    if meta is None and nodes is None:
        raise UsageError(f"{src}: converting to Keras 3 without --template works from a SavedModel's "
                         f"keras_metadata.pb, and {src} has none; {NEEDS_TEMPLATE}")
    g = ck.object_graph()
    if g is None:  # pragma: no cover - a SavedModel's variables are object-based
        raise UsageError(f"{src}: no object graph; {NEEDS_TEMPLATE}")
    if nodes is None and meta is not None:
        nodes = parse(ck.storage.read_bytes(meta), meta)
    by_node: dict[int, Any] = {}
    for n in nodes or []:
        nid = _resolve(g, n.path)
        if nid is not None:
            by_node.setdefault(nid, n)
    root = by_node.get(0)
    if root is None or root.class_name not in ("Functional", "Sequential"):
        what = root.class_name if root is not None else "unknown"
        raise UsageError(f"{src}: the model is a {what}, not a Functional or Sequential model: its Keras 3 "
                         f"layout cannot be known without the model; {NEEDS_TEMPLATE}")
    return g, by_node, root


class _Layout:
    """The model's layers walked in ``model.layers`` order: each layer's group and datasets as Keras 3
    names them (``out``), and the variables in the order Keras 3 writes them (``order``: the order
    of the optimizer's slots)."""

    def __init__(self, ck: Checkpoint, g: ObjectGraph, by_node: dict[int, Any], src: str, out: Plan):
        self.ck, self.g, self.by_node, self.src, self.out = ck, g, by_node, src, out
        self.var_key = {n.id: a.checkpoint_key for n in g.nodes for a in n.attributes if a.name == VARIABLE_VALUE}
        self.order: list[int] = []

    def own(self, nid: int) -> list[int]:
        return [c for _, c in unique(self.g.nodes[nid].children) if c in self.var_key]

    def reach(self, nid: int) -> set[int]:
        """The variables reachable from ``nid`` (a SavedModel also lists them under ``variables``,
        ``keras_api``, ...: reachability, not child names, says what a layer holds)."""
        out, seen, stack = set(), {nid}, [nid]
        while stack:
            for _, c in self.g.nodes[stack.pop()].children:
                if c in self.var_key:
                    out.add(c)
                elif c not in seen:
                    seen.add(c)
                    stack.append(c)
        return out

    def shapes_tell(self, vs: list[int]) -> bool:
        """A layer of a class not known here is its own variables in creation order, which Keras 3
        keeps trainable first: the same order, or one whose every variable differs in shape from the
        others (then Keras refuses a wrong order loudly instead of loading it)."""
        got = [(self.ck.variable(self.var_key[v]).dtype, tuple(self.ck.variable(self.var_key[v]).shape)) for v in vs]
        return len(set(got)) == len(got)

    def stacked(self, cells: int | None, held: set[int], group: str, label: str) -> bool:
        """A StackedRNNCells: tf_keras's ``cells/K``, Keras 3's list ``cells`` (items named by class,
        ``lstm_cell``, ``lstm_cell_1``)."""
        items = sorted((int(n), c) for n, c in self.g.nodes[cells].children if n.isdigit()) if cells is not None else []
        if not items or held != set().union(*(self.reach(c) for _, c in items)):
            return False
        self.out.groups.append((group, label))
        used: dict[str, int] = {}
        for _, c in items:
            sub_cls, sub_label = self.named(c)
            base = snake_case(sub_cls) if sub_cls else "cell"
            used[base] = used.get(base, -1) + 1
            name = base + (f"_{used[base]}" if used[base] else "")
            self.layer(c, sub_cls, f"{group}/cells/{name}", sub_label or name)
        return True

    def model(self, mid: int, cls_name: str, prefix: str) -> None:
        layers = sorted((int(m.group(1)), c) for n, c in self.g.nodes[mid].children if (m := _LAYER_K.match(n)))
        used: dict[str, int] = {}
        for _, nid in layers:
            cls, label = self.named(nid)
            if cls_name == "Sequential" and cls == "InputLayer":
                continue  # Keras 3's Sequential keeps no InputLayer in model.layers
            base = snake_case(cls) if cls else "layer"
            used[base] = used.get(base, -1) + 1
            self.layer(nid, cls, f"{prefix}layers/{base}" + (f"_{used[base]}" if used[base] else ""), label or base)

    def named(self, nid: int) -> tuple[str, str]:
        info = self.by_node.get(nid)
        return (info.class_name.rsplit(">", 1)[-1], info.name) if info is not None else ("", "")

    def layer(self, nid: int, cls: str, group: str, label: str) -> None:
        held = self.reach(nid)
        if not held:
            return  # no weights: Keras 3 loads a missing group as empty
        out, own = self.out, self.own(nid)
        if cls in ("Functional", "Sequential"):
            out.groups.append((group, label))
            self.model(nid, cls, group + "/")
            return
        if held == set(own) and (cls in SIMPLE or self.shapes_tell(own)):
            out.groups.append((group, label))
            for i, v in enumerate(own):
                out.pairs.append((self.var_key[v], f"{group}/vars/{i}"))
                self.order.append(v)
            return
        kids = dict(unique(self.g.nodes[nid].children))
        subs = {"cell": "cell"} if cls in RNN else NESTED.get(cls, {})
        found = [(kids[a], name) for a, name in subs.items() if a in kids]
        if subs and not own and held == set().union(*(self.reach(c) for c, _ in found)):
            out.groups.append((group, label))
            for c, name in found:
                sub_cls, sub_label = self.named(c)
                self.layer(c, sub_cls or ("cell" if name == "cell" else ""), f"{group}/{name}", sub_label or name)
            return
        if cls == "StackedRNNCells" and not own and self.stacked(kids.get("cells"), held, group, label):
            return
        raise UsageError(f"{self.src}: layer {label!r} ({cls or 'unknown class'}): its Keras 3 layout is not known "
                         f"without the model; {NEEDS_TEMPLATE}")


def _optimizer(out: Plan, g: ObjectGraph, opt: int, order: list[int], var_key: dict[int, str],
               config: dict[str, Any] | None, ck: Checkpoint, src: str, skip: bool) -> None:
    """The optimizer as Keras 3 writes it, from the training config keras_metadata.pb records: a
    LossScaleOptimizer (mixed precision) as its ``vars`` and ``inner_optimizer/vars``."""
    import numpy as np

    tfo = tf_optimizer(g, opt, order, var_key)
    if not tfo.every:
        return
    if skip:
        out.dropped += [var_key[t] for t in tfo.every]
        out.notes.append("optimizer: left out as asked: the output has no optimizer state, and Keras will start the "
                         "optimizer fresh")
        return
    cfg = config or {}
    lso = "LossScaleOptimizer" in str(cfg.get("class_name", ""))
    inner = cfg.get("config", {}).get("inner_optimizer") if lso and isinstance(cfg.get("config"), dict) else cfg
    what, kinds = expected_kinds(inner, "")
    have = source_kinds(tfo, kinds)
    slots = tfo.slots
    if kinds == [] and have == ["m"]:  # the config says momentum 0: tf.keras keeps slots it never reads
        out.dropped += [var_key[t] for t in slots]
        out.notes.append(f"optimizer: a plain SGD (momentum 0): Keras 3 keeps no slots; the {len(slots)} momentum "
                         "slots tf.keras keeps (and never reads) are not carried")
        slots = []
    elif kinds is None or tfo.per_variable is None or kinds != have:
        raise UsageError(f"{src}: the optimizer ({what}) keeps slots {have} per variable and its Keras 3 layout is "
                         f"not known for certain; {NEEDS_TEMPLATE}, or --skip-optimizer")
    extra, why = trailing_state(tfo, inner, "")
    if why:
        raise UsageError(f"{src}: {why}")
    state = [t for t in (tfo.it, tfo.lr) if t is not None] + slots + extra
    keys: list[Any] = [var_key[t] for t in state]
    rate = (inner.get("config") or {}).get("learning_rate") if isinstance(inner, dict) else None
    if tfo.lr is None and tfo.it is not None and isinstance(rate, (int, float)) and not isinstance(rate, bool):
        keys.insert(1, np.float32(rate))  # a tf_keras .h5 writes no learning rate; Keras 3 keeps one (not a schedule)
        out.notes.append(f"optimizer: the learning rate ({rate:g}) is the training config's: the source holds no "
                         "variable of it")
    name = snake_case(str(inner.get("class_name", "optimizer")).rsplit(">", 1)[-1]) if isinstance(inner, dict) \
        else "optimizer"
    if lso:
        if tfo.loss_scale is None:
            raise UsageError(f"{src}: a LossScaleOptimizer without its loss scale; {NEEDS_TEMPLATE}")
        out.groups += [("optimizer", "loss_scale_optimizer"), ("optimizer/inner_optimizer", name)]
        out.consts += [("optimizer/vars/0", np.int64(0)), ("optimizer/vars/1", np.float32(0.0))]
        outer = [var_key[t] for t in tfo.loss_scale] + keys
        _place(out, outer, "optimizer/vars", 2)
        _place(out, keys, "optimizer/inner_optimizer/vars", 0)
        out.optimizer = 2 + len(outer) + len(keys)
    else:
        if tfo.loss_scale is not None:
            raise UsageError(f"{src}: a loss scale without a LossScaleOptimizer in keras_metadata.pb; {NEEDS_TEMPLATE}")
        out.groups.append(("optimizer", name))
        _place(out, keys, "optimizer/vars", 0)
        out.optimizer = len(keys)
    out.notes.append(f"optimizer: written as Keras 3's {'mixed-precision ' if lso else ''}{what} state; Keras loads it "
                     "only into a built optimizer of the same kind (model.optimizer.build(model.trainable_variables) "
                     "before load_weights) and skips it, with a warning, otherwise")


def _place(out: Plan, items: list[Any], group: str, start: int) -> None:
    """``items`` (TF keys, or constants Keras 3 keeps) as ``group/start``, ``group/start+1``, ..."""
    for i, x in enumerate(items, start):
        if isinstance(x, str):
            out.pairs.append((x, f"{group}/{i}"))
        else:
            out.consts.append((f"{group}/{i}", x))


def write_h5(path: str, ck: Checkpoint, p: Plan) -> None:
    """Write the planned file at ``path`` (a temporary name), groups in write order."""
    import ml_dtypes
    import numpy as np

    from ckptool.ops.read.keras import import_h5py

    h5py = import_h5py()
    by_group: dict[str, list[tuple[str, Any]]] = {}
    for key, name in p.pairs:
        by_group.setdefault(name.rsplit("/vars/", 1)[0], []).append((name, key))
    for name, value in p.consts:
        by_group.setdefault(name.rsplit("/vars/", 1)[0], []).append((name, value))
    with h5py.File(path, "w") as h5:
        for group, label in p.groups:
            vg = h5.require_group(f"{group}/vars" if group else "vars")
            vg.attrs["name"] = label
            for ds_name, src in sorted(by_group.get(group, []), key=lambda x: int(x[0].rsplit("/", 1)[1])):
                arr = np.asarray(ck.read(src) if isinstance(src, str) else src)
                arr = arr if arr.flags.c_contiguous else arr.copy(order="C")
                if arr.dtype == ml_dtypes.bfloat16:
                    h5.create_dataset(ds_name, data=arr).attrs["dtype"] = "bfloat16"
                else:
                    h5.create_dataset(ds_name, data=arr)


__all__ = ["NEEDS_TEMPLATE", "Plan", "metadata_path", "plan", "snake_case", "write_h5"]
