"""The object graph of object-based (TF2) checkpoints (docs/FORMAT.md §7).

``_CHECKPOINTABLE_OBJECT_GRAPH`` holds a serialized TrackableObjectGraph:
node 0 is the root, children are named edges, attributes name the bundle
keys that hold each object's tensors, and optimizer slot variables are
recorded on the optimizer's node.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Sequence
from typing import cast

from google.protobuf.message import DecodeError

from ckptool.errors import CkptError, CorruptError
from ckptool.format.objkeys import ATTRIBUTES as ATTRIBUTES  # X as X: the key grammar, re-exported
from ckptool.format.objkeys import OBJECT_GRAPH_KEY as OBJECT_GRAPH_KEY
from ckptool.format.objkeys import OPTIMIZER_SLOT as OPTIMIZER_SLOT
from ckptool.format.objkeys import VARIABLE_VALUE as VARIABLE_VALUE
from ckptool.format.objkeys import escape as escape
from ckptool.format.objkeys import is_object_key as is_object_key
from ckptool.format.objkeys import object_key as object_key
from ckptool.format.objkeys import parse_object_key as parse_object_key
from ckptool.format.objkeys import unescape as unescape
from ckptool.format.objnodes import Attribute as Attribute  # X as X: defined there, named here
from ckptool.format.objnodes import (
    ChildIndex,
    copy_node,
    node_from_proto,
    node_spans,
    parse_node,
    record_at,
    serialize_nodes,
)
from ckptool.format.objnodes import Node as Node
from ckptool.format.objnodes import SlotVariable as SlotVariable
from ckptool.format.protos.tensor_bundle_pb2 import TrackableObjectGraph


class ObjectGraph:
    """A parsed TrackableObjectGraph."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes

    @classmethod
    def parse(cls, data: bytes, where: str = OBJECT_GRAPH_KEY) -> ObjectGraph:
        data = bytes(data)
        spans = node_spans(data, where)
        shared: dict[str, str] = {}
        if spans is None:  # not only node records at the top level: parsed whole
            try:
                protos = list(TrackableObjectGraph.FromString(data).nodes)
            except DecodeError:
                raise CorruptError(f"{where}: unparsable object graph") from None
            return cls([node_from_proto(i, p, len(protos), where, shared) for i, p in enumerate(protos)])
        n = len(spans) - 1
        return cls([node_from_proto(i, parse_node(record_at(data, spans, i), where), n, where, shared)
                    for i in range(n)])

    def serialize(self) -> bytes:
        return serialize_nodes(self.nodes)

    def paths(self) -> dict[int, str]:
        """The object path ('model/layer') of every node reachable from the root, breadth first."""
        if not self.nodes:
            return {}
        out = {0: ""}
        queue = deque([0])
        while queue:
            nid = queue.popleft()
            base = out[nid]
            for name, child in self.nodes[nid].children:
                if child not in out:
                    out[child] = f"{base}/{escape(name)}" if base else escape(name)
                    queue.append(child)
        return out

    def slot_owners(self) -> dict[int, tuple[int, int, str]]:
        """slot node id -> (optimizer node id, original variable node id, slot name)."""
        out = {}
        for node in self.nodes:
            for s in node.slot_variables:
                out[s.slot_variable_node_id] = (node.id, s.original_variable_node_id, s.slot_name)
        return out

    def keys(self) -> list[str]:
        return [a.checkpoint_key for node in self.nodes for a in node.attributes]

    # -- editing (rewrite-names) ----------------------------------------------

    def optimizer_nodes(self) -> set[int]:
        """The optimizers: nodes that record slot variables, and the root's ``optimizer`` child."""
        out = {n.id for n in self.nodes if n.slot_variables}
        if self.nodes:
            out |= {nid for name, nid in self.nodes[0].children if name == "optimizer"}
        return out

    def _walk(self, path: Sequence[str]) -> int | None:
        """The node ``path`` reaches from the root (the first child of each name), or None."""
        return ChildIndex(self.nodes).walk(path)

    def edited(self, renames: dict[str, str], dropped: Collection[str] = frozenset(),
               strip_optimizer: bool = False) -> tuple[ObjectGraph, dict[str, str | None]]:
        """A copy with keys renamed and dropped, each renamed object moved to its new path.

        The graph is edited, not rebuilt: objects reached by several paths (a
        Keras model's variables are also the optimizer's ``_trainable_variables``)
        keep their other paths, and slot variables stay attached to their
        optimizer. ``strip_optimizer`` cuts the optimizers out (their edges and
        slot records). Nodes no longer reachable from the root are removed.

        Returns ``(graph, keys)``: ``keys`` maps every key the caller planned
        (after ``renames``) to the key the graph now uses for it, or to None when
        it left the graph with an unreachable node. A kept variable whose key ran
        through a removed path is re-keyed by its first path breadth first, as TF
        would key it.
        """
        nodes = [copy_node(n) for n in self.nodes]
        g = ObjectGraph(nodes)
        if not nodes:
            return g, {}
        if strip_optimizer:
            opt = self.optimizer_nodes()
            for n in nodes:
                n.slot_variables = []
                if any(i in opt for _, i in n.children):
                    n.children = [(c, i) for c, i in n.children if i not in opt]
        slot_nodes = set(self.slot_owners())
        # node -> (old path, new path, new key)
        moves: dict[int, tuple[tuple[str, ...] | None, tuple[str, ...], str]] = {}
        for n in nodes:
            kept = []
            for a in n.attributes:
                key = a.checkpoint_key
                if key in dropped:
                    continue
                new = renames.get(key, key)
                if new != key:
                    parsed = parse_object_key(new)
                    if parsed is None:  # now a plain tensor, outside the graph
                        continue
                    path, attr, slot = parsed
                    a.checkpoint_key, a.name = new, attr
                    old = parse_object_key(key)
                    if slot is None and n.id not in slot_nodes and (old is None or old[0] != path):
                        prev = moves.setdefault(n.id, (old[0] if old else None, path, new))
                        if prev[1] != path:
                            raise CkptError(f"{key!r} -> {new!r} splits one object between "
                                            f"{'/'.join(prev[1])!r} and {'/'.join(path)!r}")
                kept.append(a)
            n.attributes = kept
        edit = ChildIndex(nodes)  # one index of names per node: each step of a walk is a dict probe
        for nid, (old_path, _, _) in moves.items():  # detach every mover first: swaps work
            if old_path and edit.walk(old_path) == nid:
                parent = cast(int, edit.walk(old_path[:-1]))  # a walked path's prefix walks too
                edit.detach(parent, old_path[-1], nid)
        for nid, (_, path, new) in moves.items():
            edit.attach(nid, path, new)
        edit.commit()  # each parent's children list rewritten once
        emptied = self._valued() - g._valued()  # objects whose values all moved or went
        if emptied:
            for n in nodes:
                if any(i in emptied for _, i in n.children):
                    n.children = [(c, i) for c, i in n.children if i not in emptied]
        return g._compacted()

    def _valued(self) -> set[int]:
        """Nodes with attributes, slot records or a registered saver, or reaching such a node
        (save_util_v1._add_checkpoint_values_check)."""
        parents: dict[int, list[int]] = {}
        for n in self.nodes:
            for _, c in n.children:
                parents.setdefault(c, []).append(n.id)
        out = {n.id for n in self.nodes if n.attributes or n.slot_variables or n.registered_saver}
        queue = deque(out)
        while queue:
            for p in parents.get(queue.popleft(), ()):
                if p not in out:
                    out.add(p)
                    queue.append(p)
        return out

    def _compacted(self) -> tuple[ObjectGraph, dict[str, str | None]]:
        reach: list[int] = []
        seen = {0}
        queue = deque([0])
        while queue:
            nid = queue.popleft()
            reach.append(nid)
            node = self.nodes[nid]
            refs = [c for _, c in node.children]
            for s in node.slot_variables:
                refs += [s.original_variable_node_id, s.slot_variable_node_id]
            for r in refs:
                if r not in seen:
                    seen.add(r)
                    queue.append(r)
        keys: dict[str, str | None] = {a.checkpoint_key: None for n in self.nodes for a in n.attributes}
        order = sorted(reach)
        new_id = {old: i for i, old in enumerate(order)}
        nodes = []
        for old in order:
            n = self.nodes[old]
            n.id = new_id[old]
            n.children = [(c, new_id[i]) for c, i in n.children]
            n.slot_variables = [SlotVariable(new_id[s.original_variable_node_id], s.slot_name,
                                             new_id[s.slot_variable_node_id]) for s in n.slot_variables]
            nodes.append(n)
        g = ObjectGraph(nodes)
        slots = set(g.slot_owners())
        paths = g.paths()
        walk = ChildIndex(nodes).walk
        for n in nodes:
            for a in n.attributes:
                parsed = parse_object_key(a.checkpoint_key)
                if n.id not in slots and n.id in paths and (parsed is None or walk(parsed[0]) != n.id):
                    key = f"{paths[n.id]}/{ATTRIBUTES}/{escape(a.name)}"
                    keys[a.checkpoint_key] = key
                    a.checkpoint_key = key
                else:
                    keys[a.checkpoint_key] = a.checkpoint_key
        g._mark_values()
        return g, keys

    # -- synthesis -----------------------------------------------------------

    @classmethod
    def from_keys(cls, keys: Iterable[str]) -> ObjectGraph:
        """The object graph TF would have written for these object-based keys.

        Each ``a/b/.ATTRIBUTES/NAME`` key becomes attribute NAME of the object
        reached from the root through children ``a`` then ``b`` (path components
        unescaped, docs/FORMAT.md §7.2); an optimizer slot key
        ``v/.OPTIMIZER_SLOT/opt/m/.ATTRIBUTES/VARIABLE_VALUE`` becomes a slot
        variable node appended after the others and recorded on the ``opt`` node.
        Nodes are numbered breadth first, children in order of first appearance.
        Keys not of the object-based form are ignored (they stay plain tensors).
        """
        root = _Tree()
        slots = []  # (variable path, optimizer path, slot name, key)
        for key in keys:
            parsed = parse_object_key(key)
            if parsed is None:
                continue
            path, attr, slot = parsed
            if slot is None:
                root.walk(path).attrs.append((attr, key, path))
            else:
                opt_path, slot_name = slot
                root.walk(path)
                root.walk(opt_path)
                slots.append((path, opt_path, slot_name, attr, key))
        nodes: list[Node] = []
        ids: dict[tuple[str, ...], int] = {}
        trees: list[_Tree] = []
        queue: deque[tuple[tuple[str, ...], _Tree]] = deque([((), root)])
        while queue:  # breadth first: ids in visiting order
            path, tree = queue.popleft()
            ids[path] = len(nodes)
            nodes.append(Node(len(nodes)))
            trees.append(tree)
            for name, child in tree.children.items():
                queue.append((path + (name,), child))
        for nid, tree in enumerate(trees):
            node = nodes[nid]
            for name in tree.children:
                node.children.append((name, -1))
            node.attributes = [Attribute(attr, _full_name(path, attr), key) for attr, key, path in tree.attrs]
        # children ids: a child's path is its parent's plus its name
        for path, nid in ids.items():
            node = nodes[nid]
            node.children = [(name, ids[path + (name,)]) for name, _ in node.children]
        for var_path, opt_path, slot_name, attr, key in slots:
            sid = len(nodes)
            full = _full_name(var_path, attr)
            slot_node = Node(sid, attributes=[Attribute(attr, f"{full}/{slot_name}" if full else slot_name, key)])
            nodes.append(slot_node)
            nodes[ids[opt_path]].slot_variables.append(SlotVariable(ids[var_path], slot_name, sid))
        graph = cls(nodes)
        graph._mark_values()
        return graph

    def _mark_values(self) -> None:
        """has_checkpoint_values: a node with attributes or slots, or with such descendants."""
        valued = self._valued()
        for node in self.nodes:
            node.has_checkpoint_values = node.id in valued


class _Tree:
    def __init__(self) -> None:
        self.children: dict[str, _Tree] = {}
        self.attrs: list[tuple[str, str, tuple[str, ...]]] = []

    def walk(self, path: Iterable[str]) -> _Tree:
        t = self
        for name in path:
            nxt = t.children.get(name)
            if nxt is None:
                nxt = t.children[name] = _Tree()
            t = nxt
        return t


def _full_name(path: tuple[str, ...], attr: str) -> str:
    """A TF1-style name for the tensor: the object path, unescaped ('model/dense/kernel')."""
    return "/".join(path) if path else attr
