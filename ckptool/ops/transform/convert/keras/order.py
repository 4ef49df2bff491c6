"""Which layer of a Keras 3 file is which: the order of a container's items, proved, never guessed
(docs/FORMAT.md §14.1).

Keras 3 names the items of a container (``model.layers``, a list attribute) by their class in snake
case with a per-class counter in the container's order (:func:`ckptool.format.keras3.counter`, the
one home of Keras 3's structure): the counters order the items of one class, nothing orders the
classes against each other. Object-header
addresses do not either (HDF5 reuses freed space). The whole order comes from what records it: a
model config (``config.json`` of a ``.keras`` file, or ``model.to_json()``: each model's
``layers`` in order, matched to the file by the layer names Keras >= 3.6 writes in each ``vars``
group's ``name``), or, without one, from the only interleaving of the per-class chains whose
shapes fit the TF side's sequence. Where two interleavings fit, nothing proves either: the caller
refuses and says what to give.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ckptool.format.keras3 import class_chains, config_layers, counter
from ckptool.ops.read.keras import KerasCheckpoint

#: how many partial interleavings the search keeps before it calls the order unprovable
LIMIT = 4096


#: tf.keras's names of a model's layers: every layer, and those with weights, in ``model.layers`` order
LAYER_K = re.compile(r"^layer-(\d+)$")
LAYER_W = re.compile(r"^layer_with_weights-(\d+)$")


def layer_lists_agree(children: Sequence[tuple[str, int]]) -> bool:
    """tf.keras lists a model's layers twice (``layer-K`` all of them, ``layer_with_weights-K`` those
    with weights): whether both give one order (else the checkpoint contradicts itself)."""
    def numbered(pattern: re.Pattern[str]) -> list[int]:
        found = [(int(m.group(1)), c) for n, c in children if (m := pattern.match(n))]
        return [c for _, c in sorted(found)]

    weighted = numbered(LAYER_W)
    listed = numbered(LAYER_K)
    in_order = list(dict.fromkeys(c for c in listed if c in set(weighted)))
    return not (weighted and listed and in_order != weighted)


def overlaps(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether one multiset of signatures holds the other (a layer with a variable more or less on
    one side: what ``--allow-missing`` / ``--allow-unused`` are for), neither empty."""
    ca, cb = Counter(a), Counter(b)
    return bool(ca and cb) and (not ca - cb or not cb - ca)


def embed(short: Sequence[Any], long: Sequence[Any]) -> list[int] | None:
    """The one order-keeping way to find ``short``'s items among ``long``'s (equal items only), as
    indices into ``long``; None where there is none or more than one (one object's variables,
    where one side has a variable more: Dense without bias is provable, BatchNormalization
    without ``scale`` is not)."""
    k, n = len(short), len(long)
    ways = [[0] * (n + 1) for _ in range(k + 1)]  # ways[i][j]: short[i:] within long[j:], up to 2
    for j in range(n + 1):
        ways[k][j] = 1
    for i in range(k - 1, -1, -1):
        for j in range(n - 1, -1, -1):
            ways[i][j] = min(2, ways[i][j + 1] + (ways[i + 1][j + 1] if short[i] == long[j] else 0))
    if ways[0][0] != 1:
        return None
    out, j = [], 0
    for i in range(k):
        while not (short[i] == long[j] and ways[i + 1][j + 1]):
            j += 1
        out.append(j)
        j += 1
    return out


def common(a: Sequence[Any], b: Sequence[Any]) -> tuple[list[int], list[int]] | None:
    """Indices into ``a`` and ``b`` (signatures of one object's variables on two sides, one side
    with more) of the variables both have, paired in order by :func:`embed`; None: unprovable."""
    short, long = (a, b) if len(a) < len(b) else (b, a)
    at = embed(short, long)
    if at is None:
        return None
    every = list(range(len(short)))
    return (every, at) if short is a else (at, every)


