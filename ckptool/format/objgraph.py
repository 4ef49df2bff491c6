"""The object graph of object-based (TF2) checkpoints (docs/FORMAT.md §7).

``_CHECKPOINTABLE_OBJECT_GRAPH`` holds a serialized TrackableObjectGraph:
node 0 is the root, children are named edges, attributes name the bundle
keys that hold each object's tensors, and optimizer slot variables are
recorded on the optimizer's node.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence

from ckptool.format.objedit import edit_records
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
from ckptool.format.objnodes import Node as Node
from ckptool.format.objnodes import SlotVariable as SlotVariable
from ckptool.format.objnodes import parse_nodes, serialize_nodes
from ckptool.format.objstruct import Edges


class ObjectGraph:
    """A parsed TrackableObjectGraph."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes

    @classmethod
    def parse(cls, data: bytes, where: str = OBJECT_GRAPH_KEY) -> ObjectGraph:
        return cls(parse_nodes(data, where))

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

    # -- editing (rewrite-names, convert, average, strip) ----------------------

    def optimizer_nodes(self) -> set[int]:
        """The optimizers: nodes that record slot variables, and the root's ``optimizer`` child."""
        out = {n.id for n in self.nodes if n.slot_variables}
        if self.nodes:
            out |= {nid for name, nid in self.nodes[0].children if name == "optimizer"}
        return out

    def _walk(self, path: Sequence[str]) -> int | None:
        """The node ``path`` reaches from the root (the first child of each name), or None."""
        edges = Edges(len(self.nodes))
        for node in self.nodes:
            edges.add_node(node.id, node.children)
        return edges.walk(path)

    def edited(self, renames: Mapping[str, str], dropped: Collection[str] = frozenset(),
               strip_optimizer: bool = False) -> tuple[ObjectGraph, dict[str, str | None]]:
        """A copy with keys renamed and dropped, each renamed object moved to its new path.

        The graph is edited, not rebuilt: objects reached by several paths (a
        Keras model's variables are also the optimizer's ``_trainable_variables``)
        keep their other paths, and slot variables stay attached to their
        optimizer. ``strip_optimizer`` cuts the optimizers out (their edges and
        slot records). Nodes no longer reachable from the root are removed.

        Returns ``(graph, keys)``: ``keys`` maps each key the caller planned
        (after ``renames``) that the graph does not keep as it is to the key the
        graph now uses for it, or to None when it left the graph with an
        unreachable node (a key not in it stays: ``keys.get(k, k)``). A kept
        variable whose key ran through a removed path is re-keyed by its first
        path breadth first, as TF would key it. The edit is
        :func:`~ckptool.format.objedit.edit_records`'s, on the serialized nodes.
        """
        data, keys = edit_records(self.serialize(), renames, dropped, strip_optimizer)
        return ObjectGraph.parse(bytes(data)), keys

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
