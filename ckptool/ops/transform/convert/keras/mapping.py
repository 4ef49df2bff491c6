"""Which variable of a Keras 2 (tf.keras / tf_keras) TF-format checkpoint is which dataset of a
Keras 3 weights file: the structural mapping behind ``convert --template`` both ways
(docs/FORMAT.md §14).

TF side: the object graph (``_CHECKPOINTABLE_OBJECT_GRAPH``), whose child order is creation
order; a node reached through two names (``Normalization``'s ``mean`` and ``adapt_mean``) counts
once. Keras side: the HDF5 tree, whose group names say where each object sits but not, across
layer classes, in what order (:mod:`~ckptool.ops.transform.convert.keras.order`). At each object: its own
variables in creation order (TF's variable children <-> Keras's ``vars/0..``); then its
sub-objects, first those with the same attribute name on both sides (leading ``_`` ignored:
``_query_dense`` is Keras 3's ``query_dense``), then the rest in the one order that is proved
(Functional/Sequential ``layer-K`` by K against Keras's ``layers`` in the config's order, or the
only interleaving of Keras's per-class counters the shapes allow), else nothing and a problem.
Optimizer state: :mod:`~ckptool.ops.transform.convert.keras.optim`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptool.format.keras3 import model_orders
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, VARIABLE_VALUE, ObjectGraph
from ckptool.ops.read.checkpoint import Checkpoint
from ckptool.ops.read.keras import KerasCheckpoint
from ckptool.ops.transform.convert.keras.optim import KerasOptimizer, one_sided, plan, tf_optimizer
from ckptool.ops.transform.convert.keras.order import (
    LAYER_K,
    LAYER_W,
    KNode,
    align,
    common,
    keras_tree,
    layer_lists_agree,
    overlaps,
    show_sig,
)
from ckptool.ops.transform.convert.keras.order import chains as keras_chains

#: Children that are not layers: the optimizer, the root's self-reference, and what a SavedModel adds
#: beside the attributes (lists of the same variables, Keras's own bookkeeping).
_NOT_LAYERS = {"optimizer", "root", "keras_api", "variables", "trainable_variables", "non_trainable_variables"}
ORDER_HINT = ("give a .keras template (its config.json records the layer order) or --template-config with the "
              "Keras 3 model's model.to_json()")


@dataclass
class Mapping:
    """``pairs`` (TF key, Keras dataset); what is left on either side; ``problems`` (each refuses
    the conversion: a shape mismatch naming both sides, an order that cannot be proved, optimizer
    state the target cannot hold); ``notes`` (where the structures differ in counts: the surplus is
    left over); ``ignored`` TF keys that Keras 3 does not keep; ``drop_tf`` TF keys a TF output
    leaves out (its optimizer, when the Keras side has none or ``--skip-optimizer``)."""

    pairs: list[tuple[str, str]] = field(default_factory=list)
    shapes: dict[str, list[int]] = field(default_factory=dict)  # Keras dataset -> its shape
    tf_left: list[str] = field(default_factory=list)
    keras_left: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # where the two structures differ (counts)
    added: list[tuple[str, str]] = field(default_factory=list)  # (TF key, new Keras dataset): unbuilt optimizer
    not_carried: list[str] = field(default_factory=list)  # optimizer state only one side has
    ignored: list[str] = field(default_factory=list)
    drop_tf: list[str] = field(default_factory=list)
    zeros: list[str] = field(default_factory=list)  # TF keys a TF output writes as zeros (no slot state in Keras)
    optimizer_pairs: int = 0  # how many of the pairs and additions are optimizer state


def unique(children: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """A node's children, each node once (its first name): ``adapt_mean`` is ``mean``."""
    first: dict[int, tuple[str, int]] = {}
    for n, c in children:
        first.setdefault(c, (n, c))
    return list(first.values())


