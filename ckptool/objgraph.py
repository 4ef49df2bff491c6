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
            node = Node(i, registered_saver=p.registered_saver.name)
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
