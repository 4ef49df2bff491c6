"""Which variable of a Keras 2 (tf.keras / tf_keras) TF-format checkpoint is which dataset of a
Keras 3 weights file: the structural mapping behind ``convert --template`` both ways
(docs/FORMAT.md §14).

TF side: the object graph (``_CHECKPOINTABLE_OBJECT_GRAPH``), whose child order is creation
order. Keras side: the HDF5 tree, whose write order is the object-header addresses. At each
object: its own variables in creation order (TF's variable children <-> Keras's ``vars/0..``);
then its sub-objects, first those with the same attribute name on both sides (leading ``_``
ignored: ``_query_dense`` is Keras 3's ``query_dense``), then the rest in order, containers
opened (Functional/Sequential ``layer-K`` sorted by K, list attributes on both sides, Keras's
``layers`` group). Optimizer state: TF >= 2.11 (``_iterations``, ``_learning_rate``,
``_variables/1..``) and the legacy layout (``iter``, ``learning_rate``, slots per variable) onto
Keras 3's ``optimizer/vars/N`` (iterations, learning_rate, then the slots per trainable variable).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ckptool.format.objgraph import OBJECT_GRAPH_KEY, VARIABLE_VALUE, ObjectGraph
from ckptool.ops.read.checkpoint import Checkpoint
from ckptool.ops.read.keras import KerasCheckpoint

_LAYER_K = re.compile(r"^layer-(\d+)$")
_LAYER_W = re.compile(r"^layer_with_weights-(\d+)$")
#: Children that are not layers: the optimizer, the root's self-reference, and what a SavedModel adds
#: beside the attributes (lists of the same variables, Keras's own bookkeeping).
_NOT_LAYERS = {"optimizer", "root", "keras_api", "variables", "trainable_variables", "non_trainable_variables"}
#: Legacy (tf.keras < 2.11) optimizer hyperparameters: Keras 3 keeps them in the config, not as state
#: (as it keeps a schedule's current value, TF >= 2.11's ``_current_learning_rate``).
_HYPER = {"beta_1", "beta_2", "decay", "epsilon", "rho", "momentum", "initial_accumulator_value"}


@dataclass
class Mapping:
    """``pairs`` (TF key, Keras dataset); what is left on either side; ``problems`` (shape/dtype
    mismatches, each naming both sides); ``notes`` (where the structures differ in counts: the
    surplus is left over); ``ignored`` TF keys that Keras 3 does not keep."""

    pairs: list[tuple[str, str]] = field(default_factory=list)
    shapes: dict[str, list[int]] = field(default_factory=dict)  # Keras dataset -> its shape
    tf_left: list[str] = field(default_factory=list)
    keras_left: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # where the two structures differ (counts)
    added: list[tuple[str, str]] = field(default_factory=list)  # (TF key, new Keras dataset): unbuilt optimizer
    not_carried: list[str] = field(default_factory=list)  # optimizer state only one side has
    ignored: list[str] = field(default_factory=list)


@dataclass
class _KNode:
    path: str
    own: dict[int, str] = field(default_factory=dict)  # vars/i -> dataset name
    children: dict[str, _KNode] = field(default_factory=dict)
    order: tuple[int, int] = (1 << 62, 0)
    is_object: bool = False  # has a 'vars' group (every saveable object has one)

    def datasets(self) -> list[str]:
        out = list(self.own.values())
        for c in self.children.values():
            out.extend(c.datasets())
        return out


def _keras_tree(kc: KerasCheckpoint) -> _KNode:
    root = _KNode("")
    for name, _e in kc.entries.items():
        parts = name.split("/")
        node = root
        for i, seg in enumerate(parts[:-1]):
            if seg == "vars" and i == len(parts) - 2:
                break
            node = node.children.setdefault(seg, _KNode("/".join(parts[:i + 1])))
        if len(parts) >= 2 and parts[-2] == "vars" and parts[-1].isdigit():
            node.own[int(parts[-1])] = name
        else:  # a dataset outside a vars group: kept as its own leaf, matched by nothing
            node.children.setdefault(parts[-1], _KNode(name)).own[-1] = name
    for g in kc.groups:
        node = root
        for seg in g.split("/") if g else []:
            node = node.children.setdefault(seg, _KNode(node.path + "/" + seg if node.path else seg))
        node.is_object = True

    def settle(n: _KNode) -> tuple[int, int]:
        best = min((kc.entries[d].file, kc.entries[d].addr) for d in n.own.values()) if n.own else (1 << 62, 0)
        for c in n.children.values():
            best = min(best, settle(c))
        n.order = best
        return best
    settle(root)
    return root


class _Matcher:
    def __init__(self, graph: ObjectGraph, tf: Checkpoint, kc: KerasCheckpoint):
        self.g = graph
        self.tf = tf
        self.kc = kc
        self.out = Mapping()
        self.var_key: dict[int, str] = {}
        for n in graph.nodes:
            for a in n.attributes:
                if a.name == VARIABLE_VALUE:
                    self.var_key[n.id] = a.checkpoint_key
        self.claimed: set[int] = set()
        self._has: dict[int, bool] = {}
        self.model_order: list[int] = []  # TF variable nodes in model order (for legacy slots)
        self.k_of: dict[int, str] = {}

    def tf_order(self, nid: int, seen: set[int]) -> None:
        """TF variables under ``nid`` in model order (own variables, then sub-objects): the order of
        ``model.trainable_variables``, which the legacy optimizer's slots follow."""
        seen.add(nid)
        kids = self.g.nodes[nid].children
        for _, c in kids:
            if c in self.var_key and c not in seen:
                seen.add(c)
                self.model_order.append(c)
        for _, c in self._tf_subs(nid, claimed=False):
            if c not in seen:
                self.tf_order(c, seen)

    def has_vars(self, nid: int, seen: frozenset[int] = frozenset()) -> bool:
        if nid in self.var_key:
            return nid not in self.claimed
        if nid in seen:
            return False
        seen = seen | {nid}
        return any(c not in self.claimed and self.has_vars(c, seen) for _, c in self.g.nodes[nid].children)

    def pair(self, nid: int, kname: str) -> None:
        key = self.var_key[nid]
        self.claimed.add(nid)
        self.out.pairs.append((key, kname))
        self.k_of[nid] = kname
        tv, ke = self.tf.variable(key), self.kc.entries[kname]
        kv = self.kc.variable(kname)
        self.out.shapes[kname] = list(ke.shape)
        if tuple(tv.shape) != tuple(ke.shape) or tv.dtype != kv.dtype:
            self.out.problems.append(f"shape mismatch: {key} is {tv.dtype} {list(tv.shape)}, "
                                     f"{kname} is {kv.dtype} {list(ke.shape)}")

    # -- one object --------------------------------------------------------------

    def match(self, nid: int, k: _KNode, where: str) -> None:
        self.claimed.add(nid)
        own = [c for _, c in self.g.nodes[nid].children if c in self.var_key and c not in self.claimed]
        kown = [k.own[i] for i in sorted(k.own)]
        if len(own) != len(kown):
            tf_names = [self.var_key[c] for c in own]
            self.out.notes.append(f"{where or 'the model'}: TF has {len(own)} variables {tf_names}, "
                                     f"Keras {k.path or 'root'}/vars has {len(kown)} {kown}")
        for c, kn in zip(own, kown):
            self.pair(c, kn)
        self.match_children(self._tf_subs(nid), self._k_subs(k), where)

    def _tf_subs(self, nid: int, claimed: bool = True) -> list[tuple[str, int]]:
        kids = [(n, c) for n, c in self.g.nodes[nid].children if c not in self.var_key]
        layers = sorted(((int(m.group(1)), n, c) for n, c in kids if (m := _LAYER_K.match(n))))
        if layers:  # Functional / Sequential: model.layers order; layer_with_weights-K are the same nodes
            rest = [(n, c) for n, c in kids if not _LAYER_K.match(n) and not _LAYER_W.match(n)]
            kids = [(n, c) for _, n, c in layers] + rest
        out, seen = [], set()
        for n, c in kids:
            if c in seen or (claimed and c in self.claimed) or n in _NOT_LAYERS:
                continue
            seen.add(c)
            if not claimed or self.has_vars(c):
                out.append((n, c))
        return out

    def _k_subs(self, k: _KNode) -> list[tuple[str, _KNode]]:
        kids = [(n, c) for n, c in k.children.items() if n != "optimizer" and c.datasets()]
        return sorted(kids, key=lambda kv: kv[1].order)

    def _tf_container(self, nid: int) -> bool:
        kids = self.g.nodes[nid].children
        return bool(kids) and all(n.isdigit() for n, _ in kids) and not any(c in self.var_key for _, c in kids)

    def _tf_items(self, subs: list[tuple[str, int]]) -> list[tuple[str, int]]:
        out = []
        for n, c in subs:
            if self._tf_container(c):
                kids = sorted(self.g.nodes[c].children, key=lambda x: int(x[0]))
                out.extend(self._tf_items([(f"{n}/{m}", d) for m, d in kids if self.has_vars(d)]))
            else:
                out.append((n, c))
        return out

    def _k_items(self, subs: list[tuple[str, _KNode]]) -> list[tuple[str, _KNode]]:
        out = []
        for n, c in subs:
            if not c.is_object and c.children:
                out.extend(self._k_items([(f"{n}/{m}", d) for m, d in self._k_subs(c)]))
            else:
                out.append((n, c))
        return out

    def match_children(self, tsubs: list[tuple[str, int]], ksubs: list[tuple[str, _KNode]], where: str) -> None:
        kby = {n.lstrip("_"): (n, c) for n, c in ksubs}
        trest = []
        used: set[str] = set()
        for n, c in tsubs:
            hit = kby.get(n.lstrip("_"))
            if hit is not None and hit[0] not in used and self._tf_container(c) == (not hit[1].is_object):
                used.add(hit[0])
                sub = f"{where}/{n}" if where else n
                if self._tf_container(c):
                    self.match_children(self._tf_items([(n, c)]), self._k_items([hit]), sub)
                else:
                    self.match(c, hit[1], sub)
            else:
                trest.append((n, c))
        kitems = self._k_items([(n, c) for n, c in ksubs if n not in used])
        titems, k_iter = [], iter(kitems)
        for tn, tc in self._tf_items(trest):
            if not self.has_vars(tc):  # everything it holds was matched through an earlier path
                continue
            titems.append((tn, tc))
            kc = next(k_iter, None)
            if kc is not None:
                self.match(tc, kc[1], f"{where}/{tn}" if where else tn)
        if len(titems) != len(kitems):
            self.out.notes.append(
                f"{where or 'the model'}: TF has {len(titems)} objects with weights "
                f"{[n for n, _ in titems]}, Keras has {len(kitems)} {[c.path for _, c in kitems]}")

    # -- the optimizer ------------------------------------------------------------

    def optimizer(self, opt: int, k: _KNode, extend: bool) -> None:
        """Both sides have optimizer state: pair it. When the Keras side has no slots (its optimizer
        was not built: only iterations and learning_rate were saved) the TF slots are, with
        ``extend`` (Keras is the destination), added after them in Keras 3's order; else not carried."""
        self.claimed.add(opt)
        kv = [k.own[i] for i in sorted(k.own)]
        kids = dict(self.g.nodes[opt].children)
        tf_side = optimizer_slots(self.g, opt, self.model_order, self.var_key, partial=True)
        for n, c in kids.items():
            if c in self.var_key and (n in _HYPER and "_iterations" not in kids or n == "_current_learning_rate"):
                self.claimed.add(c)
                self.out.ignored.append(self.var_key[c])
        head = 1 + ("_learning_rate" in kids or "learning_rate" in kids)
        for t, kn in zip(tf_side, kv):
            if t is not None:
                self.pair(t, kn)
        if len(kv) == head and len(tf_side) > head:
            extra = [t for t in tf_side[head:] if t is not None]
            if extend:
                for i, t in enumerate(extra, start=head):
                    name = f"{k.path}/vars/{i}"
                    self.claimed.add(t)
                    self.out.added.append((self.var_key[t], name))
                    self.out.shapes[name] = list(self.tf.variable(self.var_key[t]).shape)
                self.out.notes.append(f"optimizer: {k.path}/vars holds no slots (the optimizer was not built "
                                      f"before saving); the {len(extra)} slot variables are added after its "
                                      "iterations and learning rate, in Keras 3's order")
            else:
                self.claimed.update(extra)
                self.out.not_carried += [self.var_key[t] for t in extra]
                self.out.notes.append(f"optimizer: {k.path}/vars holds no slots; the TF slots are not carried")
        elif len(tf_side) != len(kv):
            self.out.notes.append(f"optimizer: TF has {len(tf_side)} variables (iterations, learning rate, "
                                  f"slots), Keras {k.path}/vars has {len(kv)}")