class _Matcher:
    def __init__(self, graph: ObjectGraph, tf: Checkpoint, kc: KerasCheckpoint, tree: KNode, config: Any):
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
        self.model_order: list[int] = []  # TF variable nodes in model order (for legacy slots)
        self.nodes: dict[str, KNode] = {}
        todo = [tree]
        while todo:
            kn = todo.pop()
            self.nodes[kn.path] = kn
            todo.extend(kn.children.values())
        self.config = config
        self.top, self.nested = model_orders(config) if config is not None else (None, {})

    def tf_order(self, nid: int, seen: set[int]) -> None:
        """TF variables under ``nid`` in model order (own variables, then sub-objects): the order of
        ``model.trainable_variables``, which the legacy optimizer's slots follow."""
        seen.add(nid)
        for _, c in unique(self.g.nodes[nid].children):
            if c in self.var_key and c not in seen:
                seen.add(c)
                self.model_order.append(c)
        for _, c in self._tf_subs(nid, claimed=False):
            if c not in seen:
                self.tf_order(c, seen)

    def tf_vars(self, nid: int) -> list[int]:
        """The unclaimed variables reachable from ``nid``, each once."""
        if nid in self.var_key:
            return [] if nid in self.claimed else [nid]
        out: list[int] = []
        seen, stack = {nid}, [nid]
        while stack:
            for _, c in self.g.nodes[stack.pop()].children:
                if c in seen or c in self.claimed:
                    continue
                seen.add(c)
                if c in self.var_key:
                    out.append(c)
                else:
                    stack.append(c)
        return out

    def has_vars(self, nid: int) -> bool:
        return bool(self.tf_vars(nid))

    def tf_sig(self, nid: int) -> tuple[tuple[str, tuple[int, ...]], ...]:
        vs = [self.tf.variable(self.var_key[c]) for c in self.tf_vars(nid)]
        return tuple(sorted((v.dtype, tuple(v.shape)) for v in vs))

    def k_sig(self, k: KNode) -> tuple[tuple[str, tuple[int, ...]], ...]:
        vs = [self.kc.variable(d) for d in k.datasets()]
        return tuple(sorted((v.dtype, tuple(v.shape)) for v in vs))

    def pair(self, nid: int, kname: str) -> None:
        key = self.var_key[nid]
        self.claimed.add(nid)
        self.out.pairs.append((key, kname))
        tv, ke = self.tf.variable(key), self.kc.entries[kname]
        kv = self.kc.variable(kname)
        self.out.shapes[kname] = list(ke.shape)
        if tuple(tv.shape) != tuple(ke.shape) or tv.dtype != kv.dtype:
            self.out.problems.append(f"shape mismatch: {key} is {tv.dtype} {list(tv.shape)}, "
                                     f"{kname} is {kv.dtype} {list(ke.shape)}")

    # -- one object --------------------------------------------------------------

    def match(self, nid: int, k: KNode, where: str) -> None:
        self.claimed.add(nid)
        own = [c for _, c in unique(self.g.nodes[nid].children) if c in self.var_key and c not in self.claimed]
        kown = [k.own[i] for i in sorted(k.own)]
        if len(own) != len(kown):
            tf_names = [self.var_key[c] for c in own]
            self.out.notes.append(f"{where or 'the model'}: TF has {len(own)} variables {tf_names}, "
                                  f"Keras {k.path or 'root'}/vars has {len(kown)} {kown}")
            own, kown = self._common(own, kown, where)
        for c, kn in zip(own, kown):
            self.pair(c, kn)
        self._check_layer_lists(nid, where)
        self.match_children(self._tf_subs(nid), self._k_subs(k), where)

    def _common(self, own: list[int], kown: list[str], where: str) -> tuple[list[int], list[str]]:
        """Where one side has more variables: those both have, paired by dtype and shape in the one
        order-keeping way, else none and a problem."""
        at = common([self.tf_sig(c) for c in own], [self.k_sig(KNode(n, {0: n})) for n in kown])
        if at is None:
            self.out.problems.append(f"{where or 'the model'}: which of its variables are which cannot be proved "
                                     f"(TF has {len(own)}, Keras {kown[0].rsplit('/vars/')[0]} {len(kown)}: the "
                                     "shapes fit more than one way, or none)")
            return [], []
        return [own[i] for i in at[0]], [kown[i] for i in at[1]]

    def _check_layer_lists(self, nid: int, where: str) -> None:
        if not layer_lists_agree(self.g.nodes[nid].children):
            self.out.problems.append(f"{where or 'the model'}: the checkpoint's layer-K and layer_with_weights-K "
                                     "give its layers in different orders")

    def _tf_subs(self, nid: int, claimed: bool = True) -> list[tuple[str, int]]:
        kids = [(n, c) for n, c in self.g.nodes[nid].children if c not in self.var_key]
        layers = sorted(((int(m.group(1)), n, c) for n, c in kids if (m := LAYER_K.match(n))))
        if layers:  # Functional / Sequential: model.layers order; layer_with_weights-K are the same nodes
            rest = [(n, c) for n, c in kids if not LAYER_K.match(n) and not LAYER_W.match(n)]
            kids = [(n, c) for _, n, c in layers] + rest
        out, seen = [], set()
        for n, c in kids:
            if c in seen or (claimed and c in self.claimed) or n in _NOT_LAYERS:
                continue
            seen.add(c)
            if not claimed or self.has_vars(c):
                out.append((n, c))
        return out

    def _k_subs(self, k: KNode) -> list[tuple[str, KNode]]:
        return sorted((n, c) for n, c in k.children.items() if n != "optimizer" and c.datasets())

    def _tf_container(self, nid: int) -> bool:
        kids = self.g.nodes[nid].children
        return bool(kids) and all(n.isdigit() for n, _ in kids) and not any(c in self.var_key for _, c in kids)

    def _tf_items(self, subs: list[tuple[str, int]]) -> list[tuple[str, int]]:
        out = []
        for n, c in subs:
            if self._tf_container(c):
                kids = sorted(unique(self.g.nodes[c].children), key=lambda x: int(x[0]))
                out.extend(self._tf_items([(f"{n}/{m}", d) for m, d in kids if self.has_vars(d)]))
            else:
                out.append((n, c))
        return out

    def _k_items(self, subs: list[tuple[str, KNode]]) -> list[tuple[str, KNode]]:
        out = []
        for n, c in subs:
            if not c.is_object and c.children:
                out.extend(self._k_items([(f"{n}/{m}", d) for m, d in self._k_subs(c)]))
            else:
                out.append((n, c))
        return out

    def match_children(self, tsubs: list[tuple[str, int]], ksubs: list[tuple[str, KNode]], where: str) -> None:
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
        titems = [(n, c) for n, c in self._tf_items(trest) if self.has_vars(c)]
        if titems or kitems:
            self._pair_rest(titems, kitems, where)

    # -- the order of what names do not pair ----------------------------------------

    def _pair_rest(self, titems: list[tuple[str, int]], kitems: list[tuple[str, KNode]], where: str) -> None:
        label = where or "the model"
        chains, why = keras_chains(kitems, self.nodes, self.top, self.nested)
        if why:
            self.out.problems.append(f"{label}: {why}")
            return
        tsigs = [self.tf_sig(c) for _, c in titems]
        ksigs = [[self.k_sig(c) for _, c in ch] for ch in chains]
        res = align(tsigs, ksigs)
        if res.stuck is not None:  # a layer with a variable more or less on one side: proved the same way, or not
            loose = align(tsigs, ksigs, fits=overlaps)
            res = loose if not loose.stuck else res
        if res.why:
            hint = "" if self.config is not None else f"; {ORDER_HINT}"
            if res.disagree is not None:
                i, a, b = res.disagree
                shown = [chains[x][y][1].path if x >= 0 else "nothing" for x, y in (a, b)]
                self.out.problems.append(f"{label}: which Keras layer is which cannot be proved: {shown[0]} and "
                                         f"{shown[1]} both fit the source's {titems[i][0]} "
                                         f"({show_sig(tsigs[i])}){hint}")
            elif res.stuck is not None:
                i, nexts = res.stuck
                after = ", ".join(f"{chains[c][q][1].path} ({show_sig(self.k_sig(chains[c][q][1]))})"
                                  for c, q in nexts[:3]) or "nothing"
                self.out.problems.append(f"{label}: the template's layers do not fit the source's: "
                                         f"{titems[i][0]} ({show_sig(tsigs[i])}) matches none of what can come next in "
                                         f"the Keras file: {after}")
            else:
                self.out.problems.append(f"{label}: which Keras layer is which cannot be proved ({res.why}: "
                                         f"{len(titems)} source layers with weights, {len(kitems)} in the Keras "
                                         f"file){hint}")
            return
        for ti, (c, q) in res.pairs:
            tn, tc = titems[ti]
            self.match(tc, chains[c][q][1], f"{where}/{tn}" if where else tn)
        if len(titems) != len(kitems):
            self.out.notes.append(f"{label}: TF has {len(titems)} objects with weights, Keras has {len(kitems)}; the "
                                  "surplus is left over")