@dataclass
class KNode:
    """An object of a Keras file's tree: its ``vars`` datasets, its children by group name."""

    path: str
    own: dict[int, str] = field(default_factory=dict)  # vars/i -> dataset name
    children: dict[str, KNode] = field(default_factory=dict)
    is_object: bool = False  # has a 'vars' group (every saveable object has one)
    label: str = ""  # the vars group's name attribute: the object's name (Keras >= 3.6)

    def datasets(self) -> list[str]:
        out = [self.own[i] for i in sorted(self.own)]
        for c in self.children.values():
            out.extend(c.datasets())
        return out


def keras_tree(kc: KerasCheckpoint) -> KNode:
    """The objects of a Keras file (every group with a ``vars`` group is one), with their names."""
    root = KNode("")
    for name in kc.entries:
        parts = name.split("/")
        node = root
        for i, seg in enumerate(parts[:-1]):
            if seg == "vars" and i == len(parts) - 2:
                break
            node = node.children.setdefault(seg, KNode("/".join(parts[:i + 1])))
        if len(parts) >= 2 and parts[-2] == "vars" and parts[-1].isdigit():
            node.own[int(parts[-1])] = name
        else:  # a dataset outside a vars group: kept as its own leaf, matched by nothing
            node.children.setdefault(parts[-1], KNode(name)).own[-1] = name
    for g, (label, _file) in kc.groups.items():
        node = root
        for seg in g.split("/") if g else []:
            node = node.children.setdefault(seg, KNode(node.path + "/" + seg if node.path else seg))
        node.is_object, node.label = True, label
    return root


def show_sig(sig: tuple[tuple[str, tuple[int, ...]], ...]) -> str:
    more = f" and {len(sig) - 3} more" if len(sig) > 3 else ""
    return ", ".join(f"{d} {list(s)}" for d, s in sig[:3]) + more if sig else "no variables"


def config_order(container: str, nodes: dict[str, KNode], top: list[str] | None,
                 nested: dict[str, list[str]]) -> list[str] | None:
    """The layer names in order for a ``layers`` container, from the config (by the owner's name)."""
    if container != "layers" and not container.endswith("/layers"):
        return None
    owner = nodes.get(container[:-len("layers")].rstrip("/"))
    return None if owner is None else config_layers(owner.path, owner.label, top, nested)


def chains(kitems: list[tuple[str, KNode]], nodes: dict[str, KNode], top: list[str] | None,
           nested: dict[str, list[str]]) -> tuple[list[list[tuple[str, KNode]]], str]:
    """The Keras items as chains of known order: a container's items in its config's order, else
    one chain per class (Keras's per-class counters); or a contradiction."""
    by_parent: dict[str, list[tuple[str, KNode]]] = {}
    for n, c in kitems:
        by_parent.setdefault(c.path.rpartition("/")[0], []).append((n, c))
    chains: list[list[tuple[str, KNode]]] = []
    for parent, items in by_parent.items():
        pnode = nodes.get(parent)
        siblings = set(pnode.children) if pnode is not None else set()
        count = {c.path: counter(c.path.rpartition("/")[2], siblings) for _, c in items}
        order = config_order(parent, nodes, top, nested)
        if order is not None and all(c.label for _, c in items):
            at = {name: i for i, name in enumerate(order)}
            stray = [c for _, c in items if c.label not in at]
            if stray:
                return [], (f"{stray[0].path} (layer {stray[0].label!r}) is not a layer of the config's model: the "
                            "config does not describe this file")
            chain = sorted(items, key=lambda it: at[it[1].label])
            last: dict[str, tuple[int, str]] = {}
            for _, c in chain:
                base, num = count[c.path]
                if base in last and last[base][0] > num:
                    return [], (f"the config puts {last[base][1]} before {c.path}, against Keras's own counters: "
                                "the config does not describe this file")
                last[base] = (num, c.path)
            chains.append(chain)
            continue
        by_name = {c.path.rpartition("/")[2]: (n, c) for n, c in items}
        chains += [[by_name[x] for x in family] for family in class_chains(by_name, siblings).values()]
    return chains, ""


@dataclass
class Aligned:
    """The result of :func:`align`: ``pairs`` (TF index, (chain, position)) when one interleaving
    fits; else ``why`` and, where two fit, the first TF index they disagree on with each one's item,
    or, where none fits, the first TF index no order reaches and the Keras items that could come next."""

    pairs: list[tuple[int, tuple[int, int]]] = field(default_factory=list)
    why: str = ""
    disagree: tuple[int, tuple[int, int], tuple[int, int]] | None = None
    stuck: tuple[int, list[tuple[int, int]]] | None = None  # the TF index nothing fits, the items that came next