def optimizer_slots(g: ObjectGraph, opt: int, model_order: list[int], var_key: dict[int, str],
                    partial: bool = False) -> list[Any]:
    """The TF variable nodes of an optimizer in Keras 3's ``optimizer/vars`` order: iterations,
    learning_rate (none under a schedule), then the slots per trainable variable. TF >= 2.11:
    ``_variables/1..`` in order; legacy: each variable's slots (``m``, ``v``, ...) in
    ``model_order``. A missing iterations is None with ``partial``, else the answer is empty."""
    kids = dict(g.nodes[opt].children)
    slots: list[int] = []
    if "_iterations" in kids:
        it, lr = kids.get("_iterations"), kids.get("_learning_rate")
        lst = kids.get("_variables")
        if lst is not None:
            slots = [c for n, c in sorted(g.nodes[lst].children, key=lambda x: int(x[0]) if x[0].isdigit()
                                          else 1 << 30) if c in var_key and c != it]
    else:
        it, lr = kids.get("iter"), kids.get("learning_rate")
        names: list[str] = []
        by_var: dict[int, dict[str, int]] = {}
        for s in g.nodes[opt].slot_variables:
            if s.slot_name not in names:
                names.append(s.slot_name)
            by_var.setdefault(s.original_variable_node_id, {})[s.slot_name] = s.slot_variable_node_id
        for v in model_order:
            slots.extend(by_var[v][n] for n in names if n in by_var.get(v, {}))
    if it is None or it not in var_key:
        return [None] + slots if partial else []
    # a learning-rate schedule keeps no learning_rate variable, in tf.keras as in Keras 3
    return [it] + ([lr] if lr is not None and lr in var_key else []) + slots