def _graph(tf: Checkpoint) -> ObjectGraph:
    from ckptool.errors import UnsupportedError

    g = tf.object_graph()
    if g is None:
        raise UnsupportedError(f"{tf.prefix}: a name-based (TF1) checkpoint has no object graph; mapping onto "
                               "Keras 3 needs one written by Keras 2 / tf.keras (save_weights, tf.train.Checkpoint)")
    return g


def _optimizer(m: _Matcher, opt: int | None, kopt: KNode | None, to_keras: bool, skip: bool) -> None:
    """Optimizer state: paired where both sides have it and the target holds it exactly."""
    g, out = m.g, m.out
    tf_opt = tf_optimizer(g, opt, m.model_order, m.var_key) if opt is not None else None
    tf_vars = tf_opt.every if tf_opt is not None else []
    k_vars = kopt.datasets() if kopt is not None else []
    tf_keys = [m.var_key[t] for t in tf_vars]
    m.claimed.update(tf_vars)
    if not tf_vars and not k_vars:
        return
    if skip or not (tf_vars and k_vars):
        problem, note, drop = one_sided(len(tf_vars), bool(k_vars), to_keras, skip, m.tf.prefix)
        if problem:
            out.problems.append(problem)
            return
        out.notes.append(note)
        out.drop_tf += tf_keys if drop else []
        out.not_carried += ([] if drop else tf_keys) + k_vars
        return
    if tf_opt is None or kopt is None or opt is None:  # pragma: no cover - both sides have variables
        return
    inner = kopt.children.get("inner_optimizer")
    comp = m.config.get("compile_config") if isinstance(m.config, dict) else None
    kdesc = KerasOptimizer(kopt.path, [kopt.own[i] for i in sorted(kopt.own)],
                           inner.path if inner is not None else None,
                           [inner.own[i] for i in sorted(inner.own)] if inner is not None else None,
                           (inner.label if inner is not None else kopt.label),
                           comp.get("optimizer") if isinstance(comp, dict) else None)

    def is_zero(nids: list[int]) -> bool:
        import numpy as np
        return all(not np.any(np.asarray(m.tf.read(m.var_key[t]))) for t in nids)

    p = plan(tf_opt, kdesc, to_keras, is_zero)
    out.problems += p.problems
    out.notes += p.notes
    if p.problems:
        return
    before = len(out.pairs)
    for t, kn in p.pairs:
        m.pair(t, kn)
    for t, kn in p.added:
        out.added.append((m.var_key[t], kn))
        out.shapes[kn] = list(m.tf.variable(m.var_key[t]).shape)
    out.optimizer_pairs = len(out.pairs) - before + len(p.added)
    out.not_carried += [m.var_key[t] for t in p.kept_tf] + p.kept_keras
    out.zeros += [m.var_key[t] for t in p.zero_tf]
    out.ignored += [m.var_key[t] for t in tf_opt.ignored]  # what is left of either side stays: tf_left, keras_left


