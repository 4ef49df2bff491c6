"""A Keras 3 ``.weights.h5`` without a template, from a Keras 2 SavedModel whose
``keras_metadata.pb`` names each layer's class: where that suffices.

It suffices for a Functional or Sequential model whose layers with weights are of classes
whose Keras 3 layout is the Keras 2 one (:data:`SIMPLE`: own variables in creation order) or
recurrent layers holding one ``cell`` (:data:`RNN`). Keras 3 names a model's layers by their
snake-cased class with ``_N`` suffixes in ``model.layers`` order (``layers/dense_1/vars/0``);
the optimizer goes to ``optimizer/vars/N`` as with a template. Anything else (a subclassed
model, a nested model, another layer class) needs a template, and the error says so."""

from __future__ import annotations

import os
import re
from typing import Any

from ckptool.errors import UsageError
from ckptool.format.objgraph import VARIABLE_VALUE, ObjectGraph
from ckptool.ops.read.checkpoint import Checkpoint

SIMPLE = {"Dense", "Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
          "DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D", "SeparableConv2D", "BatchNormalization",
          "LayerNormalization", "Embedding", "PReLU"}
RNN = {"LSTM", "GRU", "SimpleRNN"}
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
    p = os.path.join(os.path.dirname(os.path.dirname(ck.prefix)), "keras_metadata.pb")
    return p if os.path.isfile(p) else None


def _resolve(g: ObjectGraph, path: str) -> int | None:
    nid = 0
    for seg in path.split(".")[1:]:
        nid_next = dict(g.nodes[nid].children).get(seg)
        if nid_next is None:
            return None
        nid = nid_next
    return nid


def plan(ck: Checkpoint, src: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[str]]:
    """``(pairs, groups, dropped)``: (TF key, Keras dataset path) in write order, (group path, the
    ``name`` attribute of its ``vars``), and TF keys Keras 3 keeps no place for (a plain SGD's
    momentum slots); a UsageError saying why when a template is needed."""
    from ckptool.format.keras_metadata import parse
    from ckptool.ops.transform.keras_map import optimizer_slots

    meta = metadata_path(ck)
    if meta is None:
        raise UsageError(f"{src}: converting to Keras 3 without --template works from a SavedModel's "
                         f"keras_metadata.pb, and {src} has none; {NEEDS_TEMPLATE}")
    g = ck.object_graph()
    if g is None:  # pragma: no cover - a SavedModel's variables are object-based
        raise UsageError(f"{src}: no object graph; {NEEDS_TEMPLATE}")
    with open(meta, "rb") as f:
        nodes = parse(f.read(), meta)
    by_node: dict[int, Any] = {}
    for n in nodes:
        nid = _resolve(g, n.path)
        if nid is not None:
            by_node.setdefault(nid, n)
    root = by_node.get(0)
    if root is None or root.class_name not in ("Functional", "Sequential"):
        what = root.class_name if root is not None else "unknown"
        raise UsageError(f"{src}: the model is a {what}, not a Functional or Sequential model: its Keras 3 "
                         f"layout cannot be known without the model; {NEEDS_TEMPLATE}")
    var_key = {n.id: a.checkpoint_key for n in g.nodes for a in n.attributes if a.name == VARIABLE_VALUE}

    def own(nid: int) -> list[int]:
        return [c for _, c in g.nodes[nid].children if c in var_key]

    def reach(nid: int) -> set[int]:
        """The variables reachable from ``nid`` (a SavedModel also lists them under ``variables``,
        ``keras_api``, ...: reachability, not child names, says what a layer holds)."""
        out, seen, stack = set(), {nid}, [nid]
        while stack:
            for _, c in g.nodes[stack.pop()].children:
                if c in var_key:
                    out.add(c)
                elif c not in seen:
                    seen.add(c)
                    stack.append(c)
        return out

    layers = sorted((int(m.group(1)), c) for n, c in g.nodes[0].children if (m := _LAYER_K.match(n)))
    pairs: list[tuple[str, str]] = []
    groups: list[tuple[str, str]] = [("", root.name)]
    used: dict[str, int] = {}
    order: list[int] = []
    for _, nid in layers:
        info = by_node.get(nid)
        cls = info.class_name if info is not None else ""
        if root.class_name == "Sequential" and cls == "InputLayer":
            continue  # Keras 3's Sequential keeps no InputLayer in model.layers
        base = snake_case(cls) if cls else "layer"
        used[base] = used.get(base, -1) + 1
        group = f"layers/{base}" + (f"_{used[base]}" if used[base] else "")
        label = info.name if info is not None else base
        held = reach(nid)
        cell = dict(g.nodes[nid].children).get("cell")
        if cls in SIMPLE and held == set(own(nid)):
            vs = own(nid)
        elif cls in RNN and cell is not None and not own(nid) and held == set(own(cell)):
            groups.append((group, label))
            cell_info = by_node.get(cell)
            group = group + "/cell"
            groups.append((group, cell_info.name if cell_info is not None else "cell"))
            for i, v in enumerate(own(cell)):
                pairs.append((var_key[v], f"{group}/vars/{i}"))
                order.append(v)
            continue
        elif not held:
            continue  # no weights: Keras 3 loads a missing group as empty
        else:
            raise UsageError(f"{src}: layer {label!r} ({cls or 'unknown class'}): its Keras 3 layout is not known "
                             f"without the model; {NEEDS_TEMPLATE}")
        groups.append((group, label))
        for i, v in enumerate(vs):
            pairs.append((var_key[v], f"{group}/vars/{i}"))
            order.append(v)
    opt = dict(g.nodes[0].children).get("optimizer")
    dropped: list[str] = []
    if opt is not None:
        tf_side = optimizer_slots(g, opt, order, var_key)
        if tf_side and not _keras3_has_slots(root.optimizer):  # Keras 3 keeps no slots for a plain SGD
            kids = dict(g.nodes[opt].children)
            head = 1 + ("_learning_rate" in kids or "learning_rate" in kids)
            dropped = [var_key[t] for t in tf_side[head:]]
            tf_side = tf_side[:head]
        if tf_side:
            groups.append(("optimizer", "optimizer"))
            pairs += [(var_key[t], f"optimizer/vars/{i}") for i, t in enumerate(tf_side)]
    return pairs, groups, dropped