def _graph(tf: Checkpoint) -> ObjectGraph:
    from ckptool.errors import UnsupportedError

    g = tf.object_graph()
    if g is None:
        raise UnsupportedError(f"{tf.prefix}: a name-based (TF1) checkpoint has no object graph; mapping onto "
                               "Keras 3 needs one written by Keras 2 / tf.keras (save_weights, tf.train.Checkpoint)")
    return g


def _optimizer_nodes(g: ObjectGraph, opt: int, var_key: dict[int, str]) -> list[int]:
    """Every variable of an optimizer: reachable from its node, and its legacy slot variables."""
    out, seen, stack = [], {opt}, [opt]
    while stack:
        for _, c in g.nodes[stack.pop()].children:
            if c in var_key and c not in out:
                out.append(c)
            elif c not in seen:
                seen.add(c)
                stack.append(c)
    out += [s.slot_variable_node_id for s in g.nodes[opt].slot_variables if s.slot_variable_node_id in var_key]
    return out


def _slots_expected(kc: KerasCheckpoint) -> bool:
    """Whether the Keras 3 optimizer, built, has slots after iterations and learning_rate (its
    ``config.json`` says, else its name): not a plain SGD (tf.keras keeps momentum slots for
    one, Keras 3 none), nor one with EMA or gradient accumulation (other variables first)."""
    comp = kc.config.get("compile_config") if isinstance(kc.config, dict) else None
    opt = comp.get("optimizer") if isinstance(comp, dict) else None
    if isinstance(opt, dict) and isinstance(opt.get("config"), dict):
        c = opt["config"]
        if c.get("use_ema") or c.get("gradient_accumulation_steps"):
            return False
        return not (opt.get("class_name") == "SGD" and not c.get("momentum"))
    name = kc.groups.get("optimizer", ("",))[0]
    return not name.lower().startswith("sgd")