def map_keras(tf: Checkpoint, kc: KerasCheckpoint, to_keras: bool = True, config: Any = None,
              skip_optimizer: bool = False) -> Mapping:
    """The mapping between a Keras 2 TF checkpoint and a Keras 3 file of the same model
    (``to_keras``: the Keras file is the destination, which may gain optimizer slots). ``config``
    is the Keras model's config (``model.to_json()``), the ``.keras`` file's own by default."""
    g = _graph(tf)
    tree = keras_tree(kc)
    m = _Matcher(g, tf, kc, tree, config if config is not None else kc.config)
    root = dict(g.nodes[0].children)
    model = 0
    if not any(LAYER_K.match(n) for n in root):
        # tf.train.Checkpoint(model=..., optimizer=...): the model is the root's one other child with
        # variables (under any name), unless the Keras file has that name (a subclassed model's attribute)
        kids = [(n, c) for n, c in unique(g.nodes[0].children)
                if n not in ("optimizer", "root") and c not in m.var_key and m.has_vars(c)]
        if len(kids) == 1 and kids[0][0].lstrip("_") not in {k.lstrip("_") for k in tree.children}:
            model = kids[0][1]
    opt = root.get("optimizer", dict(g.nodes[model].children).get("optimizer"))
    m.tf_order(model, set())
    if opt is not None:
        opt_vars = tf_optimizer(g, opt, m.model_order, m.var_key).every
        m.claimed.update(opt_vars)  # kept out of the layers' matching
    m.match(model, tree, "")
    if opt is not None:
        m.claimed.difference_update(opt_vars)
    _optimizer(m, opt, tree.children.get("optimizer"), to_keras, skip_optimizer)
    out = m.out
    mapped_tf = {t for t, _ in out.pairs} | {t for t, _ in out.added} | set(out.not_carried) | set(out.drop_tf) | \
        set(out.zeros)
    mapped_k = {k for _, k in out.pairs} | set(out.not_carried)
    ignored = set(out.ignored)
    for v in tf.variables():
        n = v.name
        if n in mapped_tf or n in ignored:
            continue
        if n == OBJECT_GRAPH_KEY or n.startswith(("save_counter/", "keras_api/", "model/keras_api/")):
            out.ignored.append(n)
        else:
            out.tf_left.append(n)
    out.keras_left = [n for n in kc.names() if n not in mapped_k]
    return out


def describe(m: Mapping) -> dict[str, Any]:
    rows = {n: [{"tf": t, "keras": k, "shape": m.shapes.get(k)} for t, k in got] for n, got in
            (("pairs", m.pairs), ("added", m.added))}
    return {**rows, "tf_unused": m.tf_left, "keras_unfilled": m.keras_left, "problems": m.problems, "notes": m.notes,
            "ignored": m.ignored, "not_carried": m.not_carried, "dropped": m.drop_tf, "zeroed": m.zeros}


__all__ = ["ORDER_HINT", "Mapping", "describe", "map_keras", "unique"]
