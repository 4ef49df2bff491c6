"""Keras 3's structure, as its saving library lays a model out (docs/FORMAT.md §14.1): the one
home of which saved object comes where in Keras's own order, and of what an optimizer's ``vars``
hold. ``ops/read/ema`` (which tensors are moving averages), ``ops/read/keras`` (``inspect``'s
layers) and the Keras 3 bridge (``ops/transform/convert/keras``) all ask it.

- **Names.** The items of a container (``model.layers``, a list attribute) are named by their class
  in snake case with a per-class counter in the container's order (``dense``, ``dense_1``, ...,
  ``dense_10``): :func:`counter`. The counters order the items of one class; nothing in the names
  orders two classes against each other, and compared as text ``dense_10`` comes before
  ``dense_2`` (:func:`numbered` compares the counters as numbers).
- **Order.** ``model.weights`` (and so ``model.trainable_variables``, which the optimizer's
  slots and moving averages follow) is each object's own variables (its ``vars`` group, trainable
  ones first), then its sub-layers': a Functional or Sequential model's ``layers`` in the config's
  order (matched by the layer names Keras >= 3.6 writes in each ``vars`` group's ``name``), a
  layer's attribute sub-layers in the order it creates them, which the file does not record
  (it lists them by name) except for the classes of :data:`ATTRIBUTE_ORDER`:
  :func:`weights_order`.
- **Optimizer.** ``optimizer/vars`` (a LossScaleOptimizer's inner one in
  ``optimizer/inner_optimizer/vars``) is ``0`` iterations, ``1`` the learning rate (a scalar; none
  under a schedule), then with ``use_ema`` one moving average per trainable variable in the model's
  order, then the slots, the same count per variable, interleaved (``m0, v0, m1, v1``), then what
  an optimizer keeps beside them (Nadam's product: :data:`TRAILING_STATE`): :func:`optimizer_vars`,
  :func:`head_length`, :func:`ema_splits`, :func:`compiled_optimizer`.

Pure: names, shapes and a config document in; orders out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: a Keras-generated name: a base and a counter
_COUNTED = re.compile(r"^(.+)_(\d+)$")
_PARTS = re.compile(r"_(\d+)(?=/|$)|/")
#: where an optimizer's own state is: a LossScaleOptimizer's inner optimizer's first
OPTIMIZER_GROUPS = ("optimizer/inner_optimizer/vars/", "optimizer/vars/")
#: Keras 3 layer classes -> how many of their own variables (the last ones) are not trainable
NON_TRAINABLE_TAIL = {"BatchNormalization": 2, "SyncBatchNormalization": 2, "Normalization": 1 << 30,
                      "Discretization": 1 << 30, "IntegerLookup": 1 << 30, "StringLookup": 1 << 30,
                      "TextVectorization": 1 << 30}
#: optimizer classes -> how many variables they keep after their slots (Nadam's running product)
TRAILING_STATE = {"Nadam": 1}
#: layer classes whose attribute sub-layers Keras creates (and so orders) in a known order; the
#: file lists them by name (``key_dense`` before ``query_dense``)
ATTRIBUTE_ORDER: dict[str, tuple[str, ...]] = {
    "MultiHeadAttention": ("query_dense", "key_dense", "value_dense", "output_dense"),
    "Bidirectional": ("forward_layer", "backward_layer"),
}


def counter(name: str, siblings: Iterable[str]) -> tuple[str, int]:
    """``(base, n)`` of a container item's name among its siblings: ``dense_3`` is the fourth
    ``dense`` when ``dense`` is a sibling too (Keras numbers ``dense``, ``dense_1``, ...)."""
    m = _COUNTED.match(name)
    if m and m.group(1) in siblings:
        return m.group(1), int(m.group(2))
    return name, 0


def uncounted(name: str) -> str:
    """A Keras-generated name without its counter (``adam_1`` -> ``adam``): the base Keras numbers
    its objects of one class by (layers in a container, an optimizer's default name)."""
    m = _COUNTED.match(name)
    return m.group(1) if m else name


def numbered(path: str) -> list[tuple[bool, Any]]:
    """A sort key of a path with Keras's counters compared as numbers (``dense_2`` before
    ``dense_10``)."""
    parts = [int(p) if p.isdigit() else p for p in _PARTS.split(path) if p]
    return [(isinstance(p, int), p) for p in parts]


def class_chains(names: Iterable[str], siblings: Iterable[str]) -> dict[str, list[str]]:
    """A container's item names by class (the counters' base), each class in Keras's order (its
    counters'); ``siblings``: every name beside them (``dense_3`` counts as a ``dense`` only where
    ``dense`` is there)."""
    sib = set(siblings)
    families: dict[str, list[tuple[int, str]]] = {}
    for n in names:
        base, k = counter(n, sib)
        families.setdefault(base, []).append((k, n))
    return {b: [n for _, n in sorted(f, key=lambda x: x[0])] for b, f in families.items()}


def config_layers(owner_path: str, owner_label: str, top: list[str] | None,
                  nested: dict[str, list[str]]) -> list[str] | None:
    """The config's layer names, in order, of the model whose ``layers`` container is at
    ``owner_path`` (``""``: the top model; a nested one by its name, the ``vars`` group's label)."""
    return top if owner_path == "" else nested.get(owner_label) if owner_label else None


def _layer_names(doc: Any) -> list[str] | None:
    cfg = doc.get("config") if isinstance(doc, dict) else None
    layers = cfg.get("layers") if isinstance(cfg, dict) else None
    if not isinstance(layers, list):
        return None
    out = []
    for entry in layers:
        c = entry.get("config") if isinstance(entry, dict) else None
        n = c.get("name") if isinstance(c, dict) else None
        if isinstance(n, str):
            out.append(n)
    return out


def _walk(config: Any) -> Iterator[dict[str, Any]]:
    """Every object of a config document, in document order, with a stack of its own."""
    stack = [config]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            yield x
            stack.extend(reversed(list(x.values())))
        elif isinstance(x, list):
            stack.extend(reversed(x))


def model_orders(config: Any) -> tuple[list[str] | None, dict[str, list[str]]]:
    """The layer names of a model config in order: ``(the top model's, {nested model name: its})``.
    ``config`` is a ``config.json`` / ``model.to_json()`` document; None where it lists no layers
    (a subclassed model)."""
    nested: dict[str, list[str]] = {}
    for x in _walk(config):
        if x is config:
            continue
        got = _layer_names(x)
        cfg = x.get("config")
        if got is not None and isinstance(cfg, dict) and isinstance(cfg.get("name"), str):
            nested.setdefault(cfg["name"], got)
    return _layer_names(config), nested


def layer_classes(config: Any) -> dict[str, str]:
    """Layer name -> class name, from a ``config.json`` document (every nested layer)."""
    out: dict[str, str] = {}
    for x in _walk(config):
        cfg = x.get("config")
        if isinstance(x.get("class_name"), str) and isinstance(cfg, dict) and isinstance(cfg.get("name"), str):
            out.setdefault(cfg["name"], x["class_name"])
    return out


def frozen_layers(config: Any) -> set[str]:
    """The names of the layers a config marks ``trainable: false`` (their sub-layers too hold no
    trainable variable)."""
    return {x["config"]["name"] for x in _walk(config) if isinstance(x.get("class_name"), str)
            and isinstance(x.get("config"), dict) and isinstance(x["config"].get("name"), str)
            and x["config"].get("trainable") is False}


@dataclass
class Saved:
    """A saved object of a Keras file: its group path (``""`` the model), the ``name`` attribute
    of its ``vars`` group (the layer's name, Keras >= 3.6; ``""`` before), its class where a
    config tells it, and its own variables (dataset names, ``vars/0..`` in order)."""

    path: str
    label: str
    class_name: str
    variables: list[str]


@dataclass
class Ordered:
    """:func:`weights_order`'s answer: the objects in Keras's order, and where that order is not
    proved (two sub-layers with variables whose order the file does not record)."""

    objects: list[Saved] = field(default_factory=list)
    unproved: list[tuple[str, list[str]]] = field(default_factory=list)  # (where, the paths side by side)


def _parent(path: str, known: Mapping[str, Saved]) -> str | None:
    p = path
    while p:
        p = p.rpartition("/")[0]
        if p in known:
            return p
    return None if path == "" else ""


def _sort_items(parent: Saved, rel: str, items: list[tuple[str, Saved]], top: list[str] | None,
                nested: dict[str, list[str]], ordered: Ordered) -> list[tuple[str, Saved]]:
    """One container's items (``rel``: its name under ``parent``) in Keras's order."""
    order = config_layers(parent.path, parent.label, top, nested) if rel == "layers" else None
    if order is not None and all(s.label in order for _, s in items):
        at = {n: i for i, n in enumerate(order)}
        return sorted(items, key=lambda it: at[it[1].label])
    by_name = {n.rpartition("/")[2]: (n, s) for n, s in items}
    families = class_chains(by_name, by_name)
    if len(families) > 1:  # each class in its order; nothing orders the classes against each other
        ordered.unproved.append((f"{parent.path or 'the model'}/{rel}", [s.path for _, s in items]))
    return [by_name[n] for base in sorted(families, key=numbered) for n in families[base]]


def _children(parent: Saved, kids: list[Saved], top: list[str] | None, nested: dict[str, list[str]],
              holds: set[str], ordered: Ordered) -> list[Saved]:
    """``parent``'s sub-objects in Keras's order: its containers' items (``layers`` first), then
    its attribute sub-layers."""
    base = parent.path + "/" if parent.path else ""
    containers: dict[str, list[tuple[str, Saved]]] = {}
    attrs: list[tuple[str, Saved]] = []
    for k in kids:
        rel = k.path[len(base):]
        if "/" in rel:
            containers.setdefault(rel.rpartition("/")[0], []).append((rel, k))
        else:
            attrs.append((rel, k))
    out: list[Saved] = []
    for rel in sorted(containers, key=lambda r: (r != "layers", numbered(r))):
        out += [s for _, s in _sort_items(parent, rel, containers[rel], top, nested, ordered)]
    known = ATTRIBUTE_ORDER.get(parent.class_name, ())
    attrs.sort(key=lambda it: (known.index(it[0]) if it[0] in known else len(known), numbered(it[0])))
    with_vars = [n for n, s in attrs if s.path in holds]
    if len(with_vars) > 1 and not set(with_vars) <= set(known):
        ordered.unproved.append((parent.path or "the model", [base + n for n in with_vars]))
    return out + [s for _, s in attrs]


def weights_order(objects: Iterable[Saved], config: Any = None, skip: tuple[str, ...] = ("optimizer",)) -> Ordered:
    """The saved objects in the order of Keras's ``model.weights`` (depth first: an object, then its
    sub-layers as :func:`_children` orders them), those under a top-level name in ``skip`` left
    out. Without a config (or one that does not name a container's layers), a container's items
    are in their per-class counters' order and two classes side by side are reported in
    ``unproved``."""
    known = {s.path: s for s in objects if s.path.split("/", 1)[0] not in skip}
    if "" not in known:
        known[""] = Saved("", "", "", [])
    top, nested = model_orders(config) if config is not None else (None, {})
    kids: dict[str, list[Saved]] = {}
    holds: set[str] = set()  # objects whose subtree has variables
    for s in known.values():
        parent = _parent(s.path, known)
        if parent is not None:
            kids.setdefault(parent, []).append(s)
        if s.variables:
            p: str | None = s.path
            while p is not None and p not in holds:
                holds.add(p)
                p = _parent(p, known)
    ordered = Ordered()
    stack = [known[""]]
    while stack:
        s = stack.pop()
        ordered.objects.append(s)
        stack.extend(reversed(_children(s, kids.get(s.path, []), top, nested, holds, ordered)))
    return ordered


def trainable_counts(ordered: Sequence[Saved], config: Any) -> list[set[int] | None]:
    """For each object, how many of its own variables (a prefix) can be trainable: ``{0}`` under a
    layer the config freezes, the count :data:`NON_TRAINABLE_TAIL` leaves for its class, None
    where any prefix can."""
    frozen = frozen_layers(config) if config is not None else set()
    frozen_paths = [s.path for s in ordered if s.label and s.label in frozen]
    out: list[set[int] | None] = []
    for s in ordered:
        if any(s.path == f or s.path.startswith(f + "/") or f == "" for f in frozen_paths):
            out.append({0})
            continue
        tail = NON_TRAINABLE_TAIL.get(s.class_name)
        out.append({max(0, len(s.variables) - tail)} if tail is not None else None)
    return out


def optimizer_vars(names: Iterable[str]) -> list[str]:
    """The datasets of the optimizer's own ``vars`` group in index order (a LossScaleOptimizer's
    inner optimizer's), or none."""
    names = list(names)
    for pre in OPTIMIZER_GROUPS:
        found = [n for n in names if n.startswith(pre) and n[len(pre):].isdigit()]
        if found:
            return sorted(found, key=lambda n: int(n[len(pre):]))
    return []


def compiled_optimizer(config: Any) -> tuple[str, dict[str, Any]] | None:
    """``(class name, config)`` of the optimizer a model config was compiled with (a
    LossScaleOptimizer's inner one, whose state its ``inner_optimizer/vars`` holds), or None."""
    comp = config.get("compile_config") if isinstance(config, dict) else None
    opt = comp.get("optimizer") if isinstance(comp, dict) else None
    for _ in range(2):
        cfg = opt.get("config") if isinstance(opt, dict) else None
        if not isinstance(cfg, dict) or not isinstance(opt, dict):
            return None
        cls = str(opt.get("class_name", "")).rsplit(">", 1)[-1]
        if cls != "LossScaleOptimizer" or not isinstance(cfg.get("inner_optimizer"), dict):
            return cls, cfg
        opt = cfg["inner_optimizer"]
    return None


def head_length(shapes: Sequence[tuple[int, ...]]) -> int:
    """How many of an optimizer's ``vars`` come before its per-variable state: iterations, and the
    learning rate when it is a variable (a scalar ``vars/1``; a schedule keeps none)."""
    return 2 if len(shapes) > 1 and tuple(shapes[1]) == () else 1


def ema_splits(sigs: Sequence[Any]) -> Iterator[tuple[int, int]]:
    """``(k, s)``: the ways an optimizer's per-variable state (``sigs``, each a dtype and shape,
    after :func:`head_length`) reads as ``k`` moving averages then ``s`` slots per variable, each
    slot shaped as its average."""
    n = len(sigs)
    for k in range(1, n + 1):
        rest = n - k
        if rest % k:
            continue
        s = rest // k
        if all(sigs[k + i * s + j] == sigs[i] for i in range(k) for j in range(s)):
            yield k, s


__all__ = ["ATTRIBUTE_ORDER", "NON_TRAINABLE_TAIL", "OPTIMIZER_GROUPS", "Ordered", "Saved", "TRAILING_STATE",
           "class_chains", "compiled_optimizer", "config_layers", "counter", "ema_splits",
           "frozen_layers", "head_length", "layer_classes", "model_orders", "numbered", "optimizer_vars",
           "trainable_counts", "uncounted", "weights_order"]
