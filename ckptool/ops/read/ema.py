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
- Keras 3 ``.keras`` with ``use_ema`` (its ``config.json``): ``optimizer/vars`` is iterations,
  learning_rate, then the averages of the trainable variables in the model's order, then the
  optimizer's slots, the same count per variable; a layer's trainable variables are the first
  of its ``vars``, layers in the config's order.

Pure: names, dtypes, shapes, the object graph and the Keras config in; the pairing out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ckptool.errors import CkptError, UnsupportedError
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, VARIABLE_VALUE, ObjectGraph
from ckptool.format.slots import is_optimizer_name

TF1, TF_KERAS, KERAS3 = "tf1", "tf_keras", "keras3"
EMA_SUFFIX = "/ExponentialMovingAverage"
EMA_LIST = "_model_variables_moving_average"
TRAINABLE_LIST = "_trainable_variables"
#: Variables Keras layers create as non-trainable (batch statistics, Normalization's state).
NON_TRAINABLE = frozenset({"moving_mean", "moving_variance", "mean", "variance", "count", "adapt_mean",
                           "adapt_variance"})
#: Keras 3 layer classes -> how many of their variables (the last ones) are not trainable.
KERAS3_NON_TRAINABLE = {"BatchNormalization": 2, "SyncBatchNormalization": 2, "Normalization": 1 << 30,
                        "Discretization": 1 << 30, "IntegerLookup": 1 << 30, "StringLookup": 1 << 30,
                        "TextVectorization": 1 << 30}
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


def _keras3_optimizer(config: Any) -> dict[str, Any] | None:
    opt = config.get("compile_config", {}).get("optimizer") if isinstance(config, dict) else None
    cfg = opt.get("config") if isinstance(opt, dict) else None
    return cfg if isinstance(cfg, dict) else None


def keras3_plan(tensors: Sequence[Tensor], config: Any, layers: Iterable[Any], where: str) -> EmaPlan | None:
    """``layers``: the file's saved objects (``KerasLayer``: path, name, variables)."""
    by = {t[0]: t for t in tensors}
    # a LossScaleOptimizer (mixed precision) keeps the inner optimizer's variables, averages included, in its own group
    pre = "optimizer/inner_optimizer/vars/" if any(n.startswith("optimizer/inner_optimizer/vars/") for n in by) \
        else "optimizer/vars/"
    opt_vars = sorted((n for n in by if n.startswith(pre) and n[len(pre):].isdigit()),
                      key=lambda n: int(n.rsplit("/", 1)[1]))
    if not opt_vars:
        return None
    if config is None:
        raise UnsupportedError(f"{where}: the moving averages of a Keras 3 .weights.h5 cannot be told from its "
                               f"other optimizer variables without the model's config: convert the .keras file, or "
                               f"give the config with --template-config (model.to_json()) to the Keras bridge")
    ocfg = _keras3_optimizer(config)
    if not ocfg or not ocfg.get("use_ema"):
        return None
    entries = [c for c in config.get("config", {}).get("layers", [])
               if isinstance(c, dict) and c.get("class_name") != "InputLayer" and isinstance(c.get("config"), dict)]
    groups = {lay.name: lay for lay in layers}
    per_layer: list[list[str]] = []
    allowed: list[set[int] | None] = []
    for c in entries:
        lay = groups.get(c["config"].get("name"))
        if lay is None:
            continue
        nested = sorted((x for x in groups.values() if x.path.startswith(lay.path + "/") and x.path != lay.path),
                        key=lambda x: x.path)
        vs = list(lay.variables) + [v for x in nested for v in x.variables]
        per_layer.append(vs)
        fixed = KERAS3_NON_TRAINABLE.get(c.get("class_name", ""))
        allowed.append({0} if c["config"].get("trainable") is False else
                       {max(0, len(vs) - fixed)} if fixed is not None else None)
    start = 2 if len(opt_vars) > 1 and by[opt_vars[1]][2] == () else 1
    found = []
    for k in range(1, len(opt_vars) - start + 1):
        avgs = [by[n] for n in opt_vars[start:start + k]]
        rest = [by[n] for n in opt_vars[start + k:]]
        if len(rest) % k:
            continue
        s = len(rest) // k
        if any(rest[i * s + j][1:] != avgs[i][1:] for i in range(k) for j in range(s)):
            continue
        for chosen in _prefixes(per_layer, [a[1:] for a in avgs], by, allowed):
            found.append((chosen, opt_vars[start:start + k]))
            if len(found) > 1:
                break
    if len(found) != 1:
        raise CkptError(f"{where}: {'no' if not found else 'more than one'} way to pair the optimizer's moving "
                        f"averages with the model's trainable variables; refusing to guess")
    chosen, avg_names = found[0]
    model = [v for vs in per_layer for v in vs]
    return EmaPlan(KERAS3, dict(zip(chosen, avg_names)), [v for v in model if v not in chosen])


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