def _keras3_has_slots(optimizer: dict[str, Any] | None) -> bool:
    """False for what Keras 3 builds without slots (a plain SGD: tf.keras keeps momentum slots for
    one anyway). Unknown optimizers are taken to have them."""
    if not optimizer:
        return True
    cls = str(optimizer.get("class_name", "")).rsplit(">", 1)[-1]
    cfg = optimizer.get("config")
    return not (cls == "SGD" and not (cfg.get("momentum") if isinstance(cfg, dict) else 0))


def write_h5(path: str, ck: Checkpoint, pairs: list[tuple[str, str]], groups: list[tuple[str, str]]) -> None:
    """Write the planned file at ``path`` (a temporary name), groups in write order."""
    import ml_dtypes
    import numpy as np

    from ckptool.ops.read.keras import import_h5py

    h5py = import_h5py()
    by_group: dict[str, list[tuple[str, str]]] = {}
    for key, name in pairs:
        by_group.setdefault(name.rsplit("/vars/", 1)[0], []).append((key, name))
    with h5py.File(path, "w") as h5:
        for group, name in groups:
            vg = h5.require_group(f"{group}/vars" if group else "vars")
            vg.attrs["name"] = name
            for key, ds_name in by_group.get(group, []):
                arr = np.asarray(ck.read(key))
                arr = arr if arr.flags.c_contiguous else arr.copy(order="C")
                if arr.dtype == ml_dtypes.bfloat16:
                    h5.create_dataset(ds_name, data=arr).attrs["dtype"] = "bfloat16"
                else:
                    h5.create_dataset(ds_name, data=arr)


__all__ = ["NEEDS_TEMPLATE", "metadata_path", "plan", "snake_case", "write_h5"]
