"""Which tensors of a checkpoint are exponential moving averages, and of which variable
(``convert --ema``, ``inspect``). Three layouts, as TF, tf_keras and Keras 3 write them:

- TF1 ``tf.train.ExponentialMovingAverage``: the shadow of ``VAR`` is ``VAR/ExponentialMovingAverage``
  (``ema.average_name``), same dtype and shape.
- tf_keras (TF >= 2.11 optimizers) with ``use_ema=True``: the optimizer's node has a child
  ``_model_variables_moving_average`` whose children ``0..k-1`` are the averages (also
  ``optimizer/_variables/1..k``), one per trainable variable in the model's order. That order
  is the optimizer's ``_trainable_variables`` when it tracks them (Keras 3 under
  ``tf.train.Checkpoint``), else the model's variables as the object graph reaches them (depth
  first, children in creation order), non-trainable ones (``moving_mean``...) left out; every
  average must have its variable's dtype and shape, and an assignment that shapes alone leave
  open is refused, never guessed.
- Keras 3 ``.keras`` with ``use_ema`` (its ``config.json``; a ``.weights.h5`` with the config
  given): ``optimizer/vars`` is iterations, learning_rate, then the averages of the trainable
  variables in the model's order, then the optimizer's slots, the same count per variable; a
  layer's trainable variables are the first of its ``vars``, layers and their nested sub-layers in
  Keras's own order. Both layouts are :mod:`ckptool.format.keras3`'s, which the bridge asks too.

Pure: names, dtypes, shapes, the object graph and the Keras config in; the pairing out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ckptool.errors import CkptError, UnsupportedError
from ckptool.format.keras3 import (
    TRAILING_STATE,
    Ordered,
    Saved,
    compiled_optimizer,
    ema_splits,
    head_length,
    layer_classes,
    optimizer_vars,
    trainable_counts,
    weights_order,
)
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, VARIABLE_VALUE, ObjectGraph
from ckptool.format.slots import is_optimizer_name

TF1, TF_KERAS, KERAS3 = "tf1", "tf_keras", "keras3"
EMA_SUFFIX = "/ExponentialMovingAverage"
EMA_LIST = "_model_variables_moving_average"
TRAINABLE_LIST = "_trainable_variables"
#: Variables Keras layers create as non-trainable (batch statistics, Normalization's state).
NON_TRAINABLE = frozenset({"moving_mean", "moving_variance", "mean", "variance", "count", "adapt_mean",
                           "adapt_variance"})
BOOKKEEPING = frozenset({"global_step", "save_counter/.ATTRIBUTES/VARIABLE_VALUE", OBJECT_GRAPH_KEY})

Tensor = tuple[str, str, tuple[int, ...]]  # name, dtype, shape


@dataclass
class EmaPlan:
    """``pairs``: variable -> its average (model order); ``without``: the model's variables that
    have none (they keep their value)."""

    kind: str
    pairs: dict[str, str]
    without: list[str] = field(default_factory=list)

    @property
    def averages(self) -> set[str]:
        return set(self.pairs.values())

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "averaged": len(self.pairs), "without": list(self.without),
                "pairs": dict(self.pairs)}


def _var_key(g: ObjectGraph, nid: int) -> str | None:
    return next((a.checkpoint_key for a in g.nodes[nid].attributes if a.name == VARIABLE_VALUE), None)


def _numbered(g: ObjectGraph, nid: int) -> list[int]:
    kids = [(int(n), c) for n, c in g.nodes[nid].children if n.isdigit()]
    return [c for _, c in sorted(kids)]


#: what a SavedModel adds to each layer beside its attributes: lists of the same variables (walked
#: through them, a BatchNormalization's moving_mean would be named "2", not "moving_mean")
SAVEDMODEL_LISTS = frozenset({"variables", "trainable_variables", "non_trainable_variables", "keras_api"})


def _model_variables(g: ObjectGraph, skip: set[int]) -> list[tuple[str, str]]:
    """``(key, local name)`` of every variable the object graph reaches from the root outside
    ``skip`` (the optimizers), depth first, children in order, each once, by the layers'
    attributes (not a SavedModel's lists of them)."""
    out: list[tuple[str, str]] = []
    seen = set(skip)
    stack: list[tuple[int, str]] = [(0, "")]
    while stack:
        nid, name = stack.pop()
        if nid in seen:
            continue
        seen.add(nid)
        key = _var_key(g, nid)
        if key is not None:
            out.append((key, name))
        kids = [(c, n) for n, c in g.nodes[nid].children if c not in seen and n not in SAVEDMODEL_LISTS]
        stack.extend(reversed(kids))
    return out


def _assign(avgs: Sequence[Tensor], model: Sequence[Tensor], where: str) -> list[int]:
    """The one order-keeping assignment of ``avgs`` to ``model`` by dtype and shape (indices
    into ``model``); CkptError when there is none or several."""
    k, n = len(avgs), len(model)
    fits = [[avgs[i][1:] == model[j][1:] for j in range(n)] for i in range(k)]
    ways = [[0] * (n + 1) for _ in range(k + 1)]  # ways[i][j]: avgs[i:] into model[j:]
    for j in range(n + 1):
        ways[k][j] = 1
    for i in range(k - 1, -1, -1):
        for j in range(n - 1, -1, -1):
            ways[i][j] = min(2, ways[i][j + 1] + (ways[i + 1][j + 1] if fits[i][j] else 0))
    if ways[0][0] != 1:
        why = "no" if ways[0][0] == 0 else "more than one"
        raise CkptError(f"{where}: {why} way to pair the {k} moving averages with the model's trainable variables "
                        f"by dtype and shape; refusing to guess")
    out, j = [], 0
    for i in range(k):
        while not (fits[i][j] and ways[i + 1][j + 1] == 1):
            j += 1
        out.append(j)
        j += 1
    return out


def tf1_plan(tensors: Sequence[Tensor]) -> EmaPlan | None:
    by = {t[0]: t for t in tensors}
    pairs: dict[str, str] = {}
    for name, dtype, shape in tensors:
        if name.endswith(EMA_SUFFIX) and name[: -len(EMA_SUFFIX)] in by:
            var = by[name[: -len(EMA_SUFFIX)]]
            if var[1:] != (dtype, shape):
                raise CkptError(f"{name}: {dtype} {list(shape)}, but {var[0]} is {var[1]} {list(var[2])}")
            pairs[var[0]] = name
    if not pairs:
        return None
    averages = set(pairs.values())
    without = [n for n, _, _ in tensors if n not in pairs and n not in averages and n not in BOOKKEEPING
               and not is_optimizer_name(n) and not n.endswith(EMA_SUFFIX)]
    return EmaPlan(TF1, dict(sorted(pairs.items())), without)


def tf_keras_plan(tensors: Sequence[Tensor], g: ObjectGraph, where: str) -> EmaPlan | None:
    by = {t[0]: t for t in tensors}
    opts = [n.id for n in g.nodes if any(c == EMA_LIST for c, _ in n.children)]
    if not opts:
        return None
    pairs: dict[str, str] = {}
    skip = g.optimizer_nodes() | set(opts)
    model_keys = [(k, local) for k, local in _model_variables(g, skip) if k in by]
    for opt in opts:
        kids = dict(g.nodes[opt].children)
        avg_keys = [k for c in _numbered(g, kids[EMA_LIST]) if (k := _var_key(g, c)) is not None and k in by]
        if not avg_keys:
            continue
        if TRAINABLE_LIST in kids:  # the optimizer names the variables itself (Keras 3 in a TF checkpoint)
            order = [k for c in _numbered(g, kids[TRAINABLE_LIST]) if (k := _var_key(g, c)) is not None]
            if len(order) != len(avg_keys) or any(by[a][1:] != by[v][1:] for a, v in zip(avg_keys, order)
                                                  if v in by):
                raise CkptError(f"{where}: the optimizer's {len(avg_keys)} averages do not match its "
                                f"{len(order)} trainable variables")
            pairs.update((v, a) for v, a in zip(order, avg_keys) if v in by)
            continue
        named = [k for k, local in model_keys if local not in NON_TRAINABLE]
        avgs = [by[a] for a in avg_keys]
        if len(named) == len(avgs) and all(by[v][1:] == a[1:] for v, a in zip(named, avgs)):
            chosen = named
        else:
            every = [k for k, _ in model_keys]
            chosen = [every[j] for j in _assign(avgs, [by[k] for k in every], where)]
        pairs.update(zip(chosen, avg_keys))
    if not pairs:
        return None
    without = [k for k, _ in model_keys if k not in pairs]
    return EmaPlan(TF_KERAS, pairs, without)


#: what to give where a Keras 3 .weights.h5's averages cannot be told: one route, every convert takes it
CONFIG_HINT = ("convert SRC DST --ema --template-config CONFIG.json (the model's model.to_json() saved to a file) "
               "tells them, as the .keras file's own config does")


def _could_average(state: Sequence[tuple[str, tuple[int, ...]]], model: Sequence[Tensor]) -> bool:
    """Whether an optimizer's per-variable ``state`` can read as moving averages of the model's
    variables then slots (:func:`ckptool.format.keras3.ema_splits`), by dtype and shape alone."""
    have = Counter(t[1:] for t in model)
    return any(not Counter(state[:k]) - have for k, _ in ema_splits(state))


def _same_order_unknown(ordered: Ordered, by: dict[str, Tensor], where: str) -> None:
    """Refuse where the file leaves the order of two sub-layers with the same variables open."""
    for at, paths in ordered.unproved:
        sig: dict[str, list[Any]] = {p: [] for p in paths}
        for o in ordered.objects:
            for p in paths:
                if o.path == p or o.path.startswith(p + "/"):
                    sig[p] += [by[v][1:] for v in o.variables if v in by]
        seen: dict[str, str] = {}
        for p in paths:
            key = repr(sig[p])
            if sig[p] and key in seen:
                raise CkptError(f"{where}: the order of {seen[key]} and {p} (in {at}) is not recorded in the file and "
                                f"their variables have the same shapes: which average is whose cannot be proved; "
                                f"refusing to guess")
            seen[key] = p


def keras3_plan(tensors: Sequence[Tensor], config: Any, layers: Iterable[Any], where: str) -> EmaPlan | None:
    """``layers``: the file's saved objects (``KerasLayer``: path, name, class, variables); their
    order and the optimizer's ``vars`` layout are :mod:`ckptool.format.keras3`'s."""
    by = {t[0]: t for t in tensors}
    opt_vars = optimizer_vars(by)
    if not opt_vars:
        return None
    sigs = [by[n][1:] for n in opt_vars]
    start = head_length([s[1] for s in sigs])
    classes = layer_classes(config) if config is not None else {}  # a .weights.h5's config comes from outside
    objects = [Saved(x.path, x.name, x.class_name or classes.get(x.name, ""), list(x.variables)) for x in layers]
    if config is None:
        model = [by[v] for o in objects if not o.path.startswith("optimizer") for v in o.variables if v in by]
        if not any(_could_average(sigs[start:len(sigs) - t], model) for t in {0, *TRAILING_STATE.values()}
                   if all(x[1] == () for x in sigs[len(sigs) - t:])):
            return None  # no reading of the optimizer's state has averages: there are none to find
        raise UnsupportedError(f"{where}: the moving averages of a Keras 3 .weights.h5 cannot be told from its other "
                               f"optimizer variables without the model's config (amsgrad's slots have the same "
                               f"shapes): {CONFIG_HINT}")
    compiled = compiled_optimizer(config)
    if compiled is None or not compiled[1].get("use_ema"):
        return None
    tail = TRAILING_STATE.get(compiled[0], 0)  # Nadam's product, after the slots
    state = sigs[start:len(sigs) - tail]
    ordered = weights_order(objects, config)
    per_layer = [[v for v in o.variables if v in by] for o in ordered.objects]
    allowed = trainable_counts(ordered.objects, config)
    found = []
    for k, _ in ema_splits(state):
        for chosen in _prefixes(per_layer, state[:k], by, allowed):
            found.append((chosen, opt_vars[start:start + k]))
        if len(found) > 1:
            break
    if found:
        _same_order_unknown(ordered, by, where)
    if len(found) != 1:
        raise CkptError(f"{where}: {'no' if not found else 'more than one'} way to pair the optimizer's moving "
                        f"averages with the model's trainable variables; refusing to guess")
    chosen, avg_names = found[0]
    every = [v for vs in per_layer for v in vs]
    return EmaPlan(KERAS3, dict(zip(chosen, avg_names)), [v for v in every if v not in chosen])


def _prefixes(per_layer: list[list[str]], shapes: list[tuple[str, tuple[int, ...]]], by: dict[str, Tensor],
              allowed: list[set[int] | None]) -> list[list[str]]:
    """The ways (none, one, or two: "more than one") the trainable variables, a prefix of each
    layer's (of a length in ``allowed[layer]`` when it is known), read as ``shapes`` in order."""
    m, k = len(per_layer), len(shapes)

    def fits(at: int, i: int) -> int:  # the longest prefix of layer ``at`` that reads as shapes[i:]
        vs, t = per_layer[at], 0
        while t < len(vs) and i + t < k and by[vs[t]][1:] == shapes[i + t]:
            t += 1
        return t

    def ok(at: int, t: int) -> bool:
        a = allowed[at]
        return a is None or t in a

    ways = [[0] * (k + 1) for _ in range(m + 1)]  # ways[at][i]: layers at.. read as shapes[i:]
    ways[m][k] = 1
    for at in range(m - 1, -1, -1):
        for i in range(k + 1):
            ways[at][i] = min(2, sum(ways[at + 1][i + t] for t in range(fits(at, i) + 1) if ok(at, t)))
    if ways[0][0] == 0:
        return []
    out: list[str] = []
    i = 0
    for at in range(m):
        t = next(t for t in range(fits(at, i) + 1) if ok(at, t) and ways[at + 1][i + t])
        out += per_layer[at][:t]
        i += t
    return [out] if ways[0][0] == 1 else [out, out]


def plan_ema(tensors: Sequence[Tensor], graph: ObjectGraph | None = None, keras_config: Any = None,
             keras_layers: Iterable[Any] | None = None, where: str = "") -> EmaPlan | None:
    """The moving averages of a checkpoint and their variables (None when it has none)."""
    if keras_layers is not None:
        return keras3_plan(tensors, keras_config, keras_layers, where)
    if graph is not None:
        plan = tf_keras_plan(tensors, graph, where)
        if plan is not None:
            return plan
    return tf1_plan(tensors)


def checkpoint_plan(ck: Any) -> EmaPlan | None:
    """:func:`plan_ema` of an open checkpoint (a TF bundle, V1, or a Keras 3 file)."""
    tensors = [(v.name, v.dtype, tuple(v.shape)) for v in ck.variables()]
    if getattr(ck, "format", None) == "keras":
        return plan_ema(tensors, keras_config=ck.config, keras_layers=ck.layers(), where=ck.prefix)
    graph = ck.object_graph() if hasattr(ck, "object_graph") else None
    return plan_ema(tensors, graph, where=ck.prefix)


__all__ = ["EMA_SUFFIX", "KERAS3", "NON_TRAINABLE", "TF1", "TF_KERAS", "EmaPlan", "checkpoint_plan", "keras3_plan",
           "plan_ema", "tf1_plan", "tf_keras_plan"]
