"""The object graph of object-based (TF2) checkpoints (FORMAT.md §7).

``_CHECKPOINTABLE_OBJECT_GRAPH`` holds a serialized TrackableObjectGraph:
node 0 is the root, children are named edges, attributes name the bundle
keys that hold each object's tensors, and optimizer slot variables are
recorded on the optimizer's node.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from .errors import CorruptError
from .format.protos.tensor_bundle_pb2 import TrackableObjectGraph

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
ATTRIBUTES = ".ATTRIBUTES"
OPTIMIZER_SLOT = ".OPTIMIZER_SLOT"
VARIABLE_VALUE = "VARIABLE_VALUE"


def escape(name: str) -> str:
    """trackable_utils.escape_local_name: '.' -> '..', '/' -> '.S'."""
    return name.replace(".", "..").replace("/", ".S")


def unescape(name: str) -> str:
    out = []
    i = 0
    while i < len(name):
        c = name[i]
        if c == "." and i + 1 < len(name):
            nxt = name[i + 1]
            out.append("." if nxt == "." else "/" if nxt == "S" else c + nxt)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


@dataclass
class Attribute:
    name: str
    full_name: str
    checkpoint_key: str


@dataclass
class SlotVariable:
    original_variable_node_id: int
    slot_name: str
    slot_variable_node_id: int


@dataclass
class Node:
    id: int
    children: list[tuple[str, int]] = field(default_factory=list)  # (local name, node id)
    attributes: list[Attribute] = field(default_factory=list)
    slot_variables: list[SlotVariable] = field(default_factory=list)
    registered_saver: str = ""
    has_checkpoint_values: bool | None = None  # None: the field is absent


class ObjectGraph:
    """A parsed TrackableObjectGraph."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes

    @classmethod
    def parse(cls, data: bytes, where: str = OBJECT_GRAPH_KEY) -> "ObjectGraph":
        try:
            proto = TrackableObjectGraph.FromString(bytes(data))
        except DecodeError:
            raise CorruptError(f"{where}: unparsable object graph") from None
        n = len(proto.nodes)
        nodes = []
        for i, p in enumerate(proto.nodes):
            node = Node(i, registered_saver=p.registered_saver.name,
                        has_checkpoint_values=(p.has_checkpoint_values.value
                                               if p.HasField("has_checkpoint_values") else None))
            for c in p.children:
                if not 0 <= c.node_id < n:
                    raise CorruptError(f"{where}: node {i} has child {c.local_name!r} -> missing node {c.node_id}")
                node.children.append((c.local_name, c.node_id))
            node.attributes = [Attribute(a.name, a.full_name, a.checkpoint_key) for a in p.attributes]
            for s in p.slot_variables:
                for ref in (s.original_variable_node_id, s.slot_variable_node_id):
                    if not 0 <= ref < n:
                        raise CorruptError(f"{where}: node {i} has a slot variable referring to missing node {ref}")
                node.slot_variables.append(
                    SlotVariable(s.original_variable_node_id, s.slot_name, s.slot_variable_node_id))
            nodes.append(node)
        return cls(nodes)

    def serialize(self) -> bytes:
        proto = TrackableObjectGraph()
        for node in self.nodes:
            p = proto.nodes.add()
            for name, nid in node.children:
                p.children.add(node_id=nid, local_name=name)
            for a in node.attributes:
                p.attributes.add(name=a.name, full_name=a.full_name, checkpoint_key=a.checkpoint_key)
            for s in node.slot_variables:
                p.slot_variables.add(original_variable_node_id=s.original_variable_node_id,
                                     slot_name=s.slot_name, slot_variable_node_id=s.slot_variable_node_id)
            if node.registered_saver:
                p.registered_saver.name = node.registered_saver
            if node.has_checkpoint_values is not None:
                p.has_checkpoint_values.value = node.has_checkpoint_values
        return proto.SerializeToString()

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

    # -- synthesis -----------------------------------------------------------

    @classmethod
    def from_keys(cls, keys) -> "ObjectGraph":
        """The object graph TF would have written for these object-based keys.

        Each ``a/b/.ATTRIBUTES/NAME`` key becomes attribute NAME of the object
        reached from the root through children ``a`` then ``b`` (path components
        unescaped, FORMAT.md §7.2); an optimizer slot key
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
        ids: dict[tuple, int] = {}
        trees: list[_Tree] = []
        queue = deque([((), root)])
        while queue:  # breadth first: ids in visiting order
            path, tree = queue.popleft()
            ids[path] = len(nodes)
            nodes.append(Node(len(nodes)))
            trees.append(tree)
            for name, child in tree.children.items():
                queue.append((path + (name,), child))
        for nid, tree in enumerate(trees):
            node = nodes[nid]
            for name, child in tree.children.items():
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
        n = len(self.nodes)
        memo: dict[int, bool] = {}

        def has(nid: int, seen: frozenset) -> bool:
            if nid in memo:
                return memo[nid]
            node = self.nodes[nid]
            value = bool(node.attributes or node.slot_variables)
            for _, child in node.children:
                if 0 <= child < n and child not in seen and has(child, seen | {nid}):
                    value = True
            memo[nid] = value
            return value

        for node in self.nodes:
            node.has_checkpoint_values = has(node.id, frozenset())


class _Tree:
    def __init__(self):
        self.children: dict[str, _Tree] = {}
        self.attrs: list[tuple[str, str, tuple]] = []

    def walk(self, path) -> "_Tree":
        t = self
        for name in path:
            nxt = t.children.get(name)
            if nxt is None:
                nxt = t.children[name] = _Tree()
            t = nxt
        return t


def _full_name(path: tuple, attr: str) -> str:
    """A TF1-style name for the tensor: the object path, unescaped ('model/dense/kernel')."""
    return "/".join(path) if path else attr


def parse_object_key(key: str):
    """Split an object-based key into (object path, attribute name, slot).

    The object path is a tuple of unescaped local names; ``slot`` is None, or
    ``(optimizer path, slot name)`` for an optimizer slot key, whose object path
    is then the original variable's. None when ``key`` is not of the form
    ``<escaped path>/.ATTRIBUTES/<escaped attribute>``.
    """
    if key.startswith("\0"):  # an encoded slice key (FORMAT.md §4.4), not a name
        return None
    parts = key.split("/")
    if len(parts) < 2 or parts[-2] != ATTRIBUTES or not parts[-1] or ATTRIBUTES in parts[:-2]:
        return None
    attr = unescape(parts[-1])
    comps = parts[:-2]
    if any(not c for c in comps):
        return None
    if OPTIMIZER_SLOT in comps:
        i = comps.index(OPTIMIZER_SLOT)
        var, rest = comps[:i], comps[i + 1:]
        if not var or len(rest) < 2 or OPTIMIZER_SLOT in rest:
            return None
        return (tuple(unescape(c) for c in var), attr,
                (tuple(unescape(c) for c in rest[:-1]), unescape(rest[-1])))
    return tuple(unescape(c) for c in comps), attr, None


def is_object_key(key: str) -> bool:
    """Whether ``key`` names an attribute of an object (``.../.ATTRIBUTES/NAME``)."""
    return parse_object_key(key) is not None


def object_key(name: str, attribute: str = VARIABLE_VALUE) -> str:
    """The object-based key of a plain name: each '/' part escaped, then /.ATTRIBUTES/<attr>."""
    path = "/".join(escape(part) for part in name.split("/"))
    return f"{path}/{ATTRIBUTES}/{escape(attribute)}" if path else f"{ATTRIBUTES}/{escape(attribute)}"