def align(tf_sigs: Sequence[Any], chains: Sequence[Sequence[Any]], limit: int = LIMIT,
          fits: Callable[[Any, Any], bool] = operator.eq) -> Aligned:
    """The interleavings of ``chains`` (each an ordered list of signatures) that fit ``tf_sigs``
    item by item. Where the counts differ, the longer side's surplus may be skipped (an extra layer
    on one side); a skip is taken just before the next match in its chain or at the end, so each
    assignment is counted once. ``fits(keras, tf)`` says whether two items may be one (equal
    signatures by default). Exactly one interleaving: its pairs; else a reason."""
    nt, nk = len(tf_sigs), sum(len(c) for c in chains)
    kbud, tbud = max(0, nk - nt), max(0, nt - nk)
    start = tuple(0 for _ in chains)
    # state (positions in each chain) -> (count of ways, up to 2; up to two back links)
    Back = tuple[tuple[int, ...], tuple[int, int] | None]
    layer: dict[tuple[int, ...], tuple[int, list[Back]]] = {start: (1, [])}
    history = [layer]
    for i, sig in enumerate(tf_sigs):
        nxt: dict[tuple[int, ...], tuple[int, list[Back]]] = {}
        for pos, (ways, _) in layer.items():
            done = sum(pos)
            moves: list[tuple[tuple[int, ...], tuple[int, int] | None]] = []
            if tbud and i - done < tbud:  # skip this TF item
                moves.append((pos, None))
            free = kbud - (done - i) if kbud else 0
            for c, chain in enumerate(chains):
                for q in range(pos[c], min(len(chain), pos[c] + free + 1)):
                    if fits(chain[q], sig):
                        moves.append((pos[:c] + (q + 1,) + pos[c + 1:], (c, q)))
            for to, action in moves:
                have, links = nxt.get(to, (0, []))
                nxt[to] = (min(2, have + ways), links + [(pos, action)] if len(links) < 2 else links)
        if not nxt:
            nexts = sorted({(c, p[c]) for p in layer for c in range(len(chains)) if p[c] < len(chains[c])})
            return Aligned(why="no order of the Keras layers fits the TF side", stuck=(i, nexts))
        if len(nxt) > limit:
            return Aligned(why=f"over {limit} partial orders of the Keras layers fit the shapes")
        layer = nxt
        history.append(layer)
    finals = [(p, w) for p, w in layer.items()]
    total = sum(w for _, (w, _) in finals)
    if total == 1:
        return Aligned(pairs=_path(history, finals[0][0], 0))
    a = _path(history, finals[0][0], 0)
    if len(finals) > 1:
        b = _path(history, finals[1][0], 0)
    else:
        b = _path(history, finals[0][0], 1)
    da, db = dict(a), dict(b)
    for i in range(nt):
        if da.get(i) != db.get(i):
            return Aligned(why="more than one order of the Keras layers fits the shapes",
                           disagree=(i, da.get(i, (-1, -1)), db.get(i, (-1, -1))))
    return Aligned(why="more than one order of the Keras layers fits the shapes")  # pragma: no cover


def _path(history: list[Any], pos: tuple[int, ...], branch: int) -> list[tuple[int, tuple[int, int]]]:
    """Walk back from ``pos`` in the last layer, taking each state's first link; ``branch`` 1 takes
    the second link at the first state that has two (where two ways part), so the walk differs
    from branch 0's."""
    out = []
    for i in range(len(history) - 1, 0, -1):
        _, links = history[i][pos]
        take = 1 if branch and len(links) > 1 else 0
        if take:
            branch = 0
        prev, action = links[take]
        if action is not None:
            out.append((i - 1, action))
        pos = prev
    out.reverse()
    return out


__all__ = ["LAYER_K", "LAYER_W", "LIMIT", "Aligned", "KNode", "align", "chains", "common", "config_order", "embed",
           "keras_tree", "layer_lists_agree", "overlaps", "show_sig"]