def map_keras(tf: Checkpoint, kc: KerasCheckpoint, to_keras: bool = True) -> Mapping:
    """The mapping between a Keras 2 TF checkpoint and a Keras 3 file of the same model
    (``to_keras``: the Keras file is the destination, which may gain optimizer slots)."""
    g = _graph(tf)
    m = _Matcher(g, tf, kc)
    tree = _keras_tree(kc)
    root = dict(g.nodes[0].children)
    model = 0
    if not any(_LAYER_K.match(n) for n in root):
        # tf.train.Checkpoint(model=..., optimizer=...): the model is the root's one other child with
        # variables (under any name), unless the Keras file has that name (a subclassed model's attribute)
        kids = [(n, c) for n, c in root.items()
                if n not in ("optimizer", "root") and c not in m.var_key and m.has_vars(c)]
        if len(kids) == 1 and kids[0][0].lstrip("_") not in {k.lstrip("_") for k in tree.children}:
            model = kids[0][1]
    opt = root.get("optimizer", dict(g.nodes[model].children).get("optimizer"))
    m.tf_order(model, set())
    m.match(model, tree, "")
    kopt = tree.children.get("optimizer")
    tf_opt = _optimizer_nodes(g, opt, m.var_key) if opt is not None else []
    k_opt = kopt.datasets() if kopt is not None else []
    if tf_opt and k_opt and kopt is not None and opt is not None:
        m.optimizer(opt, kopt, to_keras and _slots_expected(kc))
    elif tf_opt or k_opt:  # optimizer state on one side only: carried when both sides have it
        m.claimed.update(tf_opt)
        m.out.not_carried += [m.var_key[t] for t in tf_opt] + k_opt
        m.out.notes.append(f"optimizer state not carried: only the {'TF checkpoint' if tf_opt else 'Keras file'} "
                           "has it")
    mapped_tf = {t for t, _ in m.out.pairs} | {t for t, _ in m.out.added} | set(m.out.not_carried)
    mapped_k = {k for _, k in m.out.pairs} | set(m.out.not_carried)
    ignored = set(m.out.ignored)
    for v in tf.variables():
        n = v.name
        if n in mapped_tf or n in ignored:
            continue
        if n == OBJECT_GRAPH_KEY or n.startswith(("save_counter/", "keras_api/", "model/keras_api/")):
            m.out.ignored.append(n)
        else:
            m.out.tf_left.append(n)
    m.out.keras_left = [n for n in kc.write_order() if n not in mapped_k]
    return m.out


def describe(mapping: Mapping) -> dict[str, Any]:
    return {"pairs": [{"tf": t, "keras": k, "shape": mapping.shapes.get(k)} for t, k in mapping.pairs],
            "tf_unused": mapping.tf_left,
            "keras_unfilled": mapping.keras_left, "problems": mapping.problems,
            "notes": mapping.notes, "ignored": mapping.ignored,
            "added": [{"tf": t, "keras": k, "shape": mapping.shapes.get(k)} for t, k in mapping.added],
            "not_carried": mapping.not_carried}


__all__ = ["Mapping", "describe", "map_keras"]
