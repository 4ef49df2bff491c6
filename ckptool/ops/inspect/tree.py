"""The object graph (or the name hierarchy) of a checkpoint as a tree (``inspect --tree``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.format.objgraph import VARIABLE_VALUE

if TYPE_CHECKING:
    from ckptool.format.objgraph import ObjectGraph
    from ckptool.ops.read.checkpoint import Checkpoint, Variable


@dataclass
class TreeNode:
    """A node of the object graph (or of the name hierarchy of a name-based checkpoint).

    ``parameters`` and ``bytes`` total the subtree: the node's own tensors,
    its children's, and, for an optimizer, the slot variables it owns (shown
    under the variables they belong to, in ``slots``).
    """

    name: str
    path: str
    tensor: dict[str, Any] | None = None  # {"key", "dtype", "shape", "parameters", "bytes"}
    attributes: list[dict[str, Any]] = field(default_factory=list)  # other attributes: {"name", ...tensor}
    slots: list[dict[str, Any]] = field(default_factory=list)  # {"slot", "optimizer", ...tensor}
    children: list[TreeNode] = field(default_factory=list)
    alias_of: str | None = None  # a second edge to an object shown elsewhere
    parameters: int = 0
    bytes: int = 0
    owned_slots: int = 0

    def to_json(self) -> dict[str, Any]:
        """The subtree as nested dicts, built without recursion (graphs can be thousands deep)."""
        root = _own_json(self)
        stack = [(self, root)]
        while stack:
            node, out = stack.pop()
            kids = out["children"] = [_own_json(c) for c in node.children]
            stack.extend(zip(node.children, kids))
        return root

    def depth(self) -> int:
        """Levels below this node (0 for a leaf), counted without recursion."""
        deepest, stack = 0, [(self, 0)]
        while stack:
            node, d = stack.pop()
            deepest = max(deepest, d)
            stack.extend((c, d + 1) for c in node.children)
        return deepest


def _own_json(node: TreeNode) -> dict[str, Any]:
    """``node`` as a dict, its ``children`` left empty for :meth:`TreeNode.to_json` to fill."""
    out: dict[str, Any] = {"name": node.name, "path": node.path, "parameters": node.parameters, "bytes": node.bytes}
    if node.alias_of is not None:
        out["alias_of"] = node.alias_of
    if node.tensor is not None:
        out["tensor"] = node.tensor
    if node.attributes:
        out["attributes"] = node.attributes
    if node.slots:
        out["slots"] = node.slots
    if node.owned_slots:
        out["owned_slots"] = node.owned_slots
    out["children"] = []
    return out


def _tensor_doc(var: Variable, key: str) -> dict[str, Any]:
    return {"key": key, "dtype": var.dtype, "shape": list(var.shape), "parameters": var.numel,
            "bytes": var.nbytes}


def tree(ck: Checkpoint) -> TreeNode:
    """The object graph as a tree (object-based), else the '/'-scopes of the names."""
    graph = ck.object_graph()
    if graph is None or not graph.nodes:  # an empty graph has no root: show the names
        return _name_tree(ck)
    return _object_tree(ck, graph)


def _object_tree(ck: Checkpoint, graph: ObjectGraph) -> TreeNode:
    variables = {v.name: v for v in ck.variables()}
    used = set()
    nodes = graph.nodes
    view: dict[int, TreeNode] = {}
    paths = graph.paths()
    # spanning tree in breadth-first order: the first edge to reach a node owns it
    root = TreeNode("", "")
    view[0] = root
    aliases: list[tuple[TreeNode, int]] = []
    order = [0]
    i = 0
    while i < len(order):
        nid = order[i]
        i += 1
        for local, child in nodes[nid].children:
            if child in view:
                alias = TreeNode(local, _join(view[nid].path, local), alias_of=view[child].path)
                aliases.append((alias, child))
                view[nid].children.append(alias)
                continue
            tn = TreeNode(local, paths.get(child, _join(view[nid].path, local)))
            view[child] = tn
            view[nid].children.append(tn)
            order.append(child)
    owners = graph.slot_owners()
    for nid, tn in view.items():
        for a in nodes[nid].attributes:
            var = variables.get(a.checkpoint_key)
            if var is None:
                continue
            used.add(a.checkpoint_key)
            doc = _tensor_doc(var, a.checkpoint_key)
            if a.name == VARIABLE_VALUE and tn.tensor is None:
                tn.tensor = doc
            else:
                tn.attributes.append({"name": a.name, **doc})
    for slot_id, (opt_id, var_id, slot_name) in sorted(owners.items()):
        target = view.get(var_id)
        opt = view.get(opt_id)
        for a in nodes[slot_id].attributes:
            var = variables.get(a.checkpoint_key)
            if var is None:
                continue
            used.add(a.checkpoint_key)
            doc = {"slot": slot_name, "optimizer": opt.path if opt else None, **_tensor_doc(var, a.checkpoint_key)}
            (target or root).slots.append(doc)
            if opt is not None:
                opt.owned_slots += 1
                opt.parameters += var.numel
                opt.bytes += var.nbytes
            else:
                root.parameters += var.numel
                root.bytes += var.nbytes
    for alias, target_id in aliases:  # an alias shows what it points at (counted once, where it lives)
        alias.tensor = view[target_id].tensor
    for name, var in variables.items():
        if name not in used:  # the object graph itself, or tensors no object claims
            root.attributes.append({"name": name, **_tensor_doc(var, name)})
    _total(root)
    return root


def _join(base: str, local: str) -> str:
    from ckptool.format.objgraph import escape

    return f"{base}/{escape(local)}" if base else escape(local)


def _total(root: TreeNode) -> None:
    """Subtree totals, children before parents (post-order, without recursion)."""
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(c for c in node.children if c.alias_of is None)
    for node in reversed(order):
        p, b = node.parameters, node.bytes
        for t in ([node.tensor] if node.tensor else []) + node.attributes:
            p += t["parameters"]
            b += t["bytes"]
        for c in node.children:
            if c.alias_of is None:
                p += c.parameters
                b += c.bytes
        node.parameters, node.bytes = p, b


def _name_tree(ck: Checkpoint) -> TreeNode:
    root = TreeNode("", "")
    index: dict[tuple[int, str], TreeNode] = {}  # (parent's id, scope) -> node: no path is rebuilt
    for v in ck.variables():
        node = root
        for part in v.name.split("/"):
            nxt = index.get((id(node), part))
            if nxt is None:
                nxt = TreeNode(part, f"{node.path}/{part}" if node is not root else part)
                index[(id(node), part)] = nxt
                node.children.append(nxt)
            node = nxt
        if node.tensor is None:
            node.tensor = _tensor_doc(v, v.name)
        else:  # pragma: no cover - names are unique
            node.attributes.append({"name": v.name, **_tensor_doc(v, v.name)})
    _total(root)
    return root
